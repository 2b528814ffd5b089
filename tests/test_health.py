"""Calendar-aware source health with a fixed clock: ok, quiet weekends and holidays, stale, failing."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from core.config import parse_holidays
from core.db import Database
from core.models import RunState
from core.overview import dashboard_records
from core.overview.status import source_statuses
from core.papers import run_records
from core.papers.health import Health, announcement_expected_today, arxiv_feed_health, latest_mailing

THU_MAILING = date(2024, 11, 28)  # the recorded feed: announced Wed 27 Nov 2024, 20:00 New York


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def judge(
    now: str, served: date | None, *, failed: bool = False, holidays: frozenset[date] = frozenset()
) -> Health:
    verdict = arxiv_feed_health(
        now=at(now), last_check_failed=failed, last_error="boom", served_mailing=served, holidays=holidays
    )
    return verdict.state


def test_latest_mailing_follows_the_announcement_calendar() -> None:
    # Wednesday 20:00 EST = Thursday 01:00 UTC; the mailing carries Thursday's date.
    assert latest_mailing(at("2024-11-28T01:00:00")) == (THU_MAILING, at("2024-11-28T01:00:00"))
    assert latest_mailing(at("2024-11-28T00:59:00"))[0] == date(2024, 11, 27)
    # Friday and Saturday evenings announce nothing: all weekend the newest mailing is Friday's.
    assert latest_mailing(at("2024-11-30T12:00:00"))[0] == date(2024, 11, 29)
    assert latest_mailing(at("2024-12-01T23:00:00"))[0] == date(2024, 11, 29)
    # Sunday evening's announcement is Monday's mailing.
    assert latest_mailing(at("2024-12-02T01:30:00"))[0] == date(2024, 12, 2)


def test_daylight_saving_moves_the_announcement_in_utc() -> None:
    # In July New York is UTC-4: 20:00 there is 00:00 UTC.
    assert latest_mailing(at("2024-07-03T00:00:00"))[1] == at("2024-07-03T00:00:00")


def test_current_feed_on_a_weekday_is_ok() -> None:
    assert judge("2024-11-28T15:00:00", THU_MAILING) == Health.OK


def test_feed_still_serving_the_previous_mailing_is_stale_after_the_grace() -> None:
    # Thursday's announcement (Fri mailing) is due at Fri 01:00 UTC; with 4 h grace, stale from 05:00 UTC.
    assert judge("2024-11-29T04:00:00", THU_MAILING) == Health.OK
    verdict = arxiv_feed_health(
        now=at("2024-11-29T06:00:00"), last_check_failed=False, last_error=None, served_mailing=THU_MAILING
    )
    assert verdict.state == Health.STALE and verdict.lag == timedelta(hours=1)
    assert "2024-11-28" in verdict.reason and "2024-11-29" in verdict.reason


def test_weekend_is_quiet_not_stale() -> None:
    friday = date(2024, 11, 29)
    assert judge("2024-11-30T12:00:00", friday) == Health.QUIET  # Saturday
    assert judge("2024-11-29T18:00:00", friday) == Health.QUIET  # Friday: no announcement this evening
    assert judge("2024-12-01T12:00:00", friday) == Health.OK  # Sunday: an announcement is due tonight


def test_holiday_is_quiet_and_the_mailing_after_it_is_expected() -> None:
    holidays = parse_holidays("2024-12-25")
    tuesday_mailing = date(2024, 12, 24)
    # Tuesday evening announces nothing (no mailing on the 25th): quiet, and not stale on the 25th either.
    assert not announcement_expected_today(at("2024-12-24T15:00:00"), holidays)
    assert judge("2024-12-24T15:00:00", tuesday_mailing, holidays=holidays) == Health.QUIET
    assert judge("2024-12-25T15:00:00", tuesday_mailing, holidays=holidays) == Health.OK
    # Without the holiday configured, the same silence reads as stale.
    assert judge("2024-12-25T15:00:00", tuesday_mailing) == Health.STALE


def test_failing_and_unknown() -> None:
    assert judge("2024-11-28T15:00:00", THU_MAILING, failed=True) == Health.FAILING
    assert judge("2024-11-28T15:00:00", None) == Health.UNKNOWN


def test_bad_holiday_setting_explains() -> None:
    with pytest.raises(ValueError, match="2026-12-25"):
        parse_holidays("2026-12-25, christmas")


def test_source_statuses_from_stored_runs(sqlite_store: Database) -> None:
    now = at("2024-11-28T15:00:00")
    run = run_records.start_run(sqlite_store, "arxiv-rss", now=now)
    run_records.finish_run(
        sqlite_store, run, RunState.OK, now=now, cursor="2024-11-28T00:00:00-05:00", new_papers=3
    )
    later = now + timedelta(minutes=30)
    run = run_records.start_run(sqlite_store, "arxiv-rss", now=later)
    run_records.finish_run(sqlite_store, run, RunState.NOT_MODIFIED, now=later)
    summary = dashboard_records.status(sqlite_store, later, sources=["arxiv-rss", "hf-daily"])
    rss, hf = source_statuses(summary, now=later)
    assert rss.verdict.state == Health.OK and rss.facts.last_success == later
    assert rss.facts.served_cursor == "2024-11-28T00:00:00-05:00"
    assert hf.verdict.state == Health.UNKNOWN
    stale = source_statuses(summary, now=at("2024-11-29T12:00:00"))[0]
    assert stale.verdict.state == Health.STALE
