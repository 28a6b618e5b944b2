"""Each read layer measured with and without it: the same run, on the workload it serves.

    PYTHONPATH=. .venv/bin/python bench/ablation.py <commit> [--rounds 2] [--only reads grpc] [--variants no-read-pool ...]

Exports `<commit>`'s tree to bench/var/ablation/<variant>/ once as it is (`all`) and once per
layer with that layer turned off by the smallest edit that does it (`VARIANTS`), then measures
the variants in alternating rounds (all, one without, another without, ..., all, ...) against
the same databases, request files and driver as `bench/run.sh run`: the JSON-RPC and HTTP+JSON
reads of `reads-pg` and the gRPC reads, Cairn only. The report gives,
per layer and workload, the median rate and the server's CPU per request with and without it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
from datetime import UTC, datetime

import bench
from bench import (
    RESULTS,
    ROOT,
    VAR,
    BackendPinner,
    cairn_grpc_server,
    cairn_server,
    log,
    pg_start,
    pg_url,
    run_grpc_reads,
    run_reads,
)

# variant: (file, text, replacement) edits that turn one layer off.
VARIANTS: dict[str, list[tuple[str, str, str]]] = {
    "all": [],
    "no-read-pool": [
        (
            "a2a_gateway/read_connections.py",
            "    return _on_postgresql() and time.monotonic() >= _unavailable_until\n",
            "    return False\n",
        ),
        (
            "a2a_gateway/grpc_binding.py",
            "    if not read_connections.is_available():\n        return None\n"
            "    read = await transport.read_here(stored_read(request, None, read_connections.POOL_SOURCE))",
            "    read = await transport.read_here(\n        stored_read(request, None, DjangoSource(in_request_cycle=True))\n    )",
        ),
        (
            "a2a_gateway/grpc_binding.py",
            "from a2a_gateway.stored_reads import StoredTask, stored_read",
            "from a2a_gateway.stored_reads import DjangoSource, StoredTask, stored_read",
        ),
    ],
    "no-evaluated-forms": [
        ("a2a_gateway/kept_forms.py", "MAX_CHARS = 4 * 1024 * 1024", "MAX_CHARS = 0"),
    ],
    "no-fast-reads": [
        ("a2a_gateway/jsonrpc_binding.py", "fast_reads: bool = True", "fast_reads: bool = False"),
        ("a2a_gateway/http_json_binding.py", "fast_reads: bool = True", "fast_reads: bool = False"),
    ],
    "no-door-asgi": [
        ("cairn/asgi.py", 'and is_a2a_path(scope["path"])', "and False"),
    ],
    "no-log-state-memo": [
        (
            "ledger/log_state.py",
            "    return list(_started(path, found.st_ino, found.st_size, found.st_ctime_ns))\n",
            '    return sorted(_read(Path(path))[1], key=lambda log: int(log["number"]))\n',
        ),
    ],
    "no-grpc-wire-lru": [
        ("a2a_gateway/grpc_binding.py", "max_bytes: int = 8 * 1024 * 1024", "max_bytes: int = 0"),
    ],
}
# Which variants each kind of run compares with `all`.
KINDS = {
    "reads": [
        "no-read-pool",
        "no-evaluated-forms",
        "no-fast-reads",
        "no-door-asgi",
        "no-log-state-memo",
    ],
    "grpc": ["no-read-pool", "no-evaluated-forms", "no-grpc-wire-lru"],
}


def export(commit: str, variant: str) -> str:
    tree = VAR / "ablation" / variant
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for name, text, replacement in VARIANTS[variant]:
        path = tree / name
        source = path.read_text()
        if source.count(text) != 1:
            raise SystemExit(f"{variant}: {name} does not hold {text!r} once")
        path.write_text(source.replace(text, replacement))
    return str(tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("commit")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="*", choices=list(KINDS), default=list(KINDS))
    parser.add_argument("--variants", nargs="*", choices=list(VARIANTS)[1:], help="these alone")
    args = parser.parse_args()
    chosen = {
        kind: [v for v in KINDS[kind] if not args.variants or v in args.variants]
        for kind in args.only
    }
    variants = ["all", *dict.fromkeys(v for kind in args.only for v in chosen[kind])]
    trees = {variant: export(args.commit, variant) for variant in variants}
    pg_start()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    results: dict = {"started": stamp, "commit": args.commit, "runs": [], "rss_mb": {}}
    results["checks"] = {}
    results["load"] = []
    pinner = BackendPinner()
    pinner.start()
    try:
        for round_ in range(args.rounds):
            for kind in args.only:
                for variant in ["all", *chosen[kind]]:
                    bench.SERVE_TREE = trees[variant]
                    config = f"{variant}-r{round_}"
                    results["load"].append((config, kind, list(bench.os.getloadavg())))
                    db = pg_url("cairn_bench_pg_1k")
                    ids = VAR / "pg_1k" / "task_ids.txt"
                    if kind == "reads":
                        run_reads(
                            results,
                            config,
                            cairn_server("uvicorn", db, "cairn.settings"),
                            ids,
                            pinner,
                        )
                    else:
                        run_grpc_reads(
                            results, config, cairn_grpc_server(db, "cairn.settings"), ids, pinner
                        )
    finally:
        pinner.stop()
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"{stamp}+ablation.json"
        out.write_text(json.dumps(results, indent=1) + "\n")
        log(f"results: {out.relative_to(ROOT)}")
    print(report(results))


def report(results: dict) -> str:
    """Per variant and workload: the median req/s and server CPU µs per request over the rounds."""
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for run in results["runs"]:
        variant = run["config"].rsplit("-r", 1)[0]
        figures.setdefault((variant, run["workload"]), []).append(
            (run["rps"], run.get("server_cpu_us") or 0.0)
        )
    lines = [
        "| variant | workload | req/s (each round) | CPU µs/request (each round) | median req/s | median CPU µs |"
    ]
    lines.append("|---|---|---|---|---:|---:|")
    for (variant, workload), runs in sorted(
        figures.items(), key=lambda item: (item[0][1], item[0][0])
    ):
        rates = [rate for rate, _ in runs]
        cpus = [cpu for _, cpu in runs]
        lines.append(
            f"| {variant} | {workload} | {', '.join(f'{r:.0f}' for r in rates)} | "
            f"{', '.join(f'{c:.0f}' for c in cpus)} | {statistics.median(rates):.0f} | "
            f"{statistics.median(cpus):.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
