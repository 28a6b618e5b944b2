"""What keyper sealing costs (SPEC §15.8), in one process on a PostgreSQL database of its own:

- the server's write of a sealed contribution against a plain one (`contribution_submit`, the
  domain call every door makes; the contributor's sealing is the client's and is not counted);
- the evaluation of a task of 10 sealed contributions once 3 local keypers' releases are in
  (`tasks.evaluation.task_evaluate_with_releases`: combine, open, check, rule, write);
- the verifier opening 1,000 sealed items as it is served (`verify/cairn_verify.py` built by
  `core.amalgam`: each release's signature, the key from k shares, the ciphertext, the
  commitment).

    .venv/bin/python bench/keyper_cost.py [contributions]

Its figures go to bench/README.md ("Keyper sealing").
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.amalgam import amalgamated  # noqa: E402
from ledger.keyper_seal import keyper_public  # noqa: E402
from ledger.signed_note import COSIGNATURE_V1, private_verifier_key  # noqa: E402

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB = "cairn_bench_keyper"


def _database() -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")


def _setup(keypers_env: dict[str, str]) -> None:
    os.environ.update(
        {
            "DEBUG": "true",
            "DATABASE_URL": f"{PG}/{DB}",
            "CAIRN_TASK_DEADLINE_MIN_S": "1",
            "CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY": "100000",
            "CAIRN_TASKS_PER_AGENT_PER_DAY": "100000",
            "CAIRN_OPEN_TASKS_PER_AGENT": "100000",
            "CAIRN_REGISTRATIONS_PER_IP_PER_HOUR": "100000",
            **keypers_env,
        }
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _keypers_environment(
    keys: list[tuple[str, X25519PrivateKey, Ed25519PrivateKey]],
) -> dict[str, str]:
    """Three local keypers, each a witness under its name, threshold 2: the site's settings."""
    return {
        "CAIRN_KEYPERS": "\n".join(
            f"{name} {keyper_public(hpke)} https://{name.split('/')[0]}/api/keyper"
            for name, hpke, _ in keys
        ),
        "CAIRN_KEYPER_THRESHOLD": "2",
        "CAIRN_WITNESSES": "\n".join(
            f"{private_verifier_key(name, signing, type=COSIGNATURE_V1).text} "
            f"https://{name.split('/')[0]}/api/witness"
            for name, _, signing in keys
        ),
    }


def main(count: int) -> None:
    keys = [
        (
            f"k{n}.keyper.bench/cairn/witness",
            X25519PrivateKey.generate(),
            Ed25519PrivateKey.generate(),
        )
        for n in range(1, 4)
    ]
    _database()
    _setup(_keypers_environment(keys))

    import time_machine

    from agents.models import Door
    from agents.services import Caller, agent_register
    from core.clock import format_instant, now_ms
    from tasks.evaluation import task_evaluate_with_releases
    from tasks.models import Contribution, Task
    from tasks.services import contribution_submit, task_post
    from tests.factories import (
        contribution_payload,
        contribution_report,
        open_task_payload,
        open_task_request,
    )
    from tests.ledger.sealed_to_keypers import HeldKeyper, release
    from tests.ledger.sealed_to_keypers import sealed_payload as sealed_to

    held = [HeldKeyper(name, hpke, signing) for name, hpke, signing in keys]

    def sealed_payload(task: Task) -> dict:
        return sealed_to(task, contribution_report(), held, threshold=2)

    poster, _ = agent_register(label="poster", address="127.0.0.1")
    agents = [agent_register(label=f"a{n}", address="127.0.0.1")[0] for n in range(2 * count)]

    def post(deadline_s: int, room: int = 10) -> Task:
        deadline = format_instant(now_ms() + timedelta(seconds=deadline_s))
        body = task_post(
            Caller(poster, str(uuid.uuid4()), Door.HTTP),
            payload=open_task_payload(open_task_request(deadline=deadline, max_contributors=room)),
        ).body
        return Task.objects.get(pk=body["task"]["id"])

    # 1. The write, alternating plain and sealed on tasks of their own.
    plain, sealed = [], []
    for n in range(count):
        task = post(3600)
        payload = sealed_payload(task)
        for agent, body, times in (
            (agents[2 * n], contribution_payload(), plain),
            (agents[2 * n + 1], payload, sealed),
        ):
            started = time.perf_counter()
            contribution_submit(
                Caller(agent, str(uuid.uuid4()), Door.HTTP), task_id=task.pk, payload=body
            )
            times.append(time.perf_counter() - started)
    plain_ms, sealed_ms = statistics.median(plain) * 1e3, statistics.median(sealed) * 1e3
    print(
        f"write, median of {count}: plain {plain_ms:.2f} ms, sealed {sealed_ms:.2f} ms, "
        f"ratio {sealed_ms / plain_ms:.2f}"
    )

    # 2. A task of 10 sealed contributions, evaluated once the releases are in.
    task = post(5, room=10)
    for agent in agents[:10]:
        contribution_submit(
            Caller(agent, str(uuid.uuid4()), Door.HTTP),
            task_id=task.pk,
            payload=sealed_payload(task),
        )
    after = task.deadline + timedelta(seconds=61)
    with time_machine.travel(after, tick=True):
        collected = {
            contribution.id: [release(k, contribution, released_at=after) for k in held]
            for contribution in Contribution.objects.filter(task=task)
        }
        started = time.perf_counter()
        assert task_evaluate_with_releases(task_id=task.pk, collected=collected)
        seconds = time.perf_counter() - started
    task.refresh_from_db()
    opened = [item for item in task.evaluation["contributions"] if "report" in item]
    print(
        f"evaluation of 10 sealed contributions after the releases: {seconds * 1e3:.0f} ms "
        f"({len(opened)} opened, outcome {task.outcome})"
    )

    # 3. The verifier, as served, opening 1,000 sealed items.
    built = Path(tempfile.mkdtemp()) / "cairn_verify.py"
    built.write_text(amalgamated(ROOT / "verify/cairn_verify.py"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("cairn_verify", built)
    assert spec is not None and spec.loader is not None
    verify = importlib.util.module_from_spec(spec)
    sys.modules["cairn_verify"] = verify
    spec.loader.exec_module(verify)
    from ledger.keyper_seal import b64u_decode
    from ledger.notes import log_origin

    site = log_origin()
    items = task.evaluation["contributions"]
    report = contribution_report()
    started = time.perf_counter()
    checked = 0
    while checked < 1000:
        for item in items:
            body = item["sealed"]
            for release_made in body["releases"]:
                claims = verify.release_claims(
                    keyper=release_made["keyper"],
                    site=site,
                    task_id=str(task.pk),
                    contribution_id=item["contribution_id"],
                    index=release_made["index"],
                    share=release_made["share"],
                    released_at=release_made["released_at"],
                )
                witness = next(k for k in held if k.name == release_made["keyper"])
                assert verify.release_verify(
                    claims, release_made["signature"], witness.signing.public_key()
                )
            key = verify.key_combine(
                [(r["index"], b64u_decode(r["share"])) for r in body["releases"]], 2
            )
            opened_report, _ = verify.report_open(
                b64u_decode(body["ciphertext"]),
                key,
                site=site,
                task_id=str(task.pk),
                deadline=task.deadline_text,
                commitment=item["commitment"],
            )
            assert opened_report == report
            checked += 1
    seconds = time.perf_counter() - started
    print(f"verifier: {checked} sealed items opened in {seconds:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
