"""What the chat commands say about time and health: schedules, the next digest, and a source summary.

Times are shown in the subscriber's timezone with English day and month names, whatever the process
locale, e.g. ``Fri 29 Nov 08:00 CET``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from core.config import Settings
from core.models import Subscriber
from core.schedule import next_due, parse_schedule, zone
from core.status import source_statuses
from core.store import Store

HEALTH_SOURCES = ("arxiv-rss", "hf-daily")
"""Sources always named in ``status``; any other source is named only while it fails."""
SOURCE_NAMES = {
    "arxiv-rss": "arXiv",
    "hf-daily": "Hugging Face",
    "arxiv-oai": "arXiv OAI-PMH",
    "arxiv-api": "arXiv API",
}
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def describe_schedule(subscriber: Subscriber) -> str:
    """``daily 08:00 (Europe/Berlin)``, or ``as soon as something matches`` for instant."""
    if subscriber.schedule.strip().casefold() == "instant":
        return "as soon as something matches"
    return f"{subscriber.schedule} ({subscriber.timezone})"


def next_digest(subscriber: Subscriber, now: datetime) -> datetime | None:
    """When the subscriber's next digest can go out (UTC); None for an unreadable schedule or zone."""
    try:
        schedule = parse_schedule(subscriber.schedule)
        return next_due(
            schedule, subscriber.timezone, now, subscriber.last_digest_at or subscriber.created_at
        )
    except ValueError:
        return None


def local_time(when: datetime, tz_name: str, *, date: bool = True) -> str:
    """``Fri 29 Nov 08:00 CET`` (or ``08:00 CET`` without the date) in ``tz_name``."""
    local = when.astimezone(zone(tz_name))
    clock = f"{local:%H:%M} {local.tzname() or tz_name}"
    if not date:
        return clock
    return f"{_DAYS[local.weekday()]} {local.day} {_MONTHS[local.month - 1]} {clock}"


def duration(delta: timedelta) -> str:
    """``less than a minute``, ``12 min``, ``19 h``, ``3 days``: rounded down, for people."""
    seconds = max(delta.total_seconds(), 0)
    if seconds < 60:
        return "less than a minute"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} days"


def source_line(store: Store, settings: Settings, now: datetime, names: Sequence[str]) -> str:
    """One line on source health: ``arXiv: ok, checked 12 min ago; Hugging Face: quiet, checked 3 h ago``."""
    summary = store.status(now=now, sources=names)
    judged = source_statuses(
        summary,
        now=now,
        holidays=settings.holiday_dates,
        grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )
    parts: list[str] = []
    for status in judged:
        source, state = status.facts.source, status.verdict.state
        if source not in names and state != "failing":
            continue
        name = SOURCE_NAMES.get(source, source)
        if status.facts.last_check is None:
            parts.append(f"{name}: never checked")
            continue
        ago = now - status.facts.last_check
        checked = "just now" if ago < timedelta(minutes=1) else f"{duration(ago)} ago"
        parts.append(f"{name}: {state}, checked {checked}")
    return "; ".join(parts) or "none configured"


__all__ = [
    "HEALTH_SOURCES",
    "SOURCE_NAMES",
    "describe_schedule",
    "duration",
    "local_time",
    "next_digest",
    "source_line",
]
