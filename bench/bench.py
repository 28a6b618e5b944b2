"""Cairn's benchmark driver. Standard library + psycopg only; run it through bench/run.sh.

    .venv/bin/python bench/bench.py setup            # databases, migrations, fixtures (skips what exists)
    .venv/bin/python bench/bench.py run [--only ...]  # servers on core 0, wrk on core 1, results to bench/results/
    .venv/bin/python bench/bench.py sweep            # time the evaluation sweep over 10,000 overdue tasks
    .venv/bin/python bench/bench.py clean            # drop every cairn_bench* database and bench/var

Every server runs pinned to core 0 (`taskset -c 0`); the PostgreSQL backends serving the bench databases
are pinned to core 0 too, by pid, as soon as they appear (a watcher polls pg_stat_activity every 0.2 s
and calls sched_setaffinity). wrk runs pinned to core 1. Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
# The checkout whose code the Cairn servers run (BENCH_SERVE_TREE): another commit's tree measures
# "before" against the same databases, request files and driver.
SERVE_TREE = Path(os.environ.get("BENCH_SERVE_TREE", str(ROOT))).resolve()
VAR = BENCH / "var"
RESULTS = BENCH / "results"
PY = str(ROOT / ".venv" / "bin" / "python")
GUNICORN = str(ROOT / ".venv" / "bin" / "gunicorn")
LUA = str(BENCH / "wrk" / "rpc.lua")
# The benchmark's own PostgreSQL 15 cluster on 127.0.0.1:5433, started pinned to core 0 (`bench/run.sh pg-start`):
# every backend inherits the postmaster's affinity, and a connection leak under test (finding F1) cannot
# exhaust the shared server's slots. BENCH_PG=postgres://postgres@127.0.0.1:5432 uses the shared server
# instead (its bench backends are then pinned one by one, see BackendPinner).
PG_PORT = int(os.environ.get("BENCH_PG_PORT", "5433"))
PG = os.environ.get("BENCH_PG", f"postgres://postgres@127.0.0.1:{PG_PORT}")
PRIVATE_PG = PG.endswith(f":{PG_PORT}")
PG_BIN = Path(os.environ.get("BENCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_DATA = VAR / "pgdata"
# The shared server's settings (SHOW ... on 127.0.0.1:5432, Debian defaults), so both measure alike.
PG_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "port": str(PG_PORT),
    "unix_socket_directories": "",
    "max_connections": "300",
    "shared_buffers": "128MB",
    "work_mem": "4MB",
    "effective_cache_size": "4GB",
    "max_wal_size": "1GB",
    "fsync": "on",
    "synchronous_commit": "on",
    "jit": "on",
    "log_min_messages": "warning",
}
# BENCH_PORT moves the four servers' ports together, for a second benchmark on a shared machine.
CAIRN_PORT = int(os.environ.get("BENCH_PORT", "18081"))
SDK_PORT, CAIRN_GRPC_PORT, SDK_GRPC_PORT = CAIRN_PORT + 1, CAIRN_PORT + 2, CAIRN_PORT + 3
SERVER_CORE, LOAD_CORE = "0", "1"
DURATION = os.environ.get("BENCH_DURATION", "10s")
WARMUP = os.environ.get("BENCH_WARMUP", "3s")
CONNECTIONS = os.environ.get("BENCH_CONNECTIONS", "8")
# Stop a run before it eats the server's connection slots (100 on the shared server, 300 on our own).
MAX_BENCH_BACKENDS = 250 if PRIVATE_PG else 40
SIZES = {"1k": 1000, "100k": 100_000}
WRITE_TASKS = 3000  # x 10 contributions each = 30,000 single-use SendMessage requests
SWEEP_TASKS = 10_000
# `bench/run.sh sweep --tasks 100k`: the sweep at 100,000 due tasks, its template
# seeded by the first such run.
SWEEP_SIZES = {"10k": SWEEP_TASKS, "100k": 100_000}
GUNICORN_WORKERS = os.environ.get("BENCH_GUNICORN_WORKERS", "3")

CAIRN_ENV = {
    "SECRET_KEY": "cairn-bench-only-secret-key",
    "DEBUG": "false",
    "ALLOWED_HOSTS": "127.0.0.1",
    "CAIRN_SITE_URL": f"http://127.0.0.1:{CAIRN_PORT}",
    # Caps raised for the SendMessage workload (SPEC §4.1 defaults are 3 a day).
    "CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY": "1000000",
    "CAIRN_TASKS_PER_AGENT_PER_DAY": "1000000",
    "CAIRN_OPEN_TASKS_PER_AGENT": "1000000",
    "PYTHONDONTWRITEBYTECODE": "1",
    # What a site that has signed its log keeps beside its keys (`seed.py log-state`).
    "CAIRN_LOG_STATE": str(VAR / "log_state.json"),
}


def log(message: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {message}", flush=True)


def pg_url(db: str) -> str:
    return f"{PG}/{db}"


def sqlite_url(name: str) -> str:
    return f"sqlite:///{VAR / (name + '.sqlite3')}"


def site_keys() -> dict[str, str]:
    """The keys a server without DEBUG must be given (SPEC §15.1, §15.6), made once under bench/var
    by the settings' own helpers."""
    from cairn.env import env_seal_key, env_signing_key

    signing, seal = VAR / "signing_key.pem", VAR / "seal_key"
    env_signing_key("CAIRN_BENCH_UNSET", create_at=signing)
    env_seal_key("CAIRN_BENCH_UNSET", create_at=seal)
    return {"CAIRN_SIGNING_KEY": str(signing), "CAIRN_SEAL_KEY": str(seal)}


def cairn_env(database_url: str, settings_module: str = "cairn.settings") -> dict[str, str]:
    env = {
        **os.environ,
        **CAIRN_ENV,
        **site_keys(),
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": settings_module,
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def admin(sql: str) -> None:
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def db_exists(db: str) -> bool:
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone()
            is not None
        )


def recreate_db(db: str, template: str | None = None) -> None:
    assert db.startswith("cairn_bench"), db
    admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{db}"' + (f' TEMPLATE "{template}"' if template else ""))


def run(cmd: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=ROOT, check=True, text=True, **kwargs)


# ---------------------------------------------------------------- the private PostgreSQL cluster


def pg_ctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(PG_DATA), *args],
        check=False,
        text=True,
        capture_output=True,
    )


def pg_start(args: argparse.Namespace | None = None) -> None:
    """initdb (once) and start the benchmark's own cluster, pinned to the server core."""
    if not PRIVATE_PG:
        log(f"using the PostgreSQL at {PG}: nothing to start")
        return
    if not (PG_DATA / "PG_VERSION").exists():
        PG_DATA.mkdir(parents=True, exist_ok=True)
        shutil.chown(PG_DATA, "postgres", "postgres")
        run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "initdb"),
                "-D",
                str(PG_DATA),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
            capture_output=True,
        )
        log(f"initdb {PG_DATA}")
    if pg_ctl("status").returncode == 0:
        log("bench PostgreSQL already running")
        return
    options = " ".join(
        f"-c {key}={value}" if value else f"-c {key}=''" for key, value in PG_SETTINGS.items()
    )
    logfile = VAR / "logs" / "postgresql.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    logfile.touch()
    shutil.chown(logfile, "postgres", "postgres")
    result = subprocess.run(
        [
            "taskset",
            "-c",
            SERVER_CORE,
            "runuser",
            "-u",
            "postgres",
            "--",
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(PG_DATA),
            "-l",
            str(logfile),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ],
        text=True,
        capture_output=True,
    )
    if result.returncode != 0:
        sys.exit(
            f"could not start the bench PostgreSQL: {result.stdout}{result.stderr} (see {logfile})"
        )
    log(f"bench PostgreSQL on 127.0.0.1:{PG_PORT}, pinned to core {SERVER_CORE}")


def pg_stop(args: argparse.Namespace | None = None) -> None:
    if PRIVATE_PG and (PG_DATA / "PG_VERSION").exists() and pg_ctl("status").returncode == 0:
        pg_ctl("-m", "fast", "-w", "stop")
        log("bench PostgreSQL stopped")


# ---------------------------------------------------------------- setup


def marker(name: str) -> Path:
    return VAR / name / "seeded.json"


def setup_cairn(name: str, database_url: str, profile: str, tasks: int, is_pg: bool) -> bool:
    """Create + migrate + seed one Cairn database, unless its marker says it is done. True when
    it seeded."""
    if marker(name).exists() and (not is_pg or db_exists(database_url.rsplit("/", 1)[1])):
        log(f"{name}: already seeded ({marker(name).read_text().strip()})")
        return False
    log(f"{name}: create, migrate, seed {profile} x {tasks}")
    if is_pg:
        recreate_db(database_url.rsplit("/", 1)[1])
    else:
        Path(database_url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    env = cairn_env(database_url)
    run([PY, "manage.py", "migrate", "--noinput", "-v0"], env=env)
    started = time.perf_counter()
    out = run(
        [PY, str(BENCH / "seed.py"), profile, "--tasks", str(tasks), "--out", str(VAR / name)],
        env=env,
        capture_output=True,
    )
    (VAR / name).mkdir(parents=True, exist_ok=True)
    marker(name).write_text(
        json.dumps(
            {
                "seed": json.loads(out.stdout.strip().splitlines()[-1]),
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
        + "\n"
    )
    log(f"{name}: {marker(name).read_text().strip()}")
    return True


def setup_sdk(name: str, source_db: str, *, source_seeded: bool) -> None:
    """The SDK's DatabaseTaskStore table, filled with the same tasks as the Cairn database
    `source_db`: copied again whenever that database was seeded again, since the request files
    name its task ids."""
    db = f"cairn_bench_{name}"
    if not source_seeded and marker(name).exists() and db_exists(db):
        log(f"{name}: already seeded")
        return
    recreate_db(db)
    started = time.perf_counter()
    out = run(
        [PY, str(BENCH / "seed.py"), "sdk", "--sdk-url", pg_url(db)],
        env=cairn_env(pg_url(source_db)),
        capture_output=True,
    )
    (VAR / name).mkdir(parents=True, exist_ok=True)
    marker(name).write_text(
        json.dumps(
            {
                "seed": json.loads(out.stdout.strip().splitlines()[-1]),
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
        + "\n"
    )
    log(f"{name}: {marker(name).read_text().strip()}")


def setup(args: argparse.Namespace) -> None:
    VAR.mkdir(parents=True, exist_ok=True)
    pg_start()
    for size in args.sizes:
        tasks = SIZES[size]
        seeded = setup_cairn(f"pg_{size}", pg_url(f"cairn_bench_pg_{size}"), "reads", tasks, True)
        setup_sdk(f"sdk_{size}", f"cairn_bench_pg_{size}", source_seeded=seeded)
        setup_cairn(f"sqlite_{size}", sqlite_url(f"sqlite_{size}"), "reads", tasks, False)
    # Templates: each write run and each sweep starts from a fresh copy (CREATE DATABASE ... TEMPLATE).
    setup_cairn("write_tpl", pg_url("cairn_bench_write_tpl"), "writes", WRITE_TASKS, True)
    setup_cairn("sweep_tpl", pg_url("cairn_bench_sweep_tpl"), "sweep", SWEEP_TASKS, True)
    if not (VAR / "log_state.json").exists():
        run([PY, str(BENCH / "seed.py"), "log-state"], env=cairn_env(pg_url("cairn_bench_pg_1k")))
        log(f"log state: {VAR / 'log_state.json'}")
    if not db_exists("cairn_bench_sdk_write_tpl"):
        recreate_db("cairn_bench_sdk_write_tpl")
        # An empty SDK store (its server creates the table on first use): nothing else to seed.
    log("setup done")


# ---------------------------------------------------------------- PostgreSQL backend pinning


class BackendPinner(threading.Thread):
    """Pins every PostgreSQL backend serving a cairn_bench* database to the server core, and counts them."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop_event = threading.Event()
        self.pinned: set[int] = set()
        self.peak = 0
        self.over_limit = threading.Event()

    def run(self) -> None:
        with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
            while not self.stop_event.wait(0.2):
                pids = [
                    row[0]
                    for row in conn.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname LIKE 'cairn_bench%%' AND pid <> pg_backend_pid()"
                    )
                ]
                self.peak = max(self.peak, len(pids))
                if len(pids) > MAX_BENCH_BACKENDS:
                    self.over_limit.set()
                for pid in pids:
                    if pid not in self.pinned:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.sched_setaffinity(pid, {int(SERVER_CORE)})
                        self.pinned.add(pid)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)


# ---------------------------------------------------------------- servers


class Server:
    def __init__(
        self, label: str, cmd: list[str], env: dict[str, str], port: int, cwd: Path = ROOT
    ) -> None:
        self.label, self.cmd, self.env, self.port, self.cwd = label, cmd, env, port, cwd
        self.proc: subprocess.Popen | None = None
        self.log_path = VAR / "logs" / f"{label}.log"

    def __enter__(self) -> Server:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["taskset", "-c", SERVER_CORE, *self.cmd],
            env=self.env,
            cwd=self.cwd,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited: see {self.log_path}")
            if self.ready():
                return self
            time.sleep(0.3)
        raise RuntimeError(f"{self.label} did not start: see {self.log_path}")

    def ready(self) -> bool:
        """Whether it serves: its card answers."""
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/.well-known/agent-card.json", timeout=5
            ):
                return True
        return False

    def worker_pids(self) -> list[int]:
        """The processes that serve requests: the server itself, or a gunicorn master's children."""
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        kids = [int(pid) for pid in children.read_text().split()] if children.exists() else []
        return kids or [self.proc.pid]

    def rss_mb(self) -> list[float]:
        sizes = []
        for pid in self.worker_pids():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes.append(round(int(line.split()[1]) / 1024, 1))
        return sizes

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log_file.close()


class GrpcServer(Server):
    """A gRPC server: it serves once a channel to it connects (it has no card)."""

    def ready(self) -> bool:
        import grpc  # the driver's own imports stay the standard library's and psycopg

        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=1)
            except grpc.FutureTimeoutError:
                return False
        return True


# uvicorn's event loop and HTTP parser for every uvicorn server here (Cairn, the floor, the SDK's),
# so the ratios compare servers on one stack: "standard" is uvloop + httptools, what
# `python -m cairn.serve` uses; BENCH_UVICORN=h11 measures plain asyncio + h11.
UVICORN_STACKS = {
    "standard": ["--loop", "uvloop", "--http", "httptools"],
    "h11": ["--loop", "asyncio", "--http", "h11"],
}
UVICORN_STACK = os.environ.get("BENCH_UVICORN", "standard")


def uvicorn_flags() -> list[str]:
    return [*UVICORN_STACKS[UVICORN_STACK], "--no-access-log", "--log-level", "warning"]


def cairn_server(stack: str, database_url: str, settings_module: str) -> Server:
    env = {**cairn_env(database_url, settings_module), "PYTHONPATH": str(SERVE_TREE)}
    bind = ["--host", "127.0.0.1", "--port", str(CAIRN_PORT)]
    if stack == "uvicorn":  # what `make run` serves: ASGI, one process
        cmd = [
            PY,
            "-m",
            "uvicorn",
            "cairn.asgi:application",
            *bind,
            *uvicorn_flags(),
        ]
    elif (
        stack == "gunicorn"
    ):  # sync WSGI workers; the A2A view is async, so Django runs it via async_to_sync
        cmd = [
            GUNICORN,
            "cairn.wsgi:application",
            "-b",
            f"127.0.0.1:{CAIRN_PORT}",
            "-k",
            "sync",
            "-w",
            GUNICORN_WORKERS,
            "--log-level",
            "warning",
        ]
    else:
        raise ValueError(stack)
    return Server(f"cairn-{stack}", cmd, env, CAIRN_PORT, cwd=SERVE_TREE)


def floor_server(database_url: str) -> Server:
    """bench/floor_server.py: Cairn's A2A app with reads answered from memory (the floor)."""
    cmd = [
        PY,
        "-m",
        "uvicorn",
        "bench.floor_server:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(CAIRN_PORT),
        *uvicorn_flags(),
    ]
    return Server("floor-uvicorn", cmd, cairn_env(database_url), CAIRN_PORT)


def sdk_server(db: str) -> Server:
    env = {
        **os.environ,
        "SDK_DATABASE_URL": pg_url(db),
        "SDK_PORT": str(SDK_PORT),
        "PYTHONPATH": str(ROOT),
    }
    # Like for like: Cairn turns the SDK's OpenTelemetry spans off (no exporter), so the reference does too.
    # BENCH_SDK_OTEL=true keeps the SDK's default (spans on).
    if os.environ.get("BENCH_SDK_OTEL", "false") != "true":
        env.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    cmd = [
        PY,
        "-m",
        "uvicorn",
        "bench.sdk_server:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(SDK_PORT),
        *uvicorn_flags(),
    ]
    return Server("sdk-uvicorn", cmd, env, SDK_PORT)


def cairn_grpc_server(database_url: str, settings_module: str) -> GrpcServer:
    """`python -m cairn.grpc`, as `make run` starts it."""
    env = {
        **cairn_env(database_url, settings_module),
        "PYTHONPATH": str(SERVE_TREE),
        "CAIRN_GRPC_BIND": f"127.0.0.1:{CAIRN_GRPC_PORT}",
    }
    cmd = [PY, "-m", "cairn.grpc"]
    return GrpcServer("cairn-grpc", cmd, env, CAIRN_GRPC_PORT, cwd=SERVE_TREE)


def sdk_grpc_server(db: str) -> GrpcServer:
    """`bench/sdk_server.py` run as a module: the SDK's gRPC binding over the same handler and store."""
    env = {
        **os.environ,
        "SDK_DATABASE_URL": pg_url(db),
        "SDK_GRPC_PORT": str(SDK_GRPC_PORT),
        "PYTHONPATH": str(ROOT),
    }
    if os.environ.get("BENCH_SDK_OTEL", "false") != "true":
        env.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    return GrpcServer("sdk-grpc", [PY, "-m", "bench.sdk_server"], env, SDK_GRPC_PORT)


# ---------------------------------------------------------------- load


def rpc(port: int, method: str, params: dict) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/a2a",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    if "error" in answer:
        raise RuntimeError(f"{method} failed: {answer['error']}")
    return answer["result"]


DEPTHS: dict[str, int] = {}


def request_file(name: str, lines: list[str]) -> Path:
    """POST bodies without a token, or (lines starting with "/") HTTP+JSON's GET paths."""
    path = VAR / "requests" / f"{name}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{'' if line.startswith('/') else chr(9)}{line}\n" for line in lines))
    return path


def read_files(port: int, label: str, ids_file: Path) -> dict[str, tuple[str, Path | None]]:
    """(path, request file) per read workload; the deep ListTasks token is found by walking 20 pages."""
    ids = ids_file.read_text().split()[:1000]
    get_lines = [
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "GetTask", "params": {"id": task_id}})
        for i, task_id in enumerate(ids)
    ]
    first = {"pageSize": 50}
    tokens: list[str] = []
    for _ in range(20):  # 20 pages x 50 = 1,000 tasks deep (950, the last page, with 1,000 tasks)
        token = rpc(port, "ListTasks", {**first, **({"pageToken": tokens[-1]} if tokens else {})})[
            "nextPageToken"
        ]
        if not token:
            break
        tokens.append(token)
    token = tokens[-1]
    DEPTHS[label] = len(tokens) * 50
    rest = "/api/a2a/tasks"  # HTTP+JSON's reads of the same tasks and pages (A2A 1.0 §11)

    def listing(name: str, params: dict) -> tuple[str, Path]:
        rpc_body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}
        return ("/api/a2a", request_file(f"{label}-{name}", [json.dumps(rpc_body)]))

    def rest_listing(name: str, params: dict) -> tuple[str, Path]:
        query = urllib.parse.urlencode(params)
        return (rest, request_file(f"{label}-{name}-rest", [f"{rest}?{query}"]))

    return {
        "card": ("/.well-known/agent-card.json", None),
        "get_task": ("/api/a2a", request_file(f"{label}-get", get_lines)),
        "get_task_rest": (rest, request_file(f"{label}-get-rest", [f"{rest}/{i}" for i in ids])),
        "list_first": listing("list-first", first),
        "list_first_rest": rest_listing("list-first", first),
        "list_deep": listing("list-deep", {**first, "pageToken": token}),
        "list_deep_rest": rest_listing("list-deep", {**first, "pageToken": token}),
    }


def wrk(
    port: int,
    path: str,
    file: Path | None,
    duration: str,
    start: int = 1,
    pinner: BackendPinner | None = None,
    scheme: str = "http",
) -> dict:
    cmd = [
        "taskset",
        "-c",
        LOAD_CORE,
        "wrk",
        "-t1",
        f"-c{CONNECTIONS}",
        f"-d{duration}",
        "--timeout",
        "10s",
        "-s",
        LUA,
        f"{scheme}://127.0.0.1:{port}",
        "--",
        path,
    ]
    if file is not None:
        cmd += [str(file), str(start)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    aborted = False
    while proc.poll() is None:
        if pinner is not None and pinner.over_limit.is_set():
            proc.terminate()
            aborted = True
        time.sleep(0.1)
    out, err = proc.communicate()
    line = next((line for line in out.splitlines() if line.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no summary: {out}\n{err}")
    result = json.loads(line.removeprefix("BENCH_JSON "))
    if aborted:
        result["aborted"] = f"more than {MAX_BENCH_BACKENDS} PostgreSQL connections"
    return result


GRPC_WORKLOADS = ("get_task", "list_first", "list_deep")


def grpc_load(
    port: int, server_pid: int, workload: str, ids_file: Path, pinner: BackendPinner
) -> dict:
    """`bench/grpc_load.py` from the load core: its warm-up and measured run in one process, as
    many calls in flight as wrk has connections, each channel its own connection."""
    cmd = [
        "taskset",
        "-c",
        LOAD_CORE,
        PY,
        str(BENCH / "grpc_load.py"),
        f"127.0.0.1:{port}",
        workload,
        "--ids",
        str(ids_file),
        "--calls",
        CONNECTIONS,
        "--channels",
        CONNECTIONS,
        "--warmup",
        WARMUP,
        "--duration",
        DURATION,
        "--server-pid",
        str(server_pid),
    ]
    load = os.getloadavg()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    aborted = False
    while proc.poll() is None:
        if pinner.over_limit.is_set():
            proc.terminate()
            aborted = True
        time.sleep(0.1)
    out, err = proc.communicate()
    line = next((line for line in out.splitlines() if line.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"grpc_load gave no summary: {out}\n{err}")
    result = json.loads(line.removeprefix("BENCH_JSON "))
    result["load_before"] = [round(x, 2) for x in load]
    if aborted:
        result["aborted"] = f"more than {MAX_BENCH_BACKENDS} PostgreSQL connections"
    return result


def process_cpu(pids: list[int]) -> float:
    """The CPU seconds the processes (all their threads) have used so far."""
    used = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            used += int(fields[11]) + int(fields[12])
    return used / os.sysconf("SC_CLK_TCK")


def measure(
    port: int,
    path: str,
    file: Path | None,
    start: int = 1,
    pinner: BackendPinner | None = None,
    server_pids: list[int] | None = None,
    scheme: str = "http",
) -> dict:
    """Warm up, then measure. For single-use request files the measured run continues after the
    warm-up. Given the server's pids, the result has their CPU per request (`server_cpu_us`,
    PostgreSQL's backends not in it), which other work on a shared machine moves far less than
    the rate; given the pinner, the bench PostgreSQL's CPU per request too (`pg_cpu_us`)."""
    warm = wrk(port, path, file, WARMUP, start, pinner, scheme)
    load = os.getloadavg()
    cpu = process_cpu(server_pids or [])
    backends = {pid: process_cpu([pid]) for pid in set(pinner.pinned if pinner else ())}
    result = wrk(
        port,
        path,
        file,
        DURATION,
        warm["last_index"] + 1 if file is not None else 1,
        pinner,
        scheme,
    )
    if server_pids and result["requests"]:
        used = process_cpu(server_pids) - cpu
        result["server_cpu_us"] = round(used / result["requests"] * 1e6, 1)
    if pinner and result["requests"]:
        # A backend that started during the run counts whole; one that ended is left out.
        pg_used = sum(process_cpu([pid]) - backends.get(pid, 0.0) for pid in set(pinner.pinned))
        result["pg_cpu_us"] = round(pg_used / result["requests"] * 1e6, 1)
    result["load_before"] = [round(x, 2) for x in load]
    result["warmup_requests"] = warm["requests"]
    return result


def summary(result: dict) -> str:
    failures = result["failures"] + result["socket_errors"]
    return (
        f"{result['rps']:8.1f} req/s  p50 {result['p50_ms']:7.2f} ms  p99 {result['p99_ms']:7.2f} ms"
        f"  fail {failures}"
        + (f"  server CPU {result['server_cpu_us']:7.1f} µs" if "server_cpu_us" in result else "")
        + (f"  PostgreSQL CPU {result['pg_cpu_us']:7.1f} µs" if "pg_cpu_us" in result else "")
        + (" ABORTED" if "aborted" in result else "")
        + (f"  first failure: {result['first_failure'][:200]}" if failures else "")
    )


# ---------------------------------------------------------------- the run


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        line.split(":", 1)[1].strip()
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    pg_version = ""
    with contextlib.suppress(Exception), psycopg.connect(pg_url("postgres")) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[
        0:1
    ]
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "postgresql": pg_version,
        "wrk": wrk_version[0] if wrk_version else "",
        "kernel": platform.release(),
    }


def tree_state() -> dict:
    """Which code was measured: the tree's path, HEAD and whether it has uncommitted changes (read-only git)."""

    def git(*args: str, tree: Path = ROOT) -> str:
        result = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else ""

    return {
        "root": str(ROOT),
        "serve_tree": str(SERVE_TREE),
        "serve_head": git("rev-parse", "--short", "HEAD", tree=SERVE_TREE),
        "head": git("rev-parse", "--short", "HEAD"),
        "uncommitted_files": len(git("status", "--porcelain").splitlines())
        if git("rev-parse", "HEAD")
        else None,
    }


def run_reads(
    results: dict, config: str, server: Server, ids_file: Path, pinner: BackendPinner
) -> None:
    with server:
        files = read_files(server.port, config, ids_file)
        for workload, (path, file) in files.items():
            result = measure(
                server.port, path, file, pinner=pinner, server_pids=server.worker_pids()
            )
            results["runs"].append({"config": config, "workload": workload, **result})
            log(f"{config:28s} {workload:11s} {summary(result)}")
        results["rss_mb"][config] = server.rss_mb()
        results["checks"][config + " list_deep depth"] = DEPTHS[config]
        log(f"{config:28s} worker RSS after the run: {results['rss_mb'][config]} MB")


def run_grpc_reads(
    results: dict, config: str, server: GrpcServer, ids_file: Path, pinner: BackendPinner
) -> None:
    """GetTask and the two ListTasks pages over the gRPC binding (the `_grpc` workloads)."""
    with server:
        for workload in GRPC_WORKLOADS:
            result = grpc_load(server.port, server.worker_pids()[0], workload, ids_file, pinner)
            results["runs"].append({"config": config, "workload": f"{workload}_grpc", **result})
            log(
                f"{config:28s} {workload + '_grpc':11s} {summary(result)}"
                f"  client CPU {result['client_cpu_share']:.0%}"
            )
            if "depth" in result:
                results["checks"][config + " list_deep depth"] = result["depth"]
        results["rss_mb"][config] = server.rss_mb()


def rest_messages(file: Path) -> Path:
    """The same SendMessage requests for HTTP+JSON: each JSON-RPC body's params, posted to
    `message:send` (A2A 1.0 §11)."""
    out = file.with_name(file.stem + "-rest.txt")
    if not out.exists():
        with file.open() as lines, out.open("w") as rest:
            for line in lines:
                token, body = line.rstrip("\n").split("\t", 1)
                rest.write(f"{token}\t{json.dumps(json.loads(body)['params'])}\n")
    return out


WRITE_PATHS = {"send_message": "/api/a2a", "send_message_rest": "/api/a2a/message:send"}


def run_writes(results: dict, config: str, make_server, pinner: BackendPinner) -> None:
    """SendMessage over each binding: Cairn contributions (a fresh database from the template for
    each) or SDK messages."""
    is_sdk = config.startswith("sdk")
    db = "cairn_bench_sdk_write" if is_sdk else "cairn_bench_write"
    rpc_file = VAR / "write_tpl" / ("sdk_messages.txt" if is_sdk else "cairn_contributions.txt")
    for workload, path in WRITE_PATHS.items():
        recreate_db(db, template="cairn_bench_sdk_write_tpl" if is_sdk else "cairn_bench_write_tpl")
        file = rest_messages(rpc_file) if workload.endswith("_rest") else rpc_file
        with make_server(db) as server:
            result = measure(
                server.port, path, file, pinner=pinner, server_pids=server.worker_pids()
            )
            results["runs"].append({"config": config, "workload": workload, **result})
            log(f"{config:28s} {workload:11s} {summary(result)}")
            if result["wrapped"]:
                raise RuntimeError("the contribution file ran out: make WRITE_TASKS larger")
            results["rss_mb"][f"{config} ({workload})"] = server.rss_mb()
        if not is_sdk:
            with psycopg.connect(pg_url(db)) as conn:
                stored = conn.execute("SELECT count(*) FROM tasks_contribution").fetchone()[0]
            expected = result["requests"] + result["warmup_requests"]
            results["checks"][f"{config} {workload} contributions stored"] = {
                "stored": stored,
                "responses": expected,
            }
            log(f"{config:28s} contributions stored {stored}, responses {expected}")


CONFIGS = [
    "reads-pg",
    "grpc",
    "reads-sqlite",
    "reads-gunicorn",
    "floor",
    "writes",
    "writes-gunicorn",
]


def wait_calm(threshold: float, max_seconds: int) -> None:
    """Wait (at most max_seconds) for the 1-minute load average to fall below threshold: other work on
    the machine shares the cores the figures depend on."""
    if threshold <= 0:
        return
    deadline = time.monotonic() + max_seconds
    while os.getloadavg()[0] >= threshold and time.monotonic() < deadline:
        log(f"load {os.getloadavg()[0]:.2f} >= {threshold}: waiting")
        time.sleep(30)
    log(f"starting at load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def run_all(args: argparse.Namespace) -> None:
    seeded_per_size = [f"{kind}_{size}" for size in args.sizes for kind in ("pg", "sdk", "sqlite")]
    for name in (*seeded_per_size, "write_tpl", "sweep_tpl"):
        if not marker(name).exists():
            sys.exit(f"{name} is not seeded: run `bench/run.sh setup` first")
    pg_start()
    wait_calm(args.calm, args.calm_wait)
    settings_module = args.settings
    only = set(args.only or CONFIGS)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    results = {
        "started": stamp,
        "settings": settings_module,
        "machine": machine(),
        "duration": DURATION,
        "warmup": WARMUP,
        "connections": CONNECTIONS,
        "gunicorn_workers": GUNICORN_WORKERS,
        "uvicorn_stack": UVICORN_STACK,
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
        "runs": [],
        "rss_mb": {},
        "checks": {},
        "argv": sys.argv,
    }
    tag = "" if settings_module == "cairn.settings" else "+" + settings_module.rsplit(".", 1)[-1]
    if args.tag:
        tag += "+" + args.tag
    results["tree"] = tree_state()
    pinner = BackendPinner()
    pinner.start()
    try:
        for size in args.sizes:
            ids = VAR / f"pg_{size}" / "task_ids.txt"
            if "reads-pg" in only:  # side by side: Cairn, then the SDK, on the same data
                run_reads(
                    results,
                    f"cairn-uvicorn{tag}-pg-{size}",
                    cairn_server("uvicorn", pg_url(f"cairn_bench_pg_{size}"), settings_module),
                    ids,
                    pinner,
                )
                run_reads(
                    results,
                    f"sdk-uvicorn-pg-{size}",
                    sdk_server(f"cairn_bench_sdk_{size}"),
                    ids,
                    pinner,
                )
            if "grpc" in only:  # the same reads over gRPC: Cairn's binding, then the SDK's
                run_grpc_reads(
                    results,
                    f"cairn-grpc{tag}-pg-{size}",
                    cairn_grpc_server(pg_url(f"cairn_bench_pg_{size}"), settings_module),
                    ids,
                    pinner,
                )
                run_grpc_reads(
                    results,
                    f"sdk-grpc-pg-{size}",
                    sdk_grpc_server(f"cairn_bench_sdk_{size}"),
                    ids,
                    pinner,
                )
            if "floor" in only:  # the same reads, from memory: the most any store could give
                run_reads(
                    results,
                    f"floor-uvicorn{tag}-{size}",
                    floor_server(pg_url(f"cairn_bench_pg_{size}")),
                    ids,
                    pinner,
                )
            if "reads-gunicorn" in only:
                run_reads(
                    results,
                    f"cairn-gunicorn{tag}-pg-{size}",
                    cairn_server("gunicorn", pg_url(f"cairn_bench_pg_{size}"), settings_module),
                    ids,
                    pinner,
                )
            if "reads-sqlite" in only:
                run_reads(
                    results,
                    f"cairn-uvicorn{tag}-sqlite-{size}",
                    cairn_server("uvicorn", sqlite_url(f"sqlite_{size}"), settings_module),
                    VAR / f"sqlite_{size}" / "task_ids.txt",
                    pinner,
                )
        if "writes" in only:
            run_writes(
                results,
                f"cairn-uvicorn{tag}-pg",
                lambda db: cairn_server("uvicorn", pg_url(db), settings_module),
                pinner,
            )
            run_writes(results, "sdk-uvicorn-pg", sdk_server, pinner)
        if "writes-gunicorn" in only:
            run_writes(
                results,
                f"cairn-gunicorn{tag}-pg",
                lambda db: cairn_server("gunicorn", pg_url(db), settings_module),
                pinner,
            )
    finally:
        pinner.stop()
        results["pg_backends_peak"] = pinner.peak
        results["pg_backends_pinned"] = len(pinner.pinned)
        results["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"{stamp}{tag}.json"
        out.write_text(json.dumps(results, indent=1) + "\n")
        log(f"results: {out.relative_to(ROOT)} (peak bench PostgreSQL backends {pinner.peak})")
        print(report_table(results))


def sweep(args: argparse.Namespace) -> None:
    template = "sweep_tpl" if args.tasks == "10k" else f"sweep_{args.tasks}_tpl"
    if args.tasks == "10k" and not marker(template).exists():
        sys.exit("sweep_tpl is not seeded: run `bench/run.sh setup` first")
    pg_start()
    setup_cairn(template, pg_url(f"cairn_bench_{template}"), "sweep", SWEEP_SIZES[args.tasks], True)
    recreate_db("cairn_bench_sweep", template=f"cairn_bench_{template}")
    pinner = BackendPinner()
    pinner.start()
    load = os.getloadavg()
    try:
        out = run(
            ["taskset", "-c", SERVER_CORE, PY, str(BENCH / "sweep.py")],
            env={
                **cairn_env(pg_url("cairn_bench_sweep"), args.settings),
                "PYTHONPATH": str(SERVE_TREE),
            },
            capture_output=True,
        )
    finally:
        pinner.stop()
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["load_before"] = [round(x, 2) for x in load]
    result["settings"] = args.settings
    result["tree"] = tree_state()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"sweep-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(result) + "\n")
    log(f"sweep: {result}  -> {path.relative_to(ROOT)}")


# ---------------------------------------------------------------- report


def report_table(results: dict) -> str:
    """Markdown: each Cairn figure beside the SDK's on the same workload and data."""
    runs = {(run["config"], run["workload"]): run for run in results["runs"]}
    lines = [
        "| config | workload | req/s | p50 ms | p99 ms | server CPU µs/req | vs SDK req/s | vs its JSON-RPC | failures |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in results["runs"]:
        config, workload = run["config"], run["workload"]
        ratio = ""
        grpc = workload.endswith("_grpc")
        if not config.startswith("sdk") and ("-pg" in config or config.startswith("floor")):
            size = config.rsplit("-", 1)[-1]
            sdk_key = (
                ("sdk-uvicorn-pg", workload)
                if workload.startswith("send_message")
                else (f"sdk-{'grpc' if grpc else 'uvicorn'}-pg-{size}", workload)
            )
            if sdk_key in runs and runs[sdk_key]["rps"]:
                ratio = f"{run['rps'] / runs[sdk_key]['rps']:.2f}x"
        # HTTP+JSON and gRPC beside the same server's (gRPC: the same tree's web server's) JSON-RPC.
        rpc_key = (
            config.replace("-grpc", "-uvicorn", 1) if grpc else config,
            workload.removesuffix("_rest").removesuffix("_grpc"),
        )
        binding = ""
        if workload.endswith(("_rest", "_grpc")) and rpc_key in runs and runs[rpc_key]["rps"]:
            binding = f"{run['rps'] / runs[rpc_key]['rps']:.2f}x"
        failures = run["failures"] + run["socket_errors"]
        cpu = f"{run['server_cpu_us']:.0f}" if "server_cpu_us" in run else ""
        lines.append(
            f"| {config} | {workload} | {run['rps']:.1f} | {run['p50_ms']:.2f} | {run['p99_ms']:.2f} | "
            f"{cpu} | {ratio} | {binding} | {failures}{' ABORTED' if 'aborted' in run else ''} |"
        )
    lines.append("")
    lines.append(
        "Worker RSS after the runs (MB): "
        + "; ".join(f"{k}: {v}" for k, v in results["rss_mb"].items())
    )
    return "\n".join(lines)


def median_results(all_results: list[dict]) -> dict:
    """Several runs of the same configs as one: each figure the median of its runs (a single run
    on a shared machine is good to ±15-20%), failures summed, the largest RSS kept."""
    found: dict[tuple[str, str], list[dict]] = {}
    for results in all_results:
        for run in results["runs"]:
            found.setdefault((run["config"], run["workload"]), []).append(run)
    runs = [
        {
            "config": config,
            "workload": workload,
            **{key: statistics.median(r[key] for r in same) for key in ("rps", "p50_ms", "p99_ms")},
            **(
                {"server_cpu_us": statistics.median(r["server_cpu_us"] for r in same)}
                if all("server_cpu_us" in r for r in same)
                else {}
            ),
            "failures": sum(r["failures"] for r in same),
            "socket_errors": sum(r["socket_errors"] for r in same),
        }
        for (config, workload), same in found.items()
    ]
    rss: dict[str, list[float]] = {}
    for results in all_results:
        for config, sizes in results["rss_mb"].items():
            rss[config] = max(rss.get(config, [0.0]), sizes, key=max)
    return {"runs": runs, "rss_mb": rss}


def report(args: argparse.Namespace) -> None:
    all_results = [json.loads(Path(file).read_text()) for file in args.files]
    print(report_table(all_results[0] if len(all_results) == 1 else median_results(all_results)))


def clean(args: argparse.Namespace) -> None:
    if PRIVATE_PG:
        pg_stop()
        shutil.rmtree(VAR, ignore_errors=True)
        log(f"removed {VAR} (the bench cluster's data included)")
        return
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'cairn_bench%%'"
            )
        ]
    for name in names:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        log(f"dropped {name}")
    shutil.rmtree(VAR, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    setup_parser = sub.add_parser("setup")
    setup_parser.add_argument("--sizes", nargs="*", choices=list(SIZES), default=list(SIZES))
    setup_parser.set_defaults(func=setup)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--only", nargs="*", choices=CONFIGS)
    run_parser.add_argument(
        "--calm",
        type=float,
        default=0.0,
        help="wait until the 1-minute load average is below this before starting (0: don't)",
    )
    run_parser.add_argument(
        "--calm-wait", type=int, default=1800, help="seconds to wait for --calm at most"
    )
    run_parser.add_argument(
        "--tag", default="", help="a label for this tree/variant, added to every config name"
    )
    run_parser.add_argument("--sizes", nargs="*", choices=list(SIZES), default=list(SIZES))
    run_parser.add_argument(
        "--settings",
        default="cairn.settings",
        help="Django settings for Cairn",
    )
    run_parser.set_defaults(func=run_all)
    sweep_parser = sub.add_parser("sweep")
    sweep_parser.add_argument("--settings", default="cairn.settings")
    sweep_parser.add_argument("--tasks", choices=list(SWEEP_SIZES), default="10k")
    sweep_parser.set_defaults(func=sweep)
    report_parser = sub.add_parser("report")
    report_parser.add_argument(
        "files", nargs="+", help="one run, or several: the median of each figure"
    )
    report_parser.set_defaults(func=report)
    sub.add_parser("clean").set_defaults(func=clean)
    sub.add_parser("pg-start").set_defaults(func=pg_start)
    sub.add_parser("pg-stop").set_defaults(func=pg_stop)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
