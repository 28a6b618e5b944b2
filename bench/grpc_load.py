"""The gRPC load generator: what wrk is to the HTTP workloads, for the A2A gRPC binding.

No packaged gRPC load tool could be had (`ghz` is in neither Debian, PyPI nor npm), so this is an
in-process client on grpcio's asyncio API: `--calls` calls kept in flight at once over
`--channels` channels (each its own HTTP/2 connection, as wrk's `-c` connections are), for a
warm-up and then a measured time, each call timed. It runs pinned to the load core by
`bench.py`, and reports its own CPU beside the rate: near 100% of its core, the figure is the
client's, not the server's. Given the server's pid, it also reports the server process's CPU
per call over the measured time (all its threads; PostgreSQL's backends are not in it), which
other work on a shared machine moves far less than the rate.

    taskset -c 1 .venv/bin/python bench/grpc_load.py 127.0.0.1:18083 get_task --ids ids.txt
    taskset -c 1 .venv/bin/python bench/grpc_load.py 127.0.0.1:18083 list_deep

Workloads: `get_task` (GetTask cycling over the ids of `--ids`, the order of the file),
`list_first` (ListTasks pageSize 50) and `list_deep` (the same with the token of page 21, found
by walking 20 pages before the clock starts; with 1,000 tasks the last page, from 950). Every
call carries `a2a-version: 1.0`; any status but OK is a failure. The last line printed is
`BENCH_JSON {...}`, with the keys of wrk's summary (`bench/wrk/rpc.lua`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc

METADATA = (("a2a-version", "1.0"),)
PAGE = 50
DEPTH_PAGES = 20


def process_cpu(pid: int | None) -> float:
    """The CPU seconds a process (all its threads) has used so far; 0 without a pid."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seconds(text: str) -> float:
    """wrk's durations: `10s`, `3s`, or a bare number of seconds."""
    return float(text.removesuffix("s"))


async def deep_token(stub: a2a_pb2_grpc.A2AServiceStub) -> tuple[str, int]:
    """The page token 20 pages deep (or of the last page) and how many tasks lie before it."""
    token, depth = "", 0
    for _ in range(DEPTH_PAGES):
        page = await stub.ListTasks(
            a2a_pb2.ListTasksRequest(page_size=PAGE, page_token=token), metadata=METADATA
        )
        if not page.next_page_token:
            break
        token, depth = page.next_page_token, depth + PAGE
    return token, depth


def caller(
    stub: a2a_pb2_grpc.A2AServiceStub, workload: str, ids: list[str], token: str
) -> Callable[[int], Any]:
    """The call for the n-th request of a workload."""
    if workload == "get_task":
        requests = [a2a_pb2.GetTaskRequest(id=task_id) for task_id in ids]
        return lambda n: stub.GetTask(requests[n % len(requests)], metadata=METADATA)
    listing = a2a_pb2.ListTasksRequest(page_size=PAGE, page_token=token)
    return lambda n: stub.ListTasks(listing, metadata=METADATA)


class Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failures = 0
        self.first_failure = ""

    def failed(self, error: grpc.RpcError) -> None:
        self.failures += 1
        if not self.first_failure:
            self.first_failure = f"{error.code().name}: {error.details()}"


async def load(args: argparse.Namespace) -> dict:
    channels = [
        # Each its own connection (grpcio shares one between channels to the same address).
        grpc.aio.insecure_channel(args.target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(args.channels)
    ]
    stubs = [a2a_pb2_grpc.A2AServiceStub(channel) for channel in channels]
    ids = args.ids.read().split()[:1000] if args.ids else []
    token, depth = await deep_token(stubs[0]) if args.workload == "list_deep" else ("", 0)
    calls = [caller(stub, args.workload, ids, token) for stub in stubs]
    numbers = count()
    tallies = {"warmup": Tally(), "measured": Tally()}
    phase = ["warmup"]

    async def keep_calling(call: Callable[[int], Any], stop: asyncio.Event) -> None:
        while not stop.is_set():
            tally = tallies[phase[0]]
            started = time.perf_counter()
            try:
                await call(next(numbers))
            except grpc.RpcError as error:
                tally.failed(error)
            else:
                tally.latencies.append(time.perf_counter() - started)

    stop = asyncio.Event()
    workers = [
        asyncio.create_task(keep_calling(calls[n % len(calls)], stop)) for n in range(args.calls)
    ]
    await asyncio.sleep(seconds(args.warmup))
    phase[0] = "measured"
    wall, cpu, server = time.perf_counter(), time.process_time(), process_cpu(args.server_pid)
    await asyncio.sleep(seconds(args.duration))
    elapsed, used = time.perf_counter() - wall, time.process_time() - cpu
    server = process_cpu(args.server_pid) - server
    measured = tallies["measured"]
    done = sorted(measured.latencies)  # counted before the calls still in flight come back
    stop.set()
    await asyncio.gather(*workers)
    for channel in channels:
        await channel.close()

    def percentile(share: float) -> float:
        return round(done[min(len(done) - 1, int(share * len(done)))] * 1000, 3) if done else 0.0

    return {
        "requests": len(done),
        "rps": round(len(done) / elapsed, 1),
        "p50_ms": percentile(0.50),
        "p99_ms": percentile(0.99),
        "failures": measured.failures,
        "socket_errors": 0,
        "first_failure": measured.first_failure,
        "warmup_requests": len(tallies["warmup"].latencies),
        "client_cpu_share": round(used / elapsed, 3),
        **(
            {"server_cpu_us": round(server / len(done) * 1e6, 1)}
            if args.server_pid and done
            else {}
        ),
        "calls_in_flight": args.calls,
        "channels": args.channels,
        **({"depth": depth} if args.workload == "list_deep" else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("target", help="host:port of the gRPC server")
    parser.add_argument("workload", choices=["get_task", "list_first", "list_deep"])
    parser.add_argument("--ids", type=argparse.FileType(), help="task ids, one a line (get_task)")
    parser.add_argument("--calls", type=int, default=8, help="calls in flight at once")
    parser.add_argument("--channels", type=int, default=8, help="connections they share")
    parser.add_argument("--server-pid", type=int, help="the server's pid, for its CPU per call")
    parser.add_argument("--warmup", default="3s")
    parser.add_argument("--duration", default="10s")
    args = parser.parse_args()
    if args.workload == "get_task" and args.ids is None:
        parser.error("get_task needs --ids")
    print("BENCH_JSON " + json.dumps(asyncio.run(load(args))), flush=True)


if __name__ == "__main__":
    main()
