"""The status page's SQL: the dashboard numbers, the paper browser, a source's runs, the metrics counts.

Part of the store (``core.store.Store`` inherits it), read-only except for :meth:`unsubscribe`. Every
number the page shows is counted here with the same conditions as the list it links to, so that the page's
"412 new papers" and the 412 rows behind its link can never disagree:

* the page counts *papers*, not rows of the version table: "revisions in the last 24 hours" is the number
  of papers of which a revision (v2 or later) arrived as news in that window;
* "news" is what the ingest stored as news (``Version.news``): history from a backfill or an old gap is
  never counted as arriving;
* "arrived" is the time PaperTrail first saw the version (``first_seen_at``), not arXiv's announcement.

The browser's filters all pick papers through one version of the paper (or one community pick): a paper is
listed when one of its stored versions meets every version condition at once (arrived in the window, is v1
or a revision, is AI-related, lists the category). Text search looks at every version and pick of a paper.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.chart import DayCounts
from core.models import (
    CommunityPickRow,
    Digest,
    DigestState,
    Match,
    Paper,
    RunState,
    SourceRun,
    Subscriber,
    SubscriberStatus,
    Version,
    utcnow,
)
from core.store_counts import CountQueries

_VERSION = Version.metadata.tables["version"]
# "Stored as news", spelled as the partial index ix_version_news_first_seen_at's condition (``news = 1``,
# ``news = true``) so that both databases see the index serves it; ``IS 1`` would not match it on SQLite.
IS_NEWS: sa.ColumnElement[bool] = col(Version.news) == sa.true()

# Rows per page of the paper browser, and the longest text search and category accepted.
PAGE_SIZE = 50
MAX_SEARCH = 200
MAX_CATEGORY = 64


class Sort(StrEnum):
    """Orders of the paper browser, newest first."""

    UPDATED = "updated"  # when the paper's newest version arrived
    INGESTED = "ingested"  # when PaperTrail first saw the paper
    PUBLISHED = "published"  # when arXiv announced v1 (papers whose v1 is not stored come last)


class Kind(StrEnum):
    """What a paper must have to be listed."""

    ANY = ""
    NEW = "new"  # a v1
    REVISED = "revised"  # a v2 or later
    COMMUNITY = "community"  # a community pick (Hugging Face daily papers)


@dataclass(frozen=True, slots=True)
class PaperFilter:
    """The paper browser's query. ``since`` limits arrivals (news versions, or picks for COMMUNITY)."""

    sort: Sort = Sort.UPDATED
    kind: Kind = Kind.ANY
    since: datetime | None = None
    ai: bool = False
    category: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class PaperRow:
    """One paper in the browser, with its newest stored metadata (or its newest pick's, for a stub)."""

    id: str
    title: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    latest_version: int
    ai_related: bool
    updated_at: datetime
    ingested_at: datetime
    published_at: datetime | None
    upvotes: int = 0
    picked: bool = False
    # The stored id of the newest version (None for a stub known only from a community pick): its AI guide
    # is the one a list shows.
    version_id: int | None = None


@dataclass(frozen=True, slots=True)
class PaperPage:
    """One page of the browser and how many papers the filter matches in all."""

    rows: tuple[PaperRow, ...]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        """The number of pages (at least 1)."""
        return max(1, -(-self.total // self.per_page))


@dataclass(frozen=True, slots=True)
class DashboardCounts:
    """The status page's numbers: the last 24 hours and the whole library, all counted in papers."""

    since: datetime
    new_24h: int
    new_ai_24h: int
    revised_24h: int
    revised_ai_24h: int
    community_24h: int
    papers: int
    ai_papers: int
    revised_papers: int
    community_papers: int


@dataclass(frozen=True, slots=True)
class SourceFacts:
    """What the status page adds to a source's health: its last finished run and its newest paper."""

    source: str
    last_finished: datetime | None = None
    last_finished_state: str | None = None
    newest_paper: datetime | None = None
    # For a community source, which finds picks rather than versions: when it last found a new one.
    last_new_pick: datetime | None = None


@dataclass(frozen=True, slots=True)
class MetricCounts:
    """Everything /metrics reads from the database besides source health."""

    papers: int
    versions_by_kind: dict[str, int]
    matches: int
    digests: dict[tuple[str, str], int] = field(default_factory=dict)
    subscribers: dict[str, int] = field(default_factory=dict)


def filter_conditions(flt: PaperFilter) -> list[sa.ColumnElement[bool]]:
    """WHERE conditions on ``paper`` that select the papers ``flt`` asks for."""
    conditions: list[sa.ColumnElement[bool]] = []
    version_terms: list[sa.ColumnElement[bool]] = []
    if flt.kind is Kind.NEW:
        version_terms.append(col(Version.number) == 1)
    elif flt.kind is Kind.REVISED:
        version_terms.append(col(Version.number) > 1)
    if flt.since is not None and flt.kind is not Kind.COMMUNITY:
        version_terms += [IS_NEWS, col(Version.first_seen_at) >= flt.since]
    if flt.ai:
        version_terms.append(col(Version.ai_related).is_(True))
    if flt.category:
        version_terms.append(_category_condition(flt.category))
    if version_terms:
        conditions.append(col(Paper.id).in_(select(Version.paper_id).where(*version_terms)))
    if flt.kind is Kind.COMMUNITY:
        picks = select(CommunityPickRow.paper_id)
        if flt.since is not None:
            picks = picks.where(col(CommunityPickRow.first_seen_at) >= flt.since)
        conditions.append(col(Paper.id).in_(picks))
    if flt.text:
        conditions.append(_text_condition(flt.text))
    return conditions


def _category_condition(category: str) -> sa.ColumnElement[bool]:
    """Primary or cross-list: the JSON list holds ``"cs.LG"``; an archive (``cs``, ``cs.*``) its members."""
    name = category.removesuffix(".*").removesuffix("*")
    listed = sa.cast(col(Version.categories), sa.Text)
    exact = listed.contains(json.dumps(name), autoescape=True)
    if "." in name:
        return exact
    # An archive such as "cs" or "math" also matches its categories ("cs.LG"); "hep-th" is both.
    return sa.or_(exact, listed.contains(f'"{name}.', autoescape=True))


def _text_condition(text: str) -> sa.ColumnElement[bool]:
    """Case-insensitive substring search in titles, abstracts and authors of any version, and in picks."""
    # Authors are a JSON list, stored with non-ASCII letters escaped (\u00e9): search that spelling too.
    escaped = json.dumps(text)[1:-1]
    authors = sa.cast(col(Version.authors), sa.Text)
    author_terms = [authors.icontains(text, autoescape=True)]
    if escaped != text:
        author_terms.append(authors.icontains(escaped, autoescape=True))
    in_versions = select(Version.paper_id).where(
        sa.or_(
            col(Version.title).icontains(text, autoescape=True),
            col(Version.abstract).icontains(text, autoescape=True),
            *author_terms,
        )
    )
    in_picks = select(CommunityPickRow.paper_id).where(
        sa.or_(
            col(CommunityPickRow.title).icontains(text, autoescape=True),
            col(CommunityPickRow.summary).icontains(text, autoescape=True),
        )
    )
    return sa.or_(col(Paper.id).in_(in_versions), col(Paper.id).in_(in_picks))


def _utc_day(session: Session, column: Any) -> Any:
    """The UTC calendar day of a timestamp column, in the database's own SQL."""
    if session.connection().dialect.name == "postgresql":
        return sa.cast(sa.func.timezone("UTC", column), sa.Date)
    # SQLite stores naive UTC text; date() reads its first ten characters as a day.
    return sa.func.date(column)


def _as_datetime(value: Any) -> datetime | None:
    """An aggregate over a timestamp column comes back untyped: naive text on SQLite, aware on PostgreSQL."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value))


class BrowseQueries(CountQueries):
    """The status page's read queries, over the maintained totals; mixed into :class:`core.store.Store`."""

    def session(self) -> AbstractContextManager[Session]:
        """Provided by the store: one transaction."""
        raise NotImplementedError

    # -- dashboard ---------------------------------------------------------------------------------------

    def dashboard_counts(self, now: datetime | None = None) -> DashboardCounts:
        """The last 24 hours and library totals, each the size of the browser list it links to.

        The library totals are the maintained counters (``core.store_counts``), one row read. The 24-hour
        numbers count the window's news through the partial index of news by arrival, and the window's
        picks through ``community_pick.first_seen_at``: what they read is the day's news, however large
        the library (docs/status-page.md, "How the numbers are counted").
        """
        since = (now or utcnow()) - timedelta(hours=24)
        revision = col(Version.number) > 1
        first = col(Version.number) == 1
        ai = col(Version.ai_related).is_(True)

        def papers_where(*conditions: sa.ColumnElement[bool]) -> Any:
            return sa.func.count(sa.distinct(sa.case((sa.and_(*conditions), col(Version.paper_id)))))

        with self.session() as session:
            recent = session.execute(
                sa.select(
                    papers_where(first),
                    papers_where(first, ai),
                    papers_where(revision),
                    papers_where(revision, ai),
                ).where(IS_NEWS, col(Version.first_seen_at) >= since)
            ).one()
            picked = sa.func.count(sa.distinct(col(CommunityPickRow.paper_id)))
            community_24h = int(
                session.execute(
                    sa.select(picked).where(col(CommunityPickRow.first_seen_at) >= since)
                ).scalar_one()
            )
        totals = self.library_totals()
        return DashboardCounts(
            since=since,
            new_24h=int(recent[0]),
            new_ai_24h=int(recent[1]),
            revised_24h=int(recent[2]),
            revised_ai_24h=int(recent[3]),
            community_24h=community_24h,
            papers=totals.papers,
            ai_papers=totals.ai_papers,
            revised_papers=totals.revised_papers,
            community_papers=totals.community_papers,
        )

    def daily_counts(self, now: datetime | None = None, days: int = 30) -> list[DayCounts]:
        """News per UTC day for the last ``days`` days (today included), oldest first, zeros included."""
        today = (now or utcnow()).astimezone(UTC).date()
        first_day = today - timedelta(days=days - 1)
        start = datetime.combine(first_day, time(0, 0), tzinfo=UTC)
        with self.session() as session:
            day = _utc_day(session, col(Version.first_seen_at)).label("day")

            def total(condition: sa.ColumnElement[bool]) -> Any:
                return sa.func.sum(sa.case((condition, 1), else_=0))

            rows = session.execute(
                sa.select(
                    day,
                    total(col(Version.number) == 1),
                    total(col(Version.number) > 1),
                    total(col(Version.ai_related).is_(True)),
                )
                .where(IS_NEWS, col(Version.first_seen_at) >= start)
                .group_by(day)
            ).all()
        found = {_as_date(row[0]): row for row in rows}
        result = []
        for offset in range(days):
            current = first_day + timedelta(days=offset)
            row = found.get(current)
            if row is None:
                result.append(DayCounts(current))
            else:
                result.append(DayCounts(current, int(row[1] or 0), int(row[2] or 0), int(row[3] or 0)))
        return result

    def source_facts(self, names: Sequence[str]) -> dict[str, SourceFacts]:
        """Per source: its last finished run (time and outcome) and the newest paper it delivered.

        The newest paper is the latest arXiv announcement among the news versions the source stored, or,
        for a community source, the latest day it featured a paper.
        """
        facts: dict[str, SourceFacts] = {}
        with self.session() as session:
            for name in names:
                finished = session.exec(
                    select(SourceRun)
                    .where(
                        SourceRun.source == name,
                        col(SourceRun.finished_at).is_not(None),
                        col(SourceRun.state) != RunState.RUNNING,
                    )
                    .order_by(col(SourceRun.id).desc())
                    .limit(1)
                ).first()
                newest: datetime | None = session.execute(
                    sa.select(col(Version.announced_at))
                    .where(
                        IS_NEWS,
                        col(Version.source) == name,
                        col(Version.announced_at).is_not(None),
                    )
                    .order_by(col(Version.announced_at).desc())
                    .limit(1)
                ).scalar_one_or_none()
                picked, new_pick = session.execute(
                    sa.select(
                        sa.func.max(col(CommunityPickRow.day)),
                        sa.func.max(col(CommunityPickRow.first_seen_at)),
                    ).where(col(CommunityPickRow.source) == name)
                ).one()
                if picked is not None:
                    picked_at = datetime.combine(_as_date(picked), time(0, 0), tzinfo=UTC)
                    newest = max(newest, picked_at) if newest else picked_at
                facts[name] = SourceFacts(
                    source=name,
                    last_finished=finished.finished_at if finished else None,
                    last_finished_state=finished.state if finished else None,
                    newest_paper=newest,
                    last_new_pick=_as_datetime(new_pick),
                )
        return facts

    def source_runs(self, source: str, limit: int = 50) -> list[SourceRun]:
        """The newest runs of one source, newest first."""
        with self.session() as session:
            rows = session.exec(
                select(SourceRun)
                .where(SourceRun.source == source)
                .order_by(col(SourceRun.id).desc())
                .limit(limit)
            )
            return list(rows)

    # -- paper browser -----------------------------------------------------------------------------------

    def browse_papers(self, flt: PaperFilter, *, page: int = 1, per_page: int = PAGE_SIZE) -> PaperPage:
        """One page of the papers ``flt`` selects, in its order, and the total count."""
        conditions = filter_conditions(flt)
        # Core aliases of the version table: the paper's newest version, and its v1 (either may be absent).
        latest_version, first_version = _VERSION.alias("latest"), _VERSION.alias("first")
        latest, first = latest_version.c, first_version.c
        updated = sa.func.coalesce(latest.first_seen_at, col(Paper.first_seen_at))
        order: list[Any]
        if flt.sort is Sort.INGESTED:
            order = [col(Paper.first_seen_at).desc()]
        elif flt.sort is Sort.PUBLISHED:
            order = [first.announced_at.desc().nulls_last()]
        else:
            order = [updated.desc()]
        order.append(col(Paper.id).desc())
        query = (
            sa.select(
                col(Paper.id),
                col(Paper.latest_version),
                col(Paper.first_seen_at),
                updated,
                first.announced_at,
                latest.title,
                latest.authors,
                latest.categories,
                latest.ai_related,
                latest.id,
            )
            .select_from(Paper)
            .outerjoin(
                latest_version,
                sa.and_(latest.paper_id == col(Paper.id), latest.number == col(Paper.latest_version)),
            )
            .outerjoin(first_version, sa.and_(first.paper_id == col(Paper.id), first.number == 1))
            .where(*conditions)
            .order_by(*order)
            .limit(per_page)
            .offset((max(page, 1) - 1) * per_page)
        )
        with self.session() as session:
            total = int(
                session.execute(sa.select(sa.func.count()).select_from(Paper).where(*conditions)).scalar_one()
            )
            rows = session.execute(query).all()
            picks = _pick_summary(session, [row[0] for row in rows])
        papers = []
        for pid, number, ingested, updated_at, published, title, authors, categories, ai, vid in rows:
            upvotes, pick_title = picks.get(pid, (0, None))
            papers.append(
                PaperRow(
                    id=pid,
                    title=title if title is not None else (pick_title or ""),
                    authors=tuple(authors or ()),
                    categories=tuple(categories or ()),
                    latest_version=number,
                    ai_related=bool(ai),
                    updated_at=updated_at,
                    ingested_at=ingested,
                    published_at=published,
                    upvotes=upvotes,
                    picked=pid in picks,
                    version_id=vid,
                )
            )
        return PaperPage(tuple(papers), total, max(page, 1), per_page)

    # -- metrics -----------------------------------------------------------------------------------------

    def metric_counts(self) -> MetricCounts:
        """Counters and gauges for /metrics: the library's from the maintained totals, the rest counted."""
        totals = self.library_totals()
        with self.session() as session:
            digests: dict[tuple[str, str], int] = {}
            for channel, state, count in session.execute(
                sa.select(col(Digest.channel), col(Digest.state), sa.func.count()).group_by(
                    col(Digest.channel), col(Digest.state)
                )
            ):
                # Pending and sending are both "queued": waiting for, or in, a worker's hands.
                label = "queued" if state in (DigestState.PENDING, DigestState.SENDING) else str(state)
                digests[(str(channel), label)] = digests.get((str(channel), label), 0) + int(count)
            subscribers = {
                str(status): int(count)
                for status, count in session.execute(
                    sa.select(col(Subscriber.status), sa.func.count()).group_by(col(Subscriber.status))
                )
            }
            matches = int(session.execute(sa.select(sa.func.count()).select_from(Match)).scalar_one())
        return MetricCounts(
            papers=totals.papers,
            versions_by_kind={"new": totals.news_new, "revision": totals.news_revisions},
            matches=matches,
            digests=digests,
            subscribers=subscribers,
        )

    # -- unsubscribing -----------------------------------------------------------------------------------

    def unsubscribe(self, subscriber_id: int, *, reason: str, now: datetime | None = None) -> int:
        """Stop digests to a subscriber; returns how many planned digests were withdrawn.

        The subscriber keeps its follows (the manage page can re-subscribe) and its matches. Digests
        planned but not yet taken by a worker are withdrawn (``failed``, their matches back to pending),
        so nothing goes out after the click; one a worker is sending right now may still arrive.
        """
        now = now or utcnow()
        with self.session() as session:
            subscriber = session.get(Subscriber, subscriber_id)
            if subscriber is None:
                raise LookupError(f"subscriber {subscriber_id} does not exist")
            subscriber.status = SubscriberStatus.UNSUBSCRIBED
            subscriber.status_reason = reason
            session.add(subscriber)
            planned = list(
                session.execute(
                    sa.select(col(Digest.id)).where(
                        col(Digest.subscriber_id) == subscriber_id, col(Digest.state) == DigestState.PENDING
                    )
                ).scalars()
            )
            if planned:
                session.execute(
                    sa.update(Match).where(col(Match.digest_id).in_(planned)).values(digest_id=None)
                )
                session.execute(
                    sa.update(Digest)
                    .where(col(Digest.id).in_(planned))
                    .values(state=DigestState.FAILED, error=reason, lease_until=None)
                )
        return len(planned)


def _pick_summary(session: Session, papers: Sequence[str]) -> dict[str, tuple[int, str | None]]:
    """For papers with community picks: the most upvotes any pick recorded and the newest pick's title."""
    if not papers:
        return {}
    rows = session.execute(
        sa.select(
            col(CommunityPickRow.paper_id),
            col(CommunityPickRow.upvotes),
            col(CommunityPickRow.title),
        )
        .where(col(CommunityPickRow.paper_id).in_(list(papers)))
        .order_by(col(CommunityPickRow.paper_id), col(CommunityPickRow.day))
    ).all()
    summary: dict[str, tuple[int, str | None]] = {}
    for pid, upvotes, title in rows:
        best, _ = summary.get(pid, (0, None))
        summary[pid] = (max(best, int(upvotes or 0)), title)
    return summary
