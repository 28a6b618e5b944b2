"""The log's C2SP `tlog-tiles` (SPEC §15.3). Paths are parsed as strictly as the spec writes them,
so each tile has one URL and a mirror can store the answers as files under the same names."""

from __future__ import annotations

import re

from django.http import HttpResponse
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from core.caching import IMMUTABLE
from core.errors import Refusal, invalid_query
from http_api.inputs import query_none
from http_api.views import ApiView
from ledger.logs import log_numbered
from ledger.selectors import MAX_LEVEL, TILE_WIDTH, entry_bundle, hash_tile

# A partial tile's bytes never change either, but the spec lets a log drop it once it is full.
PARTIAL = "public, max-age=5"

_PATH = re.compile(
    r"(?P<level>entries|0|[1-9][0-9]?)"
    r"/(?P<index>(?:x[0-9]{3}/)*[0-9]{3})"
    r"(?:\.p/(?P<width>[1-9][0-9]{0,2}))?"
)


def _invalid(message: str) -> Refusal:
    return invalid_query("path", message, subject="the tile path")


def _parsed(path: str) -> tuple[int | None, int, int]:
    """(level, or None for an entry bundle; tile index; width, 256 when full) of a tile path."""
    match = _PATH.fullmatch(path)
    if match is None:
        raise _invalid(
            "must be <L>/<N>[.p/<W>] or entries/<N>[.p/<W>] (C2SP tlog-tiles), e.g. 0/x001/234"
        )
    level = None if match["level"] == "entries" else int(match["level"])
    if level is not None and level > MAX_LEVEL:
        raise _invalid(f"level must be between 0 and {MAX_LEVEL}")
    # Each element is three digits and only the last lacks its `x`, so an index is written one
    # way unless its first element is a zero.
    if match["index"].startswith("x000"):
        raise _invalid("index must not have leading zero elements (1 is 001, not x000/001)")
    index = int(match["index"].replace("x", "").replace("/", ""))
    if match["width"] is None:
        return level, index, TILE_WIDTH
    width = int(match["width"])
    if width >= TILE_WIDTH:
        raise _invalid(f"partial width must be between 1 and {TILE_WIDTH - 1}")
    return level, index, width


class TileApi(ApiView):
    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        """Tiles are bytes whatever the client accepts; only refusals are JSON."""
        return super().perform_content_negotiation(request, force=True)

    def get(self, request: Request, path: str, log_number: int = 0) -> HttpResponse:
        query_none(request)
        level, index, width = _parsed(path)
        log = log_numbered(log_number)
        data = (
            entry_bundle(index=index, width=width, log=log)
            if level is None
            else hash_tile(level=level, index=index, width=width, log=log)
        )
        response = HttpResponse(data, content_type="application/octet-stream")
        response["Cache-Control"] = IMMUTABLE if width == TILE_WIDTH else PARTIAL
        return response
