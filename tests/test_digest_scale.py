"""Digest time at scale: planning, claiming and reading items cost statements per batch, not per
subscriber. The statements are counted (SQLAlchemy's ``before_cursor_execute``), not timed: 200 and 2,000
due subscribers must differ only by the pages and batches the arithmetic says (bench/plan.py times them).
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from core.channel import Notifier
from core.db import Database
from core.delivery import digests
from core.delivery.digests import PLAN_BATCH, batch_items, plan_digests
from core.ledger import ledger_records
from core.models import utcnow
from core.reasons import CATEGORY, Reason, hit_data

PAPER, VERSION, SUBSCRIBER, FOLLOW, MATCH, NEWSLETTER, DIGEST = (
    SQLModel.metadata.tables[name]
    for name in ("paper", "version", "subscriber", "follow", "match", "newsletter", "digest")
)
# Digests per claim in this test: big enough that 2,000 digests take few claims, so a statement per
# digest would show as thousands.
CLAIM = 500
# The most statements one planning page may send: the page of candidates, the lock, the open digests,
# the INSERT of the digests, the UPDATE of the matches, the counting UPDATE and the removal of empty ones.
PER_PAGE = 7
# The most one claimed batch may send: the claim (select, update, read back), the items (the matches'
# ranking rows, upvotes, then the shown matches with their versions, follows, earlier versions), guides
# (one per language: two here), newsletter titles.
PER_BATCH = 3 + 5 + 2 + 1


def seed(db: Database, subscribers: int) -> None:
    """``subscribers`` due Telegram subscribers, bulk-inserted, each with a new paper and a revision
    matched; every third also holds a newsletter's copy, every tenth reads Chinese."""
    now = utcnow()
    created = now - timedelta(days=2)
    with db.engine.begin() as conn:
        conn.execute(
            sa.insert(PAPER),
            [{"id": f"2611.{p:05d}", "latest_version": p + 1, "first_seen_at": now} for p in range(2)],
        )
        version_ids = conn.execute(
            sa.insert(VERSION).returning(VERSION.c.id, sort_by_parameter_order=True),
            [
                {
                    "paper_id": paper,
                    "number": number,
                    "title": f"Asynchronous rollouts {paper} v{number}",
                    "abstract": "An abstract.",
                    "authors": ["Ada Lovelace"],
                    "categories": ["cs.DC"],
                    "announce_type": "new",
                    "source": "arxiv-rss",
                    "first_seen_at": now,
                }
                for paper, number in (("2611.00000", 1), ("2611.00001", 1), ("2611.00001", 2))
            ],
        ).scalars()
        new, _, revision = list(version_ids)
        hidden = conn.execute(
            sa.insert(SUBSCRIBER).returning(SUBSCRIBER.c.id),
            [
                {
                    "address": "newsletter:ml-weekly",
                    "timezone": "UTC",
                    "schedule": "weekly mon 08:00",
                    "status": "active",
                    "created_at": created,
                    "failures": 0,
                }
            ],
        ).scalar_one()
        conn.execute(
            sa.insert(NEWSLETTER),
            [{"name": "ml-weekly", "title": "ML weekly", "subscriber_id": hidden, "created_at": created}],
        )
        ids = list(
            conn.execute(
                sa.insert(SUBSCRIBER).returning(SUBSCRIBER.c.id, sort_by_parameter_order=True),
                [
                    {
                        "address": f"telegram:{100_000 + n}",
                        "timezone": "UTC",
                        "schedule": "instant" if n % 2 else "daily 00:00",
                        "status": "active",
                        "created_at": created,
                        "failures": 0,
                        "language": "zh" if n % 10 == 0 else None,
                    }
                    for n in range(subscribers)
                ],
            ).scalars()
        )
        follows = conn.execute(
            sa.insert(FOLLOW).returning(FOLLOW.c.id, sort_by_parameter_order=True),
            [
                {"subscriber_id": sid, "query": "cat:cs.DC", "canonical": "cat:cs.DC", "created_at": created}
                for sid in ids
            ],
        ).scalars()
        rows: list[dict[str, Any]] = []
        for n, (sid, fid) in enumerate(zip(ids, list(follows), strict=True)):
            for version in (new, revision):
                rows.append(
                    {
                        "subscriber_id": sid,
                        "version_id": version,
                        "follow_ids": [fid],
                        "reasons": [hit_data([Reason(CATEGORY, "cs.DC")], follow=fid)],
                        "created_at": now,
                        "instant": n % 2 == 1,
                    }
                )
            if n % 3 == 0:
                rows[-1]["reasons"] = [hit_data([Reason(CATEGORY, "cs.DC")], newsletter="ml-weekly")]
                rows[-1]["follow_ids"] = []
        conn.execute(sa.insert(MATCH), rows)


def statements(db: Database, subscribers: int) -> tuple[int, int, int]:
    """Seed, then count the statements of planning and of claiming every digest with its items.

    Returns (planning statements, claiming + items statements, digests claimed).
    """
    seed(db, subscribers)
    count = 0

    def seen(*_: Any) -> None:
        nonlocal count
        count += 1

    with db.engine.connect() as conn:  # the dialect's first-connection queries, outside the count
        conn.execute(sa.text("select 1"))
    notifiers: dict[str, Notifier] = {"telegram": None}  # type: ignore[dict-item]  # planning reads keys
    now = utcnow()
    sa.event.listen(db.engine, "before_cursor_execute", seen)
    try:
        assert plan_digests(db, notifiers, now=now) == subscribers
        planning, count = count, 0
        claimed_total = 0
        titled = 0
        while claimed := ledger_records.claim_digests(db, now, "w", limit=CLAIM, lease=timedelta(minutes=5)):
            batch = batch_items(db, claimed)
            claimed_total += len(claimed)
            assert all(len(batch.items[c.digest_id]) == 2 for c in claimed)
            titled += sum(1 for c in claimed if batch.titles_for(batch.items[c.digest_id]))
        assert titled == math.ceil(subscribers / 3)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", seen)
    return planning, count, claimed_total


def test_statements_do_not_grow_with_subscribers(db: Database) -> None:
    small, large = 200, 2_000
    plan_small, claim_small, claimed_small = statements(db, small)
    with db.engine.begin() as conn:  # the same database, emptied, for the larger population
        for table in (MATCH, DIGEST, FOLLOW, NEWSLETTER, SUBSCRIBER, VERSION, PAPER):
            conn.execute(sa.delete(table))
    plan_large, claim_large, claimed_large = statements(db, large)
    assert (claimed_small, claimed_large) == (small, large)

    # The fan-out's look for waiting query matches (on PostgreSQL with its lock: two statements),
    # newsletters to issue (one statement), then pages of PLAN_BATCH; a short page ends the planning, a
    # full one is followed by one more read that finds nothing.
    def pages(n: int) -> int:
        return n // PLAN_BATCH + 1

    # Claims of CLAIM digests, and the last claim that finds nothing.
    def batches(n: int) -> int:
        return math.ceil(n / CLAIM)

    assert plan_small <= 3 + PER_PAGE * pages(small)
    assert plan_large <= 3 + PER_PAGE * pages(large)
    assert claim_small <= PER_BATCH * batches(small) + 1
    assert claim_large <= PER_BATCH * batches(large) + 1
    # Ten times the subscribers: a couple of dozen statements more, nowhere near one per subscriber.
    assert (plan_large + claim_large) - (plan_small + claim_small) <= PER_PAGE * (
        pages(large) - pages(small)
    ) + PER_BATCH * (batches(large) - batches(small))


def test_each_match_in_one_digest_after_paged_planning(db: Database, monkeypatch: Any) -> None:
    """Pages smaller than the population: every subscriber gets one digest holding all its matches."""
    monkeypatch.setattr(digests, "PLAN_BATCH", 7)
    seed(db, 50)
    notifiers: dict[str, Notifier] = {"telegram": None}  # type: ignore[dict-item]
    now = utcnow()
    assert plan_digests(db, notifiers, now=now) == 50
    assert plan_digests(db, notifiers, now=now) == 0  # open digests: nobody is planned twice
    with db.engine.connect() as conn:
        per_digest = Counter(
            conn.execute(sa.select(MATCH.c.digest_id).where(MATCH.c.subscriber_id.isnot(None))).scalars()
        )
        counts = {int(d): int(n) for d, n in conn.execute(sa.select(DIGEST.c.id, DIGEST.c.item_count))}
    assert None not in per_digest and len(per_digest) == 50
    assert per_digest == Counter(counts)
