"""Three `papertrail worker` processes share one PostgreSQL database: every due digest is sent once.

`make test` runs 300 digests claimed 10 at a time (30 claims, so the three workers claim side by side);
the full 3,000 in batches of 50 are marked slow and run in `make test-slow`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from core.db import Database
from core.models import DigestState
from tests.support.due_digests import DIGEST, MATCH, seed_due_digests

WORKERS = 3


@pytest.mark.parametrize(
    ("subscribers", "batch"), [(300, 10), pytest.param(3000, 50, marks=pytest.mark.slow)]
)
def test_three_workers_send_every_digest_exactly_once(
    pg_store: Database, postgres_url: str, tmp_path: Path, subscribers: int, batch: int
) -> None:
    seed_due_digests(pg_store.engine, subscribers)
    env = {
        **os.environ,
        "PAPERTRAIL_DATABASE_URL": postgres_url,
        "PAPERTRAIL_CONFIG": str(tmp_path / "none.toml"),
        "PAPERTRAIL_WORKER_BATCH": str(batch),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "papertrail", "worker", "--until-idle", "--name", f"w{n}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    outputs = [worker.communicate(timeout=240) for worker in workers]
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr[-2000:]

    deliveries = Counter(
        address
        for stdout, _ in outputs
        for address in re.findall(r"^--- digest for (\S+) ---$", stdout, re.M)
    )
    assert len(deliveries) == subscribers
    assert set(deliveries.values()) == {1}, [a for a, n in deliveries.items() if n > 1][:10]
    per_worker = [len(re.findall(r"^--- digest for ", stdout, re.M)) for stdout, _ in outputs]
    assert sum(per_worker) == subscribers

    with pg_store.engine.connect() as conn:
        states: dict[str, int] = dict(
            conn.execute(sa.select(DIGEST.c.state, sa.func.count()).group_by("state")).all()
        )
        unsent = conn.execute(
            sa.select(sa.func.count()).select_from(MATCH).where(MATCH.c.digest_id.is_(None))
        ).scalar_one()
    assert states == {DigestState.SENT: subscribers} and unsent == 0
