"""Logging (SPEC §16): one JSON object per line with `CAIRN_LOG_FORMAT=json`, plain lines otherwise.

A client's mistake (a bad body, a bad JSON-RPC envelope, a 4xx) is logged at INFO without a
traceback; WARNING and tracebacks are kept for the server's own faults, so an operator's alert on
them is not set off by whoever sends garbage.
"""

from __future__ import annotations

import logging
from typing import Any

# The A2A SDK's dispatcher logs a client's bad envelope or params with a traceback at ERROR, and
# every JSON-RPC error it answers at WARNING (at ERROR for -32603, the server's own fault).
_SDK_DISPATCHER = "a2a.server.routes.jsonrpc_dispatcher"
_SDK_CLIENT_MISTAKES = (
    "Failed to validate base JSON-RPC request",
    "Failed to parse request params",
)
_SDK_ANSWERED_ERROR = "Request Error"
_SDK_INTERNAL_ERROR = "Code=-32603"
# uvicorn's word for bytes that are not an HTTP request, which it answers with a 400 itself.
_UVICORN = "uvicorn.error"
_UVICORN_CLIENT_MISTAKE = "Invalid HTTP request received."


class ClientMistakesAtInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _is_client_mistake(record):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = record.exc_text = None
        return True


def _is_client_mistake(record: logging.LogRecord) -> bool:
    if record.name == "django.request":
        return getattr(record, "status_code", 500) < 500
    if record.name == _SDK_DISPATCHER:
        message = record.getMessage()
        if message.startswith(_SDK_ANSWERED_ERROR):
            return _SDK_INTERNAL_ERROR not in message
        return message in _SDK_CLIENT_MISTAKES
    if record.name == _UVICORN:
        return record.getMessage() == _UVICORN_CLIENT_MISTAKE
    return False


def logging_config(log_format: str) -> dict[str, Any]:
    console = {
        "class": "logging.StreamHandler",
        "formatter": log_format,
        "filters": ["client_mistakes"],
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"client_mistakes": {"()": ClientMistakesAtInfo}},
        "formatters": {
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "fmt": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
                "rename_fields": {
                    "asctime": "time",
                    "levelname": "level",
                    "name": "logger",
                    "process": "pid",
                },
            },
            "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"},
        },
        "handlers": {"console": console},
        "root": {"handlers": ["console"], "level": "INFO"},
        "loggers": {
            # uvicorn configured its own handler before Django started: use ours instead. Its
            # access log is left as uvicorn's --access-log/--no-access-log set it.
            "uvicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # Django's own defaults print to the console a second time when DEBUG is on.
            "django": {"handlers": [], "level": "INFO", "propagate": True},
            "httpx": {"level": "WARNING"},
        },
    }
