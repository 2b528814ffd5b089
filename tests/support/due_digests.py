"""Seeding due digests for the worker tests."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import SQLModel

from core.db import Database
from core.models import utcnow
from core.reasons import CATEGORY, Reason, hit_data

# SQLModel tables as SQLAlchemy Core tables, for bulk inserts.
PAPER, VERSION, SUBSCRIBER, MATCH, DIGEST = (
    SQLModel.metadata.tables[name] for name in ("paper", "version", "subscriber", "match", "digest")
)


def seed_due_digests(db: Database, count: int) -> None:
    """``count`` instant subscribers, each with one unsent match, inserted in bulk."""
    now = utcnow()
    with db.engine.begin() as conn:
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
                    "address": f"console:s{n:05d}",
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
                    "instant": False,
                }
                for sid in ids
            ],
        )
