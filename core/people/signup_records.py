"""The SQL of self-service sign-up: a pending sign-up recorded or replaced in one transaction, its
confirmation guarded by the nonce its link carries, and the hourly sign-up quotas.

A repository over the store's transactions (``core.people.signup_records``), through its ORM session
(``db.session()``). The rules live in :mod:`core.people.signup` and :mod:`core.people.signup_limits`; here
each step is one transaction whose
condition is checked by the database where two processes could race:

* a pending sign-up is claimed with a conditional ``UPDATE`` (no mail to the address within the resend
  window), and its content (follows, newsletter, schedule, timezone, language) is replaced in the same
  transaction, together with a new nonce: a crash leaves the old sign-up or the new one, never a mix;
* a confirmation activates the subscriber only ``WHERE confirm_nonce = <the link's nonce>``;
* a quota is taken with ``INSERT … ON CONFLICT DO UPDATE … WHERE used < limit RETURNING``, all of a
  sign-up's quotas in one transaction, so concurrent sign-ups never take more than the limit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Session, col, select

from core.db import Db
from core.models import Follow, Newsletter, NewsletterMember, Subscriber, SubscriberStatus

log = logging.getLogger(__name__)

WAITING = "waiting for confirmation"


class Claim(StrEnum):
    """What recording a sign-up did."""

    PENDING = "pending"  # a new or replaced pending sign-up: its confirmation mail is due
    SUBSCRIBED = "subscribed"  # the address is subscribed already: its manage-link mail is due
    THROTTLED = "throttled"  # a sign-up mail went to the address within the resend window: nothing changed


@dataclass(frozen=True, slots=True)
class PendingContent:
    """What a pending sign-up holds: exactly what its confirmation link confirms."""

    follows: tuple[tuple[str, str], ...]  # (query as written, its normal form)
    newsletter_id: int | None
    timezone: str
    schedule: str
    language: str | None


@dataclass(frozen=True, slots=True)
class PendingView:
    """A pending sign-up as its confirmation page shows it."""

    subscriber: Subscriber
    follows: tuple[str, ...]
    newsletters: tuple[Newsletter, ...]


@dataclass(frozen=True, slots=True)
class QuotaRequest:
    """One count to take: ``key`` may take at most ``limit`` per hour."""

    key: str
    limit: int


# One statement per quota, atomic under concurrency: the row's lock (PostgreSQL) or the database's write
# lock (SQLite) serialises the takers of a key, and the WHERE refuses once the hour's count is reached (then
# nothing is returned). Plain SQL that both databases read alike.
_TAKE = sa.text(
    """
    INSERT INTO signup_quota (key, hour, used) VALUES (:key, :hour, 1)
    ON CONFLICT (key, hour) DO UPDATE SET used = signup_quota.used + 1
    WHERE signup_quota.used < :limit
    RETURNING used
    """
)
_PRUNE = sa.text("DELETE FROM signup_quota WHERE hour < :hour")


class _Refused(Exception):
    """Rolls back the quotas taken before the one that was full."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


# Sign-up's transactions on one store.
def record(
    db: Db,
    address: str,
    content: PendingContent,
    *,
    nonce: str,
    now: datetime,
    resend_after: timedelta,
) -> tuple[Claim, Subscriber]:
    """Record a sign-up for ``address`` in one transaction; what it did and the subscriber after it.

    A new address becomes an unconfirmed subscriber holding ``content``. An unconfirmed one whose last
    sign-up mail is older than ``resend_after`` has its pending sign-up *replaced* by ``content``, with
    the new ``nonce`` (older links stop confirming). A subscribed address (active, paused, unsubscribed)
    is left as it is, apart from the time of its sign-up mail. Within ``resend_after`` of the last
    sign-up mail nothing at all changes (THROTTLED).
    """
    for attempt in (1, 2):
        try:
            with db.session() as session:
                return _record(db, session, address, content, nonce, now, now - resend_after)
        except IntegrityError:
            # Two first sign-ups of one address at once: the other created it. Once more, which now
            # finds it (and, its mail being just sent, is throttled).
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _record(
    db: Db,
    session: Session,
    address: str,
    content: PendingContent,
    nonce: str,
    now: datetime,
    cutoff: datetime,
) -> tuple[Claim, Subscriber]:
    found = session.exec(select(Subscriber).where(Subscriber.address == address).with_for_update()).first()
    if found is None:
        subscriber = Subscriber(
            address=address,
            timezone=content.timezone,
            schedule=content.schedule,
            status=SubscriberStatus.UNCONFIRMED,
            status_reason=WAITING,
            language=content.language,
            confirm_sent_at=now,
            confirm_nonce=nonce,
        )
        session.add(subscriber)
        session.flush()
        _replace_content(session, subscriber.id or 0, content, now)
        return Claim.PENDING, subscriber
    assert found.id is not None
    # Claimed by the database, not by the row read above: on SQLite that read locks nothing.
    may_mail = sa.or_(col(Subscriber.confirm_sent_at).is_(None), col(Subscriber.confirm_sent_at) <= cutoff)
    if found.status != SubscriberStatus.UNCONFIRMED:
        claimed = session.execute(
            sa.update(Subscriber).where(col(Subscriber.id) == found.id, may_mail).values(confirm_sent_at=now)
        )
        return (Claim.SUBSCRIBED if _rows(claimed) else Claim.THROTTLED), _reread(session, found.id)
    language = {"language": content.language} if content.language is not None else {}
    claimed = session.execute(
        sa.update(Subscriber)
        .where(
            col(Subscriber.id) == found.id,
            col(Subscriber.status) == SubscriberStatus.UNCONFIRMED,
            may_mail,
        )
        .values(
            confirm_sent_at=now,
            confirm_nonce=nonce,
            timezone=content.timezone,
            schedule=content.schedule,
            status_reason=WAITING,
            **language,
        )
    )
    if _rows(claimed):
        _replace_content(session, found.id, content, now)
    return (Claim.PENDING if _rows(claimed) else Claim.THROTTLED), _reread(session, found.id)


def _replace_content(session: Session, subscriber_id: int, content: PendingContent, now: datetime) -> None:
    """The subscriber's follows and newsletter become exactly the content's (a pending sign-up has no
    other: nothing else writes to an unconfirmed address but an operator)."""
    wanted = dict((canonical, text) for text, canonical in content.follows)
    for follow in session.exec(select(Follow).where(col(Follow.subscriber_id) == subscriber_id)).all():
        text = wanted.pop(follow.canonical, None)
        if text is None:
            session.delete(follow)
        elif text != follow.query:
            follow.query = text  # the same follow, worded as this sign-up wrote it
            session.add(follow)
    for canonical, text in wanted.items():
        session.add(Follow(subscriber_id=subscriber_id, query=text, canonical=canonical, created_at=now))
    members = session.exec(
        select(NewsletterMember).where(col(NewsletterMember.subscriber_id) == subscriber_id)
    ).all()
    kept = False
    for member in members:
        if member.newsletter_id == content.newsletter_id:
            kept = True
        else:
            session.delete(member)
    if content.newsletter_id is not None and not kept:
        session.add(
            NewsletterMember(newsletter_id=content.newsletter_id, subscriber_id=subscriber_id, joined_at=now)
        )
    session.flush()


def release(db: Db, subscriber_id: int, sent_at: datetime) -> None:
    """The sign-up mail claimed at ``sent_at`` did not go out: the address may be mailed again at once.

    Only that claim is released: a later sign-up's is left alone.
    """
    with db.session() as session:
        session.execute(
            sa.update(Subscriber)
            .where(col(Subscriber.id) == subscriber_id, col(Subscriber.confirm_sent_at) == sent_at)
            .values(confirm_sent_at=None)
        )


def pending(db: Db, address: str, nonce: str) -> PendingView | None:
    """The pending sign-up of ``address`` when its nonce is ``nonce``, read in one transaction."""
    with db.session() as session:
        subscriber = session.exec(select(Subscriber).where(Subscriber.address == address)).first()
        if (
            subscriber is None
            or subscriber.status != SubscriberStatus.UNCONFIRMED
            or subscriber.confirm_nonce != nonce
        ):
            return None
        follows = session.exec(
            select(Follow.query).where(col(Follow.subscriber_id) == subscriber.id).order_by(col(Follow.id))
        ).all()
        newsletters = session.exec(
            select(Newsletter)
            .join(NewsletterMember, col(NewsletterMember.newsletter_id) == col(Newsletter.id))
            .where(col(NewsletterMember.subscriber_id) == subscriber.id)
            .order_by(col(Newsletter.name))
        ).all()
        return PendingView(subscriber, tuple(follows), tuple(newsletters))


def activate(db: Db, address: str, nonce: str) -> bool:
    """Confirm the pending sign-up of ``address`` if its nonce is still ``nonce``; False otherwise."""
    with db.session() as session:
        done = session.execute(
            sa.update(Subscriber)
            .where(
                col(Subscriber.address) == address,
                col(Subscriber.status) == SubscriberStatus.UNCONFIRMED,
                col(Subscriber.confirm_nonce) == nonce,
            )
            .values(status=SubscriberStatus.ACTIVE, status_reason=None)
        )
        return _rows(done) > 0


def take(db: Db, quotas: Sequence[QuotaRequest], hour: int) -> int | None:
    """Count one sign-up against every quota of hour ``hour``, all or none, in one transaction.

    None when every quota had room; otherwise the index of the first full one, and nothing is counted.
    Callers list quotas in one fixed order (client, network, everyone), so two transactions never
    wait for each other's rows the other way round.
    """
    first_of_hour = False
    try:
        with db.session() as session:
            for index, quota in enumerate(quotas):
                used = session.execute(
                    _TAKE, {"key": quota.key, "hour": hour, "limit": quota.limit}
                ).scalar_one_or_none()
                if used is None:
                    raise _Refused(index)
                first_of_hour = first_of_hour or (index == len(quotas) - 1 and used == 1)
    except _Refused as refused:
        return refused.index
    if first_of_hour:
        _prune(db, hour)
    return None


def _prune(db: Db, hour: int) -> None:
    # Once an hour (by the sign-up that opened it): earlier hours' rows count nothing any more. On its
    # own transaction, after the quotas: a failure here costs a few stale rows, never a sign-up.
    try:
        with db.session() as session:
            session.execute(_PRUNE, {"hour": hour})
    except SQLAlchemyError as exc:
        log.warning("could not delete past sign-up quotas (%s); the next hour tries again", exc)


def _reread(session: Session, subscriber_id: int) -> Subscriber:
    """The subscriber as the statements of this transaction left it."""
    subscriber = session.get(Subscriber, subscriber_id, populate_existing=True)
    assert subscriber is not None
    return subscriber


def _rows(result: object) -> int:
    return int(getattr(result, "rowcount", 0) or 0)
