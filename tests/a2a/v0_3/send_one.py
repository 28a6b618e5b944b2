"""Sends one data part to a task through the official Python client of A2A 0.3 (`a2a-sdk`
0.3.26), in its own virtualenv, as `sdk_flow.py` does. Input (stdin, JSON): {base, token, taskId,
data}. Output (stdout, JSON): the Task or Message it was answered with, as 0.3 JSON, and the
`sentMessageId`."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from sdk_flow import client_for, data_message, send


async def main(flow: dict[str, Any]) -> dict[str, Any]:
    _, client = await client_for(flow["base"], flow["token"])
    sent = data_message(flow["data"], flow["taskId"])
    return {**await send(client, sent), "sentMessageId": sent.message_id}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
