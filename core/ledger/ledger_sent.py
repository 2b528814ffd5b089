"""What was sent to a subscriber: the one reader of the ledger's delivered matches.

The ``.bib`` history of the manage page, the private Atom feed and the subscription export all read what a
subscriber's digests carried through :func:`sent_items`, each in its own order and window.

**What counts as sent.** A match of the subscriber whose digest is the subscriber's and in state ``sent``:
every match that digest held, the ones past its display cap ("…and N more") too. A digest split into
parts counts once all its parts went out (then it is ``sent``); one still retrying after some parts, one
dead-lettered or refused, and a match in no digest yet do not count, since the ledger does not record which
matches a part carried. A newsletter's items count for a member as the member's own matches, once the
member's digest carrying them is sent (the issue's own digest belongs to the newsletter's subscriber).
Recommendations and history imported from another server are matches like any other. Heartbeats hold no
match and add nothing.

**Order.** By when the digest was sent, then by digest, then by match (the order a digest's matches were
written): :data:`OLDEST_FIRST`, or exactly the reverse, :data:`NEWEST_FIRST`. A digest retried and sent
after a later one sits where it was sent, not where it was planned.

**Cost.** The subscriber's sent digests are walked a page at a time (the index on ``digest.subscriber_id``,
a keyset on the sending time), and each page's matches read through the index on ``match.digest_id``: a
read costs the digests it reaches, never the library's size or the subscriber's whole history when it stops
early (``limit``, ``since``, or a caller that stops iterating).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlmodel import col

from core.models import Digest, DigestState, Match, Version
from core.reasons import Reason, reasons_from_data

if TYPE_CHECKING:
    from core.db import Database

# Sent digests read per statement (their matches in one more); a page of a big ledger stays small.
SENT_PAGE = 200


class SentOrder(StrEnum):
    """The two orders of what was sent."""

    NEWEST_FIRST = "newest_first"
    OLDEST_FIRST = "oldest_first"


NEWEST_FIRST = SentOrder.NEWEST_FIRST
OLDEST_FIRST = SentOrder.OLDEST_FIRST


@dataclass(frozen=True, slots=True)
class SentMatch:
    """One match a sent digest carried: the ledger's record of a sending, not a view of the paper.

    It names the match, its reasons, the digest that carried it with when it was sent, and the version
    (its id and key); the title as stored comes along only for the subscription export, which writes it
    next to the key. A caller that shows the version reads it by ``version_id`` (the private Atom feed).
    """

    match_id: int
    digest_id: int
    sent_at: datetime
    version_id: int
    arxiv_id: str
    version: int
    title: str
    reasons: tuple[Reason, ...]


def sent_items(
    source: Database | sa.Connection,
    subscriber_id: int,
    *,
    order: SentOrder = NEWEST_FIRST,
    since: datetime | None = None,
    limit: int | None = None,
    page: int = SENT_PAGE,
) -> Iterator[SentMatch]:
    """What the subscriber's sent digests carried (see the module docstring for what counts and the order),
    lazily, at most ``limit`` items, only digests sent at or after ``since``.

    ``source`` is a connection (every page read in the caller's transaction: one consistent read) or the
    store (each page in its own short transaction, so a long download never holds one open while its client
    reads).
    """
    if limit is not None and limit <= 0:
        return
    count = 0
    after: tuple[datetime, int] | None = None
    # With a limit, the first pages need not be longer than it: every digest but a heartbeat holds a match.
    size = max(1, min(page, limit) if limit is not None else page)
    while True:
        if isinstance(source, sa.Connection):
            digests, items = _page(source, subscriber_id, order, since, after, size)
        else:
            with source.connection() as connection:
                digests, items = _page(connection, subscriber_id, order, since, after, size)
        for item in items:
            yield item
            count += 1
            if limit is not None and count >= limit:
                return
        if len(digests) < size:
            return
        after = digests[-1]


def _page(
    connection: sa.Connection,
    subscriber_id: int,
    order: SentOrder,
    since: datetime | None,
    after: tuple[datetime, int] | None,
    size: int,
) -> tuple[list[tuple[datetime, int]], list[SentMatch]]:
    """One page: the next ``size`` sent digests after ``after`` in ``order`` as (sent time, id), and their
    matches in that order."""
    # Every sent digest has sent_at (finish_sent, an issue, an import); created_at only guards the order.
    when = sa.func.coalesce(col(Digest.sent_at), col(Digest.created_at))
    newest = order is SentOrder.NEWEST_FIRST
    query = sa.select(when, col(Digest.id)).where(
        col(Digest.subscriber_id) == subscriber_id, col(Digest.state) == DigestState.SENT
    )
    if since is not None:
        query = query.where(when >= since)
    if after is not None:
        at, digest_id = after
        if newest:
            query = query.where(sa.or_(when < at, sa.and_(when == at, col(Digest.id) < digest_id)))
        else:
            query = query.where(sa.or_(when > at, sa.and_(when == at, col(Digest.id) > digest_id)))
    keys = (when.desc(), col(Digest.id).desc()) if newest else (when.asc(), col(Digest.id).asc())
    digests: list[tuple[datetime, int]] = [
        (row[0], cast(int, row[1])) for row in connection.execute(query.order_by(*keys).limit(size))
    ]
    if not digests:
        return digests, []
    rows = connection.execute(
        sa.select(
            col(Match.id),
            col(Match.digest_id),
            col(Match.reasons),
            col(Version.id).label("version_id"),
            col(Version.paper_id),
            col(Version.number),
            col(Version.title),
        )
        .join(Version, col(Version.id) == col(Match.version_id))
        .where(
            col(Match.digest_id).in_([page_id for _, page_id in digests]),
            col(Match.subscriber_id) == subscriber_id,
        )
    ).all()
    position = {page_id: (sent_at, n) for n, (sent_at, page_id) in enumerate(digests)}
    # Digests in the page's order, matches by id within each (reversed for newest first).
    ordered = sorted(rows, key=lambda row: (position[row.digest_id][1], -row.id if newest else row.id))
    return digests, [_item(row, position[row.digest_id][0]) for row in ordered]


def _item(row: Any, sent_at: datetime) -> SentMatch:
    return SentMatch(
        match_id=int(row.id),
        digest_id=int(row.digest_id),
        sent_at=sent_at,
        version_id=int(row.version_id),
        arxiv_id=str(row.paper_id),
        version=int(row.number),
        title=str(row.title),
        reasons=reasons_from_data(row.reasons),
    )
