"""Cairn's settings. Everything comes from the environment (SPEC §14); see cairn/env.py."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg.conninfo import make_conninfo

from cairn.database_url import database_urls, hosts_in_query
from cairn.env import (
    env_advertised_address,
    env_bool,
    env_choice,
    env_int,
    env_keypers,
    env_list,
    env_listen_address,
    env_optional_key,
    env_seal_key,
    env_signing_key,
    env_str,
    env_url,
    env_verifier_keys,
    env_witnesses,
)
from core.logs import logging_config
from ledger.signed_note import ED25519

# The A2A SDK opens an OpenTelemetry span around every call, a noticeable share of a request's
# time; Cairn configures no exporter, so tracing is off unless the environment turns it on.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG")

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set (a development default exists only when DEBUG=true)"
        )
    SECRET_KEY = "cairn-development-only-secret-key-never-use-in-production"

CAIRN_SITE_URL = env_url("CAIRN_SITE_URL")

# The site key signs receipts, checkpoints and the card; the seal key encrypts reports until
# evaluation (SPEC §15).
CAIRN_SIGNING_KEY = env_signing_key(
    "CAIRN_SIGNING_KEY", create_at=VAR_DIR / "signing_key.pem" if DEBUG else None
)
CAIRN_SEAL_KEY = env_seal_key("CAIRN_SEAL_KEY", create_at=VAR_DIR / "seal_key" if DEBUG else None)
# The witnesses that cosign the site's checkpoints, and how many must (§15.4).
CAIRN_WITNESSES = env_witnesses("CAIRN_WITNESSES")
CAIRN_WITNESS_QUORUM = env_int(
    "CAIRN_WITNESS_QUORUM",
    len(CAIRN_WITNESSES),
    minimum=1 if CAIRN_WITNESSES else 0,
    maximum=len(CAIRN_WITNESSES),
)
# Cairn as a witness of other logs (§15.4): off unless it has a key.
CAIRN_WITNESS_SIGNING_KEY = env_optional_key("CAIRN_WITNESS_SIGNING_KEY", "Ed25519")
CAIRN_WITNESS_NAME = env_str("CAIRN_WITNESS_NAME")
CAIRN_WITNESSED_LOGS = env_verifier_keys("CAIRN_WITNESSED_LOGS", type=ED25519)
# Keyper sealing (§15.8). As a keyper for the logs it witnesses: its X25519 key, off when unset.
CAIRN_KEYPER_KEY = env_optional_key("CAIRN_KEYPER_KEY", "X25519")
# As a site: the keypers its contributors seal to, how many must release, and how long after the
# deadline plus the merge delay a sealed report may wait for them before it is void.
CAIRN_KEYPERS = env_keypers("CAIRN_KEYPERS")
CAIRN_KEYPER_THRESHOLD = env_int(
    "CAIRN_KEYPER_THRESHOLD",
    len(CAIRN_KEYPERS) // 2 + 1 if CAIRN_KEYPERS else 0,
    minimum=1 if CAIRN_KEYPERS else 0,
    maximum=len(CAIRN_KEYPERS),
)
CAIRN_KEYPER_GRACE_S = env_int("CAIRN_KEYPER_GRACE_S", 600, minimum=0)
if CAIRN_KEYPER_KEY and not CAIRN_WITNESS_SIGNING_KEY:
    raise ImproperlyConfigured(
        "CAIRN_KEYPER_KEY needs CAIRN_WITNESS_SIGNING_KEY: a keyper is a witness and signs its "
        "releases with its witness key"
    )
_unwitnessed = [
    k["name"] for k in CAIRN_KEYPERS if k["name"] not in {w["name"] for w in CAIRN_WITNESSES}
]
if _unwitnessed:
    raise ImproperlyConfigured(
        f"CAIRN_KEYPERS names {', '.join(_unwitnessed)}, not among CAIRN_WITNESSES: a keyper's "
        "releases are checked with the witness key configured under its name"
    )
# How often the sequencer integrates queued log entries and publishes a checkpoint (§15.3).
CAIRN_LOG_INTERVAL_S = env_int("CAIRN_LOG_INTERVAL_S", 5, minimum=1, maximum=10)
# What the site signed and its witnesses hold, kept outside the database so a restore of the
# database cannot take it back (§16.2): a file on durable storage, beside the keys.
CAIRN_LOG_STATE = Path(env_str("CAIRN_LOG_STATE", str(VAR_DIR / "log_state.json")))

_default_hosts = [str(urlsplit(CAIRN_SITE_URL).hostname)] if CAIRN_SITE_URL else []
if DEBUG:
    _default_hosts += ["localhost", "127.0.0.1", "[::1]"]
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", _default_hosts)
if not ALLOWED_HOSTS:
    # Django would start and then answer every request 400: say so now instead.
    raise ImproperlyConfigured(
        "CAIRN_SITE_URL (or ALLOWED_HOSTS) must be set when DEBUG is false: "
        "it names the host this site answers to"
    )
if CAIRN_SITE_URL:
    CSRF_TRUSTED_ORIGINS = [CAIRN_SITE_URL]

INSTALLED_APPS = [
    "keeper.site.CairnAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # Before django_q: `cairn` provides the qcluster command (cairn/worker.py).
    "cairn",
    "django_q",
    "agents",
    "tasks",
    "calls",
    "a2a_gateway",
    "ops",
    "ledger",
    "keeper.site.LoginLockoutConfig",  # django-axes
]

MIDDLEWARE = [
    "core.middleware.SecurityHeadersMiddleware",
    "core.middleware.CachingMiddleware",
    "cairn.error_pages.BrandedErrorsMiddleware",
    "core.middleware.OutageMiddleware",
    "http_api.fallback.ApiJsonMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "cairn.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it answers a login its lock refused (keeper.logins.locked_out).
    "axes.middleware.AxesMiddleware",
]

# The keeper's login resists guessing (keeper/logins.py): an account or an address (REMOTE_ADDR,
# from X-Forwarded-For only for a trusted proxy) over its limit is refused before its password.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "keeper.logins.PasswordBackend"]
AXES_FAILURE_LIMIT = env_int("CAIRN_KEEPER_LOGIN_FAILURES", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(seconds=env_int("CAIRN_KEEPER_LOCKOUT_S", 900, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# Attempts while locked are refused, not counted: the lock lasts CAIRN_KEEPER_LOCKOUT_S, as said.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "keeper.logins.locked_out"

ROOT_URLCONF = "cairn.urls"
WSGI_APPLICATION = "cairn.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# PgBouncer's `pool_mode = transaction`, which keeps no session state between transactions.
CAIRN_DB_POOLER = env_choice("CAIRN_DB_POOLER", ("transaction", ""), "")
# Connections a process holds at most to each database, and so the threads the A2A and MCP doors
# run their requests' ORM work on (`core.orm_threads`): a thread more would only wait for one.
DB_POOL_SIZE = 20


def _database(url: str, setting: str = "DATABASE_URL") -> dict:
    """The Django database of a URL; `setting` names where the URL came from in any error."""
    try:
        config = dj_database_url.parse(hosts_in_query(url))
    except Exception as exc:  # dj-database-url raises several types for a bad URL
        raise ImproperlyConfigured(
            f"{setting} is not a database URL Cairn understands: {exc}"
        ) from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # The web server and the worker write the same file: wait for the lock instead of failing,
        # and take it at the start of a transaction so two writers never deadlock on an upgrade.
        # Tests share the database with a live server thread and worker processes: use a file.
        config["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    elif config["ENGINE"] == "django.db.backends.postgresql":
        config["ENGINE"] = "cairn.postgresql"
        # The query string's libpq parameters reach every connection, its hosts and ports winning
        # over the URL's own, as in libpq; one libpq does not know, or given twice, stops start-up
        # here rather than failing every connection later.
        parameters = {}
        for name, value in config.get("OPTIONS", {}).items():
            if isinstance(value, list):
                raise ImproperlyConfigured(f"{setting} gives {name} more than once")
            parameters[name] = str(value)
        try:
            make_conninfo(**parameters)
        except psycopg.ProgrammingError as exc:
            raise ImproperlyConfigured(f"{setting}'s query string: {exc}") from None
        config["HOST"] = parameters.pop("host", config["HOST"])
        config["PORT"] = parameters.pop("port", config["PORT"])
        hosts, ports = str(config["HOST"]).count(",") + 1, str(config["PORT"]).count(",") + 1
        if ports not in (1, hosts):
            raise ImproperlyConfigured(
                f"{setting} gives {ports} ports for {hosts} hosts: give one port for them all, "
                "or one for each"
            )
        config["OPTIONS"] = {
            # Under ASGI each request may run on a new thread: a pool, not per-thread connections
            # (CONN_MAX_AGE stays 0; `cairn.postgresql.base` checks them, not CONN_HEALTH_CHECKS).
            # SPEC §16: a request fails within 5 s while the database is down, and a failing
            # reconnection is abandoned after 4 s rather than waiting out psycopg's back-off.
            "pool": {"min_size": 2, "max_size": DB_POOL_SIZE, "timeout": 3, "reconnect_timeout": 4},
            "connect_timeout": 3,
            **parameters,
            "server_side_binding": True,
            # A transaction pooler cannot keep the statements psycopg prepares.
            "prepare_threshold": None if CAIRN_DB_POOLER == "transaction" else 5,
        }
        config["DISABLE_SERVER_SIDE_CURSORS"] = CAIRN_DB_POOLER == "transaction"
    else:
        raise ImproperlyConfigured(f"{setting} must name SQLite or PostgreSQL")
    return dict(config)


if not env_str("DATABASE_URL"):
    VAR_DIR.mkdir(exist_ok=True)
DATABASES = {
    "default": _database(env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'cairn.sqlite3'}"))
}


def _replicas(raw: str, primary: dict) -> dict[str, dict]:
    """PostgreSQL streaming replicas of `primary`, for public reads (`core.replicas`), known to
    Django as `replica1`, `replica2`, ...; tests mirror the primary instead."""
    urls = database_urls(raw)
    if urls and primary["ENGINE"] != "cairn.postgresql":
        raise ImproperlyConfigured(
            "DATABASE_REPLICA_URLS needs DATABASE_URL to name PostgreSQL: replicas stream a "
            "PostgreSQL primary"
        )
    found = {}
    for number, url in enumerate(urls, start=1):
        config = _database(url, f"DATABASE_REPLICA_URLS' URL {number}")
        if config["ENGINE"] != "cairn.postgresql":
            raise ImproperlyConfigured(
                f"DATABASE_REPLICA_URLS' URL {number} must name PostgreSQL, as DATABASE_URL does"
            )
        config["TEST"] = {"MIRROR": "default"}
        found[f"replica{number}"] = config
    return found


DATABASES.update(_replicas(env_str("DATABASE_REPLICA_URLS"), DATABASES["default"]))
DATABASE_ROUTERS = ["core.replicas.ReplicaRouter"] if len(DATABASES) > 1 else []
CAIRN_REPLICA_MAX_LAG_S = env_int("CAIRN_REPLICA_MAX_LAG_S", 5, minimum=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en"
FORMAT_MODULE_PATH = ["cairn.formats"]
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# Behind a TLS proxy (SPEC §16): uvicorn sets the scheme from X-Forwarded-Proto for a proxy in
# FORWARDED_ALLOW_IPS alone; SECURE_PROXY_SSL_HEADER stays unset, since Django would believe the
# header from any client. HSTS covers this host only: includeSubDomains or preload would bind
# sites Cairn cannot know of.
if CAIRN_SITE_URL.startswith("https://"):
    SECURE_HSTS_SECONDS = 365 * 24 * 60 * 60
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
SILENCED_SYSTEM_CHECKS = [
    # HSTS without includeSubDomains or preload: deliberate, see above.
    "security.W005",
    "security.W021",
    # The proxy redirects plain http; Cairn redirecting too would send the host's own probes
    # (/healthz, /readyz, /metrics over http://127.0.0.1) away from the process they check.
    "security.W008",
]
DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agents.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "http_api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    # `?format=` is no renderer choice here (JSON is the one answer): a route refuses it as it
    # refuses any parameter it does not take.
    "URL_FORMAT_OVERRIDE": None,
}

# The gRPC binding (SPEC §8.7), served by `python -m cairn.grpc`; off, the card lists none.
CAIRN_GRPC_BIND = env_listen_address("CAIRN_GRPC_BIND", "127.0.0.1:50051")
CAIRN_GRPC_URL = env_advertised_address(
    "CAIRN_GRPC_URL",
    listening=CAIRN_GRPC_BIND,
    site_url=CAIRN_SITE_URL,
    off="or set CAIRN_GRPC_BIND empty to turn gRPC off",
)

# Policy (SPEC §2, §3.1, §4.1, §7).
CAIRN_TASK_DEADLINE_MIN_S = env_int("CAIRN_TASK_DEADLINE_MIN_S", 1800, minimum=1)
CAIRN_TASK_DEADLINE_MAX_S = env_int("CAIRN_TASK_DEADLINE_MAX_S", 604800, minimum=1)
if CAIRN_TASK_DEADLINE_MAX_S < CAIRN_TASK_DEADLINE_MIN_S:
    raise ImproperlyConfigured(
        "CAIRN_TASK_DEADLINE_MAX_S must be at least CAIRN_TASK_DEADLINE_MIN_S"
    )
CAIRN_TASKS_PER_AGENT_PER_DAY = env_int("CAIRN_TASKS_PER_AGENT_PER_DAY", 2)
CAIRN_OPEN_TASKS_PER_AGENT = env_int("CAIRN_OPEN_TASKS_PER_AGENT", 2)
CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = env_int("CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY", 3)
CAIRN_CALL_RESPONSES_PER_AGENT_PER_DAY = env_int("CAIRN_CALL_RESPONSES_PER_AGENT_PER_DAY", 10)
CAIRN_RESPONSES_PER_CALL = env_int("CAIRN_RESPONSES_PER_CALL", 300)
CAIRN_REGISTRATIONS_PER_IP_PER_HOUR = env_int("CAIRN_REGISTRATIONS_PER_IP_PER_HOUR", 20)
CAIRN_SOURCE_HOSTS = env_list(
    "CAIRN_SOURCE_HOSTS",
    [
        "github.com",
        "raw.githubusercontent.com",
        "registry.npmjs.org",
        "docs.python.org",
        "nodejs.org",
        "developers.cloudflare.com",
        "a2a-protocol.org",
    ],
)
if not CAIRN_SOURCE_HOSTS:
    raise ImproperlyConfigured("CAIRN_SOURCE_HOSTS must name at least one host")
# The read model every task change is written to, in the same transaction (`tasks.changes`).
CAIRN_TASK_CHANGED = "a2a_gateway.stored_forms.task_forms_written"

CAIRN_REDIS_URL = env_str("CAIRN_REDIS_URL")
Q_CLUSTER = {
    "name": "cairn",
    "workers": env_int("CAIRN_WORKERS", 2, minimum=1),
    # A job gets 55 s (the sweep of a large backlog works in batches well within it); a job whose
    # worker died is handed out again after 60 s, and the sweep catches its task before that.
    "timeout": 55,
    "retry": 60,
    "max_attempts": 3,
    "catch_up": False,
    "poll": 0.5,
    "sync": env_bool("CAIRN_Q_SYNC"),
    **({"redis": CAIRN_REDIS_URL} if CAIRN_REDIS_URL else {"orm": "default"}),
}

# Operations (SPEC §16).
LOGGING = logging_config(env_choice("CAIRN_LOG_FORMAT", ("text", "json"), "text"))
CAIRN_METRICS_TOKEN = env_str("CAIRN_METRICS_TOKEN")
