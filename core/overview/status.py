"""The status page's sources, judged: each source's stored facts (``core.overview.dashboard_records``) and
its calendar-aware verdict (``core.papers.status.judge``), as the page, /metrics, ``papertrail status`` and
the chat's status command show them."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from core.models import utcnow
from core.overview.dashboard_records import StatusSummary
from core.papers.health import SourceHealth, Verdict
from core.papers.status import judge


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """One source on the status page: the stored facts and the calendar-aware verdict."""

    facts: SourceHealth
    verdict: Verdict


def source_statuses(
    summary: StatusSummary,
    *,
    now: datetime | None = None,
    holidays: Collection[date] = (),
    grace: timedelta = timedelta(hours=4),
) -> list[SourceStatus]:
    """Judge every source of a status summary: ok, quiet, stale, failing or unknown."""
    now = now or utcnow()
    return [
        SourceStatus(facts, judge(facts, now=now, holidays=holidays, grace=grace))
        for facts in summary.sources
    ]
