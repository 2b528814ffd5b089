"""Digest schedules: when a subscriber's digest is due, in the subscriber's own timezone.

Forms: ``instant`` (as soon as a match is pending), ``daily HH:MM``, ``weekdays HH:MM`` (Monday to
Friday), ``weekly DAY HH:MM`` (DAY = mon..sun). Times are wall-clock times in the subscriber's zone, so a
daily 08:00 digest stays at 08:00 across daylight-saving changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.languages import N_, Listed, Phrase, Refusal

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_FORM = re.compile(
    r"^\s*(?:(?P<instant>instant)|(?P<kind>daily|weekdays)\s+(?P<t1>\d{1,2}:\d{2})"
    r"|weekly\s+(?P<day>[a-z]+)\s+(?P<t2>\d{1,2}:\d{2}))\s*$",
    re.IGNORECASE,
)


def _day_number(word: str) -> int | None:
    """Monday = 0 for ``mon``, ``tues``, ``Thursday``, ``sundays`` ...; None for anything else.

    The whole word is checked: reading only its first three letters took "Monster" for Monday and
    reported "Funday" as the unknown day 'Fun'.
    """
    stem = word.lower()
    stem = stem[:-1] if stem.endswith("s") and stem[:-1] in _DAY_NAMES else stem
    if len(stem) < 3:
        return None
    return next((number for number, name in enumerate(_DAY_NAMES) if name.startswith(stem)), None)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule. ``days`` holds weekday numbers (Monday = 0) on which a slot exists."""

    text: str
    instant: bool
    at: time
    days: frozenset[int]


def parse_schedule(text: str) -> Schedule:
    """Parse a schedule string, raising a Refusal (a ValueError) that shows the accepted forms."""
    m = _FORM.match(text)
    hint = Phrase(N_("use 'instant', 'daily 08:00', 'weekdays 07:30' or 'weekly mon 09:00'"))
    if not m:
        raise Refusal(Phrase(N_("cannot read schedule '{schedule}'"), schedule=text), hint)
    if m["instant"]:
        return Schedule("instant", True, time(0, 0), frozenset(range(7)))
    clock = m["t1"] or m["t2"]
    hours, minutes = (int(p) for p in clock.split(":"))
    if hours > 23 or minutes > 59:
        raise Refusal(
            Phrase(
                N_("time '{time}' in schedule '{schedule}' is not a valid 24-hour time"),
                time=clock,
                schedule=text,
            ),
            hint,
        )
    at = time(hours, minutes)
    if m["kind"]:
        kind = m["kind"].lower()
        days = frozenset(range(7)) if kind == "daily" else frozenset(range(5))
        return Schedule(f"{kind} {at:%H:%M}", False, at, days)
    number = _day_number(m["day"])
    if number is None:
        raise Refusal(
            Phrase(N_("unknown day '{day}' in schedule '{schedule}'"), day=m["day"], schedule=text),
            Phrase(N_("days are {days}"), days=Listed(DAYS)),
        )
    return Schedule(f"weekly {DAYS[number]} {at:%H:%M}", False, at, frozenset({number}))


def zone(name: str) -> ZoneInfo:
    """Look up an IANA timezone, raising a Refusal (a ValueError) with a hint for a typo."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise Refusal(
            Phrase(N_("unknown timezone '{zone}'"), zone=name),
            Phrase(N_("use an IANA name such as Europe/Berlin or UTC")),
        ) from exc


def last_slot(schedule: Schedule, tz_name: str, now: datetime) -> datetime | None:
    """The most recent scheduled send time at or before ``now`` (aware UTC), within the past 8 days."""
    tz = zone(tz_name)
    local_now = now.astimezone(tz)
    for back in range(8):
        day = (local_now - timedelta(days=back)).date()
        if day.weekday() not in schedule.days:
            continue
        slot = datetime.combine(day, schedule.at, tzinfo=tz)
        if slot <= local_now:
            return slot.astimezone(UTC)
    return None


def is_due(schedule: Schedule, tz_name: str, now: datetime, since: datetime) -> bool:
    """True when a digest should go out now, given the last digest (or sign-up) time ``since``."""
    if schedule.instant:
        return True
    slot = last_slot(schedule, tz_name, now)
    return slot is not None and slot > since


def next_slot(schedule: Schedule, tz_name: str, now: datetime) -> datetime:
    """The first scheduled send time strictly after ``now`` (aware UTC); ``now`` itself when instant."""
    if schedule.instant:
        return now
    tz = zone(tz_name)
    local_now = now.astimezone(tz)
    for ahead in range(8):
        day = (local_now + timedelta(days=ahead)).date()
        if day.weekday() not in schedule.days:
            continue
        slot = datetime.combine(day, schedule.at, tzinfo=tz)
        if slot > local_now:
            return slot.astimezone(UTC)
    # Every schedule has a slot within a week; reaching this means `days` was empty.
    raise ValueError(f"schedule {schedule.text!r} has no day on which it is due")


def next_due(schedule: Schedule, tz_name: str, now: datetime, since: datetime) -> datetime:
    """When the next digest can go out (aware UTC), given the last digest (or sign-up) time ``since``.

    ``now`` when a digest is due already (:func:`is_due`), else the next scheduled slot. A digest goes out
    only when something matched, so this is "the next time one would", not a promise that one will.
    """
    if is_due(schedule, tz_name, now, since):
        return now
    return next_slot(schedule, tz_name, now)
