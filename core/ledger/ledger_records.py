"""The ledger's digest life in SQL: planning digests and heartbeats, reading what waits, workers claiming
digests and loading their items, and recording how each send went.

One module because one set of rules holds for every step (below): planning, claiming and recording each
read or write the same guards on the match and digest rows. What was sent (the feed, the ``.bib``
history, the export) is ``core.ledger.ledger_sent``, a read with callers of its own. Each function talks to
the database through ``db.session()``: ORM rows for single digests, Core statements for the guarded
updates; all must be safe with several worker processes at once. The rules:

* A match belongs to at most one digest (``Match.digest_id``), set by a guarded ``UPDATE ... WHERE
  digest_id IS NULL``, so two planners can never put one match into two digests.
* A worker claims digests with ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL; SQLite has one writer
  at a time and ignores the clause) and marks them ``sending`` with a lease. A worker that dies loses its
  lease, and the digest is taken over when the lease runs out: that is the only way a digest can go out
  twice, and only if the platform had accepted it just before the crash. A live worker renews the lease
  of every digest of its batch until the digest's outcome is recorded (:func:`renew_leases`).
* Every outcome a worker records names its claim (worker, attempt): a worker whose claim passed to
  another (it stalled past its lease) changes nothing over the new holder's.
* ``sent`` is recorded in one transaction with the digest's matches, so a digest is never half sent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.db import Db
from core.follows import match_records
from core.models import (
    CommunityPickRow,
    Digest,
    DigestState,
    Follow,
    Match,
    Subscriber,
    SubscriberStatus,
    UTCDateTime,
    Version,
    utcnow,
    version_to_item,
)
from core.papers.revisions import changes_of
from core.reasons import Reason, reasons_from_data, recommended_score
from core.values import DigestItem

OPEN_STATES = (DigestState.PENDING, DigestState.SENDING)
# A heartbeat is a digest planned with this many items (none): a one-line message with the scan receipt on
# an arXiv announcement day when nothing matched (core.delivery.digests.plan_heartbeats). Any other digest
# holds at least one match (an empty one is deleted when planned), so the count tells the two apart without
# a column.
HEARTBEAT_ITEMS = 0

# Values per IN list. PostgreSQL binds at most 65,535 values in one statement and SQLite 32,766; a batch of
# a busy minute can name more (100,000 subscribers, their matches' papers), so lists are read in slices.
IN_SLICE = 5_000
_Key = TypeVar("_Key", int, str)


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
    ranks these and loads full items (:func:`match_items`) for the shown
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
        items = _items_of(session, rows)
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


def _rowcount(result: sa.Result[Any]) -> int:
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


# Claiming digests, renewing their lease, and loading what they carry.
def claim_digests(
    db: Db,
    now: datetime,
    worker: str,
    *,
    limit: int,
    lease: timedelta,
    address: str | None = None,
    ignore_schedule: bool = False,
    exclude: Sequence[int] = (),
) -> list[ClaimedDigest]:
    """Take up to ``limit`` digests that are due (or whose holder's lease ran out) for ``worker``.

    ``ignore_schedule`` takes pending digests even while they back off (an operator's "send now");
    ``exclude`` skips digests this caller already tried in the same pass.
    """
    due = col(Digest.next_attempt_at) <= now
    if ignore_schedule:
        due = sa.true()
    claimable = sa.or_(
        sa.and_(col(Digest.state) == DigestState.PENDING, due),
        sa.and_(col(Digest.state) == DigestState.SENDING, col(Digest.lease_until) < now),
    )
    query = (
        sa.select(col(Digest.id))
        .where(claimable)
        .order_by(col(Digest.next_attempt_at), col(Digest.id))
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if address is not None:
        query = query.join(Subscriber, col(Subscriber.id) == col(Digest.subscriber_id)).where(
            col(Subscriber.address) == address
        )
    if exclude:
        query = query.where(col(Digest.id).not_in(list(exclude)))
    with db.session() as session:
        ids = [row[0] for row in session.execute(query)]
        if not ids:
            return []
        # The UPDATE repeats the claimable test and keeps only what it changed. SQLite has no row
        # locks and pysqlite runs the SELECT before its transaction takes the write lock, so two
        # workers can select the same digests; the second one's UPDATE then finds them claimed (the
        # write lock orders the two) and takes nothing: a claim is exclusive on every database.
        ids = list(
            session.execute(
                sa.update(Digest)
                .where(col(Digest.id).in_(ids), claimable)
                .values(
                    state=DigestState.SENDING,
                    worker=worker,
                    lease_until=now + lease,
                    attempts=Digest.attempts + 1,
                )
                .returning(col(Digest.id))
                .execution_options(synchronize_session=False)
            ).scalars()
        )
        if not ids:
            return []
        rows = session.execute(
            sa.select(
                col(Digest.id),
                col(Digest.subscriber_id),
                col(Subscriber.address),
                col(Digest.attempts),
                col(Digest.parts_sent),
                col(Subscriber.language),
                col(Digest.created_at),
                col(Subscriber.last_digest_at),
                col(Subscriber.created_at),
                col(Subscriber.timezone),
                col(Digest.item_count),
            )
            .join(Subscriber, col(Subscriber.id) == col(Digest.subscriber_id))
            .where(col(Digest.id).in_(ids))
            .order_by(col(Digest.id))
        ).all()
    return [ClaimedDigest(*row) for row in rows]


def renew_lease(
    db: Db, digest_id: int, *, worker: str, attempts: int, parts_sent: int, until: datetime
) -> bool:
    """Extend ``worker``'s claim on a digest it is still sending and record the parts delivered so far.

    Guarded: only the claim ``worker`` made at attempt ``attempts`` is renewed, so a worker whose lease
    ran out, and whose digest another worker has claimed since, gets False and must stop sending.
    """
    with db.session() as session:
        result = session.execute(
            sa.update(Digest)
            .where(
                col(Digest.id) == digest_id,
                col(Digest.state) == DigestState.SENDING,
                col(Digest.worker) == worker,
                col(Digest.attempts) == attempts,
            )
            .values(lease_until=until, parts_sent=parts_sent)
        )
        return _rowcount(result) == 1


def renew_leases(db: Db, held: Mapping[int, int], *, worker: str, until: datetime) -> set[int]:
    """Extend ``worker``'s claims on a batch it still holds (digest id -> the claim's attempt number)
    until ``until``; returns the ids renewed.

    Guarded like :meth:`renew_lease`: a digest whose outcome is recorded, or whose lease ran out and
    that another worker (or a later attempt) claimed since, is left alone and not returned. One
    statement per attempt number in the batch (a retried digest's differs) and slice of ids.
    """
    by_attempt: dict[int, list[int]] = {}
    for digest_id, attempts in held.items():
        by_attempt.setdefault(attempts, []).append(digest_id)
    renewed: set[int] = set()
    with db.session() as session:
        for attempts, digest_ids in by_attempt.items():
            for ids in _slices(digest_ids):
                renewed.update(
                    session.execute(
                        sa.update(Digest)
                        .where(
                            col(Digest.id).in_(ids),
                            col(Digest.state) == DigestState.SENDING,
                            col(Digest.worker) == worker,
                            col(Digest.attempts) == attempts,
                        )
                        .values(lease_until=until)
                        .returning(col(Digest.id))
                        .execution_options(synchronize_session=False)
                    ).scalars()
                )
    return renewed


def digest_items(db: Db, digest_id: int) -> list[DigestItem]:
    """The items of one digest, with what each revision changed and Hugging Face upvotes."""
    return digests_items(db, [digest_id]).get(digest_id, [])


def digests_items(db: Db, digest_ids: Sequence[int]) -> dict[int, list[DigestItem]]:
    """The items of several digests at once (a worker's claimed batch), keyed by digest id.

    A fixed number of statements whatever the batch holds (one per slice of ids, see ``IN_SLICE``):
    the matches with their versions, then the follows, upvotes and earlier versions they name.
    """
    with db.session() as session:
        rows: list[tuple[Match, Version]] = []
        for ids in _slices(digest_ids):
            rows += session.exec(
                select(Match, Version)
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.digest_id).in_(ids))
            ).all()
        rows.sort(key=lambda row: row[0].id or 0)
        items = _items_of(session, rows)
    grouped: dict[int, list[DigestItem]] = {digest_id: [] for digest_id in digest_ids}
    for (match, _), item in zip(rows, items, strict=True):
        grouped[match.digest_id or 0].append(item)
    return grouped


def digests_ranked(db: Db, digest_ids: Sequence[int]) -> dict[int, list[RankedMatch]]:
    """The matches of several digests as :class:`RankedMatch` rows, by digest id, each in match order.

    Plain column reads (no ORM objects, no version texts): one statement per slice of digest ids and
    one per slice of papers for the upvotes, whatever the batch holds. Match order is the order
    :meth:`digests_items` gives the same matches in, so ties in ranking break the same way.
    """
    rows: list[Any] = []  # Core rows: (match id, digest id, version id, paper, number, reasons)
    with db.session() as session:
        for ids in _slices(digest_ids):
            rows += session.execute(
                sa.select(
                    col(Match.id),
                    col(Match.digest_id),
                    col(Match.version_id),
                    col(Version.paper_id),
                    col(Version.number),
                    col(Match.reasons),
                )
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.digest_id).in_(ids))
            ).all()
        upvotes = _upvotes_of(session, {row[3] for row in rows})
    rows.sort(key=lambda row: int(row[0]))
    grouped: dict[int, list[RankedMatch]] = {digest_id: [] for digest_id in digest_ids}
    for match_id, digest_id, version_id, paper_id, number, reasons in rows:
        grouped[int(digest_id)].append(
            RankedMatch(
                match_id=int(match_id),
                digest_id=int(digest_id),
                version_id=int(version_id),
                arxiv_id=str(paper_id),
                version=int(number),
                reasons=reasons_from_data(reasons),
                upvotes=upvotes.get(paper_id, 0),
                recommended=recommended_score(reasons),
            )
        )
    return grouped


def match_items(db: Db, ranked: Sequence[RankedMatch]) -> dict[int, DigestItem]:
    """Full items for these matches (the ones digests show), keyed by match id.

    The same items :meth:`digests_items` builds for them, read as plain columns: the versions' texts,
    the follows that still exist, and what each revision changed (core.papers.revisions). Reasons and
    upvotes come from the ranked rows, not read again.
    """
    if not ranked:
        return {}
    by_id = {row.match_id: row for row in ranked}
    versions: list[sa.Row[Any]] = []
    with db.session() as session:
        for ids in _slices(by_id):
            versions += session.execute(
                sa.select(
                    col(Match.id),
                    col(Match.follow_ids),
                    col(Version.title),
                    col(Version.authors),
                    col(Version.categories),
                    col(Version.abstract),
                    col(Version.comment),
                    col(Version.journal_ref),
                    col(Version.doi),
                )
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.id).in_(ids))
            ).all()
        changed = changes_of(session.connection(), [(row.arxiv_id, row.version) for row in ranked])
        queries = _follow_queries(session, {fid for row in versions for fid in row.follow_ids or ()})
    items: dict[int, DigestItem] = {}
    for row in versions:
        match = by_id[int(row.id)]
        follow_ids = row.follow_ids or []
        items[match.match_id] = DigestItem(
            version_id=match.version_id,
            arxiv_id=match.arxiv_id,
            version=match.version,
            title=row.title,
            authors=tuple(row.authors),
            categories=tuple(row.categories),
            reasons=match.reasons,
            abstract=row.abstract,
            comment=row.comment,
            changes=changed[(match.arxiv_id, match.version)],
            upvotes=match.upvotes,
            journal_ref=row.journal_ref,
            doi=row.doi,
            follows=tuple((fid, queries[fid]) for fid in sorted(follow_ids) if fid in queries),
            recommended=match.recommended,
        )
    return items


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
        return _rowcount(result)


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
    attempt (the same test as :func:`_still_held` and :func:`renew_lease`)."""
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


# Ledger rows as digest items: the items of (match, version) rows and the side reads they need, in slices.
def _items_of(session: Session, rows: Sequence[tuple[Match, Version]]) -> list[DigestItem]:
    """DigestItems for (match, version) rows, in the same order."""
    papers = {version.paper_id for _, version in rows}
    upvotes = _upvotes_of(session, papers)
    changed = changes_of(session.connection(), [(v.paper_id, v.number) for _, v in rows])
    queries = _follow_queries(session, {fid for match, _ in rows for fid in match.follow_ids})
    return [
        version_to_item(
            version,
            reasons=reasons_from_data(match.reasons),
            changes=changed[(version.paper_id, version.number)],
            upvotes=upvotes.get(version.paper_id, 0),
            follows=tuple((fid, queries[fid]) for fid in sorted(match.follow_ids) if fid in queries),
            recommended=recommended_score(match.reasons),
        )
        for match, version in rows
    ]


def _slices(keys: Iterable[_Key], size: int = IN_SLICE) -> Iterator[list[_Key]]:
    """``keys`` without repeats, sorted, in lists of at most ``size``: one IN list each."""
    ordered = sorted(set(keys))
    for start in range(0, len(ordered), size):
        yield ordered[start : start + size]


def _follow_queries(session: Session, ids: set[int]) -> dict[int, str]:
    """Follow id -> query, for the follows that still exist."""
    found: dict[int, str] = {}
    for chunk in _slices(ids):
        rows = session.execute(sa.select(col(Follow.id), col(Follow.query)).where(col(Follow.id).in_(chunk)))
        found.update((int(fid), str(query)) for fid, query in rows)
    return found


def _upvotes_of(session: Session, papers: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for chunk in _slices(papers):
        rows = session.execute(
            sa.select(col(CommunityPickRow.paper_id), sa.func.max(col(CommunityPickRow.upvotes)))
            .where(col(CommunityPickRow.paper_id).in_(chunk))
            .group_by(col(CommunityPickRow.paper_id))
        )
        found.update((paper, int(votes or 0)) for paper, votes in rows)
    return found
