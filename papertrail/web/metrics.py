"""``/metrics`` and ``/readyz``: Prometheus numbers read from the database, and the readiness check.

The collector reads the database at scrape time instead of counting in this process: the versions were
ingested by the scheduler, the digests sent by workers, possibly in other processes or before a restart,
and the database is the one place that knows all of it. Each app gets its own registry, so two apps in one
process (tests) never share or collide.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.channel import channels
from core.config import Settings
from core.db import Database
from core.overview import screens
from core.overview.status import SourceStatus, source_statuses
from core.papers.health import Health
from papertrail.service.ingest_claim import status_summary
from papertrail.service.redact import SecretRedactor, secrets_of

if TYPE_CHECKING:
    from core.overview.dashboard_records import StatusSummary

log = logging.getLogger(__name__)


def judged_sources(
    db: Database, settings: Settings, names: Sequence[str], now: datetime
) -> tuple[list[SourceStatus], StatusSummary]:
    """Every source's verdict (with the settings' holidays and grace, as ``papertrail status``)."""
    summary = status_summary(db, names, now)
    judged = source_statuses(
        summary,
        now=now,
        holidays=settings.holiday_dates,
        grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )
    return judged, summary


class StoreCollector(Collector):
    """PaperTrail's numbers, read from the store on every scrape."""

    def __init__(
        self, db: Database, settings: Settings, sources: Sequence[str], clock: Callable[[], datetime]
    ) -> None:
        self.db = db
        self.settings = settings
        self.sources = tuple(sources)
        self.clock = clock

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: registering must not query the database."""
        return []

    def collect(self) -> Iterable[Metric]:
        """Read the store; on a database error report ``papertrail_database_up 0`` and nothing else."""
        up = GaugeMetricFamily("papertrail_database_up", "1 when the last scrape could read the database.")
        now = self.clock()
        try:
            read = screens.metrics(self.db, now)
            judged, summary = judged_sources(self.db, self.settings, self.sources, now)
            counts, guides_made, versions_guided = read.counts, read.guides_made, read.versions_guided
        except sa.exc.SQLAlchemyError as exc:
            log.warning("metrics: cannot read the database: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up

        papers = GaugeMetricFamily("papertrail_papers", "Papers stored (every source, stubs included).")
        papers.add_metric([], counts.papers)
        yield papers

        versions = CounterMetricFamily(
            "papertrail_versions_ingested",
            "Versions stored as news (history from backfills is not counted), by kind: new (v1) or revision.",
            labels=["kind"],
        )
        for kind in ("new", "revision"):
            versions.add_metric([kind], counts.versions_by_kind.get(kind, 0))
        yield versions

        matches = CounterMetricFamily("papertrail_matches", "Matches written (subscriber, version) pairs.")
        matches.add_metric([], counts.matches)
        yield matches

        digests = GaugeMetricFamily(
            "papertrail_digests",
            "Digests by channel and state: sent, failed (refused), dead (retries exhausted), queued.",
            labels=["channel", "state"],
        )
        for (channel, state), value in sorted(counts.digests.items()):
            digests.add_metric([channel, state], value)
        yield digests

        subscribers = GaugeMetricFamily("papertrail_subscribers", "Subscribers by status.", labels=["status"])
        for status, value in sorted(counts.subscribers.items()):
            subscribers.add_metric([status], value)
        yield subscribers

        alarm = GaugeMetricFamily(
            "papertrail_delivery_alarm",
            "1 while a delivery alarm is raised on the channel (its platform refused many recipients the "
            "same way, or refused the sender's setup; digests are held, nobody is paused), else 0.",
            labels=["channel"],
        )
        raised = {a.channel for a in summary.alarms}
        # Every channel a notifier can serve always has a series (0 when quiet), so that an alert rule sees
        # the change to 1 rather than a series appearing.
        served = {c.name for c in channels() if c.delivers}
        for channel in sorted(served | raised):
            alarm.add_metric([channel], 1 if channel in raised else 0)
        yield alarm

        depth = GaugeMetricFamily(
            "papertrail_queue_depth",
            "Work waiting: matches in no digest yet (pending_matches), digests pending or sending "
            "(queued_digests).",
            labels=["queue"],
        )
        depth.add_metric(["pending_matches"], summary.pending_matches)
        depth.add_metric(["queued_digests"], summary.queued_digests)
        yield depth

        made = GaugeMetricFamily(
            "papertrail_guides_made_24h",
            "AI guides stored in the last 24 hours, every language: what PAPERTRAIL_LLM_DAILY_LIMIT counts.",
        )
        made.add_metric([], guides_made)
        yield made
        guided = GaugeMetricFamily(
            "papertrail_guided_versions_24h",
            "Versions whose first AI guide was made in the last 24 hours (the status page's AI guides +N).",
        )
        guided.add_metric([], versions_guided)
        yield guided

        yield from _source_metrics(judged, now)


def _source_metrics(judged: Sequence[SourceStatus], now: datetime) -> Iterable[Metric]:
    lag = GaugeMetricFamily(
        "papertrail_source_lag_seconds",
        "Seconds since the source's last successful check (absent until it has one).",
        labels=["source"],
    )
    last = GaugeMetricFamily(
        "papertrail_source_last_success_timestamp_seconds",
        "Unix time of the source's last successful check.",
        labels=["source"],
    )
    state = GaugeMetricFamily(
        "papertrail_source_state",
        "1 for the source's current state (ok, quiet, stale, failing, unknown), 0 for the others.",
        labels=["source", "state"],
    )
    for item in judged:
        source = item.facts.source
        success = item.facts.last_success
        if success is not None:
            lag.add_metric([source], max(0.0, (now - success).total_seconds()))
            last.add_metric([source], success.timestamp())
        # The standing: a check in flight does not reset a failing source's alert for its duration.
        for health in Health:
            if health != Health.CHECKING:
                state.add_metric([source, health.value], 1 if item.verdict.standing == health else 0)
    yield lag
    yield last
    yield state


def metrics_registry(collector: StoreCollector) -> CollectorRegistry:
    """A fresh registry holding only ``collector`` (not the process-global default registry)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format."""
    return generate_latest(registry)


def readiness(db: Database, settings: Settings) -> str | None:
    """None when ``SELECT 1`` works; else why not, with every secret and the database password masked."""
    try:
        with db.engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except Exception as exc:  # any failure to reach the database means "not ready", whatever raised it
        original = getattr(exc, "orig", None) or exc
        detail = str(original).strip().splitlines()[0] if str(original).strip() else ""
        reason = SecretRedactor(secrets_of(settings)).mask(
            f"database unreachable ({type(original).__name__}: {detail})"
        )
        # The redactor skips short secrets (they would mask innocent words); a password never shows.
        password = db.engine.url.password
        if password and len(str(password)) >= 4:
            reason = reason.replace(str(password), "********")
        return reason
    return None
