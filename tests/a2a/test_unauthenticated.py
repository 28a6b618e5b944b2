"""SPEC §8.2, §8.6: SendMessage without a valid token is HTTP's 401 with the challenge on both HTTP
bindings, and the official Python client (`a2a-sdk` 1.3.0) reports it as the same kind of error
whichever binding it speaks: an HTTP 401, never a request to fix (an HTTP+JSON 401 whose body
named `INVALID_REQUEST` reached it as `InvalidRequestError`). Each client is made from the card
the live server publishes and allowed one binding only."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.utils.constants import TransportProtocol

from tasks.models import Task
from tests.a2a.conftest import run, sdk_send
from tests.factories import open_task_payload

BINDINGS = (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
CHALLENGE = 'Bearer realm="cairn"'
# What each client sends: no Authorization header, and a token Cairn never issued.
TOKENS = {"none": None, "unknown": "cairn_unknown-token"}


async def _python_error(live_url: str, binding: str, token: str | None) -> A2AClientError:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=20) as http_client:
        config = ClientConfig(httpx_client=http_client, supported_protocol_bindings=[binding])
        client = await ClientFactory(config).create_from_url(live_url)
        async with client:
            with pytest.raises(A2AClientError) as raised:
                await sdk_send(client, open_task_payload())
    return raised.value


def test_the_python_client_sees_an_http_401_on_both_bindings(live_url):
    for binding in BINDINGS:
        for name, token in TOKENS.items():
            error = run(_python_error(live_url, binding, token))

            # The SDK's HTTP error, not one of A2A's (InvalidRequestError and its kin subclass A2AError
            # only): the same class on both bindings, raised from the answer's HTTP status.
            assert type(error) is A2AClientError, (binding, name, repr(error))
            answer = error.__cause__
            assert isinstance(answer, httpx.HTTPStatusError), (binding, name, repr(error))
            assert answer.response.status_code == 401
            assert answer.response.headers["WWW-Authenticate"] == CHALLENGE
            assert "Bearer token" in answer.response.json()["error"]["message"]
    assert Task.objects.count() == 0
