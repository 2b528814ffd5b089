"""All SQL lives here: engine set-up, upserts of papers and versions, the match ledger, digests, runs.

Each public method is one transaction, so a failure never leaves anything stored half-way.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from core.follows.reasons import Reason
from core.follows.search_text import paper_doc
from core.models import (
    CommunityPickRow,
    DeliveryAlarm,
    Digest,
    DigestState,
    Follow,
    HttpValidator,
    Match,
    Paper,
    PaperIn,
    QueryMatch,
    RunState,
    SourceRun,
    Subscriber,
    SubscriberStatus,
    Version,
    utcnow,
)
from core.papers.classify import is_ai_related
from core.store.alarms import AlarmQueries
from core.store.browse import IS_NEWS, BrowseQueries
from core.store.browser import BrowserQueries
from core.store.counts import add_to_totals, flag_papers
from core.store.fanout import FAN_OUT_VERSIONS, ReasonsJson, fan_out, pending_versions, receives_matches
from core.store.feeds import FeedQueries
from core.store.follows import FollowBulkQueries
from core.store.guides import GuideQueries
from core.store.history import HistoryQueries
from core.store.ids import ID_CHUNK, id_conditions
from core.store.ledger import LedgerQueries, recommended_expression
from core.store.newsletters import NewsletterQueries
from core.store.search import INDEX_BATCH, index_stale, mark_stale, stale_count, tidy, write_entries
from core.store.sort_keys import (
    NEWS_BIT,
    lock_papers,
    mark_news,
    newest_version_id,
    published_key,
    refresh_browse_keys,
    set_published_keys,
)
from core.values import AnnounceType, CommunityPick

# Versions whose rows save_versions builds and writes at a time (within its one transaction).
SAVE_BATCH = 5000


class DatabaseFolderMissing(ValueError):
    """The folder of a SQLite database URL does not exist (a mistyped path, most likely)."""


def make_engine(url: str, *, create_folder: bool = True) -> Engine:
    """Create an engine for ``url``; for a SQLite file use WAL with foreign keys.

    A SQLite file's missing folder is created when ``create_folder``, else refused with
    ``DatabaseFolderMissing``: the command line creates only the default ``./data/`` (issue 16: a
    mistyped ``sqlite:////nonexistent/dir/pt.db`` silently made the folders and an empty database).
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1].split("?", 1)[0]
        if path and path != ":memory:":
            folder = Path(path).parent
            if create_folder:
                folder.mkdir(parents=True, exist_ok=True)
            elif not folder.is_dir():
                raise DatabaseFolderMissing(
                    f"the folder {folder} of the SQLite database {path} does not exist; check "
                    f"PAPERTRAIL_DATABASE_URL, or create the folder first (mkdir -p {folder})"
                )
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            # 64 MiB of page cache instead of SQLite's 2 MiB: a day's matches insert into the ledger's
            # indexes in no useful order, and with the default cache most of those inserts miss it
            # (measured: 2.4x less CPU for 531k rows; docs/benchmarks.md).
            cursor.execute("PRAGMA cache_size=-65536")
            cursor.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


class Novelty(StrEnum):
    """Which new versions of a batch are news (see :meth:`Store.save_versions`)."""

    NEWS = "news"
    HISTORY = "history"
    GAP = "gap"


@dataclass(slots=True)
class SaveResult:
    """What one batch of versions did to the store. Counts of new papers and revisions are news only."""

    new_version_ids: list[int] = field(default_factory=list)
    new_papers: int = 0
    revisions: int = 0
    duplicates: int = 0
    history: int = 0


@dataclass(frozen=True, slots=True)
class StoredFollow:
    """An active follow with what the matcher needs to know about it."""

    id: int
    subscriber_id: int
    query: str
    created_at: datetime
    revisions: bool = True
    instant: bool = False
    canonical: str = ""
    """The query's normal form: what its query matches are stored under (``QueryMatch.canonical``)."""


class QueryHit(NamedTuple):
    """One distinct follow query (by its normal form) matched one version, with the query's reasons."""

    version_id: int
    canonical: str
    reasons: Sequence[Reason]


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """The latest facts about one source for the status page."""

    source: str
    last_check: datetime | None
    last_state: str
    last_new_version: datetime | None
    last_error: str | None
    last_note: str | None
    last_success: datetime | None = None
    # The cursor of the newest good run that had one (for arXiv RSS: the mailing's pubDate).
    served_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class StatusSummary:
    """The numbers the status page and ``papertrail status`` show."""

    papers: int
    versions: int
    new_papers_24h: int
    revisions_24h: int
    ai_related_24h: int
    subscribers: int
    follows: int
    pending_matches: int
    community_24h: int
    sources: tuple[SourceHealth, ...]
    # The delivery queue: digests waiting or being sent, and those dead-lettered after too many failures.
    queued_digests: int = 0
    dead_digests: int = 0
    paused_subscribers: int = 0
    # Versions that got their first AI guide in the last 24 hours ("AI guides: +N").
    guides_24h: int = 0
    # Raised delivery alarms (core.delivery.alarm): a platform refusing many recipients the same way.
    alarms: tuple[DeliveryAlarm, ...] = ()
    # Of ``pending_matches`` (which counts them like any match), the learned recommendations (issue 17).
    pending_recommended: int = 0


def version_to_paper(version: Version) -> PaperIn:
    """Turn a stored version back into the value object the matcher reads."""
    return PaperIn(
        arxiv_id=version.paper_id,
        version=version.number,
        title=version.title,
        abstract=version.abstract,
        authors=tuple(version.authors),
        categories=tuple(version.categories),
        announce_type=AnnounceType(version.announce_type),
        announced_at=version.announced_at,
        comment=version.comment,
        journal_ref=version.journal_ref,
        doi=version.doi,
        license=version.license,
        source=version.source,
    )


class Store(
    LedgerQueries,
    NewsletterQueries,
    BrowseQueries,
    FeedQueries,
    BrowserQueries,
    GuideQueries,
    FollowBulkQueries,
    AlarmQueries,
    HistoryQueries,
):
    """The database. Build one per process from an engine and pass it down."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on any exception."""
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    # -- papers and versions -------------------------------------------------------------------------

    def save_versions(
        self,
        papers: Iterable[PaperIn],
        *,
        now: datetime | None = None,
        validator: HttpValidator | None = None,
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
        with self.session() as session:
            connection = session.connection()
            # Read once, before anything is written: the gap is the one that existed before this call.
            threshold = _news_threshold(session) if novelty is Novelty.GAP else None
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
                    _save_batch(connection, batch, now, novelty, threshold, result)
                    batch = []
            if batch:
                _save_batch(connection, batch, now, novelty, threshold, result)
            if validator is not None:
                session.merge(validator)
        return result

    def save_picks(self, picks: Sequence[CommunityPick], *, now: datetime | None = None) -> tuple[int, int]:
        """Store community picks, attached to their arXiv paper (created as a stub when still unknown).

        A pick seen again on the same day updates its signals (upvotes move during the day). Returns
        (picks stored for the first time, papers PaperTrail had not seen before).
        """
        now = now or utcnow()
        added = stubs = 0
        picked: set[str] = set()
        with self.session() as session:
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
            # Last, so the totals' row is locked only for the commit (core.store.counts).
            add_to_totals(
                connection, papers=stubs, community_papers=flag_papers(connection, "picked", picked)
            )
        return added, stubs

    def picks_of(self, arxiv_id: str) -> list[CommunityPickRow]:
        """Every community pick of one paper, oldest day first."""
        with self.session() as session:
            rows = session.exec(
                select(CommunityPickRow)
                .where(CommunityPickRow.paper_id == arxiv_id)
                .order_by(col(CommunityPickRow.day))
            )
            return list(rows)

    def index_search(self, limit: int = INDEX_BATCH) -> int:
        """Write the search index entries of up to ``limit`` papers a backfill left; return how many.

        One transaction per call: call it again until it returns 0 (``core.store.search.index_stale``).
        """
        with self.session() as session:
            return index_stale(session.connection(), limit)

    def tidy_search_index(self) -> None:
        """Merge the search index's pending entries (PostgreSQL's GIN pending list); see core.store.search."""
        with self.session() as session:
            tidy(session.connection())

    def search_backlog(self) -> int:
        """How many papers wait for their search index entry."""
        with self.session() as session:
            return stale_count(session.connection())

    def papers_without_versions(self, limit: int = 100) -> list[str]:
        """Ids of papers known only from a community source, waiting for their arXiv metadata."""
        with self.session() as session:
            return list(session.exec(select(Paper.id).where(Paper.latest_version == 0).limit(limit)))

    def versions_of(self, arxiv_id: str) -> list[Version]:
        """Every stored version of one paper, oldest first (empty when the paper is unknown)."""
        with self.session() as session:
            rows = session.exec(
                select(Version).where(Version.paper_id == arxiv_id).order_by(col(Version.number))
            )
            return list(rows)

    def validator_for(self, url: str) -> HttpValidator | None:
        """The stored ETag / Last-Modified for ``url``, if any."""
        with self.session() as session:
            return session.get(HttpValidator, url)

    def save_validator(self, validator: HttpValidator) -> None:
        """Remember ETag / Last-Modified for a URL (used when a response carried nothing to store)."""
        with self.session() as session:
            session.merge(validator)

    # -- source runs ---------------------------------------------------------------------------------

    def start_run(self, source: str, *, now: datetime | None = None) -> int:
        """Open a source run in state ``running`` and return its id."""
        with self.session() as session:
            run = SourceRun(source=source, started_at=now or utcnow())
            session.add(run)
            session.flush()
            assert run.id is not None
            return run.id

    def finish_run(self, run_id: int, state: RunState, *, now: datetime | None = None, **fields: Any) -> None:
        """Close a source run with its final state and counts (``fetched``, ``new_papers``, ``error`` ...)."""
        with self.session() as session:
            run = session.get(SourceRun, run_id)
            if run is None:
                raise LookupError(f"source run {run_id} does not exist")
            run.state = state
            run.finished_at = now or utcnow()
            for name, value in fields.items():
                setattr(run, name, value)
            session.add(run)

    def last_cursor(self, source: str) -> str | None:
        """The newest cursor a run of ``source`` recorded: where an incremental source resumes."""
        with self.session() as session:
            return session.exec(
                select(SourceRun.cursor)
                .where(SourceRun.source == source, col(SourceRun.cursor).is_not(None))
                .order_by(col(SourceRun.id).desc())
                .limit(1)
            ).first()

    def receipt_runs(
        self,
        since: datetime,
        until: datetime,
        *,
        overlap: timedelta,
        sources: Collection[str] = (),
        page: int = 1000,
    ) -> list[SourceRun]:
        """The runs a scan receipt of the window (since, until] is computed from (core.delivery.receipts), by
        id.

        Every run finished in the window, and for each source that has one (and each of ``sources``) the
        runs that say how it stood when the window opened: its last run finished before, its newest good
        run with a cursor (the mailing it served) and, when that last run failed, the first run of the
        failure streak.

        No index on the runs' times is needed: the window's runs are read by id, newest first, a page at
        a time, until a run started ``overlap`` before the window (ids follow start times); the few runs
        of each source before the window through the (source) index, each a probe from the window's end.
        So the cost is the window's runs, not the table's (a year of runs every 30 minutes is ~20,000).
        """
        found: dict[int, SourceRun] = {}
        with self.session() as session:
            before: int | None = None
            while True:
                query = select(SourceRun).order_by(col(SourceRun.id).desc()).limit(page)
                if before is not None:
                    query = query.where(col(SourceRun.id) < before)
                rows = list(session.exec(query))
                for run in rows:
                    if run.finished_at is not None and since < run.finished_at <= until:
                        found[run.id or 0] = run
                if len(rows) < page or rows[-1].started_at <= since - overlap:
                    break
                before = rows[-1].id
            names = sorted({run.source for run in found.values()} | set(sources))
            for name in names:
                for run in _runs_before(session, name, since):
                    found[run.id or 0] = run
        return [found[key] for key in sorted(found)]

    def latest_runs(self, limit: int = 20) -> list[SourceRun]:
        """The most recent source runs, newest first."""
        with self.session() as session:
            rows = session.exec(select(SourceRun).order_by(col(SourceRun.id).desc()).limit(limit))
            return list(rows)

    # -- subscribers and follows ---------------------------------------------------------------------

    def get_subscriber(self, address: str) -> Subscriber | None:
        """The subscriber with this (normalised) address, if any."""
        with self.session() as session:
            return session.exec(select(Subscriber).where(Subscriber.address == address)).first()

    def ensure_subscriber(self, address: str, *, timezone: str, schedule: str) -> tuple[Subscriber, bool]:
        """The subscriber for ``address``, created when new; the flag says whether it was created."""
        with self.session() as session:
            found = session.exec(select(Subscriber).where(Subscriber.address == address)).first()
            if found is not None:
                return found, False
            subscriber = Subscriber(address=address, timezone=timezone, schedule=schedule)
            session.add(subscriber)
            session.flush()
            return subscriber, True

    def update_subscriber(self, subscriber_id: int, **fields: Any) -> Subscriber:
        """Change fields of a subscriber (schedule, timezone, status ...).

        A change of ``status`` also forgets ``refused_at`` unless it is given: only the delivery ledger's
        own pause (``finish_refused``) marks a subscriber whose matches are held while it is paused.
        """
        if "status" in fields:
            fields.setdefault("refused_at", None)
        with self.session() as session:
            subscriber = session.get(Subscriber, subscriber_id)
            if subscriber is None:
                raise LookupError(f"subscriber {subscriber_id} does not exist")
            for name, value in fields.items():
                setattr(subscriber, name, value)
            session.add(subscriber)
            return subscriber

    def add_follow(
        self, subscriber_id: int, query: str, canonical: str, *, revisions: bool = True, instant: bool = False
    ) -> tuple[Follow, str]:
        """Add a follow, or update the options of the same query: ``added``, ``updated`` or ``unchanged``."""
        with self.session() as session:
            existing = session.exec(
                select(Follow).where(Follow.subscriber_id == subscriber_id, Follow.canonical == canonical)
            ).first()
            if existing is not None:
                if (existing.revisions, existing.instant) == (revisions, instant):
                    return existing, "unchanged"
                existing.revisions, existing.instant = revisions, instant
                session.add(existing)
                return existing, "updated"
            follow = Follow(
                subscriber_id=subscriber_id,
                query=query,
                canonical=canonical,
                revisions=revisions,
                instant=instant,
            )
            session.add(follow)
            session.flush()
            return follow, "added"

    def follows_of(self, subscriber_id: int) -> list[Follow]:
        """A subscriber's follows in the order they were added (the numbering users see)."""
        with self.session() as session:
            rows = session.exec(
                select(Follow).where(Follow.subscriber_id == subscriber_id).order_by(col(Follow.id))
            )
            return list(rows)

    def remove_follow(self, follow_id: int) -> None:
        """Delete one follow. Matches it already produced stay in the ledger."""
        with self.session() as session:
            follow = session.get(Follow, follow_id)
            if follow is not None:
                session.delete(follow)

    def active_follows(self, *, now: datetime | None = None) -> list[StoredFollow]:
        """Every follow that is matched: of active subscribers, and of those a delivery refusal paused
        recently (their matches are held for their resume; ``core.store.fanout.receives_matches``)."""
        now = now or utcnow()
        with self.session() as session:
            rows = session.exec(
                select(Follow)
                .join(Subscriber, col(Subscriber.id) == col(Follow.subscriber_id))
                .where(receives_matches(col(Subscriber.status), col(Subscriber.refused_at), now))
                .order_by(col(Follow.id))
            )
            return [
                StoredFollow(
                    f.id or 0, f.subscriber_id, f.query, f.created_at, f.revisions, f.instant, f.canonical
                )
                for f in rows
            ]

    # -- matching ------------------------------------------------------------------------------------

    def unmatched_versions(self, limit: int = 5000) -> list[Version]:
        """Versions not yet run against the follows, oldest first."""
        with self.session() as session:
            rows = session.exec(
                select(Version)
                .where(col(Version.matched_at).is_(None))
                .order_by(col(Version.id))
                .limit(limit)
            )
            return list(rows)

    def record_query_matches(
        self,
        version_ids: Iterable[int],
        matches: Iterable[QueryHit],
        *,
        now: datetime | None = None,
    ) -> int:
        """Write what matching found, one row per (version, distinct query), and mark the versions matched.

        Both happen in one transaction, so every version is matched exactly once; the rows go to the
        database in one bulk load (executemany on SQLite, COPY on PostgreSQL), as ``save_versions`` writes
        versions. They wait there for :meth:`expand_matches`. Returns the number of rows written.
        """
        now = now or utcnow()
        encode = ReasonsJson()
        rows = [[version_id, canonical, encode(reasons)] for version_id, canonical, reasons in matches]
        with self.session() as session:
            connection = session.connection()
            if rows:
                _bulk_insert(connection, _QUERY_MATCH_TABLE, _QUERY_MATCH_COLUMNS, rows, encoded={"reasons"})
            ids = list(version_ids)
            for start in range(0, len(ids), ID_CHUNK):
                connection.execute(
                    sa.update(_VERSION_TABLE)
                    .where(_VERSION_TABLE.c.id.in_(ids[start : start + ID_CHUNK]))
                    .values(matched_at=now)
                )
        return len(rows)

    def expand_matches(self, *, now: datetime | None = None) -> int:
        """Fan the waiting query matches out to their followers' Match rows; returns the rows written.

        Planning, guides and a subscriber's pending count call this first, so the ledger they read is
        complete; the status page, ``/metrics`` and ``status`` read only, and never pay for it. A slice of
        versions per transaction (``core.store.fanout``). On PostgreSQL one process fans out at a time: a
        transaction-scoped advisory lock (per schema) that a second caller waits for, a slice at most,
        before it fans out what is left; so when this returns, everything matched before the call is in
        the ledger, whoever fanned it out.
        """
        now = now or utcnow()
        total = 0
        while True:
            with self.session() as session:
                connection = session.connection()
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:key, hashtext(current_schema()))"),
                        {"key": _FAN_OUT_LOCK_KEY},
                    )
                versions = pending_versions(connection, FAN_OUT_VERSIONS)
                if not versions:
                    return total
                total += fan_out(connection, versions, now)

    def versions_since(self, since: datetime, *, batch: int = 2000) -> Iterator[Version]:
        """Every version first seen at or after ``since``, newest first, read in batches."""
        last_id: int | None = None
        while True:
            with self.session() as session:
                query = select(Version).where(col(Version.first_seen_at) >= since)
                if last_id is not None:
                    query = query.where(col(Version.id) < last_id)
                rows = list(session.exec(query.order_by(col(Version.id).desc()).limit(batch)))
            if not rows:
                return
            yield from rows
            last_id = rows[-1].id

    # -- status --------------------------------------------------------------------------------------

    def status(self, now: datetime | None = None, sources: Iterable[str] = ()) -> StatusSummary:
        """Counts for the last 24 hours and the health of each source (those named plus any that ran)."""
        now = now or utcnow()
        since = now - timedelta(hours=24)
        with self.session() as session:

            def count(query: Any) -> int:
                return int(session.execute(query).scalar_one())

            # The news of the window, through the partial index of news by arrival; the library's totals
            # are the maintained counters (core.store.counts), as on the status page and /metrics.
            recent = (
                select(sa.func.count())
                .select_from(Version)
                .where(col(Version.first_seen_at) >= since, IS_NEWS)
            )
            totals = self.library_totals()
            summary_counts = {
                "papers": totals.papers,
                "versions": totals.versions,
                "new_papers_24h": count(recent.where(Version.number == 1)),
                "revisions_24h": count(recent.where(Version.number > 1)),
                "ai_related_24h": count(recent.where(col(Version.ai_related).is_(True))),
                "subscribers": count(select(sa.func.count()).select_from(Subscriber)),
                "follows": count(select(sa.func.count()).select_from(Follow)),
                "community_24h": count(
                    select(sa.func.count())
                    .select_from(CommunityPickRow)
                    .where(col(CommunityPickRow.first_seen_at) >= since)
                ),
                "pending_matches": count(
                    select(sa.func.count()).select_from(Match).where(col(Match.digest_id).is_(None))
                ),
                "pending_recommended": count(
                    select(sa.func.count(recommended_expression()))
                    .select_from(Match)
                    .where(col(Match.digest_id).is_(None))
                ),
                "queued_digests": count(
                    select(sa.func.count())
                    .select_from(Digest)
                    .where(col(Digest.state).in_((DigestState.PENDING, DigestState.SENDING)))
                ),
                "dead_digests": count(
                    select(sa.func.count()).select_from(Digest).where(col(Digest.state) == DigestState.DEAD)
                ),
                "paused_subscribers": count(
                    select(sa.func.count())
                    .select_from(Subscriber)
                    .where(col(Subscriber.status) == SubscriberStatus.PAUSED)
                ),
            }
            names = list(dict.fromkeys([*sources, *session.exec(select(SourceRun.source).distinct())]))
            health = tuple(_source_health(session, name) for name in names)
        guides = self.count_guided_versions_since(since)
        alarms = tuple(self.delivery_alarms())
        return StatusSummary(**summary_counts, sources=health, guides_24h=guides, alarms=alarms)


def _source_health(session: Session, source: str) -> SourceHealth:
    last = session.exec(
        select(SourceRun).where(SourceRun.source == source).order_by(col(SourceRun.id).desc()).limit(1)
    ).first()
    productive = session.exec(
        select(SourceRun.finished_at)
        .where(SourceRun.source == source, (col(SourceRun.new_papers) + col(SourceRun.revisions)) > 0)
        .order_by(col(SourceRun.id).desc())
        .limit(1)
    ).first()
    good = select(SourceRun).where(SourceRun.source == source, col(SourceRun.state).in_(_GOOD_STATES))
    success = session.exec(good.order_by(col(SourceRun.id).desc()).limit(1)).first()
    served = session.exec(
        good.where(col(SourceRun.cursor).is_not(None)).order_by(col(SourceRun.id).desc()).limit(1)
    ).first()
    if last is None:
        return SourceHealth(source, None, "never run", None, None, None)
    return SourceHealth(
        source=source,
        last_check=last.finished_at or last.started_at,
        last_state=last.state,
        last_new_version=productive,
        last_error=last.error,
        last_note=last.note,
        last_success=success.finished_at if success else None,
        served_cursor=served.cursor if served else None,
    )


_GOOD_STATES = (RunState.OK, RunState.EMPTY, RunState.NOT_MODIFIED)


def _runs_before(session: Session, source: str, moment: datetime) -> list[SourceRun]:
    """How ``source`` stood at ``moment``: its last run finished by then, its newest good run with a cursor
    by then, and when the last run failed, the first run of that failure streak (see receipt_runs)."""
    mine = select(SourceRun).where(
        SourceRun.source == source,
        col(SourceRun.finished_at).is_not(None),
        col(SourceRun.finished_at) <= moment,
    )
    newest = col(SourceRun.id).desc()
    last = session.exec(mine.order_by(newest).limit(1)).first()
    if last is None:
        return []
    found = [last]
    good = mine.where(col(SourceRun.state).in_(_GOOD_STATES))
    served = session.exec(good.where(col(SourceRun.cursor).is_not(None)).order_by(newest).limit(1)).first()
    if served is not None:
        found.append(served)
    if last.state == RunState.ERROR:
        recovered = session.exec(
            good.where(col(SourceRun.id) < (last.id or 0)).order_by(newest).limit(1)
        ).first()
        streak = mine.where(col(SourceRun.id) <= (last.id or 0))
        if recovered is not None:
            streak = streak.where(col(SourceRun.id) > (recovered.id or 0))
        first = session.exec(streak.order_by(col(SourceRun.id)).limit(1)).first()
        if first is not None:
            found.append(first)
    return found


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
_QUERY_MATCH_TABLE = QueryMatch.metadata.tables["query_match"]
_QUERY_MATCH_COLUMNS = ("version_id", "canonical", "reasons")
# The first half of the fan-out's advisory lock (two 32-bit keys: this and the schema's hash), a space of
# its own beside the single 64-bit keys of core.store.migrate and papertrail.leader.
_FAN_OUT_LOCK_KEY = 0x5054_464F  # "PTFO"
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


def _save_batch(
    connection: sa.Connection,
    batch: list[PaperIn],
    now: datetime,
    novelty: Novelty,
    threshold: datetime | None,
    result: SaveResult,
) -> None:
    """Store the versions of ``batch`` (no id and number twice) not stored yet; count them in ``result``."""
    latest, known_versions = _stored_versions(connection, {paper.arxiv_id for paper in batch})
    new_papers: dict[str, int] = {}
    raised: dict[str, int] = {}
    news: list[PaperIn] = []
    history: list[PaperIn] = []
    for paper in batch:
        arxiv_id, number = paper.arxiv_id, paper.version
        if (arxiv_id, number) in known_versions:
            result.duplicates += 1
            continue
        if arxiv_id not in latest:
            new_papers[arxiv_id] = max(number, new_papers.get(arxiv_id, 0))
        elif number > latest[arxiv_id]:
            raised[arxiv_id] = max(number, raised.get(arxiv_id, 0))
        is_news = novelty is Novelty.NEWS or (
            novelty is Novelty.GAP
            and threshold is not None
            and paper.announced_at is not None
            and paper.announced_at > threshold
        )
        if not is_news:
            history.append(paper)
            result.history += 1
        else:
            news.append(paper)
            if number > 1:
                result.revisions += 1
            else:
                result.new_papers += 1
    history_rows = _version_rows(history, now, news=False)
    news_rows = _version_rows(news, now, news=True)
    # The papers the library totals count (core.store.counts), read before the bulk loads convert the rows
    # in place.
    ai_papers = {row[0] for row in (*history_rows, *news_rows) if row[_AI_RELATED]}
    revised_papers = {row[0] for row in (*history_rows, *news_rows) if row[1] > 1}
    # The browser's keys (core.store.sort_keys): which papers have news, and v1's announcement.
    news_papers = {paper.arxiv_id for paper in news}
    first_announced = {
        paper.arxiv_id: paper.announced_at for paper in (*history, *news) if paper.version == 1
    }
    # Core statements and driver bulk loads, not ORM objects: a backfill writes millions of rows.
    if new_papers:
        _bulk_insert(
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
        _bulk_insert(connection, _VERSION_TABLE, _VERSION_COLUMNS, history_rows)
    if news_rows:
        _bulk_insert(connection, _VERSION_TABLE, _VERSION_COLUMNS, news_rows)
        # Read back rather than RETURNING, which neither executemany nor COPY offers.
        result.new_version_ids.extend(_version_ids(connection, news))
    # Known papers that now have news or their v1; then the keys of every paper whose newest version or
    # news flag changed, and their entries in the search index (after the keys: SQLite's entry is keyed
    # by one).
    became_news = mark_news(connection, news_papers.difference(new_papers))
    set_published_keys(connection, {pid: at for pid, at in first_announced.items() if pid not in new_papers})
    changed = set(new_papers).union(raised, became_news)
    refresh_browse_keys(connection, changed)
    if novelty is Novelty.HISTORY:
        # A backfill leaves its entries to the indexer (core.store.search: "When entries are written");
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
    # Each batch adds what it wrote to the totals, in the caller's one transaction (core.store.counts).
    add_to_totals(
        connection,
        papers=len(new_papers),
        versions=len(history_rows) + len(news_rows),
        ai_papers=sum(pid in ai_papers for pid in new_papers)
        + flag_papers(connection, "ai_related", ai_papers.difference(new_papers)),
        revised_papers=sum(number > 1 for number in new_papers.values())
        + flag_papers(connection, "revised", revised_papers.difference(new_papers)),
        news_new=sum(1 for paper in news if paper.version == 1),
        news_revisions=sum(1 for paper in news if paper.version > 1),
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


def _bulk_insert(
    connection: sa.Connection,
    table: sa.Table,
    columns: Sequence[str],
    rows: list[list[Any]],
    *,
    encoded: Collection[str] = (),
) -> None:
    """INSERT ``rows`` (values of ``columns``) into ``table`` in the connection's transaction, fast.

    SQLAlchemy's own executemany processes every value of every row in Python, and its ORM bulk insert also
    splits the rows into small groups wherever a None moves from one column to another. Here each column's
    bind processor (the same conversion SQLAlchemy applies: JSON text, naive UTC for SQLite, ...) runs once
    per distinct value, and the rows go to the driver in one call: ``executemany`` for SQLite, ``COPY`` for
    PostgreSQL (several times faster than psycopg's per-row executemany). Any other database gets plain
    SQLAlchemy executemany. Values must be hashable; ``rows`` is modified in place. Values of the
    ``encoded`` columns are already in the database's form (JSON text) and pass unconverted.
    """
    dialect = connection.dialect
    if dialect.name not in ("sqlite", "postgresql"):
        decoded = [
            [json.loads(v) if c in encoded else v for c, v in zip(columns, row, strict=True)] for row in rows
        ]
        connection.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in decoded])
        return
    for index, name in enumerate(columns):
        if name in encoded:
            continue
        process = table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        if process is None:
            continue
        # Keyed by the value: repeated dates, categories and the author list shared by the versions of
        # one paper are converted once. (Values that compare equal convert equally: a datetime is stored
        # as its UTC instant.)
        seen: dict[Any, Any] = {}
        for row in rows:
            value = row[index]
            try:
                row[index] = seen[value]
            except KeyError:
                row[index] = seen[value] = process(value)
    quote = dialect.identifier_preparer.quote
    target = f"{dialect.identifier_preparer.format_table(table)} ({', '.join(quote(c) for c in columns)})"
    if dialect.name == "sqlite":
        # The DBAPI cursor directly: SQLAlchemy's exec_driver_sql would want every row copied into a tuple.
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(f"INSERT INTO {target} VALUES ({', '.join('?' for _ in columns)})", rows)
        finally:
            cursor.close()
        return
    # psycopg's own connection: the COPY runs in the transaction SQLAlchemy has open on it.
    driver = connection.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _stored_versions(connection: sa.Connection, ids: set[str]) -> tuple[dict[str, int], set[tuple[str, int]]]:
    """For the papers ``ids``: the latest version number of each stored one, and every stored version.

    On PostgreSQL the papers' rows are locked by the read, in id order, for the caller's transaction
    (``core.store.sort_keys.lock_papers`` says why: writers of the same papers deadlocked without it); the
    read returns them as the writer it waited for committed them, and the versions are read after it.
    """
    paper, version = _PAPER_TABLE.c, _VERSION_TABLE.c
    latest = {
        pid: n
        for pid, n in _rows_of_papers(connection, (paper.id, paper.latest_version), paper.id, ids, lock=True)
    }
    known = {
        (pid, n)
        for pid, n in _rows_of_papers(connection, (version.paper_id, version.number), version.paper_id, ids)
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


def _news_threshold(session: Session) -> datetime | None:
    """The newest announcement already stored as news: later versions found by a gap fill are news."""
    value = session.execute(sa.select(sa.func.max(Version.announced_at)).where(col(Version.news).is_(True)))
    return value.scalar_one_or_none()
