# Cairn: `make run` serves it, `make test` tests it, `make lint` and `make typecheck` check the code.
# All set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1

.PHONY: install run test migrate lint typecheck

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

migrate: install
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput

# Web (uvicorn, ASGI) and the django-q2 worker together; Ctrl-C stops both.
run: migrate
	@echo "Cairn on http://$(HOST):$(PORT)/a2a  (keeper account: $(PY) manage.py createsuperuser, then /admin/)"
	@export DEBUG=$${DEBUG:-true}; \
	$(PY) manage.py qcluster & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker' EXIT INT TERM; \
	$(PY) -m cairn.serve --host $(HOST) --port $(PORT)

test: install
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# django-stubs loads the settings, which need a SECRET_KEY; mypy reads its options from pyproject.toml.
typecheck: install
	SECRET_KEY=$${SECRET_KEY:-cairn-typecheck-only} $(VENV)/bin/mypy
