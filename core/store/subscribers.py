"""Subscribers and their follows, one at a time; ``store.subscribers``.

Talks to the database through the store's ORM session (``store.session()``), one transaction per method.
Bulk import and export of follows are ``core.store.follows``'s (``store.follow_files``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import col, select

from core.models import (
    Digest,
    DigestState,
    Follow,
    Match,
    Subscriber,
    SubscriberStatus,
    utcnow,
)
from core.store.fanout import receives_matches

if TYPE_CHECKING:
    from core.store.facade import Store


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


class SubscriberStore:
    """Subscribers and follows."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get_subscriber(self, address: str) -> Subscriber | None:
        """The subscriber with this (normalised) address, if any."""
        with self._store.session() as session:
            return session.exec(select(Subscriber).where(Subscriber.address == address)).first()

    def ensure_subscriber(self, address: str, *, timezone: str, schedule: str) -> tuple[Subscriber, bool]:
        """The subscriber for ``address``, created when new; the flag says whether it was created."""
        with self._store.session() as session:
            found = session.exec(select(Subscriber).where(Subscriber.address == address)).first()
            if found is not None:
                return found, False
            subscriber = Subscriber(address=address, timezone=timezone, schedule=schedule)
            session.add(subscriber)
            session.flush()
            return subscriber, True

    def update_subscriber(self, subscriber_id: int, **fields: Any) -> Subscriber:
        """Change fields of a subscriber (schedule, timezone, status ...).

        A change of ``status`` also forgets ``refused_at`` unless it is given: only the delivery ledger's
        own pause (``finish_refused``) marks a subscriber whose matches are held while it is paused.
        """
        if "status" in fields:
            fields.setdefault("refused_at", None)
        with self._store.session() as session:
            subscriber = session.get(Subscriber, subscriber_id)
            if subscriber is None:
                raise LookupError(f"subscriber {subscriber_id} does not exist")
            for name, value in fields.items():
                setattr(subscriber, name, value)
            session.add(subscriber)
            return subscriber

    def add_follow(
        self, subscriber_id: int, query: str, canonical: str, *, revisions: bool = True, instant: bool = False
    ) -> tuple[Follow, str]:
        """Add a follow, or update the options of the same query: ``added``, ``updated`` or ``unchanged``."""
        with self._store.session() as session:
            existing = session.exec(
                select(Follow).where(Follow.subscriber_id == subscriber_id, Follow.canonical == canonical)
            ).first()
            if existing is not None:
                if (existing.revisions, existing.instant) == (revisions, instant):
                    return existing, "unchanged"
                existing.revisions, existing.instant = revisions, instant
                session.add(existing)
                return existing, "updated"
            follow = Follow(
                subscriber_id=subscriber_id,
                query=query,
                canonical=canonical,
                revisions=revisions,
                instant=instant,
            )
            session.add(follow)
            session.flush()
            return follow, "added"

    def follows_of(self, subscriber_id: int) -> list[Follow]:
        """A subscriber's follows in the order they were added (the numbering users see)."""
        with self._store.session() as session:
            rows = session.exec(
                select(Follow).where(Follow.subscriber_id == subscriber_id).order_by(col(Follow.id))
            )
            return list(rows)

    def remove_follow(self, follow_id: int) -> None:
        """Delete one follow. Matches it already produced stay in the ledger."""
        with self._store.session() as session:
            follow = session.get(Follow, follow_id)
            if follow is not None:
                session.delete(follow)

    def active_follows(self, *, now: datetime | None = None) -> list[StoredFollow]:
        """Every follow that is matched: of active subscribers, and of those a delivery refusal paused
        recently (their matches are held for their resume; ``core.store.fanout.receives_matches``)."""
        now = now or utcnow()
        with self._store.session() as session:
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

    def unsubscribe(self, subscriber_id: int, *, reason: str, now: datetime | None = None) -> int:
        """Stop digests to a subscriber; returns how many planned digests were withdrawn.

        The subscriber keeps its follows (the manage page can re-subscribe) and its matches. Digests
        planned but not yet taken by a worker are withdrawn (``failed``, their matches back to pending),
        so nothing goes out after the click; one a worker is sending right now may still arrive.
        """
        now = now or utcnow()
        with self._store.session() as session:
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
                session.execute(
                    sa.update(Match).where(col(Match.digest_id).in_(planned)).values(digest_id=None)
                )
                session.execute(
                    sa.update(Digest)
                    .where(col(Digest.id).in_(planned))
                    .values(state=DigestState.FAILED, error=reason, lease_until=None)
                )
        return len(planned)
