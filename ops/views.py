"""The operator's routes (SPEC §16): liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import hmac
import os
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from core.clock import format_instant
from core.outages import is_outage
from ops.collectors import DatabaseCollector
from tasks.sweeps import sweep_last_finished

SWEEP_MAX_AGE = timedelta(minutes=2)

_database_registry = CollectorRegistry(auto_describe=False)
_database_registry.register(DatabaseCollector())


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _checks() -> dict[str, dict]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        last_sweep = sweep_last_finished()
    except Exception as exc:
        if not is_outage(exc):
            raise
        return {
            "database": {"ok": False, "detail": "the database does not answer"},
            "sweep": {"ok": False, "detail": "unknown while the database does not answer"},
        }
    fresh = last_sweep is not None and timezone.now() - last_sweep <= SWEEP_MAX_AGE
    sweep = {"ok": fresh, "last_finished_at": format_instant(last_sweep) if last_sweep else None}
    if not fresh:
        sweep["detail"] = "no worker finished the evaluation sweep in the last two minutes"
    return {"database": {"ok": True}, "sweep": sweep}


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = _checks()
    ready = all(check["ok"] for check in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "unready", "checks": checks}, status=200 if ready else 503
    )


def _process_metrics() -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.CAIRN_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            response = JsonResponse(
                {
                    "error": {
                        "code": "unauthorized",
                        "message": "the metrics token is required",
                        "issues": [],
                    }
                },
                status=401,
            )
            response["WWW-Authenticate"] = 'Bearer realm="cairn-metrics"'
            return response
    body = _process_metrics() + generate_latest(_database_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
