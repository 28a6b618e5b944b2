"""Logging (SPEC §16): one JSON object per line with `CAIRN_LOG_FORMAT=json`, plain lines otherwise.

A client's mistake (a bad body or envelope, a 4xx, a refused CSRF check) is logged at INFO without
a traceback, so an operator's alert on WARNING is not set off by whoever sends garbage. Logs hold
no token and no query string (where a pasted token would be), whatever record carries them:
Django's request records are written as method and path, not the full URL.
"""

from __future__ import annotations

import logging
import re
from typing import Any

# A bearer token as agents.services issues it: "cairn_" and 43 URL-safe characters.
_TOKEN = re.compile(r"cairn_[A-Za-z0-9_-]{40,}")
_TOKEN_REDACTED = "cairn_[redacted]"
# A query string in a URL a request record quotes (its path, a refused Referer).
_QUERY = re.compile(r"\?[^\s'\"]*")


class ClientMistakesAtInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _is_client_mistake(record):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = record.exc_text = None
        return True


class NoSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a malformed call: the handler reports it as a logging error, as ever
        cleaned = _TOKEN.sub(_TOKEN_REDACTED, message)
        request: Any = getattr(record, "request", None)
        if hasattr(request, "path"):
            cleaned = _QUERY.sub("", cleaned)
            record.request = f"{request.method} {_TOKEN.sub(_TOKEN_REDACTED, request.path)}"
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info:
            # Formatted here, where it can be cleaned; the formatters then print this text.
            traceback = logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, _TOKEN.sub(_TOKEN_REDACTED, traceback)
        # uvicorn's copy of the message with terminal colours, which the JSON lines would carry.
        record.__dict__.pop("color_message", None)
        return True


def _is_client_mistake(record: logging.LogRecord) -> bool:
    if record.name == "django.request" or record.name.startswith("django.security."):
        # Django's refusals of a request: a 404, a refused CSRF check, a disallowed Host...
        return getattr(record, "status_code", 500) < 500
    if record.name == "a2a.server.routes.jsonrpc_dispatcher":
        # The A2A SDK logs a client's bad envelope or params with a traceback at ERROR, and every
        # JSON-RPC error it answers at WARNING (at ERROR for -32603, the server's own fault).
        message = record.getMessage()
        if message.startswith("Request Error"):
            return "Code=-32603" not in message
        return message in (
            "Failed to validate base JSON-RPC request",
            "Failed to parse request params",
        )
    if record.name == "a2a.utils.version_validator":
        # Every request whose A2A-Version the SDK does not serve, though the answer
        # (VersionNotSupportedError) tells the client exactly what to fix.
        return record.getMessage().startswith("Version mismatch:")
    if record.name == "uvicorn.error":
        # Bytes that are not an HTTP request, which uvicorn answers with a 400 itself.
        return record.getMessage() == "Invalid HTTP request received."
    return False


def logging_config(log_format: str) -> dict[str, Any]:
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "client_mistakes": {"()": ClientMistakesAtInfo},
            "no_secrets": {"()": NoSecrets},
        },
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
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["client_mistakes", "no_secrets"],
            }
        },
        "root": {"handlers": ["console"], "level": "INFO"},
        "loggers": {
            # uvicorn configured its own handler before Django started: use ours instead. Its
            # access log is left as uvicorn's --access-log/--no-access-log set it.
            "uvicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # Django's own defaults print to the console a second time when DEBUG is on.
            "django": {"handlers": [], "level": "INFO", "propagate": True},
            "httpx": {"level": "WARNING"},
            # django-axes logs each failed keeper login at WARNING, masked; keeper.logins logs each
            # one unmasked, at INFO as a client's mistake. Axes' own errors still show.
            "axes": {"level": "ERROR"},
        },
    }
