"""The reads behind the shell's screens, one value per screen: a subscription's status (the chat's
``status``), a reader's manage page, the status page, ``/metrics`` and ``papertrail status``.

Each step reads through the public steps of the packages that own the data (follows, delivery, taste,
guides, papers) and through this package's own SQL (``dashboard_records``); it writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

from core.db import Database
from core.delivery import queue
from core.follows import subscribers
from core.guides import service as guides
from core.models import Digest, Follow, SourceRun
from core.overview import dashboard_records
from core.overview.dashboard_records import DashboardCounts, MetricCounts, SourceFacts, StatusSummary
from core.papers import pipeline
from core.taste.votes import VoteCounts, vote_counts, votes
from core.values import DayCounts

if TYPE_CHECKING:
    from core.taste.taste_records import VoteView


@dataclass(frozen=True, slots=True)
class SubscriptionStatus:
    """The chat's ``status``: how many follows, and the matches waiting (recommendations among them)."""

    follows: int
    waiting: int
    recommended: int


def subscription_status(db: Database, subscriber_id: int) -> SubscriptionStatus:
    """What ``status`` says of one subscription besides its row."""
    waiting = queue.waiting(db, subscriber_id)
    return SubscriptionStatus(
        len(subscribers.follows_of(db, subscriber_id)), waiting.matches, waiting.recommended
    )


@dataclass(frozen=True, slots=True)
class ManagePage:
    """A reader's manage page: the follows, the newest votes and the vote counts."""

    follows: list[Follow]
    votes: list[VoteView]
    vote_counts: VoteCounts


def manage_page(db: Database, subscriber_id: int, *, votes_shown: int) -> ManagePage:
    """What the manage page lists of one subscriber (its feed link is ``core.delivery.feeds``'s)."""
    return ManagePage(
        subscribers.follows_of(db, subscriber_id),
        votes(db, subscriber_id, limit=votes_shown),
        vote_counts(db, subscriber_id),
    )


@dataclass(frozen=True, slots=True)
class StatusPage:
    """The status page's reads besides the sources' verdicts: the counts, the guides of the last day,
    each source's facts and the chart's days."""

    counts: DashboardCounts
    guides_24h: int
    facts: dict[str, SourceFacts]
    days: list[DayCounts]


def status_page(
    db: Database, now: datetime, sources: Sequence[str], *, days: int, zone: tzinfo
) -> StatusPage:
    """The status page at ``now``, for ``sources``, with a chart of ``days`` days in ``zone``."""
    return StatusPage(
        dashboard_records.dashboard_counts(db, now),
        guides.guided_versions_since(db, now - timedelta(hours=24)),
        dashboard_records.source_facts(db, sources),
        dashboard_records.daily_counts(db, now, days, zone),
    )


@dataclass(frozen=True, slots=True)
class Metrics:
    """What ``/metrics`` reads besides the sources' health: the counts and the guides of the last day."""

    counts: MetricCounts
    guides_made: int
    versions_guided: int


def metrics(db: Database, now: datetime) -> Metrics:
    """The database's part of ``/metrics`` at ``now``."""
    day_ago = now - timedelta(hours=24)
    return Metrics(
        dashboard_records.metric_counts(db),
        guides.made_since(db, day_ago),
        guides.guided_versions_since(db, day_ago),
    )


@dataclass(frozen=True, slots=True)
class Queues:
    """What ``papertrail status`` adds to the summary: the newest dead-lettered digests (with their
    addresses), the papers waiting for the search index, and the matches waiting per channel."""

    dead: list[tuple[Digest, str]]
    search_backlog: int
    waiting_by_channel: dict[str, int]


def queues(db: Database) -> Queues:
    """The operator's queues (see :class:`Queues`)."""
    return Queues(queue.dead_digests(db), pipeline.search_backlog(db), queue.waiting_by_channel(db))


def status(db: Database, now: datetime | None = None, sources: Iterable[str] = ()) -> StatusSummary:
    """The status summary: library, subscribers, delivery and each source's health."""
    return dashboard_records.status(db, now, sources=sources)


def source_runs(db: Database, source: str, *, limit: int = 50) -> list[SourceRun]:
    """The newest runs of ``source``, newest first."""
    return dashboard_records.source_runs(db, source, limit=limit)
