# Cairn: `make run` serves it, `make test` tests it, `make lint` and `make typecheck` check the code.
# All set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1
# make run's gRPC server listens beside the web server, on the next port, so two clones served on
# two ports never share one (CAIRN_GRPC_BIND in the environment wins; empty turns gRPC off).
GRPC_PORT ?= $(shell expr $(PORT) + 1)
CHROMIUM ?= /usr/bin/chromium
# make test runs the tests in this many pytest-xdist processes side by side: most of their time
# is spent waiting on servers, browsers and processes they start, so more than the cores help.
# On PostgreSQL fewer: each worker's live servers hold connections, and six reached a default
# server's 100.
TEST_WORKERS ?= $(if $(DATABASE_URL),4,6)

.PHONY: install run run-keypers test migrate superuser chromium lint typecheck clients

# Serving needs the runtime dependencies only; make test, lint and typecheck add the test extras
# (pytest, Playwright, mypy, ruff, stubs). Installing the extras marks the runtime stamp too, so
# going from run to test installs just the extras, and back again installs nothing.
$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

# This clone's own settings, written once and read by manage.py and the ASGI/WSGI apps; the
# environment wins over it. Git ignores it.
.env:
	@$(PYTHON) -c 'import secrets; print("# Written once by make for this clone. The environment wins over it.\nDEBUG=true\nSECRET_KEY=" + secrets.token_urlsafe(50))' > $@
	@echo "wrote .env (DEBUG=true and a new SECRET_KEY)"

migrate: $(VENV)/.installed .env
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput

# The keeper's account for /admin/. It asks for a name and a password, so without a terminal it
# stops, saying how to give them in the environment instead (Django's own command would skip
# the account and still succeed).
superuser:
	@if [ -z "$$DJANGO_SUPERUSER_PASSWORD" ] && [ ! -t 0 ]; then \
	  echo "make superuser: no terminal to ask on; give the account in the environment: DJANGO_SUPERUSER_USERNAME=keeper DJANGO_SUPERUSER_EMAIL=keeper@example.org DJANGO_SUPERUSER_PASSWORD='...' make superuser (it runs manage.py createsuperuser --noinput)" >&2; \
	  exit 1; \
	fi
	@$(MAKE) --no-print-directory migrate
	$(PY) manage.py createsuperuser $${DJANGO_SUPERUSER_PASSWORD:+--noinput}

# Web (uvicorn, ASGI), the django-q2 worker and the gRPC binding's server together, gRPC on
# GRPC_PORT (PORT+1) unless CAIRN_GRPC_BIND says otherwise. It is a developer's server: DEBUG; a
# task's deadline may be as little as 30 s ahead, so the walk-through shows an evaluation within
# a minute on this very server (a site's own minimum stays the setting's default, 30 minutes);
# and one address may register 1000 agents an hour, where a site's limit is 20, so the
# walk-throughs can be run again and again. The environment wins over all three.
# They run in the background so the shell's traps run at once (a foreground command would defer
# them), and the shell checks every second that all three still run: when one ends (a port taken
# by another clone, a bad setting), it says which and stops the others, so no card is left
# pointing at a server that is not there. Ctrl-C, or SIGTERM to make or its process group, stops
# all three; the shell then exits quietly and make ends by the signal itself. The shell waits for
# all to exit before it does, ignoring the signals make and the group repeat meanwhile.
run: migrate
	@export DEBUG=$${DEBUG:-true} CAIRN_TASK_DEADLINE_MIN_S=$${CAIRN_TASK_DEADLINE_MIN_S:-30} \
	  CAIRN_REGISTRATIONS_PER_IP_PER_HOUR=$${CAIRN_REGISTRATIONS_PER_IP_PER_HOUR:-1000} \
	  CAIRN_GRPC_BIND=$${CAIRN_GRPC_BIND-$(HOST):$(GRPC_PORT)}; \
	echo "Cairn on http://$(HOST):$(PORT)/a2a  (keeper account: make superuser, then /admin/)"; \
	echo "gRPC on $${CAIRN_GRPC_BIND:-nothing: it is off (CAIRN_GRPC_BIND is empty)}  (GRPC_PORT, PORT+1 by default; CAIRN_GRPC_BIND)"; \
	echo "In another terminal, before the walk-throughs, MCP or the verifier:"; \
	echo "  export CAIRN_URL=http://$(HOST):$(PORT)"; \
	echo "Developer's settings: DEBUG=$$DEBUG, a task's deadline may be $$CAIRN_TASK_DEADLINE_MIN_S s ahead (CAIRN_TASK_DEADLINE_MIN_S), and one address may register $$CAIRN_REGISTRATIONS_PER_IP_PER_HOUR agents an hour (CAIRN_REGISTRATIONS_PER_IP_PER_HOUR)"; \
	trap 'trap "" INT TERM; kill $$web $$worker $$grpc $$tick 2>/dev/null; wait' EXIT; \
	trap 'exit 0' INT TERM; \
	$(PY) manage.py qcluster & worker=$$!; \
	grpc=; if [ -n "$$CAIRN_GRPC_BIND" ]; then $(PY) -m cairn.grpc & grpc=$$!; fi; \
	$(PY) -m cairn.serve --host $(HOST) --port $(PORT) & web=$$!; \
	running() { kill -0 $$web 2>/dev/null && kill -0 $$worker 2>/dev/null && { [ -z "$$grpc" ] || kill -0 $$grpc 2>/dev/null; }; }; \
	while running; do sleep 1 & tick=$$!; wait $$tick; done; \
	for ended in "$$web the web server (python -m cairn.serve, on $(HOST):$(PORT))" \
	  "$$worker the worker (manage.py qcluster)" \
	  "$$grpc the gRPC server (python -m cairn.grpc, on $$CAIRN_GRPC_BIND)"; do \
	  pid=$${ended%% *}; [ -n "$$pid" ] || continue; kill -0 $$pid 2>/dev/null && continue; \
	  wait $$pid; echo "make run: $${ended#* } exited (status $$?): stopping Cairn" >&2; \
	done; \
	exit 1

# make run with two keypers on this machine, so a sealed contribution can be tried from start to
# end (docs/sealing.md): each a Cairn of its own, on the site's port + 10 and + 11 unless
# KEYPER_PORTS="p1,p2" says, its database and keys under KEYPERS_DIR. They hold the keeper's own
# keys: they show the flow and protect nothing.
# migrate has just installed and written what run needs: -o keeps the inner make from doing it again.
KEYPER_PORTS ?=
KEYPERS_DIR ?= var/keypers
run-keypers: migrate
	@$(PY) -m cairn.local_keypers --port $(PORT) --ports "$(KEYPER_PORTS)" --folder $(KEYPERS_DIR) -- \
	  $(MAKE) --no-print-directory -o $(VENV)/.installed -o .env run

# The browser tests drive Chromium: say so before anything is set up or run.
chromium:
	@$(if $(wildcard $(CHROMIUM)),:,$(error make test needs Chromium at $(CHROMIUM): install it first (Debian/Ubuntu: sudo apt-get install chromium), or set CHROMIUM=/path/to/chromium))

# `loadgroup` keeps the tests that share a module's server or deployment on one worker
# (tests/conftest.py marks them), and spreads every other test one by one.
test: chromium $(VENV)/.installed-test
	CAIRN_CHROMIUM=$(CHROMIUM) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The pinned official A2A clients the binding tests drive (tests/a2a/clients.py): installed once
# and kept; the tests would install them on first use, this does it ahead and fails loudly.
clients: $(VENV)/.installed-test
	$(PY) -m tests.a2a.clients

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# django-stubs loads the settings, which need a SECRET_KEY (and, without DEBUG, the site keys); mypy reads its options from pyproject.toml.
typecheck: $(VENV)/.installed-test
	DEBUG=true SECRET_KEY=$${SECRET_KEY:-cairn-typecheck-only} $(VENV)/bin/mypy
