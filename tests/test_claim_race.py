"""Two workers on one SQLite file never claim the same digest.

SQLite has no row locks and pysqlite runs a SELECT outside the write transaction, so two claimers can read
the same claimable digests before either writes. Here both are made to do exactly that (a barrier after
the claim's SELECT), then both update: only one may come away with each digest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import col

from core.db import Database
from core.follows import subscriber_records
from core.ledger import ledger_records
from core.models import Digest, DigestState, utcnow
from tests.conftest import migrated_store

DIGESTS = 40


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[Database]:
    yield from migrated_store(f"sqlite:///{tmp_path}/race.db")


def pending_digests(db: Database, n: int) -> None:
    """``n`` due pending digests, one subscriber each (the claim reads nothing else)."""
    now = utcnow()
    for i in range(n):
        subscriber, _ = subscriber_records.ensure_subscriber(
            db, f"console:r{i}", timezone="UTC", schedule="instant"
        )
        with db.session() as session:
            session.add(
                Digest(
                    subscriber_id=subscriber.id or 0,
                    created_at=now,
                    state=DigestState.PENDING,
                    channel="console",
                    next_attempt_at=now - timedelta(minutes=1),
                    item_count=1,
                    attempts=0,
                    parts_sent=0,
                )
            )


def test_two_claimers_that_selected_the_same_digests_share_none(file_store: Database) -> None:
    pending_digests(file_store, DIGESTS)
    barrier = threading.Barrier(2, timeout=30)
    waited: set[int] = set()

    def after_select(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        # The claim's first statement: wait until the other claimer has read the same digests too.
        if statement.lstrip().upper().startswith("SELECT DIGEST.ID") and threading.get_ident() not in waited:
            waited.add(threading.get_ident())
            barrier.wait()

    sa.event.listen(file_store.engine, "after_cursor_execute", after_select)
    claimed: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def claim(worker: str) -> None:
        try:
            got = ledger_records.claim_digests(
                file_store, utcnow(), worker, limit=DIGESTS, lease=timedelta(minutes=5)
            )
            claimed[worker] = [c.digest_id for c in got]
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(name,)) for name in ("w1", "w2")]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        sa.event.remove(file_store.engine, "after_cursor_execute", after_select)
    assert not errors, errors
    assert len(waited) == 2, "both claimers read the digests before either wrote"
    first, second = set(claimed["w1"]), set(claimed["w2"])
    assert not first & second, f"claimed twice: {sorted(first & second)}"
    assert len(first | second) == DIGESTS  # and none was lost: one of them took each
    with file_store.session() as session:
        attempts = session.execute(sa.select(col(Digest.attempts))).scalars().all()
    assert set(attempts) == {1}
