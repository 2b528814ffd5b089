"""The paper browser's sort keys, stored on each paper and kept by every write that changes them.

The browser lists papers in three orders (docs/status-page.md, "The paper browser"). Computing an order
from the versions on each request sorts the whole library (seconds at a million papers); instead each
paper carries its keys, an index serves each order, and a page is a short walk of that index from a
cursor. The keys (columns of ``paper``, migration 0018):

* ``news``: the paper arrived as news, not as history. A version of it was stored as news, or a community
  source picked it. History (a backfill, an old gap) never sets it. Only ever turns true.
* ``browse_key``: the default order, *news before history, newest update first*. It is the id of the
  paper's newest stored version (version ids grow with arrival, so a larger id is a later update) plus
  :data:`NEWS_BIT` when the paper is news: one integer, one index, and a backfill of millions of old
  papers can never push the day's news off the first page. A paper known only from a community pick (a
  stub, no version yet) takes the largest version id stored when it was first seen. SQLite's search index
  uses this key as the row id of the paper's entry (core.papers.search_index), so search results come out of
  that index already in this order.
* ``published_key``: v1's announcement in Unix seconds; 0 when v1, or its date, is not stored.

Writers call :func:`mark_news` and :func:`refresh_browse_keys` for the papers they touched, after their
versions are inserted, in their own transaction.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

import sqlalchemy as sa

from core.db_ids import id_conditions

# Version ids stay far below 2**40 (a trillion); the bit above them puts news first.
NEWS_BIT = 1 << 40

# Plain table objects (not the models): only the columns these statements use.
_PAPER = sa.table(
    "paper",
    sa.column("id", sa.String),
    sa.column("latest_version", sa.Integer),
    sa.column("news", sa.Boolean),
    sa.column("browse_key", sa.BigInteger),
    sa.column("published_key", sa.BigInteger),
)
_VERSION = sa.table(
    "version",
    sa.column("id", sa.BigInteger),
    sa.column("paper_id", sa.String),
    sa.column("number", sa.Integer),
    sa.column("news", sa.Boolean),
    sa.column("announced_at", sa.DateTime),
)


def published_key(announced_at: datetime | None) -> int:
    """The published order's key of a v1 announced at ``announced_at`` (0 when unknown)."""
    if announced_at is None:
        return 0
    aware = announced_at if announced_at.tzinfo else announced_at.replace(tzinfo=UTC)
    return int(aware.timestamp())


def lock_papers(connection: sa.Connection, ids: Collection[str]) -> None:
    """On PostgreSQL, lock the stored rows of the papers ``ids`` for this transaction, in id order.

    A write of papers runs several UPDATEs over different subsets of its papers (the latest version, the
    flags, the news flag, the keys, the search entries). Two writers of the same papers that took those
    row locks statement by statement could each hold a row the other wants next: a deadlock (seen with
    eight writers of the same 60 papers). Taking them all first, in one order, makes the second writer
    wait for the first to commit before it touches any of them. ``paper_records.save_versions`` takes them
    with the read of the papers' latest versions; ``save_picks`` calls this. SQLite has one writer at a time
    and needs nothing.
    """
    if connection.dialect.name != "postgresql":
        return
    for condition in id_conditions(connection, _PAPER.c.id, ids):
        connection.execute(sa.select(_PAPER.c.id).where(condition).order_by(_PAPER.c.id).with_for_update())


def mark_news(connection: sa.Connection, ids: Collection[str]) -> set[str]:
    """Set ``news`` on the papers ``ids`` that do not have it yet; return those that changed."""
    changed: set[str] = set()
    for condition in id_conditions(connection, _PAPER.c.id, ids):
        rows = connection.execute(
            _PAPER.update()
            .where(condition, _PAPER.c.news.is_not(sa.true()))
            .values(news=True)
            .returning(_PAPER.c.id)
        )
        changed.update(row[0] for row in rows)
    return changed


def refresh_browse_keys(connection: sa.Connection, ids: Collection[str]) -> None:
    """Recompute ``browse_key`` of the papers ``ids`` from their newest stored version and news flag."""
    newest = (
        sa.select(sa.func.max(_VERSION.c.id))
        .where(_VERSION.c.paper_id == _PAPER.c.id, _VERSION.c.number == _PAPER.c.latest_version)
        .scalar_subquery()
    )
    # A stub has no version: it keeps the base it was given when it was first seen.
    base = sa.func.coalesce(newest, _PAPER.c.browse_key % NEWS_BIT)
    key = base + sa.case((_PAPER.c.news.is_(sa.true()), NEWS_BIT), else_=0)
    for condition in id_conditions(connection, _PAPER.c.id, ids):
        connection.execute(_PAPER.update().where(condition).values(browse_key=key))


def set_published_keys(connection: sa.Connection, announced: dict[str, datetime | None]) -> None:
    """Store ``published_key`` for papers whose v1 was just stored (paper id -> v1's announcement)."""
    if not announced:
        return
    connection.execute(
        _PAPER.update().where(_PAPER.c.id == sa.bindparam("pid")).values(published_key=sa.bindparam("key")),
        [{"pid": pid, "key": published_key(at)} for pid, at in announced.items()],
    )


def newest_version_id(connection: sa.Connection) -> int:
    """The largest version id stored (0 for none): the base of a stub's ``browse_key``."""
    return int(connection.execute(sa.select(sa.func.max(_VERSION.c.id))).scalar_one() or 0)


def rebuild_sort_keys(connection: sa.Connection) -> None:
    """Compute every paper's keys from its stored rows (a repair tool; migration 0018 holds a frozen copy)."""
    news_papers = sa.select(_VERSION.c.paper_id).where(_VERSION.c.news.is_(sa.true()))
    picked: sa.Select[str] = sa.select(sa.column("paper_id", sa.String)).select_from(
        sa.table("community_pick")
    )
    # One UPDATE per source with the semi-join in WHERE (see migration 0017 on PostgreSQL's subplans).
    connection.execute(_PAPER.update().where(_PAPER.c.id.in_(news_papers)).values(news=True))
    connection.execute(_PAPER.update().where(_PAPER.c.id.in_(picked)).values(news=True))
    stub_base = newest_version_id(connection)
    newest = (
        sa.select(sa.func.max(_VERSION.c.id))
        .where(_VERSION.c.paper_id == _PAPER.c.id, _VERSION.c.number == _PAPER.c.latest_version)
        .scalar_subquery()
    )
    connection.execute(
        _PAPER.update().values(
            browse_key=sa.func.coalesce(newest, stub_base)
            + sa.case((_PAPER.c.news.is_(sa.true()), NEWS_BIT), else_=0)
        )
    )
    first = sa.select(_VERSION.c.paper_id, _VERSION.c.announced_at).where(
        _VERSION.c.number == 1, _VERSION.c.announced_at.is_not(None)
    )
    batch: list[dict[str, object]] = []
    for pid, at in connection.execute(first):
        parsed = at if isinstance(at, datetime) else datetime.fromisoformat(str(at))
        batch.append({"pid": pid, "key": published_key(parsed)})
        if len(batch) == 5000:
            _store_published(connection, batch)
            batch = []
    _store_published(connection, batch)


def _store_published(connection: sa.Connection, batch: list[dict[str, object]]) -> None:
    if batch:
        connection.execute(
            _PAPER.update()
            .where(_PAPER.c.id == sa.bindparam("pid"))
            .values(published_key=sa.bindparam("key")),
            batch,
        )
