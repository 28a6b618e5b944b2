"""Verifiability's public routes (SPEC §1, §15)."""

from django.urls import path

from http_api import keyper, witness
from http_api import ledger as apis
from http_api.tiles import TileApi

urlpatterns = [
    path(".well-known/jwks.json", apis.jwks_view, name="jwks"),
    path("api/log/checkpoint", apis.CheckpointApi.as_view(), name="log-checkpoint"),
    path("api/log/vkey", apis.LogVerifierKeyApi.as_view(), name="log-vkey"),
    path("api/log/checkpoints", apis.CheckpointsApi.as_view(), name="log-checkpoints"),
    path("api/log/entries", apis.EntriesApi.as_view(), name="log-entries"),
    path("api/log/tasks/<uuid:task_id>", apis.TaskEntriesApi.as_view(), name="log-task"),
    path("api/log/proof/inclusion", apis.InclusionProofApi.as_view(), name="log-inclusion"),
    path("api/log/proof/consistency", apis.ConsistencyProofApi.as_view(), name="log-consistency"),
    path("api/log/tile/<path:path>", TileApi.as_view(), name="log-tile"),
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
