"""Static files through WhiteNoise, sent without blocking the event loop under ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import IO

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest
from whitenoise.middleware import WhiteNoiseMiddleware

_CHUNK = 64 * 1024


async def _read(file: IO[bytes] | None) -> AsyncIterator[bytes]:
    if file is None:  # a HEAD or a 304: no body
        return
    read = sync_to_async(file.read, thread_sensitive=False)
    while chunk := await read(_CHUNK):
        yield chunk


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise answers with a file and a synchronous iterator. Under ASGI Django would drain
    that iterator into memory in a thread and warn on every static response; here the file is
    read in chunks by an asynchronous iterator instead. Under WSGI nothing changes."""

    @staticmethod
    def serve(static_file, request: HttpRequest):
        response = WhiteNoiseMiddleware.serve(static_file, request)
        if isinstance(request, ASGIRequest):
            response.streaming_content = _read(response.file_to_stream)
        return response
