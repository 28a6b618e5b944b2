"""SPEC §8.2, §8.6: SendMessage without a valid token is HTTP's 401 with the challenge on both HTTP
bindings, and both official clients (`a2a-sdk` 1.3.0 and `@a2a-js/sdk` 1.3.0) report it as an
HTTP 401 whichever binding they speak, never as a request to fix (an HTTP+JSON 401 whose body
named `INVALID_REQUEST` reached the Python client as `InvalidRequestError`, and a JSON-RPC 401
carrying -32600 reached the JS client as `RequestMalformedError`). Each client is made from the
card the live server publishes and allowed one binding only."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.utils.constants import TransportProtocol

from tasks.models import Task
from tests.a2a.conftest import JS_DIR, run, run_node, sdk_send
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


def test_the_js_client_sees_an_http_401_on_both_bindings(node, live_url):
    flow = {"base": live_url, "tokens": TOKENS, "post": open_task_payload()}
    seen = run_node(node, JS_DIR, "cairn_unauthenticated.mjs", flow)

    for name in TOKENS:
        # JSON-RPC: the client's own HTTP error, which names the status and the body, not one of
        # A2A's errors by a JSON-RPC code.
        rpc = seen["JSONRPC"][name]
        assert rpc is not None and rpc["transport"] == "JsonRpcTransport", (name, rpc)
        assert rpc["name"] == "Error", (name, rpc)
        assert not rpc["isA2AError"] and rpc["code"] is None, (name, rpc)
        assert "Status: 401" in rpc["message"] and "Bearer token" in rpc["message"], (name, rpc)
        # HTTP+JSON: the transport's A2A error carrying the HTTP status, not one of A2A's errors
        # by an ErrorInfo reason.
        rest = seen["HTTP+JSON"][name]
        assert rest is not None and rest["transport"] == "_RestTransport", (name, rest)
        assert rest["name"] == "RestA2AErrorImpl", (name, rest)
        assert rest["statusCode"] == 401 and "Bearer token" in rest["message"], (name, rest)
    assert Task.objects.count() == 0
