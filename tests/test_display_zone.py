"""PAPERTRAIL_DISPLAY_TIMEZONE: the web pages' times and the chart's days in the operator's zone.

The chart's days are counted by the store on SQLite and PostgreSQL across a zone's midnight and across a
daylight-saving change; the pages are read through Starlette's test client with a fixed clock, in
Asia/Shanghai ("北京时间" / "Beijing time") and in the default, UTC.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from core.config import Settings
from core.db import Database
from core.delivery import alarm_records
from core.languages import translator
from core.models import RunState
from core.overview import dashboard_records
from core.papers import paper_records, run_records
from core.papers.paper_records import Novelty
from core.timezones import abbreviation, day_starts
from core.values import AnnounceType, PaperIn
from papertrail.web.app import build_app
from papertrail.web.pages import source_reason
from papertrail.web.times import display_zone
from tests.cli_helpers import invoke
from tests.support.web import KEY, web_context

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")


def version(arxiv_id: str, number: int = 1, *, ai: bool = False) -> PaperIn:
    """A version of ``arxiv_id``; AI-related through its category when ``ai``."""
    return PaperIn(
        arxiv_id=arxiv_id,
        version=number,
        title=f"On {arxiv_id}",
        abstract="We count things.",
        authors=("Ada Lovelace",),
        categories=("cs.LG",) if ai else ("math.CO",),
        announce_type=AnnounceType.NEW if number == 1 else AnnounceType.REPLACE,
        announced_at=datetime(2026, 11, 8, 1, 0, tzinfo=UTC),
    )


def arrive(db: Database, at: datetime, *papers: PaperIn) -> None:
    """Store ``papers`` as news first seen at ``at``."""
    assert paper_records.save_versions(db, list(papers), now=at).new_version_ids


def counts(db: Database, now: datetime, days: int, zone: Any) -> dict[str, tuple[int, int, int]]:
    """``daily_counts`` as {day: (new, revisions, AI-related)}."""
    return {
        d.day.isoformat(): (d.new, d.revisions, d.ai_related)
        for d in dashboard_records.daily_counts(db, now, days, zone)
    }


# -- the zone's days, pure -------------------------------------------------------------------------------


def test_days_start_at_the_zones_midnight_and_last_23_or_25_hours_across_a_change() -> None:
    starts = day_starts(date(2026, 11, 8), 3, SHANGHAI)
    assert starts == [datetime(2026, 11, d, 16, 0, tzinfo=UTC) for d in (7, 8, 9)]
    # Europe/Berlin leaves summer time on the last Sunday of October (25 Oct 2026): a 25-hour day.
    autumn = day_starts(date(2026, 10, 24), 3, BERLIN)
    assert autumn == [datetime(2026, 10, 23, 22, tzinfo=UTC), datetime(2026, 10, 24, 22, tzinfo=UTC),
                      datetime(2026, 10, 25, 23, tzinfo=UTC)]  # fmt: skip
    assert autumn[2] - autumn[1] == timedelta(hours=25)
    spring = day_starts(date(2026, 3, 29), 2, BERLIN)
    assert spring[1] - spring[0] == timedelta(hours=23)
    # America/Santiago skips midnight itself (00:00 -> 01:00 on 6 Sep 2026): the day starts at the change.
    santiago = day_starts(date(2026, 9, 6), 2, ZoneInfo("America/Santiago"))
    assert santiago[0] == datetime(2026, 9, 6, 4, 0, tzinfo=UTC)
    assert santiago[0].astimezone(ZoneInfo("America/Santiago")).hour == 1  # its first real moment
    assert santiago[1] - santiago[0] == timedelta(hours=23)


def test_zones_are_named_in_the_pages_language() -> None:
    winter, summer = datetime(2026, 1, 15, tzinfo=UTC), datetime(2026, 7, 15, tzinfo=UTC)
    assert (abbreviation(BERLIN, winter), abbreviation(BERLIN, summer)) == ("CET", "CEST")
    assert abbreviation(ZoneInfo("America/Sao_Paulo"), winter) == "UTC-03:00"  # the database says -03
    assert abbreviation(ZoneInfo("Etc/GMT-8"), winter) == "UTC+08:00"
    assert abbreviation(ZoneInfo("Asia/Kolkata"), winter) == "IST"
    assert abbreviation(ZoneInfo("UTC"), winter) == "UTC"
    at = datetime(2026, 11, 8, 16, 30, tzinfo=UTC)
    assert display_zone("Asia/Shanghai", translator("zh")).when(at) == "2026-11-09 00:30 北京时间"
    assert display_zone("Asia/Shanghai", translator("en")).when(at) == "2026-11-09 00:30 Beijing time"
    assert display_zone("PRC", translator("en")).when(at) == "2026-11-09 00:30 Beijing time"
    assert display_zone("UTC", translator("zh")).when(at) == "2026-11-08 16:30 UTC"
    assert display_zone("Asia/Singapore", translator("en")).when(None) == "—"
    berlin = display_zone("Europe/Berlin", translator("en"))
    assert berlin.when(at) == "2026-11-08 17:30 CET"
    assert berlin.span_name(
        datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 25, 12, tzinfo=UTC)
    ) == ("CEST → CET")
    # Calendar days: a zone with daylight saving by its IANA name (its days are CET and CEST), others by
    # their one name.
    assert berlin.day_name(at) == "Europe/Berlin"
    assert display_zone("Asia/Kolkata", translator("en")).day_name(at) == "IST"
    assert display_zone("UTC", translator("en")).day_name(at) == "UTC"
    assert display_zone("Asia/Shanghai", translator("zh")).day_name(at) == "北京时间"


def test_a_stale_feeds_announcement_time_is_shown_in_the_zone() -> None:
    reason = "serves the mailing of 2026-11-05; arXiv announced the one of 2026-11-09 at 2026-11-09 01:00 UTC"
    assert source_reason(reason, translator("en")) == reason  # UTC reads as stored
    shanghai = display_zone("Asia/Shanghai", translator("zh"))
    assert source_reason(reason, shanghai.t, shanghai) == (
        "提供的是 2026-11-05 的公告；arXiv 已于 2026-11-09 09:00 北京时间 发布 2026-11-09 的公告"
    )


# -- the setting -----------------------------------------------------------------------------------------


def test_the_setting_takes_an_iana_name_and_defaults_to_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().display_timezone == "UTC"
    monkeypatch.setenv("PAPERTRAIL_DISPLAY_TIMEZONE", "Asia/Shanghai")
    assert Settings().display_timezone == "Asia/Shanghai"
    monkeypatch.setenv("PAPERTRAIL_DISPLAY_TIMEZONE", " ")
    assert Settings().display_timezone == "UTC"  # an empty variable is not set


@pytest.mark.parametrize(
    ("value", "meant"),
    [("Beijing", None), ("asia/shanghai", "Asia/Shanghai"), ("CST", "Asia/Shanghai"), ("Asia", None),
     ("../etc/passwd", None)],
)  # fmt: skip
def test_an_unknown_zone_is_refused_naming_it(value: str, meant: str | None) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(display_timezone=value)
    message = str(refused.value)
    assert f"PAPERTRAIL_DISPLAY_TIMEZONE: {value!r} is not a timezone" in message
    assert "such as Asia/Shanghai" in message
    if meant:
        assert f"did you mean {meant}" in message or f"or {meant}?" in message


def test_an_unknown_zone_stops_the_command_at_start_up(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_DISPLAY_TIMEZONE", "Mars/Olympus_Mons")
    code, _, err = invoke("status")
    assert code == 2
    assert "invalid settings: display_timezone: PAPERTRAIL_DISPLAY_TIMEZONE: 'Mars/Olympus_Mons'" in err
    assert "such as Asia/Shanghai" in " ".join(err.split())


# -- the chart's days, counted by the store --------------------------------------------------------------


def test_a_version_falls_on_the_day_of_the_display_zone(db: Database) -> None:
    arrive(db, datetime(2026, 11, 8, 15, 59, 59, tzinfo=UTC), version("2611.00001"))  # 23:59:59 in Shanghai
    arrive(db, datetime(2026, 11, 8, 16, 0, tzinfo=UTC), version("2611.00002"))  # 00:00 in Shanghai
    arrive(db, datetime(2026, 11, 8, 16, 30, tzinfo=UTC), version("2611.00003", ai=True))
    arrive(db, datetime(2026, 11, 9, 1, 0, tzinfo=UTC), version("2611.00001", 2))
    now = datetime(2026, 11, 9, 12, 0, tzinfo=UTC)
    assert counts(db, now, 3, SHANGHAI) == {
        "2026-11-07": (0, 0, 0),
        "2026-11-08": (1, 0, 0),
        "2026-11-09": (2, 1, 1),
    }
    assert counts(db, now, 3, UTC) == {
        "2026-11-07": (0, 0, 0),
        "2026-11-08": (3, 0, 1),
        "2026-11-09": (0, 1, 0),
    }
    # Late in the UTC evening it is already tomorrow in Shanghai: the chart's today is Shanghai's.
    late = datetime(2026, 11, 9, 17, 0, tzinfo=UTC)
    assert list(counts(db, late, 2, SHANGHAI)) == ["2026-11-09", "2026-11-10"]
    assert list(counts(db, late, 2, UTC)) == ["2026-11-08", "2026-11-09"]


def test_a_day_of_25_hours_keeps_all_of_its_news(db: Database) -> None:
    arrive(db, datetime(2026, 10, 23, 21, 59, tzinfo=UTC), version("2610.00001"))  # before the window
    arrive(db, datetime(2026, 10, 24, 21, 59, tzinfo=UTC), version("2610.00002"))  # 24 Oct 23:59 CEST
    arrive(db, datetime(2026, 10, 24, 22, 0, tzinfo=UTC), version("2610.00003"))  # 25 Oct 00:00 CEST
    arrive(db, datetime(2026, 10, 25, 22, 30, tzinfo=UTC), version("2610.00004"))  # 25 Oct 23:30 CET
    arrive(db, datetime(2026, 10, 25, 23, 0, tzinfo=UTC), version("2610.00005"))  # 26 Oct 00:00 CET
    arrive(db, datetime(2026, 10, 27, 9, 0, tzinfo=UTC), version("2610.00006"))  # after "now": not shown
    now = datetime(2026, 10, 26, 12, 0, tzinfo=UTC)
    assert counts(db, now, 3, BERLIN) == {
        "2026-10-24": (1, 0, 0),
        "2026-10-25": (2, 0, 0),
        "2026-10-26": (1, 0, 0),
    }


@contextmanager
def statements(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (with their parameters) the store sends while the block runs."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        sent.append((statement, parameters))

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)


def test_the_chart_reads_the_window_through_the_news_index(db: Database) -> None:
    arrive(db, datetime(2026, 11, 8, 16, 30, tzinfo=UTC), version("2611.00003"))
    # A backfill in the window's days: history, which the partial index of news leaves out.
    history = [version(f"2611.{n:05d}") for n in range(100, 600)]
    paper_records.save_versions(
        db, history, now=datetime(2026, 11, 9, 3, 0, tzinfo=UTC), novelty=Novelty.HISTORY
    )
    with statements(db) as sent:
        shown = dashboard_records.daily_counts(db, datetime(2026, 11, 9, 12, 0, tzinfo=UTC), 30, SHANGHAI)
    assert sum(day.total for day in shown) == 1
    (statement, parameters), *_ = [(s, p) for s, p in sent if "CASE" in s]
    with db.engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # At a test's size PostgreSQL's planner rates every index on first_seen_at, or on news only,
            # alike (at a library's size the partial one is the small one): they are dropped in this test's
            # own schema, so that what is tested is whether the statement can be answered from a range of
            # the partial index at all. A WHERE it cannot use (the CASE, or a function of first_seen_at)
            # falls back to the disabled sequential scan and fails.
            others = (
                "ix_version_first_seen_at",
                "ix_version_news_announced_at",
                "ix_version_news_source_announced_at",
            )
            for name in others:
                connection.exec_driver_sql(f"DROP INDEX {name}")
            connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
            prefix = "EXPLAIN "
        else:
            prefix = "EXPLAIN QUERY PLAN "
        plan = " ".join(str(row) for row in connection.exec_driver_sql(prefix + statement, parameters))
    assert "ix_version_news_first_seen_at" in plan, plan
    # A range of the index, not all of it: the window's news only.
    assert "Index Cond: (first_seen_at >=" in plan or "first_seen_at>?" in plan, plan


# -- the pages -------------------------------------------------------------------------------------------

NOW = datetime(2026, 11, 9, 12, 53, tzinfo=UTC)  # 20:53 in Shanghai


@pytest.fixture
def pages(db: Database) -> Database:
    """A store with news across Shanghai's midnight, a stale arXiv feed's runs and a delivery alarm."""
    arrive(db, datetime(2026, 11, 8, 16, 30, tzinfo=UTC), version("2611.00003", ai=True))
    run = run_records.start_run(db, "arxiv-rss", now=datetime(2026, 11, 9, 11, 59, tzinfo=UTC))
    # The feed still serves Thursday's mailing on Monday: stale, with arXiv's announcement time in the reason.
    run_records.finish_run(
        db,
        run,
        RunState.OK,
        now=datetime(2026, 11, 9, 12, 0, tzinfo=UTC),
        cursor="2026-11-05T00:00:00-05:00",
    )
    alarm_records.raise_alarm(
        db,
        "email",
        "rcpt 550 5.7.1",
        recipients=9,
        held=9,
        sample="550",
        now=datetime(2026, 11, 9, 2, tzinfo=UTC),
    )
    return db


def client(db: Database, **settings: Any) -> TestClient:
    """The app over ``store`` at :data:`NOW`."""
    return TestClient(build_app(web_context(db, secret_key=KEY, **settings), clock=lambda: NOW))


def test_the_status_page_shows_the_display_zone(pages: Database) -> None:
    shanghai = client(pages, display_timezone="Asia/Shanghai")
    zh = shanghai.get("/?lang=zh").text
    assert "统计 2026-11-08 20:53 — 2026-11-09 20:53（北京时间）" in zh
    assert "页面生成于 2026-11-09 20:53 北京时间" in zh
    assert "2026-11-09 20:00 北京时间 · 正常" in zh or "2026-11-09 20:00 北京时间 · ok" in zh
    assert "首次出现于 2026-11-09 10:00 北京时间" in zh
    assert "arXiv 已于 2026-11-09 09:00 北京时间 发布" in zh
    assert "最近 30 天每日新增（北京时间）" in zh and "<th>日期（北京时间）</th>" in zh
    # The version first seen at 16:30 UTC on 8 Nov is on Shanghai's 9 Nov.
    assert re.search(r'<tr data-day="2026-11-09"><td>2026-11-09</td><td class="num">1</td>', zh)
    assert not re.search(r'<tr data-day="2026-11-08"><td>2026-11-08</td><td class="num">[1-9]', zh)
    assert not re.search(r"\d\d:\d\d UTC", zh)  # no time left in UTC

    en = shanghai.get("/?lang=en").text
    assert "Counted 2026-11-08 20:53 — 2026-11-09 20:53 (Beijing time)" in en
    assert "Page generated 2026-11-09 20:53 Beijing time" in en
    assert "First seen 2026-11-09 10:00 Beijing time" in en
    assert "News per day, last 30 days (Beijing time)" in en and "<th>Day (Beijing time)</th>" in en
    assert "From 2026-10-11 to 2026-11-09 (Beijing time)" in en
    assert not re.search(r"\d\d:\d\d UTC", en)


def test_utc_stays_the_default(pages: Database) -> None:
    page = client(pages).get("/").text
    assert "Counted 2026-11-08 12:53 — 2026-11-09 12:53 (UTC)" in page
    assert "Page generated 2026-11-09 12:53 UTC" in page
    assert "News per day, last 30 days (UTC)" in page and "<th>Day (UTC)</th>" in page
    assert "arXiv announced the one of 2026-11-09 at 2026-11-09 01:00 UTC" in page
    assert re.search(r'<tr data-day="2026-11-08"><td>2026-11-08</td><td class="num">1</td>', page)
    assert "北京时间" not in page and "Beijing time" not in page


def test_the_browser_paper_and_source_pages_show_the_display_zone(pages: Database) -> None:
    shanghai = client(pages, display_timezone="Asia/Shanghai")
    for language, name in (("zh", "北京时间"), ("en", "Beijing time")):
        listing = shanghai.get(f"/papers?lang={language}").text
        assert f"2026-11-09 00:30 {name}" in listing  # first seen
        assert f"2026-11-08 09:00 {name}" in listing  # announced by arXiv at 01:00 UTC
        paper = shanghai.get(f"/papers/2611.00003?lang={language}").text
        assert f"<td>2026-11-08 09:00 {name}</td>" in paper and f"<td>2026-11-09 00:30 {name}</td>" in paper
        source = shanghai.get(f"/sources/arxiv-rss?lang={language}").text
        assert f"<td>2026-11-09 19:59 {name}</td>" in source and f"<td>2026-11-09 20:00 {name}</td>" in source
        for page in (listing, paper, source):
            assert not re.search(r"\d\d:\d\d UTC", page)
    berlin = client(pages, display_timezone="Europe/Berlin").get("/sources/arxiv-rss").text
    assert "<td>2026-11-09 12:59 CET</td>" in berlin
