# Cairn: `make run` serves it, `make test` tests it, `make lint` and `make typecheck` check the code.
# All set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1
CHROMIUM ?= /usr/bin/chromium

.PHONY: install run test migrate superuser chromium lint typecheck clients

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

# This clone's own settings, written once and read by manage.py and the ASGI/WSGI apps; the
# environment wins over it. Git ignores it.
.env:
	@$(PYTHON) -c 'import secrets; print("# Written once by make for this clone. The environment wins over it.\nDEBUG=true\nSECRET_KEY=" + secrets.token_urlsafe(50))' > $@
	@echo "wrote .env (DEBUG=true and a new SECRET_KEY)"

migrate: install .env
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput

# The keeper's account for /admin/.
superuser: migrate
	$(PY) manage.py createsuperuser

# Web (uvicorn, ASGI) and the django-q2 worker together; Ctrl-C, or SIGTERM to make or its
# process group, stops both. Both run in the background so the shell's traps run at once (a
# foreground command would defer them), and the shell waits for both to exit before it does,
# ignoring the signals make and the group repeat meanwhile.
run: migrate
	@echo "Cairn on http://$(HOST):$(PORT)/a2a  (keeper account: make superuser, then /admin/)"
	@export DEBUG=$${DEBUG:-true}; \
	trap 'trap "" INT TERM; kill $$web $$worker 2>/dev/null; wait' EXIT; \
	trap 'exit 130' INT; trap 'exit 143' TERM; \
	$(PY) manage.py qcluster & worker=$$!; \
	$(PY) -m cairn.serve --host $(HOST) --port $(PORT) & web=$$!; \
	wait $$web

# The browser tests drive Chromium: say so before anything is set up or run.
chromium:
	@$(if $(wildcard $(CHROMIUM)),:,$(error make test needs Chromium at $(CHROMIUM): install it first (Debian/Ubuntu: sudo apt-get install chromium), or set CHROMIUM=/path/to/chromium))

test: chromium install
	CAIRN_CHROMIUM=$(CHROMIUM) $(PY) -m pytest

# The pinned official A2A clients the binding tests drive (tests/a2a/clients.py): installed once
# and kept; the tests would install them on first use, this does it ahead and fails loudly.
clients: install
	$(PY) -m tests.a2a.clients

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# django-stubs loads the settings, which need a SECRET_KEY (and, without DEBUG, the site keys); mypy reads its options from pyproject.toml.
typecheck: install
	DEBUG=true SECRET_KEY=$${SECRET_KEY:-cairn-typecheck-only} $(VENV)/bin/mypy
