"""Papers and their versions: saving a feed's versions (and deciding which are news), community picks,
reading versions back, and the search index's backlog.

One transaction per call with a ``Database``; with a ``Transaction`` the caller's. The bulk write of a
batch (:func:`save_batch`) runs Core statements on the session's connection, no ORM objects: a day's feed is
tens of thousands of rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from operator import attrgetter
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.db import Db
from core.db_bulk import bulk_insert
from core.db_ids import id_conditions
from core.follows.search_text import paper_doc
from core.models import CommunityPickRow, Paper, Version, utcnow
from core.papers.classify import is_ai_related
from core.papers.count_records import add_to_totals, flag_papers
from core.papers.run_records import validator_row
from core.papers.search_index import INDEX_BATCH, index_stale, mark_stale, stale_count, tidy, write_entries
from core.papers.sort_keys import (
    NEWS_BIT,
    lock_papers,
    mark_news,
    newest_version_id,
    published_key,
    refresh_browse_keys,
    set_published_keys,
)
from core.values import AnnounceType, CommunityPick, PaperIn, ResponseValidator


class Novelty(StrEnum):
    """Which new versions of a batch are news (see ``paper_records.save_versions``)."""

    NEWS = "news"
    HISTORY = "history"
    GAP = "gap"


@dataclass(slots=True)
class SaveResult:
    """What one batch of versions did to the store. Counts of new papers and revisions are news only.

    ``announced`` counts the versions stored as history before that this batch's announcement made news
    (they are among ``new_version_ids``, ``new_papers`` and ``revisions`` too).
    """

    new_version_ids: list[int] = field(default_factory=list)
    new_papers: int = 0
    revisions: int = 0
    duplicates: int = 0
    history: int = 0
    announced: int = 0


_PAPER_TABLE = Paper.metadata.tables["paper"]
_NEW_PAPER_COLUMNS = (
    "id",
    "latest_version",
    "first_seen_at",
    "ai_related",
    "revised",
    "picked",
    "news",
    "published_key",
    "search_stale",
)
_VERSION_TABLE = Version.metadata.tables["version"]
# Every version column but the generated id, in the order _version_rows fills them.
_VERSION_COLUMNS = (
    "paper_id",
    "number",
    "title",
    "abstract",
    "authors",
    "categories",
    "comment",
    "journal_ref",
    "doi",
    "license",
    "announce_type",
    "source",
    "announced_at",
    "ai_related",
    "first_seen_at",
    "news",
    "matched_at",
)
# The PaperIn fields behind the first columns, read in one C call per paper.
_PAPER_FIELDS = attrgetter(
    "arxiv_id",
    "version",
    "title",
    "abstract",
    "authors",
    "categories",
    "comment",
    "journal_ref",
    "doi",
    "license",
    "announce_type",
    "source",
    "announced_at",
)
_ANNOUNCE_TYPE = _VERSION_COLUMNS.index("announce_type")
_AI_RELATED = _VERSION_COLUMNS.index("ai_related")
# Enum.value is a property, slow enough to show in a profile when read for millions of rows.
_ANNOUNCE_TYPES = {member: member.value for member in AnnounceType}


def save_batch(
    connection: sa.Connection,
    batch: list[PaperIn],
    now: datetime,
    novelty: Novelty,
    threshold: datetime | None,
    result: SaveResult,
) -> None:
    """Store the versions of ``batch`` (no id and number twice) not stored yet; count them in ``result``.

    This is the one place that decides whether a version is news: a version is news when an announcement
    brings it (``novelty``), whoever stored it first. A version a look-up, a library import or a backfill
    stored as history becomes news once, when an announcement brings it (``_announce_history``).
    """
    latest, known_versions = _stored_versions(connection, {paper.arxiv_id for paper in batch})
    new_papers: dict[str, int] = {}
    raised: dict[str, int] = {}
    news: list[PaperIn] = []
    history: list[PaperIn] = []
    announced: list[PaperIn] = []
    for paper in batch:
        arxiv_id, number = paper.arxiv_id, paper.version
        is_news = novelty is Novelty.NEWS or (
            novelty is Novelty.GAP
            and threshold is not None
            and paper.announced_at is not None
            and paper.announced_at > threshold
        )
        stored_as_news = known_versions.get((arxiv_id, number))
        if stored_as_news is None:
            if arxiv_id not in latest:
                new_papers[arxiv_id] = max(number, new_papers.get(arxiv_id, 0))
            elif number > latest[arxiv_id]:
                raised[arxiv_id] = max(number, raised.get(arxiv_id, 0))
        elif stored_as_news or not is_news:
            result.duplicates += 1
            continue
        if not is_news:
            history.append(paper)
            result.history += 1
            continue
        # News: a version never stored, or one stored as history that this announcement brings.
        (news if stored_as_news is None else announced).append(paper)
        if number > 1:
            result.revisions += 1
        else:
            result.new_papers += 1
    history_rows = _version_rows(history, now, news=False)
    news_rows = _version_rows(news, now, news=True)
    # The papers the library totals count (core.papers.count_records), read before the bulk loads convert the
    # rows in place.
    ai_papers = {row[0] for row in (*history_rows, *news_rows) if row[_AI_RELATED]}
    revised_papers = {row[0] for row in (*history_rows, *news_rows) if row[1] > 1}
    # The browser's keys (core.papers.sort_keys): which papers have news, and v1's announcement.
    news_papers = {paper.arxiv_id for paper in (*news, *announced)}
    first_announced = {
        paper.arxiv_id: paper.announced_at for paper in (*history, *news, *announced) if paper.version == 1
    }
    # Core statements and driver bulk loads, not ORM objects: a backfill writes millions of rows.
    if new_papers:
        bulk_insert(
            connection,
            _PAPER_TABLE,
            _NEW_PAPER_COLUMNS,
            [
                [
                    pid,
                    number,
                    now,
                    pid in ai_papers,
                    number > 1,
                    False,
                    pid in news_papers,
                    published_key(first_announced.get(pid)),
                    novelty is Novelty.HISTORY,
                ]
                for pid, number in new_papers.items()
            ],
        )
    if raised:
        connection.execute(
            _PAPER_TABLE.update()
            .where(_PAPER_TABLE.c.id == sa.bindparam("raised_id"))
            .values(latest_version=sa.bindparam("raised_to")),
            [{"raised_id": pid, "raised_to": number} for pid, number in raised.items()],
        )
    if history_rows:
        bulk_insert(connection, _VERSION_TABLE, _VERSION_COLUMNS, history_rows)
    if news_rows:
        bulk_insert(connection, _VERSION_TABLE, _VERSION_COLUMNS, news_rows)
    if announced:
        _announce_history(connection, announced, now)
        result.announced += len(announced)
    if news or announced:
        # Read back rather than RETURNING, which neither executemany nor COPY offers.
        result.new_version_ids.extend(_version_ids(connection, [*news, *announced]))
    # Known papers that now have news or their v1; then the keys of every paper whose newest version or
    # news flag changed, and their entries in the search index (after the keys: SQLite's entry is keyed
    # by one).
    became_news = mark_news(connection, news_papers.difference(new_papers))
    set_published_keys(connection, {pid: at for pid, at in first_announced.items() if pid not in new_papers})
    changed = set(new_papers).union(raised, became_news)
    refresh_browse_keys(connection, changed)
    if novelty is Novelty.HISTORY:
        # A backfill leaves its entries to the indexer (core.papers.search_index: "When entries are written");
        # its new papers were inserted marked.
        mark_stale(connection, changed.difference(new_papers))
    else:
        newest = {paper.arxiv_id: paper for paper in batch if paper.version == new_papers.get(paper.arxiv_id)}
        newest.update(
            (paper.arxiv_id, paper) for paper in batch if paper.version == raised.get(paper.arxiv_id)
        )
        write_entries(
            connection,
            {pid: paper_doc(paper) for pid, paper in newest.items()},
            became_news.difference(newest),
        )
    # Each batch adds what it wrote to the totals, in the caller's one transaction
    # (core.papers.count_records).
    add_to_totals(
        connection,
        papers=len(new_papers),
        versions=len(history_rows) + len(news_rows),
        ai_papers=sum(pid in ai_papers for pid in new_papers)
        + flag_papers(connection, "ai_related", ai_papers.difference(new_papers)),
        revised_papers=sum(number > 1 for number in new_papers.values())
        + flag_papers(connection, "revised", revised_papers.difference(new_papers)),
        news_new=sum(1 for paper in (*news, *announced) if paper.version == 1),
        news_revisions=sum(1 for paper in (*news, *announced) if paper.version > 1),
    )


def _announce_history(connection: sa.Connection, announced: Sequence[PaperIn], now: datetime) -> None:
    """Make the stored history versions ``announced`` news, once, as of ``now``.

    The announcement decides whether and when a version is news, not its text: the stored row keeps the
    text, categories and flags the earlier source gave it (the same arXiv version), and takes the
    announcement's type, source and date. It becomes unmatched, and first seen now: the matcher picks it up
    like a version this announcement inserted, and a follow made between the first sighting and the
    announcement sees it (``core.follows.fanout`` compares a follow's creation with ``first_seen_at``).
    ``news IS NOT TRUE`` keeps a concurrent writer's promotion from being made twice.
    """
    version = _VERSION_TABLE.c
    connection.execute(
        _VERSION_TABLE.update()
        .where(
            version.paper_id == sa.bindparam("key_paper"),
            version.number == sa.bindparam("key_number"),
            version.news.is_not(sa.true()),
        )
        .values(
            news=True,
            matched_at=None,
            first_seen_at=now,
            announce_type=sa.bindparam("new_type"),
            source=sa.bindparam("new_source"),
            announced_at=sa.bindparam("new_announced_at", type_=version.announced_at.type),
        ),
        [
            {
                "key_paper": paper.arxiv_id,
                "key_number": paper.version,
                "new_type": _ANNOUNCE_TYPES[paper.announce_type],
                "new_source": paper.source,
                "new_announced_at": paper.announced_at,
            }
            for paper in announced
        ],
    )


def _version_rows(papers: Sequence[PaperIn], now: datetime, *, news: bool) -> list[list[Any]]:
    """One row of ``_VERSION_COLUMNS`` values per paper (Python values, before any type processing).

    Authors and categories stay tuples: the JSON columns serialise them exactly as the lists they hold.
    """
    # History is never matched: mark it done so the matcher never picks it up.
    matched_at = None if news else now
    # Keyed by the whole text: the versions of one snapshot record share their title and abstract, so the
    # cue scan of core.papers.classify runs once per record, not once per version.
    ai_related: dict[tuple[tuple[str, ...], str, str], bool] = {}
    rows = []
    for paper in papers:
        row = [*_PAPER_FIELDS(paper), None, now, news, matched_at]
        row[_ANNOUNCE_TYPE] = _ANNOUNCE_TYPES[paper.announce_type]
        key = (paper.categories, paper.title, paper.abstract)
        ai = ai_related.get(key)
        if ai is None:
            ai = ai_related[key] = is_ai_related(*key)
        row[_AI_RELATED] = ai
        rows.append(row)
    return rows


def _stored_versions(
    connection: sa.Connection, ids: set[str]
) -> tuple[dict[str, int], dict[tuple[str, int], bool]]:
    """For the papers ``ids``: the latest version number of each stored one, and every stored version
    with whether it is stored as news.

    On PostgreSQL the papers' rows are locked by the read, in id order, for the caller's transaction
    (``core.papers.sort_keys.lock_papers`` says why: writers of the same papers deadlocked without it); the
    read returns them as the writer it waited for committed them, and the versions are read after it.
    """
    paper, version = _PAPER_TABLE.c, _VERSION_TABLE.c
    latest = {
        pid: n
        for pid, n in _rows_of_papers(connection, (paper.id, paper.latest_version), paper.id, ids, lock=True)
    }
    known = {
        (pid, n): bool(news)
        for pid, n, news in _rows_of_papers(
            connection, (version.paper_id, version.number, version.news), version.paper_id, ids
        )
    }
    return latest, known


def _version_ids(connection: sa.Connection, papers: Sequence[PaperIn]) -> list[int]:
    """The ids of the stored versions ``papers``, in their order (a paper id and number are unique)."""
    version = _VERSION_TABLE.c
    stored = {
        (pid, n): vid
        for vid, pid, n in _rows_of_papers(
            connection,
            (version.id, version.paper_id, version.number),
            version.paper_id,
            {p.arxiv_id for p in papers},
        )
    }
    return [stored[(paper.arxiv_id, paper.version)] for paper in papers]


def _rows_of_papers(
    connection: sa.Connection,
    columns: Sequence[sa.ColumnElement[Any]],
    paper_column: sa.Column[Any],
    ids: set[str],
    *,
    lock: bool = False,
) -> Iterator[Sequence[Any]]:
    """``columns`` of every row whose ``paper_column`` is one of ``ids``; with ``lock``, on PostgreSQL,
    the rows are locked in the order of ``paper_column`` for the transaction."""
    for condition in id_conditions(connection, paper_column, ids):
        query = sa.select(*columns).where(condition)
        if lock and connection.dialect.name == "postgresql":
            query = query.order_by(paper_column).with_for_update()
        yield from connection.execute(query)


def news_threshold(session: Session) -> datetime | None:
    """The newest announcement already stored as news: later versions found by a gap fill are news."""
    value = session.execute(sa.select(sa.func.max(Version.announced_at)).where(col(Version.news).is_(True)))
    return value.scalar_one_or_none()


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
