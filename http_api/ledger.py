"""The public routes of verifiability (SPEC §15): the site's keys, the log, and the verifier."""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict

from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.request import Request
from rest_framework.response import Response

from core.caching import Shown, mark_shown
from core.errors import ErrorCode, Issue, Refusal, invalid_query, refuse_if
from core.scripts import requirements_response, script_response
from core.site import read_only, site_url
from http_api.inputs import query_issues, query_none
from http_api.views import ApiView
from http_api.witness import TEXT
from ledger import selectors as log
from ledger.keys import jwks
from ledger.logs import log_numbered
from ledger.notes import log_verifier_key
from ledger.services import checkpoint_latest
from ledger.verifier import VERIFIER, verifier_built
from ledger.witnesses import checkpoint_note

_COUNT = re.compile(r"[0-9]{1,18}")
_HASH = re.compile(r"[0-9a-fA-F]{64}")


def _query(request: Request, names: tuple[str, ...]) -> dict[str, str]:
    params = request.query_params
    issues = query_issues(request, names)
    issues += [
        Issue(name, ErrorCode.INVALID_QUERY, "required") for name in names if name not in params
    ]
    refuse_if(issues)
    return {name: params[name] for name in names}


def _count(query: dict[str, str], name: str, *, minimum: int) -> int:
    raw = query[name]
    if not _COUNT.fullmatch(raw) or int(raw) < minimum:
        raise invalid_query(name, f"must be a whole number of at least {minimum}")
    return int(raw)


def _range(request: Request, low: str, high: str, *, minimum: int) -> tuple[int, int]:
    query = _query(request, (low, high))
    bounds = _count(query, low, minimum=minimum), _count(query, high, minimum=minimum)
    if bounds[1] < bounds[0]:
        raise invalid_query(high, f"must not be below {low}")
    return bounds


class EntriesApi(ApiView):
    """`GET /api/log/entries?start=&end=`: at most 1,000 entries, `end` exclusive."""

    def get(self, request: Request, log_number: int = 0) -> Response:
        start, end = _range(request, "start", "end", minimum=0)
        entries = log.entries_range(start=start, end=end, log=log_numbered(log_number))
        return Response({"entries": entries})


class TaskEntriesApi(ApiView):
    """`GET /api/log/tasks/<task_id>`: one task's entries under the latest checkpoint."""

    def get(self, request: Request, task_id: uuid.UUID, log_number: int = 0) -> Response:
        query_none(request)
        return Response({"entries": log.entries_of_task(task_id, log_numbered(log_number))})


class InclusionProofApi(ApiView):
    def get(self, request: Request, log_number: int = 0) -> Response:
        query = _query(request, ("leaf_hash", "tree_size"))
        if not _HASH.fullmatch(query["leaf_hash"]):
            raise invalid_query("leaf_hash", "must be a SHA-256 hash as 64 hex characters")
        proof = log.inclusion_proof(
            leaf_hash=query["leaf_hash"].lower(),
            tree_size=_count(query, "tree_size", minimum=1),
            log=log_numbered(log_number),
        )
        return Response(asdict(proof))


class ConsistencyProofApi(ApiView):
    def get(self, request: Request, log_number: int = 0) -> Response:
        first, second = _range(request, "first", "second", minimum=1)
        hashes = log.consistency_proof(first=first, second=second, log=log_numbered(log_number))
        return Response({"hashes": hashes})


class CheckpointApi(ApiView):
    """The latest signed checkpoint with its witnesses' cosignatures, as one signed note's text."""

    def get(self, request: Request, log_number: int = 0) -> HttpResponse:
        query_none(request)
        latest = checkpoint_latest(log_numbered(log_number))
        if latest is None:
            raise Refusal(ErrorCode.NOT_FOUND, "the log has no checkpoint yet")
        response = HttpResponse(checkpoint_note(latest), content_type=TEXT)
        response["Cache-Control"] = "no-cache"
        return response


class LogVerifierKeyApi(ApiView):
    """The C2SP verifier key of the log's checkpoints: a witness is set up from public answers."""

    def get(self, request: Request) -> HttpResponse:
        query_none(request)
        response = HttpResponse(log_verifier_key().text + "\n", content_type=TEXT)
        return mark_shown(response, Shown.document())


class CheckpointsApi(ApiView):
    """`?covering=<index>`: the earliest witnessed checkpoint holding entry `index`, and the latest."""

    def get(self, request: Request, log_number: int = 0) -> Response:
        index = _count(_query(request, ("covering",)), "covering", minimum=0)
        covering = log.checkpoints_covering(index=index, log=log_numbered(log_number))
        return Response({"checkpoints": [checkpoint_note(c) for c in covering]})


@read_only
def jwks_view(request: HttpRequest) -> JsonResponse:
    return mark_shown(JsonResponse(jwks()), Shown.document())


@read_only
def verifier_file(request: HttpRequest) -> HttpResponse:
    return script_response(VERIFIER.name, verifier_built(), site_url(request))


@read_only
def verifier_requirements(request: HttpRequest) -> HttpResponse:
    return requirements_response(verifier_built())
