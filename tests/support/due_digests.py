"""Seeding due digests for the worker tests."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlmodel import SQLModel

from core.models import utcnow
from core.reasons import CATEGORY, Reason, hit_data

# SQLModel tables as SQLAlchemy Core tables, for bulk inserts.
PAPER, VERSION, SUBSCRIBER, MATCH, DIGEST = (
    SQLModel.metadata.tables[name] for name in ("paper", "version", "subscriber", "match", "digest")
)


def console_address(n: int) -> str:
    """The address of the ``n``-th seeded subscriber unless a caller names its own."""
    return f"console:s{n:05d}"


def seed_due_digests(
    engine: sa.Engine,
    count: int,
    *,
    address: Callable[[int], str] = console_address,
    instant_matches: bool = False,
) -> None:
    """``count`` instant subscribers (``address(n)``), each with one unsent match of one paper, inserted in
    bulk; ``instant_matches`` marks the matches as an instant follow's."""
    now = utcnow()
    with engine.begin() as conn:
        conn.execute(sa.insert(PAPER), [{"id": "2611.00001", "latest_version": 1, "first_seen_at": now}])
        version_id = conn.execute(
            sa.insert(VERSION).returning(VERSION.c.id),
            [
                {
                    "paper_id": "2611.00001",
                    "number": 1,
                    "title": "Asynchronous rollouts",
                    "abstract": "An abstract.",
                    "authors": ["Ada Lovelace"],
                    "categories": ["cs.DC"],
                    "announce_type": "new",
                    "source": "arxiv-rss",
                    "first_seen_at": now,
                    "matched_at": now,
                }
            ],
        ).scalar_one()
        conn.execute(
            sa.insert(SUBSCRIBER),
            [
                {
                    "address": address(n),
                    "timezone": "UTC",
                    "schedule": "instant",
                    "status": "active",
                    "created_at": now,
                    "failures": 0,
                }
                for n in range(count)
            ],
        )
        ids = [row[0] for row in conn.execute(sa.select(SUBSCRIBER.c.id))]
        conn.execute(
            sa.insert(MATCH),
            [
                {
                    "subscriber_id": sid,
                    "version_id": version_id,
                    "follow_ids": [],
                    "reasons": [hit_data([Reason(CATEGORY, "cs.DC")])],
                    "created_at": now,
                    "instant": instant_matches,
                }
                for sid in ids
            ],
        )
