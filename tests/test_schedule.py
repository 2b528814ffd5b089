"""Digest schedules in the subscriber's timezone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.schedule import is_due, last_slot, parse_schedule


def test_forms_parse_to_canonical_text() -> None:
    assert parse_schedule("instant").instant
    assert parse_schedule("Daily 8:05").text == "daily 08:05"
    assert parse_schedule("weekdays 07:30").days == frozenset(range(5))
    assert parse_schedule("weekly Monday 09:00").text == "weekly mon 09:00"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hourly", "cannot read schedule"),
        ("daily 25:00", "not a valid 24-hour time"),
        ("weekly xyz 09:00", "unknown day"),
        # The day was read from its first three letters, so 'Funday' was reported as 'Fun'.
        ("weekly Funday 09:00", "unknown day 'Funday' in schedule 'weekly Funday 09:00'"),
        ("weekly Monster 09:00", "unknown day 'Monster'"),
        ("weekly mo 09:00", "unknown day 'mo'"),
    ],
)
def test_bad_schedules_explain(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_schedule(text)


@pytest.mark.parametrize(
    ("day", "canonical"),
    [
        ("mon", "mon"),
        ("Monday", "mon"),
        ("mondays", "mon"),
        ("Tues", "tue"),
        ("thurs", "thu"),
        ("SUN", "sun"),
    ],
)
def test_weekly_days_are_read_whole(day: str, canonical: str) -> None:
    assert parse_schedule(f"weekly {day} 09:00").text == f"weekly {canonical} 09:00"


def test_daily_slot_is_local_wall_clock_across_dst() -> None:
    schedule = parse_schedule("daily 08:00")
    # Berlin is UTC+1 in winter and UTC+2 in summer: 08:00 local moves in UTC, not in local time.
    winter = last_slot(schedule, "Europe/Berlin", datetime(2024, 11, 28, 12, 0, tzinfo=UTC))
    summer = last_slot(schedule, "Europe/Berlin", datetime(2024, 7, 1, 12, 0, tzinfo=UTC))
    assert winter == datetime(2024, 11, 28, 7, 0, tzinfo=UTC)
    assert summer == datetime(2024, 7, 1, 6, 0, tzinfo=UTC)


def test_slot_before_local_time_falls_on_previous_day() -> None:
    schedule = parse_schedule("daily 08:00")
    # 03:00 UTC is 22:00 the previous evening in New York: the last slot is that morning.
    slot = last_slot(schedule, "America/New_York", datetime(2024, 11, 28, 3, 0, tzinfo=UTC))
    assert slot == datetime(2024, 11, 27, 13, 0, tzinfo=UTC)


def test_due_only_once_per_slot() -> None:
    schedule = parse_schedule("daily 08:00")
    now = datetime(2024, 11, 28, 8, 1, tzinfo=UTC)
    assert is_due(schedule, "UTC", now, since=datetime(2024, 11, 27, 8, 0, 30, tzinfo=UTC))
    assert not is_due(schedule, "UTC", now, since=datetime(2024, 11, 28, 8, 0, 30, tzinfo=UTC))
    assert is_due(parse_schedule("instant"), "UTC", now, since=now)


def test_weekdays_skip_weekend() -> None:
    schedule = parse_schedule("weekdays 07:30")
    sunday = datetime(2024, 12, 1, 12, 0, tzinfo=UTC)
    assert last_slot(schedule, "UTC", sunday) == datetime(2024, 11, 29, 7, 30, tzinfo=UTC)


def test_unknown_timezone_explains() -> None:
    with pytest.raises(ValueError, match="IANA name"):
        last_slot(parse_schedule("daily 08:00"), "Mars/Olympus", datetime(2024, 1, 1, tzinfo=UTC))
