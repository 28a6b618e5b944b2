"""Verifiability's public routes (SPEC §1, §15). A log the keeper started after the database went
back (§16.2) has log 0's routes under `api/log/<n>/`."""

from django.urls import path, register_converter
from django.urls.converters import IntConverter

from http_api import keyper, witness
from http_api import ledger as apis
from http_api.tiles import TileApi


class LogNumber(IntConverter):
    """A later log's number: 1, 2, …, written without leading zeros, so each log has one URL."""

    regex = "[1-9][0-9]{0,8}"


register_converter(LogNumber, "log")

_LOG_ROUTES = [
    ("checkpoint", apis.CheckpointApi, "log-checkpoint"),
    ("checkpoints", apis.CheckpointsApi, "log-checkpoints"),
    ("entries", apis.EntriesApi, "log-entries"),
    ("tasks/<uuid:task_id>", apis.TaskEntriesApi, "log-task"),
    ("proof/inclusion", apis.InclusionProofApi, "log-inclusion"),
    ("proof/consistency", apis.ConsistencyProofApi, "log-consistency"),
    ("tile/<path:path>", TileApi, "log-tile"),
]


urlpatterns = [
    path(".well-known/jwks.json", apis.jwks_view, name="jwks"),
    path("api/log/vkey", apis.LogVerifierKeyApi.as_view(), name="log-vkey"),
    *(
        route
        for tail, view, name in _LOG_ROUTES
        for route in (
            path(f"api/log/{tail}", view.as_view(), name=name),
            path(f"api/log/<log:log_number>/{tail}", view.as_view(), name=f"{name}-numbered"),
        )
    ),
    path("verify/cairn_verify.py", apis.verifier_file, name="verifier"),
    path("verify/requirements.txt", apis.verifier_requirements, name="verifier-requirements"),
    path("api/witness", witness.witness_view, name="witness"),
    path("api/witness/add-checkpoint", witness.add_checkpoint_view, name="witness-add-checkpoint"),
    path(
        "api/witness/<str:origin_digest>/checkpoint",
        witness.cosigned_checkpoint_view,
        name="witness-checkpoint",
    ),
    path("api/keyper", keyper.keyper_view, name="keyper"),
    path("api/keyper/release", keyper.release_view, name="keyper-release"),
]
