"""The Atom feeds' SQL: the versions a follow query finds, what a subscriber's sent digests carried, and
the private feed link's nonce.

``core.delivery.feed_records`` (:class:`FeedStore`), handed ``core.papers.browser_records`` for the index
walk; Core only, on a connection of the store (``db.connection()``). What a feed costs is what its
entries cost, never the library's size or a subscriber's whole history:

* **A query's feed** finds its papers the way the paper browser's first page does
  (:func:`core.papers.browser_records.newest_news_ids`: the search index, walked in the order of the
  newest version's arrival, news only), then reads the stored versions of those papers. A paper's entries
  are its news versions, each checked against the query on its own text (the index holds each paper's
  newest version; an older version that no longer matches is left out). Of those, the newest ``limit``
  by arrival: they all belong to the first ``limit`` papers, since each paper ahead of another in that
  order has a version newer than any of the other's.
* **A subscriber's feed** is the newest ``limit`` items of what was sent to them, read by
  :func:`core.ledger.ledger_sent.sent_items` (what counts as sent and its order are that module's), then
  those versions' entry columns.

Both attach what a revision changed (core.papers.revisions, as digests say it) and the version's AI guide
in one language, when there is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import col

from core.db import Db
from core.follows.query import PaperText
from core.follows.search_text import SearchQuery
from core.ledger.ledger_sent import NEWEST_FIRST, sent_items
from core.models import GuideRow, Subscriber, Version, version_to_item
from core.papers import browser_records
from core.papers.browser_query import PaperFilter, Sort
from core.papers.revisions import changes_of
from core.reasons import Reason
from core.values import AnnounceType, FeedEntry, Guide, PaperIn

# The version columns an entry shows.
_ENTRY_COLUMNS: tuple[Any, ...] = (
    col(Version.id).label("version_id"),
    col(Version.paper_id),
    col(Version.number),
    col(Version.title),
    col(Version.abstract),
    col(Version.authors),
    col(Version.categories),
    col(Version.comment),
    col(Version.journal_ref),
    col(Version.doi),
    col(Version.announced_at),
    col(Version.first_seen_at),
    col(Version.news),
)


# The feeds' reads and the feed nonce; a query's papers are found by the browser's index walk.
def query_feed(db: Db, search: SearchQuery, *, limit: int, language: str) -> list[FeedEntry]:
    """The newest ``limit`` news versions that ``search`` matches, newest arrival first, each with what
    it changed and its guide in ``language`` (see the module docstring for how they are found)."""
    papers = browser_records.newest_news_ids(db, PaperFilter(sort=Sort.UPDATED, search=search), limit)
    if not papers or limit <= 0:
        return []
    with db.connection() as connection:
        rows = connection.execute(
            sa.select(*_ENTRY_COLUMNS)
            .where(col(Version.paper_id).in_(papers))
            .order_by(col(Version.id).desc())
        ).all()
        chosen: list[Any] = []
        for row in rows:
            if len(chosen) == limit:
                break
            if row.news and search.query.evaluate(PaperText.of(_paper_in(row))) is not None:
                chosen.append(row)
        changed = changes_of(connection, [(row.paper_id, row.number) for row in chosen])
        guides = _guides(connection, [int(row.version_id) for row in chosen], language)
    return [_entry(row, changed, guides) for row in chosen]


def sent_feed(db: Db, subscriber_id: int, *, limit: int, language: str) -> list[FeedEntry]:
    """What the subscriber was sent (``core.ledger.ledger_sent``), newest first, at most ``limit``
    versions, each with its reasons, what it changed and its guide in ``language``."""
    if limit <= 0:
        return []
    with db.connection() as connection:
        sent = list(sent_items(connection, subscriber_id, order=NEWEST_FIRST, limit=limit))
        if not sent:
            return []
        by_id = {
            int(row.version_id): row
            for row in connection.execute(
                sa.select(*_ENTRY_COLUMNS).where(col(Version.id).in_({item.version_id for item in sent}))
            ).all()
        }
        ordered = [by_id[item.version_id] for item in sent]
        changed = changes_of(connection, [(row.paper_id, row.number) for row in ordered])
        guides = _guides(connection, list(by_id), language)
    return [
        _entry(by_id[item.version_id], changed, guides, reasons=item.reasons, sent_at=item.sent_at)
        for item in sent
    ]


def feed_nonce(db: Db, subscriber_id: int, candidate: str) -> str:
    """The subscriber's feed nonce; ``candidate`` becomes it when there is none yet.

    One guarded UPDATE (``WHERE feed_nonce IS NULL``): two first uses at once agree on one nonce.
    Raises LookupError for a subscriber that does not exist.
    """
    with db.connection() as connection:
        connection.execute(
            sa.update(Subscriber)
            .where(col(Subscriber.id) == subscriber_id, col(Subscriber.feed_nonce).is_(None))
            .values(feed_nonce=candidate)
        )
        nonce = connection.execute(
            sa.select(col(Subscriber.feed_nonce)).where(col(Subscriber.id) == subscriber_id)
        ).scalar_one_or_none()
    if nonce is None:
        raise LookupError(f"subscriber {subscriber_id} does not exist")
    return str(nonce)


def replace_feed_nonce(db: Db, subscriber_id: int, nonce: str) -> None:
    """Store a new feed nonce: every link signed with the old one stops working."""
    with db.connection() as connection:
        connection.execute(
            sa.update(Subscriber).where(col(Subscriber.id) == subscriber_id).values(feed_nonce=nonce)
        )


def _paper_in(row: Any) -> PaperIn:
    """The follow matcher's view of a version row."""
    return PaperIn(
        arxiv_id=row.paper_id,
        version=row.number,
        title=row.title,
        abstract=row.abstract,
        authors=tuple(row.authors or ()),
        categories=tuple(row.categories or ()),
        announce_type=AnnounceType.NEW,
    )


def _guides(
    connection: sa.Connection, version_ids: Sequence[int], language: str
) -> dict[int, tuple[Guide, datetime]]:
    """The guides of these versions in ``language`` with when each was made (at most a feed's worth)."""
    if not version_ids:
        return {}
    rows = connection.execute(
        sa.select(
            col(GuideRow.version_id),
            col(GuideRow.tldr),
            col(GuideRow.contributions),
            col(GuideRow.changes),
            col(GuideRow.created_at),
        ).where(col(GuideRow.version_id).in_(list(version_ids)), col(GuideRow.language) == language)
    ).all()
    return {
        int(vid): (Guide(tldr, tuple(contributions or ()), changed), made)
        for vid, tldr, contributions, changed, made in rows
    }


def _entry(
    row: Any,
    changed: dict[tuple[str, int], tuple[str, ...]],
    guides: dict[int, tuple[Guide, datetime]],
    *,
    reasons: tuple[Reason, ...] = (),
    sent_at: datetime | None = None,
) -> FeedEntry:
    """A version row (with ``_ENTRY_COLUMNS``) as an entry."""
    vid = int(row.version_id)
    guide, made = guides.get(vid, (None, None))
    item = version_to_item(row, changes=changed[(row.paper_id, row.number)], guide=guide, reasons=reasons)
    return FeedEntry(
        item, arrived_at=row.first_seen_at, announced_at=row.announced_at, sent_at=sent_at, guide_made_at=made
    )
