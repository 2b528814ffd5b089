"""Subscribers and their follows, one at a time; ``core.follows.subscriber_records``.

Talks to the database through the store's ORM session (``db.session()``), one transaction per method.
Bulk import and export of follows are ``core.follows.follow_file_records``'s
(``core.follows.follow_file_records``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.db import Db
from core.db_bulk import dialect_insert
from core.follows.fanout import receives_matches
from core.models import (
    Digest,
    DigestState,
    Follow,
    Match,
    Subscriber,
    SubscriberStatus,
    utcnow,
)


@dataclass(frozen=True, slots=True)
class StoredFollow:
    """An active follow with what the matcher needs to know about it."""

    id: int
    subscriber_id: int
    query: str
    created_at: datetime
    revisions: bool = True
    instant: bool = False
    canonical: str = ""
    """The query's normal form: what its query matches are stored under (``QueryMatch.canonical``)."""


# Subscribers and follows.
def get_subscriber(db: Db, address: str) -> Subscriber | None:
    """The subscriber with this (normalised) address, if any."""
    with db.session() as session:
        return session.exec(select(Subscriber).where(Subscriber.address == address)).first()


def subscriber_by_id(db: Db, subscriber_id: int) -> Subscriber | None:
    """The subscriber with this id, if any."""
    with db.session() as session:
        return session.get(Subscriber, subscriber_id)


def ensure_subscriber(db: Db, address: str, *, timezone: str, schedule: str) -> tuple[Subscriber, bool]:
    """The subscriber for ``address``, created when new; the flag says whether it was created.

    Safe when the same new address arrives in several commands at once (a chat's first messages):
    one of them creates it, the others find it.
    """
    with db.session() as session:
        return _ensure(session, address, timezone, schedule)


def follow(
    db: Db,
    address: str,
    query: str,
    canonical: str,
    *,
    timezone: str,
    schedule: str,
    revisions: bool = True,
    instant: bool = False,
) -> tuple[Subscriber, bool, Follow, str]:
    """Create the subscriber when new and add (or update) its follow, in one transaction.

    Returns (subscriber, whether it was created, the follow, ``added``/``updated``/``unchanged``).
    Concurrent calls for the same new address, even from other processes, all succeed: each follow
    is stored once and exactly one call reports the subscriber as created.
    """
    with db.session() as session:
        subscriber, created = _ensure(session, address, timezone, schedule)
        assert subscriber.id is not None
        follow, outcome = _add_follow(session, subscriber.id, query, canonical, revisions, instant)
        return subscriber, created, follow, outcome


def update_subscriber(db: Db, subscriber_id: int, **fields: Any) -> Subscriber:
    """Change fields of a subscriber (schedule, timezone, status ...).

    A change of ``status`` also forgets ``refused_at`` unless it is given: only the delivery ledger's
    own pause (``finish_refused``) marks a subscriber whose matches are held while it is paused.
    """
    if "status" in fields:
        fields.setdefault("refused_at", None)
    with db.session() as session:
        subscriber = session.get(Subscriber, subscriber_id)
        if subscriber is None:
            raise LookupError(f"subscriber {subscriber_id} does not exist")
        for name, value in fields.items():
            setattr(subscriber, name, value)
        session.add(subscriber)
        return subscriber


def add_follow(
    db: Db, subscriber_id: int, query: str, canonical: str, *, revisions: bool = True, instant: bool = False
) -> tuple[Follow, str]:
    """Add a follow, or update the options of the same query: ``added``, ``updated`` or ``unchanged``."""
    with db.session() as session:
        return _add_follow(session, subscriber_id, query, canonical, revisions, instant)


def follows_of(db: Db, subscriber_id: int) -> list[Follow]:
    """A subscriber's follows in the order they were added (the numbering users see)."""
    with db.session() as session:
        rows = session.exec(
            select(Follow).where(Follow.subscriber_id == subscriber_id).order_by(col(Follow.id))
        )
        return list(rows)


def remove_follow(db: Db, follow_id: int) -> None:
    """Delete one follow. Matches it already produced stay in the ledger."""
    with db.session() as session:
        follow = session.get(Follow, follow_id)
        if follow is not None:
            session.delete(follow)


def active_follows(db: Db, *, now: datetime | None = None) -> list[StoredFollow]:
    """Every follow that is matched: of active subscribers, and of those a delivery refusal paused
    recently (their matches are held for their resume; ``core.follows.fanout.receives_matches``)."""
    now = now or utcnow()
    with db.session() as session:
        rows = session.exec(
            select(Follow)
            .join(Subscriber, col(Subscriber.id) == col(Follow.subscriber_id))
            .where(receives_matches(col(Subscriber.status), col(Subscriber.refused_at), now))
            .order_by(col(Follow.id))
        )
        return [
            StoredFollow(
                f.id or 0, f.subscriber_id, f.query, f.created_at, f.revisions, f.instant, f.canonical
            )
            for f in rows
        ]


def unsubscribe(db: Db, subscriber_id: int, *, reason: str, now: datetime | None = None) -> int:
    """Stop digests to a subscriber; returns how many planned digests were withdrawn.

    The subscriber keeps its follows (the manage page can re-subscribe) and its matches. Digests
    planned but not yet taken by a worker are withdrawn (``failed``, their matches back to pending),
    so nothing goes out after the click; one a worker is sending right now may still arrive.
    """
    now = now or utcnow()
    with db.session() as session:
        subscriber = session.get(Subscriber, subscriber_id)
        if subscriber is None:
            raise LookupError(f"subscriber {subscriber_id} does not exist")
        subscriber.status = SubscriberStatus.UNSUBSCRIBED
        subscriber.status_reason = reason
        session.add(subscriber)
        planned = list(
            session.execute(
                sa.select(col(Digest.id)).where(
                    col(Digest.subscriber_id) == subscriber_id, col(Digest.state) == DigestState.PENDING
                )
            ).scalars()
        )
        if planned:
            session.execute(sa.update(Match).where(col(Match.digest_id).in_(planned)).values(digest_id=None))
            session.execute(
                sa.update(Digest)
                .where(col(Digest.id).in_(planned))
                .values(state=DigestState.FAILED, error=reason, lease_until=None)
            )
    return len(planned)


def _ensure(session: Session, address: str, timezone: str, schedule: str) -> tuple[Subscriber, bool]:
    """The subscriber of ``address`` in the session's transaction, created when new (see ensure_subscriber).

    INSERT ... ON CONFLICT DO NOTHING, then read: a plain INSERT failed on the unique address when two of a
    new chat's first commands ran at once, and the loser answered with an apology and lost its follow.
    PostgreSQL makes the INSERT wait for a concurrent one of the same address and then skip it; SQLite runs
    one writer at a time. Either way the row read afterwards is the one stored.
    """
    select_it = select(Subscriber).where(Subscriber.address == address)
    found = session.exec(select_it).first()
    if found is not None:
        return found, False
    inserted = _insert_if_absent(
        session, Subscriber(address=address, timezone=timezone, schedule=schedule), ("address",)
    )
    return session.exec(select_it).one(), inserted


def _add_follow(
    session: Session, subscriber_id: int, query: str, canonical: str, revisions: bool, instant: bool
) -> tuple[Follow, str]:
    """Add a follow in the session's transaction, or update the options of the same query (add_follow).

    The same query sent twice at once is stored once (ON CONFLICT on the subscriber's query); the call
    that did not insert it updates the options like a later call would.
    """
    select_it = select(Follow).where(Follow.subscriber_id == subscriber_id, Follow.canonical == canonical)
    existing = session.exec(select_it).first()
    if existing is None:
        fresh = Follow(
            subscriber_id=subscriber_id,
            query=query,
            canonical=canonical,
            revisions=revisions,
            instant=instant,
        )
        inserted = _insert_if_absent(session, fresh, ("subscriber_id", "canonical"))
        existing = session.exec(select_it).one()
        if inserted:
            return existing, "added"
    if (existing.revisions, existing.instant) == (revisions, instant):
        return existing, "unchanged"
    existing.revisions, existing.instant = revisions, instant
    session.add(existing)
    session.flush()
    return existing, "updated"


def _insert_if_absent(session: Session, row: Subscriber | Follow, unique: tuple[str, ...]) -> bool:
    """INSERT ``row`` unless a row with the same ``unique`` columns exists; True when this call inserted it.

    The row's values are the model's own defaults, as the ORM would write them; a concurrent insert of the
    same key makes this one do nothing instead of failing on the unique index.
    """
    table: sa.Table = type(row).__table__  # type: ignore[union-attr]
    values = {column.name: getattr(row, column.name) for column in table.columns if column.name != "id"}
    connection = session.connection()
    inserted = connection.execute(
        dialect_insert(connection, table)
        .values(values)
        .on_conflict_do_nothing(index_elements=list(unique))
        .returning(table.c.id)
    ).first()
    return inserted is not None
