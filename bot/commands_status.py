"""What the chat commands say about time and health: schedules, the next digest, and a source summary.

Times are shown in the subscriber's timezone with day and month names of the reply's language, whatever
the process locale, e.g. ``Fri 29 Nov 08:00 CET`` or ``11月29日 周五 08:00 CET``. Every function takes the
reply's :class:`~core.languages.Translator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from core.config_edges import ChatSettings
from core.db import Database
from core.languages import N_, Translator
from core.models import Subscriber
from core.overview import screens
from core.overview.status import source_statuses
from core.schedule import next_due, parse_schedule, zone

HEALTH_SOURCES = ("arxiv-rss", "hf-daily")
"""Sources always named in ``status``; any other source is named only while it fails."""
SOURCE_NAMES = {
    "arxiv-rss": "arXiv",
    "hf-daily": "Hugging Face",
    "arxiv-oai": "arXiv OAI-PMH",
    "arxiv-api": "arXiv API",
}
_DAYS = (N_("Mon"), N_("Tue"), N_("Wed"), N_("Thu"), N_("Fri"), N_("Sat"), N_("Sun"))
_MONTHS = (
    N_("Jan"), N_("Feb"), N_("Mar"), N_("Apr"), N_("May"), N_("Jun"),
    N_("Jul"), N_("Aug"), N_("Sep"), N_("Oct"), N_("Nov"), N_("Dec"),
)  # fmt: skip
# A stored schedule (core.schedule's normal form) as the reader's language says it; {time} is HH:MM.
_SCHEDULES = {
    "daily": N_("daily {time}"),
    "weekdays": N_("weekdays {time}"),
    "weekly mon": N_("weekly mon {time}"),
    "weekly tue": N_("weekly tue {time}"),
    "weekly wed": N_("weekly wed {time}"),
    "weekly thu": N_("weekly thu {time}"),
    "weekly fri": N_("weekly fri {time}"),
    "weekly sat": N_("weekly sat {time}"),
    "weekly sun": N_("weekly sun {time}"),
}
_HEALTH = {
    "ok": N_("ok"),
    "quiet": N_("quiet"),
    "stale": N_("stale"),
    "failing": N_("failing"),
    "unknown": N_("unknown"),
}


def schedule_text(schedule: str, t: Translator) -> str:
    """A stored schedule in ``t``'s language: ``daily 08:00`` (``每天 08:00``); unknown forms as stored."""
    words = schedule.split()
    if not words:
        return schedule
    key, clock = " ".join(words[:-1]).casefold(), words[-1]
    message = _SCHEDULES.get(key)
    return t.gettext(message, time=clock) if message else schedule


def describe_schedule(subscriber: Subscriber, t: Translator) -> str:
    """``daily 08:00 (Europe/Berlin)``, or ``as soon as something matches`` for instant."""
    if subscriber.schedule.strip().casefold() == "instant":
        return t.gettext("as soon as something matches")
    return t.gettext(
        "{schedule} ({timezone})",
        schedule=schedule_text(subscriber.schedule, t),
        timezone=subscriber.timezone,
    )


def next_digest(subscriber: Subscriber, now: datetime) -> datetime | None:
    """When the subscriber's next digest can go out (UTC); None for an unreadable schedule or zone."""
    try:
        schedule = parse_schedule(subscriber.schedule)
        return next_due(
            schedule, subscriber.timezone, now, subscriber.last_digest_at or subscriber.created_at
        )
    except ValueError:
        return None


def local_time(when: datetime, tz_name: str, t: Translator, *, date: bool = True) -> str:
    """``Fri 29 Nov 08:00 CET`` (or ``08:00 CET`` without the date) in ``tz_name``."""
    local = when.astimezone(zone(tz_name))
    clock = f"{local:%H:%M} {local.tzname() or tz_name}"
    if not date:
        return clock
    return t.gettext(
        "{weekday} {day} {month} {time}",
        weekday=t.gettext(_DAYS[local.weekday()]),
        day=local.day,
        month=t.gettext(_MONTHS[local.month - 1]),
        time=clock,
    )


def duration(delta: timedelta, t: Translator) -> str:
    """``less than a minute``, ``12 min``, ``19 h``, ``3 days``: rounded down, for people."""
    seconds = max(delta.total_seconds(), 0)
    if seconds < 60:
        return t.gettext("less than a minute")
    if seconds < 3600:
        return t.gettext("{minutes} min", minutes=int(seconds // 60))
    if seconds < 48 * 3600:
        return t.gettext("{hours} h", hours=int(seconds // 3600))
    return t.ngettext("{n} day", "{n} days", int(seconds // 86400))


def source_line(
    db: Database, settings: ChatSettings, now: datetime, names: Sequence[str], t: Translator
) -> str:
    """One line on source health: ``arXiv: ok, checked 12 min ago; Hugging Face: quiet, checked 3 h ago``."""
    summary = screens.status(db, now=now, sources=names)
    judged = source_statuses(
        summary,
        now=now,
        holidays=settings.holiday_dates,
        grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )
    parts: list[str] = []
    for status in judged:
        # The standing: "checked … ago" is the last finished check, a check in flight has no verdict yet.
        source, state = status.facts.source, status.verdict.standing
        if source not in names and state != "failing":
            continue
        name = SOURCE_NAMES.get(source, source)
        if status.facts.last_check is None:
            parts.append(t.gettext("{source}: never checked", source=name))
            continue
        ago = now - status.facts.last_check
        shown = t.gettext(_HEALTH[state]) if state in _HEALTH else str(state)
        if ago < timedelta(minutes=1):
            parts.append(t.gettext("{source}: {state}, checked just now", source=name, state=shown))
        else:
            parts.append(
                t.gettext(
                    "{source}: {state}, checked {ago} ago", source=name, state=shown, ago=duration(ago, t)
                )
            )
    return t.gettext("; ").join(parts) or t.gettext("none configured")


__all__ = [
    "HEALTH_SOURCES",
    "SOURCE_NAMES",
    "describe_schedule",
    "duration",
    "local_time",
    "next_digest",
    "schedule_text",
    "source_line",
]
