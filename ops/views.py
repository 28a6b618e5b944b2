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

from core import replicas
from core.clock import format_instant
from core.errors import ErrorCode, Refusal
from core.outages import OUTAGES
from ledger import log_state
from ops.collectors import DatabaseCollector, ReplicaCollector
from tasks.health import sweep_last_finished

SWEEP_MAX_AGE = timedelta(minutes=2)

_database_registry = CollectorRegistry(auto_describe=False)
_database_registry.register(DatabaseCollector())
_database_registry.register(ReplicaCollector())


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _checks() -> dict[str, dict]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        last_sweep = sweep_last_finished()
    except OUTAGES:
        down = {"ok": False, "detail": "the database does not answer"}
        unknown = {"ok": False, "detail": "unknown while the database does not answer"}
        return {"database": down, "sweep": unknown, "log": unknown}
    fresh = last_sweep is not None and timezone.now() - last_sweep <= SWEEP_MAX_AGE
    sweep = {"ok": fresh, "last_finished_at": format_instant(last_sweep) if last_sweep else None}
    if not fresh:
        sweep["detail"] = "no worker finished the evaluation sweep in the last two minutes"
    rollback = log_state.rollback_found()
    log: dict = {"ok": True}
    if rollback is not None:
        log = {
            "ok": False,
            "detail": rollback.message(),
            "database_size": rollback.database_size,
            "promised_size": rollback.promised_size,
            "since": rollback.found_at,
        }
    return {"database": {"ok": True}, "sweep": sweep, "log": log}


def _replicas_check() -> dict:
    """Each replica's state as this process routes reads by it (`core.replicas`)."""
    found = {}
    for state in replicas.states():
        entry: dict = {"ok": state.serving, "state": state.state, "at": replicas.where(state.alias)}
        if state.lag_s is not None:
            entry["lag_s"] = round(state.lag_s, 3)
        if state.detail:
            entry["detail"] = f"{state.detail}; its reads go to the primary"
        found[state.alias] = entry
    serving = sum(entry["ok"] for entry in found.values())
    check: dict = {"ok": serving == len(found), "serving": serving, "replicas": found}
    if serving < len(found):
        check["detail"] = f"{len(found) - serving} of {len(found)} replicas skipped"
    return check


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = _checks()
    # Readiness is the primary's and the worker's: a replica only takes reads off the primary.
    ready = all(check["ok"] for check in checks.values())
    if replicas.configured():
        checks["replicas"] = _replicas_check()
    return JsonResponse(
        {"status": "ready" if ready else "unready", "checks": checks}, status=200 if ready else 503
    )


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.CAIRN_METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    if token and not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        refusal = Refusal(ErrorCode.UNAUTHORIZED, "the metrics token is required")
        response = JsonResponse(refusal.as_body(), status=401)
        response["WWW-Authenticate"] = 'Bearer realm="cairn-metrics"'
        return response
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    body = generate_latest(registry) + generate_latest(_database_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
