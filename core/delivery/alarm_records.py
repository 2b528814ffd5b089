"""Delivery alarms and the subscribers a refusal paused: the SQL behind core.delivery.alarm.

``core.delivery.alarm_records``; talks through the store's session (``db.session()``), one transaction per
method, its guarded writes as Core statements on that session's connection. An alarm is one row per (channel,
kind) of ``delivery_alarm``; it is raised while ``cleared_at`` is NULL. Several workers may judge batches at
once: raising is one guarded statement (an update of the raised row, else an upsert that only revives a
cleared one), so exactly one of them learns it raised the alarm and logs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import col, select

from core.db import Db
from core.models import DeliveryAlarm, Digest, DigestState, Subscriber, SubscriberStatus

_ALARM = DeliveryAlarm.metadata.tables["delivery_alarm"]


@dataclass(frozen=True, slots=True)
class HeldDigest:
    """A claimed digest put back in the queue because an alarm holds its refusal (nobody is paused)."""

    digest_id: int
    # The claim's attempt number: the hold does not count it (an outage must not dead-letter anything).
    attempts: int
    error: str
    retry_at: datetime
    parts_sent: int = 0


# Delivery alarms, held digests, resuming refused subscribers.
def delivery_alarms(db: Db, *, raised_only: bool = True) -> list[DeliveryAlarm]:
    """The alarms (only the raised ones by default), by channel and kind."""
    with db.session() as session:
        query = select(DeliveryAlarm).order_by(col(DeliveryAlarm.channel), col(DeliveryAlarm.kind))
        if raised_only:
            query = query.where(col(DeliveryAlarm.cleared_at).is_(None))
        return list(session.exec(query))


def raise_alarm(
    db: Db, channel: str, kind: str, *, recipients: int, held: int, sample: str, now: datetime
) -> tuple[bool, datetime]:
    """Raise the alarm of (``channel``, ``kind``), or count ``held`` more deliveries on it if raised.

    Returns whether this call raised it (False: it was raised already, by this worker or another) and
    when it was first seen.
    """
    a = _ALARM.c
    with db.session() as session:
        connection = session.connection()
        counted = _count_held(connection, channel, kind, held, now)
        if counted is not None:
            return False, counted
        dialect_insert: Any = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
        fresh = {
            "first_seen": now,
            "last_seen": now,
            "recipients": recipients,
            "held": held,
            "sample": sample,
            "cleared_at": None,
        }
        # Insert, or revive a cleared alarm; a raised one (another worker just raised it) is left alone
        # and returns no row.
        upsert = (
            dialect_insert(_ALARM)
            .values(channel=channel, kind=kind, **fresh)
            .on_conflict_do_update(
                index_elements=[a.channel, a.kind], set_=fresh, where=a.cleared_at.is_not(None)
            )
            .returning(a.first_seen)
        )
        raised = connection.execute(upsert).scalar_one_or_none()
        if raised is not None:
            return True, raised
        counted = _count_held(connection, channel, kind, held, now)
        return False, counted or now


def clear_alarms(
    db: Db, channel: str | None = None, kinds: Sequence[str] | None = None, *, now: datetime
) -> list[tuple[str, str]]:
    """Clear the raised alarms (of one channel, of some kinds); returns the (channel, kind) cleared."""
    a = _ALARM.c
    query = sa.update(_ALARM).where(a.cleared_at.is_(None))
    if channel is not None:
        query = query.where(a.channel == channel)
    if kinds is not None:
        query = query.where(a.kind.in_(list(kinds)))
    with db.session() as session:
        rows = session.execute(query.values(cleared_at=now).returning(a.channel, a.kind)).all()
    return sorted((str(c), str(k)) for c, k in rows)


def hold_digests(db: Db, held: Sequence[HeldDigest]) -> None:
    """Put claimed digests back in the queue until their ``retry_at``, not counting the attempt.

    Guarded by the claim (still sending, same attempt): a digest another worker took over meanwhile is
    left to it. One statement (executemany) and one transaction for the batch.
    """
    if not held:
        return
    d = Digest.metadata.tables["digest"].c
    statement = (
        sa.update(Digest.metadata.tables["digest"])
        .where(
            d.id == sa.bindparam("b_id"),
            d.state == DigestState.SENDING,
            d.attempts == sa.bindparam("b_attempts"),
        )
        .values(
            state=DigestState.PENDING,
            error=sa.bindparam("b_error"),
            next_attempt_at=sa.bindparam("b_retry_at"),
            lease_until=None,
            attempts=d.attempts - 1,
            # The parts a split digest delivered before the refusal are not sent again.
            parts_sent=sa.case(
                (d.parts_sent > sa.bindparam("b_parts"), d.parts_sent), else_=sa.bindparam("b_parts")
            ),
        )
    )
    rows = [
        {
            "b_id": h.digest_id,
            "b_attempts": h.attempts,
            "b_error": h.error,
            "b_retry_at": h.retry_at,
            "b_parts": h.parts_sent,
        }
        for h in held
    ]
    with db.session() as session:
        session.connection().execute(statement, rows)


def count_active_on_channel(db: Db, channel: str) -> int:
    """Active subscribers whose address is on ``channel``."""
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.count())
                .select_from(Subscriber)
                .where(
                    col(Subscriber.status) == SubscriberStatus.ACTIVE,
                    col(Subscriber.address).startswith(f"{channel}:", autoescape=True),
                )
            ).scalar_one()
        )


def refused_subscribers(
    db: Db, *, reason: str | None = None, since: datetime | None = None, limit: int | None = None
) -> tuple[int, list[str]]:
    """Subscribers a delivery refusal paused (pause reason containing ``reason``, case-insensitive;
    paused at or after ``since``): how many, and the first ``limit`` addresses by id."""
    where = _refused(reason, since)
    with db.session() as session:
        count = int(
            session.execute(sa.select(sa.func.count()).select_from(Subscriber).where(*where)).scalar_one()
        )
        query = sa.select(col(Subscriber.address)).where(*where).order_by(col(Subscriber.id))
        if limit is not None:
            query = query.limit(limit)
        addresses = [str(a) for a in session.execute(query).scalars()]
    return count, addresses


def resume_refused(db: Db, *, reason: str | None = None, since: datetime | None = None, now: datetime) -> int:
    """Re-activate every subscriber :meth:`refused_subscribers` finds and re-queue their dead-lettered
    digests, in one transaction; returns how many subscribers were resumed."""
    where = _refused(reason, since)
    chosen = sa.select(col(Subscriber.id)).where(*where)
    with db.session() as session:
        session.execute(
            sa.update(Digest)
            .where(col(Digest.state) == DigestState.DEAD, col(Digest.subscriber_id).in_(chosen))
            .values(state=DigestState.PENDING, attempts=0, next_attempt_at=now, error=None)
            .execution_options(synchronize_session=False)
        )
        result = session.execute(
            sa.update(Subscriber)
            .where(*where)
            .values(
                status=SubscriberStatus.ACTIVE,
                status_reason=None,
                retry_at=None,
                failures=0,
                refused_at=None,
            )
            .execution_options(synchronize_session=False)
        )
    return int(getattr(result, "rowcount", 0))


def _count_held(
    connection: sa.Connection, channel: str, kind: str, held: int, now: datetime
) -> datetime | None:
    """Count ``held`` more deliveries on the raised alarm; its first sighting, or None if not raised."""
    a = _ALARM.c
    found = connection.execute(
        sa.update(_ALARM)
        .where(a.channel == channel, a.kind == kind, a.cleared_at.is_(None))
        .values(last_seen=now, held=a.held + held)
        .returning(a.first_seen)
    ).scalar_one_or_none()
    return found if isinstance(found, datetime) else None


def _refused(reason: str | None, since: datetime | None) -> list[sa.ColumnElement[bool]]:
    """The filter of subscribers paused by a delivery refusal (not by their own choice)."""
    where: list[sa.ColumnElement[bool]] = [
        col(Subscriber.status) == SubscriberStatus.PAUSED,
        col(Subscriber.refused_at).is_not(None),
    ]
    if reason:
        where.append(sa.func.lower(col(Subscriber.status_reason)).contains(reason.lower(), autoescape=True))
    if since is not None:
        where.append(col(Subscriber.refused_at) >= since)
    return where
