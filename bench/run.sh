#!/usr/bin/env bash
# Cairn's benchmark. See bench/README.md.
#   bench/run.sh                 setup (once) + run every workload + the sweep
#   bench/run.sh setup           create, migrate and seed the cairn_bench* databases (skips what is there)
#   bench/run.sh run [--only reads-pg grpc ...]   (grpc: the reads over gRPC, bench/grpc_load.py)
#   bench/run.sh sweep [--settings ...]
#   bench/run.sh report bench/results/<file>.json [<file> ...]   (several: the median of each figure)
#   bench/run.sh pg-start|pg-stop  the benchmark's own PostgreSQL on 127.0.0.1:5433 (setup/run/sweep start it)
#   bench/run.sh clean           stop it and remove bench/var (its data, the SQLite files, request files)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "no .venv: run 'make install' first" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
command -v taskset >/dev/null || { echo "taskset is missing (util-linux)" >&2; exit 1; }
"$PY" -c "import gunicorn, sqlalchemy, asyncpg, psycopg_pool, greenlet" 2>/dev/null \
  || "$PY" -m pip install -q -r bench/requirements.txt
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)  (take final figures below ~0.5)"
if [ $# -eq 0 ]; then
  trap '"$PY" bench/bench.py pg-stop' EXIT
  "$PY" bench/bench.py setup
  "$PY" bench/bench.py run
  "$PY" bench/bench.py sweep
else
  "$PY" bench/bench.py "$@"
fi
