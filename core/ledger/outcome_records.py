"""Recording how a send went: sent (with its matches, in one transaction), a retry, a refusal (which pauses
the subscriber), and requeueing dead digests; ``core.ledger.outcome_records``. The rules are
core.ledger.ledger_records's.

Talks to the database through the store's ORM session (``db.session()``), one transaction per method.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.db import Db
from core.ledger.ledger_records import rowcount
from core.models import (
    Digest,
    DigestState,
    Match,
    Subscriber,
    SubscriberStatus,
    utcnow,
)


# The outcome of each send attempt.
def finish_sent(
    db: Db,
    digest_id: int,
    *,
    platform_id: str | None,
    parts: int,
    now: datetime,
    moved_to: str | None = None,
    held: tuple[str, int] | None = None,
) -> bool:
    """Record a delivered digest; its matches are sent from now on. Follows a moved recipient.

    With ``held`` (worker, attempt) only that claim is recorded: a worker whose lease ran out and whose
    digest another worker (or a later attempt) claimed since changes nothing; the digest is the new
    holder's to record. Returns whether this call recorded the digest (False: recorded already, or no
    longer this claim's). Two statements and one commit: this runs once per message a worker sends.
    """
    with db.session() as session:
        query = sa.update(Digest).where(col(Digest.id) == digest_id, col(Digest.state) != DigestState.SENT)
        if held is not None:
            query = query.where(*_claim_is(held))
        subscriber_id = session.execute(
            query.values(
                state=DigestState.SENT,
                sent_at=now,
                platform_id=(platform_id or "")[:255] or None,
                parts_sent=parts,
                lease_until=None,
                error=None,
            ).returning(col(Digest.subscriber_id))
        ).scalar_one_or_none()
        if subscriber_id is None:
            return False
        session.execute(
            sa.update(Subscriber)
            .where(col(Subscriber.id) == subscriber_id)
            .values(last_digest_at=now, failures=0, retry_at=None)
        )
        if moved_to:
            _move(session, subscriber_id, moved_to)
        return True


def finish_retry(
    db: Db,
    digest_id: int,
    *,
    error: str,
    retry_at: datetime,
    parts_sent: int,
    dead: bool,
    now: datetime,
    held: tuple[str, int] | None = None,
) -> bool:
    """Record a retryable failure: back off until ``retry_at``, or dead-letter the digest.

    With ``held`` (worker, attempt) only that claim is failed: nothing happens when the digest was
    sent meanwhile, or when its lease ran out and another worker claimed it since. Returns whether
    the failure was recorded.
    """
    with db.session() as session:
        digest = session.get(Digest, digest_id)
        if digest is None or not _still_held(digest, held):
            return False
        digest.state = DigestState.DEAD if dead else DigestState.PENDING
        digest.error = error
        digest.next_attempt_at = retry_at
        digest.lease_until = None
        digest.parts_sent = max(digest.parts_sent, parts_sent)
        session.add(digest)
        subscriber = session.get(Subscriber, digest.subscriber_id)
        if subscriber is not None:
            subscriber.failures += 1
            subscriber.retry_at = None if dead else retry_at
            session.add(subscriber)
        return True


def finish_refused(
    db: Db, digest_id: int, *, error: str, now: datetime, held: tuple[str, int] | None = None
) -> None:
    """Record a permanent refusal: pause the subscriber with the reason and return the matches.

    ``held`` (worker, attempt) limits it to that claim, as for :meth:`finish_retry`. The subscriber is
    marked ``refused_at``: it is still matched for a while, its matches held for its resume
    (``core.follows.fanout.HOLD_MATCHES_FOR``), and ``papertrail resume --reason`` finds it.
    """
    with db.session() as session:
        digest = session.get(Digest, digest_id)
        if digest is None or not _still_held(digest, held):
            return
        digest.state = DigestState.FAILED
        digest.error = error
        digest.lease_until = None
        session.add(digest)
        session.execute(sa.update(Match).where(col(Match.digest_id) == digest_id).values(digest_id=None))
        subscriber = session.get(Subscriber, digest.subscriber_id)
        if subscriber is not None:
            subscriber.failures += 1
            subscriber.status = SubscriberStatus.PAUSED
            subscriber.status_reason = error
            subscriber.refused_at = now
            session.add(subscriber)


def requeue_dead(db: Db, *, address: str | None = None, now: datetime | None = None) -> int:
    """Put dead-lettered digests back in the queue (all, or one subscriber's); returns how many."""
    now = now or utcnow()
    with db.session() as session:
        query = sa.update(Digest).where(col(Digest.state) == DigestState.DEAD)
        if address is not None:
            subscriber = select(Subscriber.id).where(col(Subscriber.address) == address)
            query = query.where(col(Digest.subscriber_id).in_(subscriber))
        result = session.execute(
            query.values(state=DigestState.PENDING, attempts=0, next_attempt_at=now, error=None)
        )
        return rowcount(result)


def _move(session: Session, subscriber_id: int, moved_to: str) -> None:
    """Follow a recipient the platform moved (a Telegram group that became a supergroup)."""
    subscriber = session.get(Subscriber, subscriber_id)
    if subscriber is None or subscriber.address == moved_to:
        return
    if session.exec(select(Subscriber.id).where(col(Subscriber.address) == moved_to)).first() is None:
        subscriber.address = moved_to
    else:
        subscriber.status_reason = f"the chat moved to {moved_to}, which is already a subscriber"
    session.add(subscriber)


def _claim_is(held: tuple[str, int]) -> tuple[sa.ColumnElement[bool], ...]:
    """The guard of an outcome over one claim, in SQL: the digest is being sent by that worker, at that
    attempt (the same test as :func:`_still_held` and ``claim_records.renew_lease``)."""
    worker, attempts = held
    return (
        col(Digest.state) == DigestState.SENDING,
        col(Digest.worker) == worker,
        col(Digest.attempts) == attempts,
    )


def _still_held(digest: Digest, held: tuple[str, int] | None) -> bool:
    """Whether a failure may be recorded on ``digest``: never once sent; with ``held`` (worker, attempt),
    only while that claim is the digest's current one."""
    if digest.state == DigestState.SENT:
        return False
    if held is None:
        return True
    worker, attempts = held
    return digest.state == DigestState.SENDING and digest.worker == worker and digest.attempts == attempts
