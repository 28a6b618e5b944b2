"""Drives Cairn's A2A 0.3 JSON-RPC binding with the official Python client of A2A 0.3
(`a2a-sdk` 0.3.26), in its own virtualenv: tests/a2a/test_v0_3_clients.py makes it and runs this
file there. Input (stdin, JSON): {base, posterToken, contributorToken, post, contribution, refused,
evaluatedId}. Output (stdout, JSON): what the client saw, as 0.3 JSON."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import DataPart, Message, Part, Role, TaskQueryParams


def data_message(payload: Any, task_id: str | None = None) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=DataPart(data=payload))],
        task_id=task_id,
        metadata={"cairn": {"client": "a2a-sdk/0.3.26"}},
    )


async def client_for(base: str, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=20)
    card = await A2ACardResolver(http, base).get_agent_card()
    return card, ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)


async def send(client: Any, message: Message) -> dict[str, Any]:
    answers = [event async for event in client.send_message(message)]
    (answer,) = answers
    task_or_message = answer[0] if isinstance(answer, tuple) else answer
    return task_or_message.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main(flow: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    card, poster = await client_for(flow["base"], flow["posterToken"])
    out["card"] = card.model_dump(mode="json", by_alias=True, exclude_none=True)
    out["posted"] = await send(poster, data_message(flow["post"]))
    out["refusal"] = await send(poster, data_message(flow["refused"]))
    _, contributor = await client_for(flow["base"], flow["contributorToken"])
    out["contributed"] = await send(
        contributor, data_message(flow["contribution"], out["posted"]["id"])
    )
    _, reader = await client_for(flow["base"], None)
    evaluated = await reader.get_task(TaskQueryParams(id=flow["evaluatedId"]))
    out["evaluated"] = evaluated.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
