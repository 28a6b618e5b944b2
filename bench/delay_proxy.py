"""A TCP proxy that delays every chunk it forwards, each way: PostgreSQL as if across a network,
for what a write's round trips cost where the database is not on the same host. The delay is at
least the event loop's timer resolution (about a millisecond), so a round trip through it costs
a few milliseconds: what it shows is the difference between trees, not a network.

    taskset -c 1 .venv/bin/python bench/delay_proxy.py [delay_s] &     # 127.0.0.1:5499 -> :5433
    BENCH_PG=postgres://postgres@127.0.0.1:5499 taskset -c 0 .venv/bin/python bench/write_cost.py 300
"""

from __future__ import annotations

import asyncio
import sys

DELAY_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.00025
LISTEN, UPSTREAM = 5499, 5433


async def _forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            await asyncio.sleep(DELAY_S)
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", UPSTREAM)
    await asyncio.gather(_forward(reader, upstream_writer), _forward(upstream_reader, writer))


async def main() -> None:
    server = await asyncio.start_server(_connection, "127.0.0.1", LISTEN)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
