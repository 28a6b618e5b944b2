"""GetTask over HTTP+JSON on evaluated tasks through the deployment guide's nginx cache, against Cairn
alone, in the same run (the bar: at least 10×).

    PYTHONPATH=. .venv/bin/python bench/nginx_cache.py

Serves `cairn_bench_pg_1k` (`bench/run.sh setup --sizes 1k`, seeded here when missing) with Cairn
under uvicorn on core 0, and in front of it nginx (one worker, also on core 0) running the
deployment guide's nginx block (docs/deployment.md) as printed, with only its placeholders filled, as
`tests/deploy/test_nginx.py` runs it: https on 127.0.0.1:18443 with a self-signed certificate,
its cache under bench/var/nginx. wrk drives both from core 1 with `bench/wrk/rpc.lua`, as every
other workload here (3 s warm-up, 10 s measured, 8 connections), cycling over the database's
500 evaluated tasks: `GET /api/a2a/tasks/{id}` with `A2A-Version: 1.0`, straight to Cairn, then
through nginx, then Cairn alone again. Before measuring, it checks that nginx answers an
evaluated task from its cache (`X-Cache-Status: HIT`) with Cairn's bytes.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import ssl
import subprocess
import urllib.request
from datetime import UTC, datetime
from email.message import Message

import psycopg

from bench import (  # bench/bench.py, beside this file
    CAIRN_PORT,
    RESULTS,
    ROOT,
    VAR,
    BackendPinner,
    Server,
    cairn_server,
    log,
    measure,
    pg_start,
    pg_url,
    request_file,
    setup_cairn,
    summary,
    tree_state,
)

DB = "cairn_bench_pg_1k"
NGINX_PORT = CAIRN_PORT + 362  # 18443 by default
HOME = VAR / "nginx"
REST = "/api/a2a/tasks/"
INSECURE = ssl._create_unverified_context()  # our own self-signed certificate, on 127.0.0.1


def printed_block() -> str:
    """The deployment guide's nginx block naming the upstream, as printed (what the deployment
    test runs)."""
    guide = (ROOT / "docs" / "deployment.md").read_text()
    blocks = re.findall(r"```nginx\n(.*?)\n```", guide, flags=re.S)
    (block,) = [block for block in blocks if "CAIRN_UPSTREAM" in block]
    return block


def nginx_conf() -> None:
    """cairn.conf, the guide's block with its placeholders filled, and the main file around it
    (one worker; as root, the workers run as this user, who may write the cache)."""
    HOME.mkdir(parents=True, exist_ok=True)
    cert, key = HOME / "cairn.crt", HOME / "cairn.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        + [
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    site = printed_block()
    for placeholder, value in {
        "CAIRN_UPSTREAM": f"127.0.0.1:{CAIRN_PORT}",
        "SERVER_NAME": "127.0.0.1",  # the Host Cairn is given, one of its ALLOWED_HOSTS
        "LISTEN_PORT": str(NGINX_PORT),
        "TLS_CERTIFICATE_KEY": str(key),
        "TLS_CERTIFICATE": str(cert),
        "CACHE_PATH": str(HOME / "cache"),
    }.items():
        site = site.replace(placeholder, value)
    (HOME / "cairn.conf").write_text(site)
    temp = "".join(
        f"    {kind}_temp_path {HOME / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    (HOME / "nginx.conf").write_text(
        f"{user}worker_processes 1;\nevents {{}}\nhttp {{\n    access_log off;\n{temp}"
        f"    include {HOME / 'cairn.conf'};\n}}\n"
    )


class Nginx(Server):
    def __init__(self) -> None:
        cmd = ["nginx", "-c", str(HOME / "nginx.conf"), "-p", str(HOME)]
        cmd += ["-g", f"daemon off; pid {HOME / 'nginx.pid'}; error_log {HOME / 'error.log'};"]
        super().__init__("nginx-cache", cmd, dict(os.environ), NGINX_PORT)

    def ready(self) -> bool:
        try:
            return get(f"https://127.0.0.1:{NGINX_PORT}/healthz")[0] == 200
        except OSError:
            return False


def get(url: str) -> tuple[int, Message, bytes]:
    request = urllib.request.Request(url, headers={"A2A-Version": "1.0"})
    with urllib.request.urlopen(request, timeout=10, context=INSECURE) as response:
        return response.status, response.headers, response.read()


def evaluated_ids() -> list[str]:
    with psycopg.connect(pg_url(DB)) as conn:
        rows = conn.execute(
            "SELECT task_id::text FROM a2a_gateway_taskform WHERE status <> 'working' ORDER BY 1"
        )
        return [row[0] for row in rows]


def main() -> None:
    pg_start()
    setup_cairn("pg_1k", pg_url(DB), "reads", 1000, True)
    ids = evaluated_ids()
    paths = request_file("nginx-get-evaluated", [REST + task_id for task_id in ids])
    nginx_conf()
    results: dict = {"tree": tree_state(), "tasks": len(ids), "runs": []}
    pinner = BackendPinner()
    pinner.start()
    try:
        with cairn_server("uvicorn", pg_url(DB), "cairn.settings") as cairn, Nginx() as nginx:
            direct = f"http://127.0.0.1:{CAIRN_PORT}{REST}{ids[0]}"
            cached = f"https://127.0.0.1:{NGINX_PORT}{REST}{ids[0]}"
            get(cached)
            status, headers, body = get(cached)
            if status != 200 or headers.get("X-Cache-Status") != "HIT" or body != get(direct)[2]:
                raise SystemExit(f"nginx did not answer from its cache: {status} {headers.items()}")
            log(
                f"cached: {headers.get('Cache-Control')}, X-Cache-Status {headers['X-Cache-Status']}"
            )
            for label, server, scheme in (
                ("cairn", cairn, "http"),
                ("nginx", nginx, "https"),
                ("cairn", cairn, "http"),
            ):
                load = round(os.getloadavg()[0], 2)
                pids = server.worker_pids()
                result = measure(
                    server.port, REST, paths, pinner=pinner, server_pids=pids, scheme=scheme
                )
                results["runs"].append({"config": label, "load_before_1m": load, **result})
                log(f"{label:6s} GetTask (HTTP+JSON, evaluated) {summary(result)}  load {load}")
    finally:
        pinner.stop()
    alone = [run["rps"] for run in results["runs"] if run["config"] == "cairn"]
    through = next(run["rps"] for run in results["runs"] if run["config"] == "nginx")
    results["ratio"] = round(through / (sum(alone) / len(alone)), 2)
    log(f"nginx cache / Cairn alone: {results['ratio']}× (bar: 10×)")
    out = RESULTS / f"nginx-cache-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"results: {out}")


if __name__ == "__main__":
    main()
