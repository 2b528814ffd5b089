"""The delivery ledger's SQL: planning digests, claiming them across workers, and recording outcomes.

``core.ledger.ledger_records`` (this module: planning digests and heartbeats, and reading what waits),
``core.ledger.claim_records`` (core.ledger.claim_records: workers claiming digests and loading their
items) and ``core.ledger.outcome_records`` (core.ledger.outcome_records: recording how a send went). Each
talks to the database through the store's session (``db.session()``): ORM rows for single digests, Core
statements for the guarded updates. Kept apart from the rest of the store because it must be safe with several
worker processes at once. The rules:

* A match belongs to at most one digest (``Match.digest_id``), set by a guarded ``UPDATE ... WHERE
  digest_id IS NULL``, so two planners can never put one match into two digests.
* A worker claims digests with ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL; SQLite has one writer
  at a time and ignores the clause) and marks them ``sending`` with a lease. A worker that dies loses its
  lease, and the digest is taken over when the lease runs out: that is the only way a digest can go out
  twice, and only if the platform had accepted it just before the crash. A live worker renews the lease
  of every digest of its batch until the digest's outcome is recorded (``claim_records.renew_leases``).
* Every outcome a worker records names its claim (worker, attempt): a worker whose claim passed to
  another (it stalled past its lease) changes nothing over the new holder's.
* ``sent`` is recorded in one transaction with the digest's matches, so a digest is never half sent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Db
from core.follows import match_records
from core.ledger.ledger_items import items_of
from core.models import (
    Digest,
    DigestState,
    Match,
    Subscriber,
    SubscriberStatus,
    UTCDateTime,
    Version,
)
from core.reasons import Reason
from core.values import DigestItem

if TYPE_CHECKING:
    pass

OPEN_STATES = (DigestState.PENDING, DigestState.SENDING)
# A heartbeat is a digest planned with this many items (none): a one-line message with the scan receipt on
# an arXiv announcement day when nothing matched (core.delivery.digests.plan_heartbeats). Any other digest
# holds at
# least one match (an empty one is deleted when planned), so the count tells the two apart without a column.
HEARTBEAT_ITEMS = 0


@dataclass(frozen=True, slots=True)
class PendingMatch:
    """An unsent match as a digest would show it."""

    match_id: int
    instant: bool
    item: DigestItem


@dataclass(frozen=True, slots=True)
class RankedMatch:
    """A claimed digest's match with only what ranking it needs: no title, abstract or author list.

    A digest shows at most ``PAPERTRAIL_DIGEST_MAX_ITEMS`` of its (often hundreds of) matches; the worker
    ranks these and loads full items (:func:`core.ledger.claim_records.match_items`) for the shown
    ones only.
    """

    match_id: int
    digest_id: int
    version_id: int
    arxiv_id: str
    version: int
    reasons: tuple[Reason, ...]
    upvotes: int
    # A learned recommendation's score, None for a follow's match (``DigestItem.recommended``).
    recommended: float | None = None

    @property
    def is_revision(self) -> bool:
        """True for v2 and later, like :attr:`core.values.DigestItem.is_revision`."""
        return self.version > 1


@dataclass(frozen=True, slots=True)
class DigestPlan:
    """A digest to open: whose, on which channel, and whether only instant matches are due."""

    subscriber_id: int
    channel: str
    instant_only: bool


@dataclass(frozen=True, slots=True)
class ClaimedDigest:
    """A digest one worker holds until its lease runs out. ``attempts`` counts this one."""

    digest_id: int
    subscriber_id: int
    address: str
    attempts: int
    parts_sent: int
    # The subscriber's language (None: the default), for the digest's words and its guides.
    language: str | None = None
    # What its scan receipt needs (core.delivery.receipts): when the digest was planned (the window's end),
    # the
    # subscriber's previous digest and sign-up (its start) and timezone (its words).
    created_at: datetime | None = None
    last_digest_at: datetime | None = None
    subscriber_created_at: datetime | None = None
    timezone: str = "UTC"
    # Items the digest was planned with; 0 for a heartbeat (see :data:`HEARTBEAT_ITEMS`).
    item_count: int = 1

    @property
    def heartbeat(self) -> bool:
        """True for a heartbeat: a digest planned with no items."""
        return self.item_count == HEARTBEAT_ITEMS


# Digest planning and heartbeats, and the ledger's reads of what waits (each first fans out the
# waiting query matches through ``core.follows.match_records``).
def subscribers_to_plan(
    db: Db,
    now: datetime,
    address: str | None = None,
    *,
    channels: Sequence[str] | None = None,
    ignore_backoff: bool = False,
    after: int = 0,
    limit: int | None = None,
) -> list[Subscriber]:
    """Active subscribers with matches in no digest yet and no digest already open, by id.

    ``channels`` limits them to addresses this process can deliver to; ``ignore_backoff`` includes
    subscribers whose last failure asked to wait. ``after`` and ``limit`` read one page by id (keyset):
    a planner reads a busy minute's 100,000 candidates a page at a time, not all at once. Reads the
    Match rows as they are: the planner fans out waiting query matches first (``plan_digests``).
    """
    with db.session() as session:
        # EXISTS per candidate rather than "id IN (every subscriber with an unassigned match)": with a
        # page limit the database walks subscribers by id and stops after the page, instead of
        # gathering the whole population's unassigned matches for every page.
        unassigned = sa.exists().where(
            col(Match.subscriber_id) == col(Subscriber.id), col(Match.digest_id).is_(None)
        )
        open_digest = sa.exists().where(
            col(Digest.subscriber_id) == col(Subscriber.id), col(Digest.state).in_(OPEN_STATES)
        )
        query = select(Subscriber).where(
            unassigned,
            ~open_digest,
            col(Subscriber.status) == SubscriberStatus.ACTIVE,
            col(Subscriber.id) > after,
        )
        if not ignore_backoff:
            query = query.where(sa.or_(col(Subscriber.retry_at).is_(None), col(Subscriber.retry_at) <= now))
        return list(session.exec(_candidates_page(query, address, channels, limit)))


def open_digest(db: Db, subscriber_id: int, channel: str, *, instant_only: bool, now: datetime) -> int | None:
    """Open one digest (see :meth:`open_digests`); returns its id, or None if none was opened."""
    opened = open_digests(db, [DigestPlan(subscriber_id, channel, instant_only)], now=now)
    return opened[0] if opened else None


def open_digests(db: Db, plans: Sequence[DigestPlan], *, now: datetime) -> list[int]:
    """Create pending digests, each holding its subscriber's unassigned matches; returns their ids.

    One transaction for the whole batch: the subscribers are locked (``SKIP LOCKED``: another planner
    holding one means it is being planned already), those with an open digest are left out, and each
    new digest takes its subscriber's unassigned matches (only instant ones when ``instant_only``).
    Digests that got no matches are removed again.
    """
    if not plans:
        return []
    by_subscriber = {plan.subscriber_id: plan for plan in plans}
    with db.session() as session:
        locked = set(
            session.execute(
                sa.select(col(Subscriber.id))
                .where(col(Subscriber.id).in_(list(by_subscriber)))
                .with_for_update(skip_locked=True)
            ).scalars()
        )
        busy = set(
            session.execute(
                sa.select(col(Digest.subscriber_id)).where(
                    col(Digest.subscriber_id).in_(list(locked)), col(Digest.state).in_(OPEN_STATES)
                )
            ).scalars()
        )
        chosen = [by_subscriber[sid] for sid in sorted(locked - busy)]
        if not chosen:
            return []
        # One multi-row INSERT (executemany with RETURNING) for the batch, not one per subscriber.
        opened = session.execute(
            sa.insert(Digest).returning(col(Digest.id)),
            [
                {
                    "subscriber_id": plan.subscriber_id,
                    "created_at": now,
                    "state": DigestState.PENDING,
                    "channel": plan.channel,
                    "next_attempt_at": now,
                    "item_count": 0,
                    "attempts": 0,
                    "parts_sent": 0,
                }
                for plan in chosen
            ],
        )
        digest_ids = list(opened.scalars())
        # Each match goes to the new digest of its subscriber, guarded by "digest_id IS NULL". That is
        # the subscriber's newest digest: it was just inserted, the subscriber is locked, and one with
        # an open digest was left out above. (An "id IN (the batch's ids)" here would be evaluated per
        # match row: measured 100 µs a row on SQLite, against 5 µs for this index look-up.)
        holder = (
            sa.select(sa.func.max(col(Digest.id)))
            .where(col(Digest.subscriber_id) == col(Match.subscriber_id))
            .scalar_subquery()
        )
        scheduled = [plan.subscriber_id for plan in chosen if not plan.instant_only]
        session.execute(
            sa.update(Match)
            .where(
                col(Match.subscriber_id).in_([plan.subscriber_id for plan in chosen]),
                # "+ 0" keeps the database off the digest_id index here: SQLite otherwise walks every
                # unassigned match of everyone (a day's hundreds of thousands) for each page of 1,000
                # subscribers, instead of their own rows through the (subscriber, version) index.
                (col(Match.digest_id) + 0).is_(None),
                sa.or_(col(Match.instant).is_(True), col(Match.subscriber_id).in_(scheduled)),
            )
            .values(digest_id=holder)
            .execution_options(synchronize_session=False)
        )
        # Every digest's count in one UPDATE (the database counts), then the empty ones go.
        counted = sa.select(sa.func.count()).where(col(Match.digest_id) == col(Digest.id)).scalar_subquery()
        counts = dict(
            session.execute(
                sa.update(Digest)
                .where(col(Digest.id).in_(digest_ids))
                .values(item_count=counted)
                .returning(col(Digest.id), col(Digest.item_count))
                .execution_options(synchronize_session=False)
            ).all()
        )
        empty = [d for d in digest_ids if not counts.get(d)]
        if empty:
            session.execute(sa.delete(Digest).where(col(Digest.id).in_(empty)))
        return [d for d in digest_ids if counts.get(d)]


def heartbeat_candidates(
    db: Db,
    now: datetime,
    not_since: datetime,
    address: str | None = None,
    *,
    channels: Sequence[str] | None = None,
    after: int = 0,
    limit: int | None = None,
) -> list[Subscriber]:
    """Active subscribers who asked for a heartbeat and have nothing to send, by id (keyset pages).

    Nothing to send: no match in no digest, no digest open, none planned at or after ``not_since``
    (the newest arXiv announcement: one heartbeat per announcement, and none after any digest since
    it), and not backing off after a failure. Their schedules are the caller's to check.
    """
    with db.session() as session:
        query = select(Subscriber).where(
            col(Subscriber.heartbeat).is_(True),
            col(Subscriber.status) == SubscriberStatus.ACTIVE,
            col(Subscriber.id) > after,
            *_nothing_to_send(not_since),
            sa.or_(col(Subscriber.retry_at).is_(None), col(Subscriber.retry_at) <= now),
        )
        return list(session.exec(_candidates_page(query, address, channels, limit)))


def open_heartbeats(db: Db, plans: Sequence[DigestPlan], *, not_since: datetime, now: datetime) -> list[int]:
    """Open a heartbeat (a pending digest of :data:`HEARTBEAT_ITEMS` items) for each planned subscriber
    that still has nothing to send (see :meth:`heartbeat_candidates`); returns their ids.

    Safe with several planners: the subscribers are locked (``SKIP LOCKED``: one being planned
    elsewhere is left to that planner), and each channel's heartbeats are one ``INSERT … SELECT`` whose
    guards are read in the statement itself, so a planner that read the candidates before another one
    opened (or sent) a heartbeat inserts nothing for that subscriber, on SQLite (whose write lock holds
    for the whole statement) as on PostgreSQL (the lock, then a statement that sees what was committed).
    """
    if not plans:
        return []
    by_channel: defaultdict[str, list[int]] = defaultdict(list)
    for plan in plans:
        by_channel[plan.channel].append(plan.subscriber_id)
    opened: list[int] = []
    with db.session() as session:
        locked = set(
            session.execute(
                sa.select(col(Subscriber.id))
                .where(col(Subscriber.id).in_([plan.subscriber_id for plan in plans]))
                .with_for_update(skip_locked=True)
            ).scalars()
        )
        for channel, subscriber_ids in sorted(by_channel.items()):
            chosen = sorted(locked.intersection(subscriber_ids))
            if not chosen:
                continue
            rows = sa.select(
                col(Subscriber.id),
                sa.literal(now, UTCDateTime()),
                sa.literal(DigestState.PENDING.value),
                sa.literal(channel),
                sa.literal(now, UTCDateTime()),
                sa.literal(HEARTBEAT_ITEMS),
                sa.literal(0),
                sa.literal(0),
            ).where(
                col(Subscriber.id).in_(chosen),
                col(Subscriber.heartbeat).is_(True),
                col(Subscriber.status) == SubscriberStatus.ACTIVE,
                *_nothing_to_send(not_since),
            )
            inserted = session.execute(
                sa.insert(Digest)
                .from_select(
                    [
                        "subscriber_id",
                        "created_at",
                        "state",
                        "channel",
                        "next_attempt_at",
                        "item_count",
                        "attempts",
                        "parts_sent",
                    ],
                    rows,
                )
                .returning(col(Digest.id))
            )
            opened.extend(inserted.scalars())
    return sorted(opened)


def dead_digests(db: Db, limit: int = 20) -> list[tuple[Digest, str]]:
    """The newest dead-lettered digests with their subscriber addresses."""
    with db.session() as session:
        rows = session.exec(
            select(Digest, Subscriber.address)
            .join(Subscriber, col(Subscriber.id) == col(Digest.subscriber_id))
            .where(col(Digest.state) == DigestState.DEAD)
            .order_by(col(Digest.id).desc())
            .limit(limit)
        ).all()
        return [(digest, address) for digest, address in rows]


def count_pending(db: Db, subscriber_id: int) -> int:
    """Unsent matches of one subscriber (the rule of :meth:`pending_matches`), counted in SQL."""
    match_records.expand_matches(db)
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.count())
                .select_from(Match)
                .where(col(Match.subscriber_id) == subscriber_id, unsent_condition())
            ).scalar_one()
        )


def count_pending_split(db: Db, subscriber_id: int) -> tuple[int, int]:
    """Unsent matches of one subscriber, and how many of them are learned recommendations: one
    statement (the rule of :meth:`count_pending`, which counts recommendations like any match)."""
    match_records.expand_matches(db)
    with db.session() as session:
        waiting, recommended = session.execute(
            sa.select(sa.func.count(), sa.func.count(recommended_expression()))
            .select_from(Match)
            .where(col(Match.subscriber_id) == subscriber_id, unsent_condition())
        ).one()
    return int(waiting), int(recommended)


def pending_matches(db: Db, subscriber_id: int) -> list[PendingMatch]:
    """Unsent matches of one subscriber (in no digest, or in one not sent yet), in digest order."""
    match_records.expand_matches(db)
    with db.session() as session:
        unsent = unsent_condition()
        rows = session.exec(
            select(Match, Version)
            .join(Version, col(Version.id) == col(Match.version_id))
            .where(col(Match.subscriber_id) == subscriber_id, unsent)
        ).all()
        items = items_of(session, rows)
    pending = [
        PendingMatch(match.id or 0, match.instant, item) for (match, _), item in zip(rows, items, strict=True)
    ]
    # Recommendations after the follows' matches, as a digest shows them.
    pending.sort(
        key=lambda p: (
            p.item.recommended is not None,
            p.item.is_revision,
            p.item.arxiv_id,
            p.item.version,
        )
    )
    return pending


def pending_by_channel(db: Db) -> dict[str, int]:
    """Matches in no digest yet, counted per channel (the part of the address before the colon)."""
    with db.session() as session:
        rows = session.execute(
            sa.select(col(Subscriber.address), sa.func.count())
            .join(Match, col(Match.subscriber_id) == col(Subscriber.id))
            .where(col(Match.digest_id).is_(None))
            .group_by(col(Subscriber.address))
        ).all()
    counts: dict[str, int] = defaultdict(int)
    for address, pending in rows:
        counts[address.partition(":")[0]] += int(pending)
    return dict(counts)


def digests_of(db: Db, subscriber_id: int) -> list[Digest]:
    """All digests of a subscriber, oldest first."""
    with db.session() as session:
        rows = session.exec(
            select(Digest).where(col(Digest.subscriber_id) == subscriber_id).order_by(col(Digest.id))
        )
        return list(rows)


def _nothing_to_send(not_since: datetime) -> tuple[sa.ColumnElement[bool], ...]:
    """The heartbeat's guards on a subscriber row: no match in no digest, no digest open, and no digest
    planned at or after ``not_since``."""
    mine = col(Digest.subscriber_id) == col(Subscriber.id)
    return (
        ~sa.exists().where(col(Match.subscriber_id) == col(Subscriber.id), col(Match.digest_id).is_(None)),
        ~sa.exists().where(mine, col(Digest.state).in_(OPEN_STATES)),
        ~sa.exists().where(mine, col(Digest.created_at) >= not_since),
    )


def recommended_expression() -> sa.ColumnElement[Any]:
    """SQL: the score of a learned recommendation's Match row, NULL for any other row.

    A recommendation's row holds exactly one hit, ``core.reasons.recommendation_hit`` (the pass that
    writes
    them inserts new rows only, and a follow's fan-out never adds a hit to an existing row), so the score
    is read from the first hit: ``json_extract`` on SQLite, ``#>>`` on PostgreSQL. Counting it (``count``
    skips NULL) tells how many of the matches counted are recommendations.
    """
    score: sa.ColumnElement[Any] = col(Match.reasons)[(0, "recommended")].as_float()
    return score


def unsent_condition() -> sa.ColumnElement[bool]:
    """Matches in no digest, or in one that has not been sent."""
    return sa.or_(
        col(Match.digest_id).is_(None),
        col(Match.digest_id).in_(select(Digest.id).where(col(Digest.state) != DigestState.SENT)),
    )


def rowcount(result: sa.Result[Any]) -> int:
    # UPDATE results are cursor results; the typed API hides rowcount behind the generic Result.
    return int(getattr(result, "rowcount", 0))


def _candidates_page(
    query: Any, address: str | None, channels: Sequence[str] | None, limit: int | None
) -> Any:
    """``query`` over subscribers narrowed to ``address`` and ``channels`` (None: any), in id order, at
    most ``limit`` rows: the shape both digest planning and heartbeat planning page through."""
    if address is not None:
        query = query.where(col(Subscriber.address) == address)
    if channels is not None:
        query = query.where(
            sa.or_(*(col(Subscriber.address).startswith(f"{c}:") for c in channels), sa.false())
        )
    query = query.order_by(col(Subscriber.id))
    return query.limit(limit) if limit is not None else query
