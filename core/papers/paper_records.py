"""Papers and their versions: saving a feed's versions, community picks, reading versions back, and the
search index's backlog; ``core.papers.paper_records``.

Talks to the database through the store's ORM session (``db.session()``), one transaction per method;
the bulk writes run Core statements on that session's connection (``core.papers.saving``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Db
from core.models import CommunityPickRow, Paper, Version, utcnow
from core.papers.count_records import add_to_totals, flag_papers
from core.papers.run_records import validator_row
from core.papers.saving import Novelty, SaveResult, news_threshold, save_batch
from core.papers.search_index import INDEX_BATCH, index_stale, stale_count, tidy, write_entries
from core.papers.sort_keys import (
    NEWS_BIT,
    lock_papers,
    mark_news,
    newest_version_id,
    refresh_browse_keys,
)
from core.values import CommunityPick, PaperIn, ResponseValidator

# Ids per IN list: below both databases' caps on bound parameters.
_IN_SLICE = 5_000


# Versions whose rows save_versions builds and writes at a time (within its one transaction).
SAVE_BATCH = 5000

# "Stored as news", spelled as the partial index ix_version_news_first_seen_at's condition (``news = 1``,
# ``news = true``) so that both databases see the index serves it; ``IS 1`` would not match it on SQLite.
IS_NEWS: sa.ColumnElement[bool] = col(Version.news) == sa.true()


# Papers, versions and community picks.
def save_versions(
    db: Db,
    papers: Iterable[PaperIn],
    *,
    now: datetime | None = None,
    validator: ResponseValidator | None = None,
    novelty: Novelty = Novelty.NEWS,
) -> SaveResult:
    """Store every version not seen before, in one transaction; return the ids of the news among them.

    A second sighting of a known version (a cross-list, a re-fetched feed) is counted as a duplicate.
    ``novelty`` says which new versions are news (to be matched and sent): all of them (``NEWS``, a
    daily feed), none (``HISTORY``, a backfill), or those announced after the newest announcement
    already stored as news (``GAP``, filling a gap after downtime; with nothing stored yet there is
    no gap and all is history). ``validator`` (ETag / Last-Modified of the response) is saved in the
    same transaction so that a conditional GET never skips a batch that was not stored. The rows are
    written ``SAVE_BATCH`` versions at a time inside that transaction, so memory holds one batch of
    rows, and any failure still stores nothing.
    """
    now = now or utcnow()
    result = SaveResult()
    with db.session() as session:
        connection = session.connection()
        # Read once, before anything is written: the gap is the one that existed before this call.
        threshold = news_threshold(session) if novelty is Novelty.GAP else None
        # Rows are built and written SAVE_BATCH versions at a time, in this one transaction, and
        # ``papers`` is read once, in order: a large call (a 64 MiB feed: 30,000+ versions, spooled
        # to a file by the RSS source) never holds rows, or versions, for all of them at once. Later
        # batches see the papers earlier ones wrote: the stored state and the counts are those of one
        # batch (a paper's latest version is raised to the highest number either way).
        seen: set[tuple[str, int]] = set()
        batch: list[PaperIn] = []
        for paper in papers:
            key = (paper.arxiv_id, paper.version)
            if key in seen:
                result.duplicates += 1  # a second sighting in this call: the first one counts
                continue
            seen.add(key)
            batch.append(paper)
            if len(batch) == SAVE_BATCH:
                save_batch(connection, batch, now, novelty, threshold, result)
                batch = []
        if batch:
            save_batch(connection, batch, now, novelty, threshold, result)
        if validator is not None:
            session.merge(validator_row(validator, now))
    return result


def save_picks(db: Db, picks: Sequence[CommunityPick], *, now: datetime | None = None) -> tuple[int, int]:
    """Store community picks, attached to their arXiv paper (created as a stub when still unknown).

    A pick seen again on the same day updates its signals (upvotes move during the day). Returns
    (picks stored for the first time, papers PaperTrail had not seen before).
    """
    now = now or utcnow()
    added = stubs = 0
    picked: set[str] = set()
    with db.session() as session:
        lock_papers(session.connection(), {pick.arxiv_id for pick in picks})
        # A stub is news (a community source found it today); it sorts as if updated now.
        stub_key = NEWS_BIT + newest_version_id(session.connection())
        for pick in picks:
            if session.get(Paper, pick.arxiv_id) is None:
                # latest_version 0: known from a community source only, until arXiv metadata arrives.
                session.add(
                    Paper(
                        id=pick.arxiv_id,
                        latest_version=0,
                        first_seen_at=now,
                        news=True,
                        browse_key=stub_key,
                    )
                )
                session.flush()
                stubs += 1
            row = session.exec(
                select(CommunityPickRow).where(
                    CommunityPickRow.paper_id == pick.arxiv_id,
                    CommunityPickRow.source == pick.source,
                    CommunityPickRow.day == pick.day,
                )
            ).first()
            if row is None:
                row = CommunityPickRow(
                    paper_id=pick.arxiv_id,
                    source=pick.source,
                    day=pick.day,
                    first_seen_at=now,
                    title=pick.title,
                    summary=pick.summary,
                )
                added += 1
                picked.add(pick.arxiv_id)
            row.title, row.summary = pick.title, pick.summary
            row.upvotes, row.comments = pick.upvotes, pick.comments
            row.keywords = list(pick.keywords)
            row.ai_summary, row.github_repo, row.project_page = (
                pick.ai_summary,
                pick.github_repo,
                pick.project_page,
            )
            session.add(row)
        session.flush()
        connection = session.connection()
        # A pick makes a paper news: one a backfill stored as history moves up among the news, and
        # SQLite's search index gets its entry under the new key.
        became_news = mark_news(connection, picked)
        refresh_browse_keys(connection, became_news)
        write_entries(connection, {}, became_news)
        # Last, so the totals' row is locked only for the commit (core.papers.count_records).
        add_to_totals(connection, papers=stubs, community_papers=flag_papers(connection, "picked", picked))
    return added, stubs


def picks_of(db: Db, arxiv_id: str) -> list[CommunityPickRow]:
    """Every community pick of one paper, oldest day first."""
    with db.session() as session:
        rows = session.exec(
            select(CommunityPickRow)
            .where(CommunityPickRow.paper_id == arxiv_id)
            .order_by(col(CommunityPickRow.day))
        )
        return list(rows)


def index_search(db: Db, limit: int = INDEX_BATCH) -> int:
    """Write the search index entries of up to ``limit`` papers a backfill left; return how many.

    One transaction per call: call it again until it returns 0 (``core.papers.search_index.index_stale``).
    """
    with db.session() as session:
        return index_stale(session.connection(), limit)


def tidy_search_index(db: Db) -> None:
    """Merge the search index's pending entries (PostgreSQL's GIN pending list); see
    core.papers.search_index."""
    with db.session() as session:
        tidy(session.connection())


def search_backlog(db: Db) -> int:
    """How many papers wait for their search index entry."""
    with db.session() as session:
        return stale_count(session.connection())


def papers_without_versions(db: Db, limit: int = 100) -> list[str]:
    """Ids of papers known only from a community source, waiting for their arXiv metadata."""
    with db.session() as session:
        return list(session.exec(select(Paper.id).where(Paper.latest_version == 0).limit(limit)))


def versions_of(db: Db, arxiv_id: str) -> list[Version]:
    """Every stored version of one paper, oldest first (empty when the paper is unknown)."""
    with db.session() as session:
        rows = session.exec(select(Version).where(Version.paper_id == arxiv_id).order_by(col(Version.number)))
        return list(rows)


def newest_versions(db: Db, arxiv_ids: Sequence[str]) -> dict[str, Version]:
    """The newest stored version of each of these papers (the paper's ``latest_version``), by paper id;
    a paper without one is left out. One statement per 5,000 ids."""
    ids = sorted(set(arxiv_ids))
    found: dict[str, Version] = {}
    with db.session() as session:
        for start in range(0, len(ids), _IN_SLICE):
            found.update(
                (version.paper_id, version)
                for version in session.exec(
                    select(Version)
                    .join(
                        Paper,
                        sa.and_(
                            col(Paper.id) == col(Version.paper_id),
                            col(Version.number) == col(Paper.latest_version),
                        ),
                    )
                    .where(col(Paper.id).in_(ids[start : start + _IN_SLICE]))
                )
            )
    return found


def versions_since(db: Db, since: datetime, *, batch: int = 2000) -> Iterator[Version]:
    """Every version first seen at or after ``since``, newest first, read in batches."""
    last_id: int | None = None
    while True:
        with db.session() as session:
            query = select(Version).where(col(Version.first_seen_at) >= since)
            if last_id is not None:
                query = query.where(col(Version.id) < last_id)
            rows = list(session.exec(query.order_by(col(Version.id).desc()).limit(batch)))
        if not rows:
            return
        yield from rows
        last_id = rows[-1].id
