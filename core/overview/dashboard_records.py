"""The status page's SQL: the dashboard numbers, a source's runs, the metrics counts, ``papertrail status``'s
summary; ``core.overview.dashboard_records``.

Read-only (unsubscribing, which once lived here, is ``subscriber_records.unsubscribe``). Talks
to the database through the store's session (``db.session()``) with Core ``select`` counts. Every
number the page shows is counted here with the same conditions as the list it links to, so that the page's
"412 new papers" and the 412 rows behind its link can never disagree:

* the page counts *papers*, not rows of the version table: "revisions in the last 24 hours" is the number
  of papers of which a revision (v2 or later) arrived as news in that window;
* "news" is what the ingest stored as news (``Version.news``): history from a backfill or an old gap is
  never counted as arriving;
* "arrived" is the time PaperTrail first saw the version (``first_seen_at``), not arXiv's announcement.

The paper browser's own queries (its orders, filters and search) are in core.papers.browser_records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.db import Db
from core.delivery import alarm_records
from core.guides import guide_records
from core.ledger.ledger_records import recommended_expression
from core.models import (
    CommunityPickRow,
    DeliveryAlarm,
    Digest,
    DigestState,
    Follow,
    Match,
    RunState,
    SourceRun,
    Subscriber,
    SubscriberStatus,
    Version,
    utcnow,
)
from core.papers import count_records
from core.papers.health import SourceHealth
from core.papers.paper_records import IS_NEWS
from core.papers.run_records import GOOD_STATES
from core.timezones import day_starts
from core.values import DayCounts

if TYPE_CHECKING:
    pass


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
    # The newest arrival of any kind: a news version's or a community pick's first sighting (None before
    # any). The original dashboard's "全站最近入库"; history (backfills) does not count.
    latest_arrival: datetime | None = None


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


def _as_datetime(value: Any) -> datetime | None:
    """An aggregate over a timestamp column comes back untyped: naive text on SQLite, aware on PostgreSQL."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value))


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
    # Of ``pending_matches`` (which counts them like any match), the learned recommendations.
    pending_recommended: int = 0


# The status page's read queries, over the maintained totals (``core.papers.count_records``).
def dashboard_counts(db: Db, now: datetime | None = None) -> DashboardCounts:
    """The last 24 hours and library totals, each the size of the browser list it links to.

    The library totals are the maintained counters (``core.papers.count_records``), one row read. The 24-hour
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

    with db.session() as session:
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
        # Each the end of an index: the partial index of news by arrival, and the picks' by arrival.
        newest_news = session.execute(
            sa.select(sa.func.max(col(Version.first_seen_at))).where(IS_NEWS)
        ).scalar_one()
        newest_pick = session.execute(
            sa.select(sa.func.max(col(CommunityPickRow.first_seen_at)))
        ).scalar_one()
    totals = count_records.library_totals(db)
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
        latest_arrival=max(
            (when for when in (_as_datetime(newest_news), _as_datetime(newest_pick)) if when),
            default=None,
        ),
    )


def daily_counts(db: Db, now: datetime | None = None, days: int = 30, zone: tzinfo = UTC) -> list[DayCounts]:
    """News per calendar day of ``zone`` for the last ``days`` days (today included), oldest first,
    zeros included.

    A day runs from one midnight of ``zone`` to the next, 23 or 25 hours across a daylight-saving
    change: the days' first instants are computed here (:func:`core.timezones.day_starts`) and one
    CASE over them numbers each version's day by its ``first_seen_at``, the same SQL on both databases
    and exact in any zone. The WHERE is the partial news index's range (``news AND first_seen_at >=``
    the first midnight), so a load reads the window's news and nothing else.
    """
    today = (now or utcnow()).astimezone(zone).date()
    first_day = today - timedelta(days=days - 1)
    # days + 1 instants: each day's start and the end of today.
    bounds = day_starts(first_day, days + 1, zone)
    seen = col(Version.first_seen_at)
    # The first bound a version is before is the end of its day; later than today (a clock ahead): NULL.
    # The day numbers are written into the SQL: a bound parameter in THEN would leave PostgreSQL to
    # guess its type.
    day = sa.case(
        *((seen < end, sa.literal_column(str(index))) for index, end in enumerate(bounds[1:])),
        else_=sa.null(),
    )
    window = (
        sa.select(
            day.label("day"),
            col(Version.number).label("number"),
            col(Version.ai_related).label("ai_related"),
        )
        .where(IS_NEWS, seen >= bounds[0])
        .subquery()
    )

    def total(condition: sa.ColumnElement[bool]) -> Any:
        return sa.func.sum(sa.case((condition, 1), else_=0))

    with db.session() as session:
        rows = session.execute(
            # Grouped outside the subquery: PostgreSQL does not see a CASE in SELECT and the same CASE
            # in GROUP BY as one expression when their bounds are separate parameters.
            sa.select(
                window.c.day,
                total(window.c.number == 1),
                total(window.c.number > 1),
                total(window.c.ai_related.is_(True)),
            ).group_by(window.c.day)
        ).all()
    found = {int(row[0]): row for row in rows if row[0] is not None}
    result = []
    for index in range(days):
        current = first_day + timedelta(days=index)
        row = found.get(index)
        if row is None:
            result.append(DayCounts(current))
        else:
            result.append(DayCounts(current, int(row[1] or 0), int(row[2] or 0), int(row[3] or 0)))
    return result


def source_facts(db: Db, names: Sequence[str]) -> dict[str, SourceFacts]:
    """Per source: its last finished run (time and outcome) and the newest paper it delivered.

    The newest paper is the latest arXiv announcement among the news versions the source stored, or,
    for a community source, the latest day it featured a paper.
    """
    facts: dict[str, SourceFacts] = {}
    with db.session() as session:
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


def source_runs(db: Db, source: str, limit: int = 50) -> list[SourceRun]:
    """The newest runs of one source, newest first."""
    with db.session() as session:
        rows = session.exec(
            select(SourceRun)
            .where(SourceRun.source == source)
            .order_by(col(SourceRun.id).desc())
            .limit(limit)
        )
        return list(rows)


def metric_counts(db: Db) -> MetricCounts:
    """Counters and gauges for /metrics: the library's from the maintained totals, the rest counted."""
    totals = count_records.library_totals(db)
    with db.session() as session:
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


def status(db: Db, now: datetime | None = None, sources: Iterable[str] = ()) -> StatusSummary:
    """Counts for the last 24 hours and the health of each source (those named plus any that ran)."""
    now = now or utcnow()
    since = now - timedelta(hours=24)
    with db.session() as session:

        def count(query: Any) -> int:
            return int(session.execute(query).scalar_one())

        # The news of the window, through the partial index of news by arrival; the library's totals
        # are the maintained counters (core.papers.count_records), as on the status page and /metrics.
        recent = (
            select(sa.func.count()).select_from(Version).where(col(Version.first_seen_at) >= since, IS_NEWS)
        )
        totals = count_records.library_totals(db)
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
    guides = guide_records.count_guided_versions_since(db, since)
    alarms = tuple(alarm_records.delivery_alarms(db))
    return StatusSummary(**summary_counts, sources=health, guides_24h=guides, alarms=alarms)


def _source_health(session: Session, source: str) -> SourceHealth:
    mine = select(SourceRun).where(SourceRun.source == source).order_by(col(SourceRun.id).desc()).limit(1)
    last = session.exec(mine).first()
    checking_since = None
    if last is not None and last.state == RunState.RUNNING:
        # One run of a source at a time (papertrail.service.ingest_claim): the newest finished one is just
        # before.
        checking_since = last.started_at
        last = session.exec(mine.where(col(SourceRun.state) != RunState.RUNNING)).first()
    productive = session.exec(
        select(SourceRun.finished_at)
        .where(SourceRun.source == source, (col(SourceRun.new_papers) + col(SourceRun.revisions)) > 0)
        .order_by(col(SourceRun.id).desc())
        .limit(1)
    ).first()
    good = select(SourceRun).where(SourceRun.source == source, col(SourceRun.state).in_(GOOD_STATES))
    success = session.exec(good.order_by(col(SourceRun.id).desc()).limit(1)).first()
    served = session.exec(
        good.where(col(SourceRun.cursor).is_not(None)).order_by(col(SourceRun.id).desc()).limit(1)
    ).first()
    if last is None:
        return SourceHealth(source, None, "never run", None, None, None, checking_since=checking_since)
    return SourceHealth(
        source=source,
        last_check=last.finished_at or last.started_at,
        last_state=last.state,
        last_new_version=productive,
        last_error=last.error,
        last_note=last.note,
        last_success=success.finished_at if success else None,
        served_cursor=served.cursor if served else None,
        checking_since=checking_since,
    )
