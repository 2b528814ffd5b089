"""What waits in the ledger, and the hands readers and operators have on it: a subscriber's waiting
matches, ``digest now``, dead-lettered digests re-queued, and what waits per channel.

Sending what is due is ``core.delivery.digests``'s pass; these steps only count, open or re-queue, and the
next pass sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.channel import split_address
from core.db import Database
from core.ledger import ledger_records
from core.models import Digest, Subscriber


@dataclass(frozen=True, slots=True)
class Waiting:
    """A subscriber's matches in no sent digest yet, and how many of them are learned recommendations."""

    matches: int
    recommended: int


@dataclass(frozen=True, slots=True)
class SentNow:
    """The outcome of :func:`send_now`: the waiting matches, and whether a digest was queued for them
    (False: one holding them is on its way already)."""

    waiting: int
    queued: bool


def waiting(db: Database, subscriber_id: int) -> Waiting:
    """The subscriber's waiting matches (the ledger completed first), recommendations among them."""
    matches, recommended = ledger_records.count_pending_split(db, subscriber_id)
    return Waiting(matches, recommended)


def send_now(db: Database, subscriber: Subscriber, *, now: datetime) -> SentNow:
    """Put every waiting match of ``subscriber`` in a digest the next delivery pass sends, whatever the
    schedule, and put its dead-lettered digests back in the queue (as ``papertrail retry`` does).

    The digest opened and the dead ones re-queued are one unit of work. Nothing is queued when nothing
    waits.
    """
    assert subscriber.id is not None
    count = ledger_records.count_pending(db, subscriber.id)
    if not count:
        return SentNow(0, False)
    channel = split_address(subscriber.address)[0]
    with db.transaction() as tx:
        # An open digest is due at once (next_attempt_at = now).
        opened = ledger_records.open_digest(tx, subscriber.id, channel, instant_only=False, now=now)
        requeued = ledger_records.requeue_dead(tx, address=subscriber.address, now=now)
    return SentNow(count, opened is not None or bool(requeued))


def requeue_dead(db: Database, address: str | None = None) -> int:
    """Re-queue the dead-lettered digests (of ``address``, normalised, or of everyone); how many."""
    return ledger_records.requeue_dead(db, address=address)


def dead_digests(db: Database, limit: int = 20) -> list[tuple[Digest, str]]:
    """The newest dead-lettered digests, each with its subscriber's address."""
    return ledger_records.dead_digests(db, limit)


def waiting_by_channel(db: Database) -> dict[str, int]:
    """Matches in no digest yet, counted per channel."""
    return ledger_records.pending_by_channel(db)
