"""Scan receipts and heartbeats ("users cannot tell a quiet day from a broken pipeline").

The receipt's arithmetic over source runs (pure, core.delivery.receipts), the store's read of the runs on
SQLite
and PostgreSQL, whole delivery passes whose receipts must equal what the stored runs recorded (with a
source failing then recovering, and one still failing), the heartbeat's rules (announcement days, nothing
matched, opted in, once per announcement, under retries and several planners), and the switches: the
chat command, the manage page and ``papertrail schedule --heartbeat``.

The clock is fixed in the week of Monday 16 November 2026, when New York is on EST: arXiv's 20:00
announcement there is 01:00 UTC the next day, and the reader's daily 08:00 in Berlin (CET) is 07:00 UTC.
"""

from __future__ import annotations

import html
import io
import re
import threading
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import col

from bot.commands import handle
from bot.commands_base import ChatContext, Problem
from core.channel import DeliveryError, Notifier
from core.config import Settings
from core.db import Database
from core.delivery.digests import (
    DeliveryPolicy,
    DigestReport,
    plan_digests,
    plan_heartbeats,
    send_due_digests,
)
from core.delivery.receipt_text import word_receipt
from core.delivery.receipts import LOOKBACK, RunLog, receipt_window
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.languages import translator
from core.ledger import ledger_records
from core.ledger.ledger_records import DigestPlan
from core.models import DigestState, Follow, RunState, SourceRun, Subscriber
from core.papers import paper_records, run_records
from core.papers.health import recent_announcement
from core.papers.paper_records import SaveResult
from core.values import Outage, PaperIn, Receipt, SourceScan
from notifiers.console.notifier import ConsoleNotifier
from notifiers.slack.blocks import build_payloads
from notifiers.webhook.payload import digest_payload
from tests.cli_helpers import invoke
from tests.hostile import sample_receipt
from tests.support.ledger import ScriptedNotifier
from tests.support.telegram_digests import assert_well_formed
from tests.support.web import KEY, client_for

ADDRESS = "console:ada"
BERLIN = "Europe/Berlin"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def mailing(day: str) -> str:
    """The cursor an arXiv RSS run records: the channel's pubDate, midnight in New York."""
    return f"{day}T00:00:00-05:00"


# -- the arithmetic, over runs built in memory --------------------------------------------------------------


def row(
    run_id: int,
    finished: str,
    state: RunState = RunState.OK,
    *,
    new: int = 0,
    revisions: int = 0,
    cursor: str | None = None,
    source: str = "arxiv-rss",
) -> SourceRun:
    end = at(finished)
    return SourceRun(
        id=run_id,
        source=source,
        started_at=end - timedelta(seconds=20),
        finished_at=end,
        state=state,
        new_papers=new,
        revisions=revisions,
        cursor=cursor,
        error="HTTP 503" if state == RunState.ERROR else None,
    )


def test_counts_are_what_the_runs_stored_in_the_window() -> None:
    runs = [
        row(1, "2026-11-16T01:05", new=880, revisions=20, cursor=mailing("2026-11-16")),
        row(2, "2026-11-17T01:05", new=1400, revisions=100, cursor=mailing("2026-11-17")),
        row(3, "2026-11-17T01:35", RunState.NOT_MODIFIED),
        row(4, "2026-11-17T02:00", source="hf-daily"),  # picks only: no news, not in the receipt
        row(5, "2026-11-17T03:00", new=12, source="arxiv-oai"),  # a gap fill that stored news
        row(6, "2026-11-17T06:00", cursor=mailing("2026-11-17")),  # the same mailing again: 0 new
    ]
    log = RunLog(runs)
    day = log.receipt(since=at("2026-11-16T07:00"), until=at("2026-11-17T07:00"), matched=7, timezone=BERLIN)
    assert day.sources == (
        SourceScan("arxiv-rss", runs=3, new_versions=1500, announcements=1),
        SourceScan("arxiv-oai", runs=1, new_versions=12),
    )
    assert (day.matched, day.outages, day.timezone) == (7, (), BERLIN)
    two_days = log.receipt(since=at("2026-11-15T07:00"), until=at("2026-11-17T07:00"), matched=7)
    assert two_days.sources[0] == SourceScan("arxiv-rss", runs=4, new_versions=2400, announcements=2)
    # A window in which the feed ran but stored nothing still names it: zero is what was scanned.
    quiet = log.receipt(since=at("2026-11-17T07:00"), until=at("2026-11-18T00:00"), matched=0)
    assert quiet.sources == (SourceScan("arxiv-rss", runs=0, new_versions=0, announcements=0),)
    text = word_receipt(day, translator("en"))
    assert text.summary == (
        "Since Mon 08:00 CET: arXiv: 1 announcement, 1,500 new versions scanned; "
        "arXiv OAI-PMH: 12 new versions scanned; 7 matched your follows."
    )
    assert text.warnings == ()


FAILING_RUNS = [
    row(1, "2026-11-16T01:05", new=5, cursor=mailing("2026-11-16")),
    row(2, "2026-11-17T01:05", RunState.ERROR),
    row(3, "2026-11-17T01:35", RunState.ERROR),
    row(4, "2026-11-17T03:00", new=7, cursor=mailing("2026-11-17")),
    row(5, "2026-11-18T01:05", RunState.ERROR),
    row(6, "2026-11-18T01:35", RunState.ERROR),
]


def test_a_source_failing_then_recovering_is_one_gap_to_the_next_good_run() -> None:
    receipt = RunLog(FAILING_RUNS).receipt(
        since=at("2026-11-16T07:00"), until=at("2026-11-17T07:00"), matched=2, timezone=BERLIN
    )
    assert receipt.outages == (
        Outage("arxiv-rss", "failing", at("2026-11-17T01:05"), at("2026-11-17T03:00")),
    )
    assert receipt.sources == (SourceScan("arxiv-rss", runs=3, new_versions=7, announcements=1),)
    (warning,) = word_receipt(receipt, translator("en")).warnings
    assert warning == (
        "arXiv failing from Tue 02:05 to Tue 04:00 CET; papers from that window arrive as it catches up."
    )
    (chinese,) = word_receipt(receipt, translator("zh")).warnings
    assert chinese == "arXiv 在 周二 02:05 至 周二 04:00 CET 期间出错；这段时间的论文会在补上后送达。"


def test_a_source_still_failing_says_so_from_the_streaks_first_failed_run() -> None:
    log = RunLog(FAILING_RUNS)
    day = log.receipt(since=at("2026-11-17T07:00"), until=at("2026-11-18T07:00"), matched=0, timezone=BERLIN)
    assert day.outages == (Outage("arxiv-rss", "failing", at("2026-11-18T01:05"), None),)
    # A window that opens inside the failure: the gap still starts at the first failed run, before it.
    late = log.receipt(since=at("2026-11-18T02:00"), until=at("2026-11-18T07:00"), matched=0, timezone=BERLIN)
    assert late.outages == day.outages
    (warning,) = word_receipt(late, translator("en")).warnings
    assert warning == (
        "arXiv failing since Wed 02:05 CET, and still failing; papers from that window will arrive when "
        "it recovers."
    )


def test_stale_is_the_status_pages_verdict_replayed() -> None:
    runs = [
        row(1, "2026-11-17T01:05", new=5, cursor=mailing("2026-11-17")),
        # Tuesday evening's announcement (01:00 UTC) is not in the feed yet: fine within the 4 h grace...
        row(2, "2026-11-18T01:05", cursor=mailing("2026-11-17")),
        # ...stale from 05:00 UTC on,
        row(3, "2026-11-18T06:00", cursor=mailing("2026-11-17")),
        # until a run serves Wednesday's mailing.
        row(4, "2026-11-18T09:00", new=6, cursor=mailing("2026-11-18")),
    ]
    log = RunLog(runs, grace=timedelta(hours=4))
    recovered = log.receipt(since=at("2026-11-17T07:00"), until=at("2026-11-18T12:00"), matched=1)
    assert recovered.outages == (
        Outage("arxiv-rss", "stale", at("2026-11-18T05:00"), at("2026-11-18T09:00")),
    )
    # No run at all afterwards (the scheduler stopped): Wednesday evening's mailing never came in, and the
    # receipt says so at its end, though no run recorded anything.
    stopped = log.receipt(
        since=at("2026-11-18T12:00"), until=at("2026-11-19T12:00"), matched=0, timezone=BERLIN
    )
    assert stopped.sources == (SourceScan("arxiv-rss", runs=0, new_versions=0, announcements=0),)
    assert stopped.outages == (Outage("arxiv-rss", "stale", at("2026-11-19T05:00"), None),)
    (warning,) = word_receipt(stopped, translator("en")).warnings
    assert warning.startswith("arXiv behind the announcements since Thu 06:00 CET, and still behind")
    # A holiday is no announcement: nothing was expected, so nothing is stale.
    holiday = RunLog(runs, holidays={date(2026, 11, 19)})
    assert (
        holiday.receipt(since=at("2026-11-18T12:00"), until=at("2026-11-19T12:00"), matched=0).outages == ()
    )


def test_the_window_starts_at_the_previous_digest_at_most_a_week_back() -> None:
    until = at("2026-11-20T07:00")
    assert receipt_window(at("2026-11-19T07:00"), at("2026-01-01T00:00"), until) == (
        at("2026-11-19T07:00"),
        until,
    )
    assert receipt_window(None, at("2026-11-18T10:00"), until) == (at("2026-11-18T10:00"), until)
    assert receipt_window(None, at("2026-01-01T00:00"), until) == (until - LOOKBACK, until)
    long_ago = word_receipt(
        Receipt(at("2026-11-01T07:00"), until, 0, timezone="UTC"), translator("en"), heartbeat=True
    )
    assert (
        long_ago.summary
        == "Nothing new matched your follows. Since 2026-11-01 07:00 UTC: no source was checked."
    )


# -- the store's read of the runs ------------------------------------------------------------------------


def record(
    db: Database,
    source: str,
    when: str,
    state: RunState = RunState.OK,
    *,
    papers: Sequence[PaperIn] = (),
    cursor: str | None = None,
) -> SaveResult:
    """One source run at a fixed time: what core.papers.pipeline.ingest_once records (start, store the fetched
    versions, finish with their counts, match), with the test's clock for the run's end as well (ingest_once
    finishes a run at the real time)."""
    now = at(when)
    run_id = run_records.start_run(db, source, now=now)
    if state == RunState.ERROR:
        run_records.finish_run(db, run_id, state, now=now, error="HTTP 503 from the feed")
        return SaveResult()
    saved = paper_records.save_versions(db, papers, now=now)
    run_records.finish_run(
        db,
        run_id,
        state,
        now=now,
        fetched=len(papers),
        new_papers=saved.new_papers,
        revisions=saved.revisions,
        duplicates=saved.duplicates,
        cursor=cursor,
    )
    match_new(db, now=now)
    return saved


def test_the_store_reads_the_window_and_how_each_source_stood_before_it(db: Database) -> None:
    record(db, "arxiv-rss", "2026-11-13T01:05", cursor=mailing("2026-11-13"))
    record(db, "arxiv-rss", "2026-11-13T06:00", RunState.NOT_MODIFIED)
    record(db, "arxiv-rss", "2026-11-14T01:05", RunState.ERROR)  # the failure streak starts
    record(db, "arxiv-rss", "2026-11-15T01:05", RunState.ERROR)
    record(db, "arxiv-rss", "2026-11-16T06:00", RunState.ERROR)  # the last run before the window
    record(db, "arxiv-oai", "2026-11-16T05:00")  # before the window, and no run inside it
    record(db, "arxiv-rss", "2026-11-17T01:05", cursor=mailing("2026-11-17"))
    record(db, "hf-daily", "2026-11-17T02:00")
    record(db, "arxiv-rss", "2026-11-18T01:05", cursor=mailing("2026-11-18"))  # after the window
    runs = run_records.receipt_runs(
        db,
        at("2026-11-16T07:00"),
        at("2026-11-17T07:00"),
        overlap=timedelta(days=1),
        sources=("arxiv-rss",),
        page=2,
    )
    shown = [(run.source, run.finished_at) for run in runs]
    assert shown == [
        ("arxiv-rss", at("2026-11-13T01:05")),  # the mailing it served
        ("arxiv-rss", at("2026-11-14T01:05")),  # the first failed run of the streak
        ("arxiv-rss", at("2026-11-16T06:00")),  # the last run before the window
        ("arxiv-rss", at("2026-11-17T01:05")),
        ("hf-daily", at("2026-11-17T02:00")),
    ]
    receipt = RunLog(runs).receipt(since=at("2026-11-16T07:00"), until=at("2026-11-17T07:00"), matched=0)
    assert receipt.outages == (
        Outage("arxiv-rss", "failing", at("2026-11-14T01:05"), at("2026-11-17T01:05")),
    )


# -- whole delivery passes -------------------------------------------------------------------------------


def paper(number: int, version: int = 1, category: str = "cs.DC") -> PaperIn:
    return PaperIn(
        f"2611.{number:05d}", version, f"Paper {number}", "An abstract.", ("Ada Lovelace",), (category,)
    )


def subscribe(db: Database, *, created: str = "2026-11-16T07:30", schedule: str = "daily 08:00") -> int:
    """console:ada in Berlin, following cs.DC since ``created`` (a follow sees what arrives after it)."""
    result = follow(db, ADDRESS, "cat:cs.DC", timezone=BERLIN, schedule=schedule)
    subscriber_id = result.subscriber.id
    assert subscriber_id is not None
    subscriber_records.update_subscriber(db, subscriber_id, created_at=at(created))
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=at(created)))
    return subscriber_id


async def deliver(
    db: Database,
    when: str,
    *,
    policy: DeliveryPolicy | None = None,
    notifier: Notifier | None = None,
    renderer: Renderer | None = None,
) -> tuple[list[DigestReport], str]:
    """One delivery pass at ``when`` through the console adapter: the reports and what it printed."""
    out = io.StringIO()
    reports = await send_due_digests(
        db,
        {"console": notifier or ConsoleNotifier(out)},
        renderer or Renderer(),
        now=at(when),
        policy=policy,
    )
    return reports, out.getvalue()


def stored_in(db: Database, since: str, until: str) -> int:
    """New versions the source runs finished in (since, until] recorded, summed by the database."""
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.coalesce(sa.func.sum(SourceRun.new_papers + SourceRun.revisions), 0)).where(
                    col(SourceRun.finished_at) > at(since), col(SourceRun.finished_at) <= at(until)
                )
            ).scalar_one()
        )


async def test_receipts_equal_what_the_runs_stored_through_failure_and_recovery(db: Database) -> None:
    subscriber_id = subscribe(db)
    # Tuesday: Monday evening's mailing, then the feed unchanged, then fetched again (all duplicates).
    record(db, "arxiv-rss", "2026-11-17T01:05", papers=[paper(1), paper(2), paper(3, category="cs.AI")],
           cursor=mailing("2026-11-17"))  # fmt: skip
    record(db, "arxiv-rss", "2026-11-17T01:35", RunState.NOT_MODIFIED)
    again = record(
        db, "arxiv-rss", "2026-11-17T06:30", papers=[paper(1), paper(2)], cursor=mailing("2026-11-17")
    )
    assert again.duplicates == 2
    (report,), printed = await deliver(db, "2026-11-17T07:00")
    assert report.sent and report.items == 2
    scanned = stored_in(db, "2026-11-16T07:30", "2026-11-17T07:00")
    assert scanned == 3
    assert (
        f"Since Mon 08:30 CET: arXiv: 1 announcement, {scanned} new versions scanned; 2 matched your follows."
        in printed
    )
    assert "⚠" not in printed

    # Wednesday: the feed fails twice after the announcement, then recovers with a new paper and a revision.
    record(db, "arxiv-rss", "2026-11-18T01:05", RunState.ERROR)
    record(db, "arxiv-rss", "2026-11-18T01:35", RunState.ERROR)
    wednesday = [paper(4), paper(1, 2), paper(5, category="cs.AI")]
    saved = record(db, "arxiv-rss", "2026-11-18T03:00", papers=wednesday, cursor=mailing("2026-11-18"))
    assert (saved.new_papers, saved.revisions) == (2, 1)
    (report,), printed = await deliver(db, "2026-11-18T07:00")
    assert report.items == 2
    scanned = stored_in(db, "2026-11-17T07:00", "2026-11-18T07:00")
    assert f"Since Tue 08:00 CET: arXiv: 1 announcement, {scanned} new versions scanned; 2 matched" in printed
    assert "⚠ arXiv failing from Wed 02:05 to Wed 04:00 CET" in printed

    # Thursday: failing since the announcement. Nothing matched, and without a heartbeat nothing is sent...
    record(db, "arxiv-rss", "2026-11-19T01:05", RunState.ERROR)
    record(db, "arxiv-rss", "2026-11-19T06:00", RunState.ERROR)
    assert await deliver(db, "2026-11-19T07:00") == ([], "")
    # ...with one, the silence is explained.
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=True)
    (report,), printed = await deliver(db, "2026-11-19T07:01")
    assert report.sent and report.items == 0
    assert (
        "Nothing new matched your follows. Since Wed 08:00 CET: arXiv: 0 announcements, 0 new versions"
        in printed
    )
    assert "⚠ arXiv failing since Thu 02:05 CET, and still failing" in printed
    assert [d.item_count for d in ledger_records.digests_of(db, subscriber_id)] == [2, 2, 0]


# -- heartbeats --------------------------------------------------------------------------------------------


def heartbeats(db: Database, subscriber_id: int) -> list[datetime]:
    """When each heartbeat of the subscriber was planned."""
    return [d.created_at for d in ledger_records.digests_of(db, subscriber_id) if d.item_count == 0]


def test_announcement_days_come_from_arxivs_calendar() -> None:
    assert recent_announcement(at("2026-11-16T07:00")) == at("2026-11-16T01:00")  # Sunday evening's
    assert recent_announcement(at("2026-11-15T07:00")) is None  # Sunday morning: Thursday's was 54 h ago
    assert recent_announcement(at("2026-11-21T07:00")) is None  # Saturday: Thursday evening's, 30 h ago
    assert recent_announcement(at("2026-11-18T07:00"), {date(2026, 11, 18)}) is None  # a holiday


async def test_a_heartbeat_goes_out_on_announcement_days_when_nothing_matched_and_only_then(
    db: Database,
) -> None:
    subscriber_id = subscribe(db, created="2026-11-14T12:00")
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=True)
    record(
        db,
        "arxiv-rss",
        "2026-11-16T01:05",
        papers=[paper(9, category="cs.AI")],
        cursor=mailing("2026-11-16"),
    )

    assert await deliver(db, "2026-11-15T07:00") == ([], "")  # Sunday: no announcement since Thursday
    (report,), printed = await deliver(db, "2026-11-16T07:00")  # Monday: Sunday evening's mailing
    assert report.sent and report.items == 0
    assert printed.splitlines()[1:3] == ["PaperTrail: no new matches", "=========================="]
    assert (
        "Nothing new matched your follows. Since Sat 13:00 CET: arXiv: 1 announcement, 1 new version scanned."
        in printed
    )
    assert "PaperTrail heartbeat for ada" in printed and "digest heartbeat off" in printed
    # Once: neither a second pass nor a later one the same day sends another.
    assert await deliver(db, "2026-11-16T07:00") == ([], "")
    assert await deliver(db, "2026-11-16T18:00") == ([], "")
    assert heartbeats(db, subscriber_id) == [at("2026-11-16T07:00")]

    # Tuesday: a match goes out as a digest carrying the receipt, and no heartbeat.
    record(db, "arxiv-rss", "2026-11-17T01:05", papers=[paper(10)], cursor=mailing("2026-11-17"))
    (report,), printed = await deliver(db, "2026-11-17T07:00")
    assert report.items == 1 and "Nothing new matched" not in printed
    assert "1 new version scanned; 1 matched your follows." in printed

    # Wednesday's mailing is a holiday: no announcement, no heartbeat.
    holiday = DeliveryPolicy(holidays=frozenset({date(2026, 11, 18)}))
    assert await deliver(db, "2026-11-18T07:00", policy=holiday) == ([], "")
    # Thursday, heartbeat off: nothing.
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=False)
    assert await deliver(db, "2026-11-19T07:00") == ([], "")
    # Friday, on again: one.
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=True)
    assert len((await deliver(db, "2026-11-20T07:00"))[0]) == 1
    # Saturday: Thursday evening's announcement is 30 hours old; no heartbeat.
    assert await deliver(db, "2026-11-21T07:00") == ([], "")
    # Instant digests have no digest time, so no heartbeat either.
    subscriber_records.update_subscriber(db, subscriber_id, schedule="instant")
    assert await deliver(db, "2026-11-23T07:00") == ([], "")
    assert heartbeats(db, subscriber_id) == [at("2026-11-16T07:00"), at("2026-11-20T07:00")]


async def test_a_failed_heartbeat_is_retried_never_doubled_and_a_dead_one_not_replaced(db: Database) -> None:
    subscriber_id = subscribe(db, created="2026-11-14T12:00")
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=True)
    busy = DeliveryError("console busy", retryable=True)
    notifier = ScriptedNotifier([busy])
    (first,), _ = await deliver(db, "2026-11-16T07:00", notifier=notifier)
    assert not first.sent and not first.dead
    # The next passes retry the same heartbeat (after its back-off); none opens a second one.
    assert (await deliver(db, "2026-11-16T07:00:30", notifier=notifier))[0] == []
    (second,), _ = await deliver(db, "2026-11-16T07:03", notifier=notifier)
    assert second.sent and second.digest_id == first.digest_id
    (_, message) = notifier.sent[0]
    assert message.heartbeat and message.item_count == 0 and message.receipt is not None
    assert [(d.state, d.attempts) for d in ledger_records.digests_of(db, subscriber_id)] == [
        (DigestState.SENT, 2)
    ]

    # Tuesday: dead-lettered at its only attempt; no second heartbeat for that announcement.
    dead_end = DeliveryPolicy(max_attempts=1)
    notifier.outcomes.append(busy)
    (third,), _ = await deliver(db, "2026-11-17T07:00", notifier=notifier, policy=dead_end)
    assert third.dead
    assert (await deliver(db, "2026-11-17T07:10", notifier=notifier, policy=dead_end))[0] == []
    assert [d.state for d in ledger_records.digests_of(db, subscriber_id)] == [
        DigestState.SENT,
        DigestState.DEAD,
    ]


async def test_a_planner_with_stale_candidates_opens_no_second_heartbeat(db: Database) -> None:
    subscriber_id = subscribe(db, created="2026-11-14T12:00")
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=True)
    now = at("2026-11-16T07:00")
    announced = recent_announcement(now)
    assert announced is not None
    # Planner A reads its candidates; planner B opens the heartbeat and a worker sends it; then A opens.
    stale = ledger_records.heartbeat_candidates(db, now, announced)
    assert [s.id for s in stale] == [subscriber_id]
    assert plan_heartbeats(db, {"console": ConsoleNotifier(io.StringIO())}, now=now) == 1
    (sent,), _ = await deliver(db, "2026-11-16T07:00")
    assert sent.sent
    plans = [DigestPlan(subscriber_id, "console", instant_only=False)]
    assert ledger_records.open_heartbeats(db, plans, not_since=announced, now=now) == []
    assert heartbeats(db, subscriber_id) == [now]


def test_planners_at_once_open_one_heartbeat(db: Database) -> None:
    subscriber_id = subscribe(db, created="2026-11-14T12:00")
    subscriber_records.update_subscriber(db, subscriber_id, heartbeat=True)
    notifiers: dict[str, Notifier] = {"console": ConsoleNotifier(io.StringIO())}
    start = threading.Barrier(4)
    opened: list[int] = []

    def plan() -> None:
        start.wait()
        opened.append(plan_digests(db, notifiers, now=at("2026-11-16T07:00")))

    threads = [threading.Thread(target=plan) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(opened) == [0, 0, 0, 1]
    assert len(heartbeats(db, subscriber_id)) == 1


# -- every channel, both languages ---------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_heartbeat_in_every_channel(language: str) -> None:
    renderer = Renderer(secret_key="k", public_url="https://papertrail.example")
    receipt = sample_receipt(0, BERLIN if language == "en" else "Asia/Shanghai")
    line = {
        "en": "Nothing new matched your follows. Since Mon 08:00 CET: arXiv: 1 announcement, 4,512 new",
        "zh": "没有新的论文与你的关注匹配。自 周一 15:00 CST 以来：arXiv：1 次发布、扫描了 4,512 个新版本",
    }[language]
    messages = {
        channel: renderer.render(channel, [], "12345", language=language, receipt=receipt, heartbeat=True)
        for channel in ("console", "email", "telegram", "slack", "webhook", "apprise")
    }
    for channel, message in messages.items():
        assert message.heartbeat and message.receipt == receipt and message.item_count == 0, channel
        assert line in message.text, channel
    telegram = messages["telegram"].html or ""
    assert_well_formed(telegram)
    assert line in html.unescape(telegram)
    assert line in html.unescape(messages["email"].html or "")
    (payload,) = build_payloads(messages["slack"])
    assert any(line in str(block) for block in payload.blocks)
    body = digest_payload(messages["webhook"], at("2026-11-17T07:00:05"))
    assert (body["kind"], body["items"], body["counts"]["new"]) == ("heartbeat", [], 0)
    assert body["receipt"]["matched"] == 0 and body["receipt"]["sources"][0]["new_versions"] == 4512
    assert [o["to"] for o in body["receipt"]["outages"]] == ["2026-11-17T02:35:00Z", None]
    if language == "zh":
        for message in messages.values():
            assert "heartbeat for" not in message.text and "Nothing new" not in message.text


# -- the switches --------------------------------------------------------------------------------------------

PRIVATE = ChatContext("telegram:4242", chat_name="Ada Lovelace")
CHINESE = ChatContext("telegram:4343", language="zh-CN")
GROUP_MEMBER = ChatContext("telegram:-100200300", is_group=True, can_change=False, chat_name="Lab")


def say(db: Database, text: str, ctx: ChatContext = PRIVATE) -> str:
    reply = handle(db, Settings().chat(), ctx, text, now=at("2026-11-16T12:00"))
    return reply.text


def beats(db: Database, address: str) -> bool:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None
    return subscriber.heartbeat


def test_the_chat_command_turns_the_heartbeat_on_and_off(sqlite_store: Database) -> None:
    db = sqlite_store
    on = say(db, "/digest heartbeat on")
    assert on.startswith("Heartbeat on; digests go out daily 08:00 (UTC).")
    assert "so that a quiet day is not mistaken for a broken one" in on
    assert beats(db, "telegram:4242") is True
    assert say(db, "/digest heartbeat").startswith("The heartbeat is on.")
    assert (
        say(db, "/schedule heartbeat off") == "Heartbeat off: on a day when nothing matched, nothing is sent."
    )
    assert beats(db, "telegram:4242") is False
    assert say(db, "/digest heartbeat").startswith("The heartbeat is off.")
    bad = handle(db, Settings().chat(), PRIVATE, "/digest heartbeat sometimes")
    assert bad.error == Problem.BAD_ARGUMENT and bad.suggestions == (
        "digest heartbeat on",
        "digest heartbeat off",
    )
    # Instant digests have no digest time: turning it on says so.
    say(db, "/digest instant")
    assert "the heartbeat goes out only with a daily, weekdays or weekly schedule" in say(
        db, "/digest heartbeat on"
    )
    # In a group only admins change it.
    refused = handle(db, Settings().chat(), GROUP_MEMBER, "/digest heartbeat on")
    assert (
        refused.error == Problem.NOT_ALLOWED
        and subscriber_records.get_subscriber(db, "telegram:-100200300") is None
    )
    # The help page documents it.
    assert "/digest heartbeat on — on arXiv announcement days when nothing matched" in say(db, "/help digest")


def test_the_chat_command_in_chinese(sqlite_store: Database) -> None:
    db = sqlite_store
    on = say(db, "/digest heartbeat on", CHINESE)
    assert on.startswith("心跳消息已开启；摘要发送时间为") and beats(db, "telegram:4343") is True
    assert say(db, "/digest heartbeat", CHINESE).startswith("心跳消息已开启。")
    assert say(db, "/digest heartbeat off", CHINESE) == "心跳消息已关闭：没有匹配的日子里不会发送任何消息。"
    assert beats(db, "telegram:4343") is False
    assert "digest heartbeat on" in say(db, "/help digest", CHINESE)


def test_the_manage_page_toggles_the_heartbeat(sqlite_store: Database) -> None:
    from core.people import tokens

    address = "email:ada@example.org"
    follow(sqlite_store, address, "cat:cs.DC")
    path = f"/manage/{tokens.sign(KEY, tokens.MANAGE, address)}"
    client = client_for(sqlite_store)
    page = client.get(path).text
    assert 'data-heartbeat="off"' in page and "It is off." in page and "Turn the heartbeat on" in page
    turned = client.post(path, data={"action": "heartbeat", "heartbeat": "on"})
    assert turned.status_code == 303 and turned.headers["location"] == f"{path}?done=heartbeat_on"
    assert beats(sqlite_store, address) is True
    page = client.get(turned.headers["location"]).text
    assert "Heartbeat on:" in page and 'data-heartbeat="on"' in page and "Turn the heartbeat off" in page
    assert client.post(path, data={"action": "heartbeat", "heartbeat": "off"}).status_code == 303
    assert beats(sqlite_store, address) is False
    bad = client.post(path, data={"action": "heartbeat", "heartbeat": "maybe"})
    assert bad.status_code == 400 and "unknown heartbeat choice" in html.unescape(bad.text)
    assert beats(sqlite_store, address) is False
    chinese = client.get(f"{path}?lang=zh").text
    assert "心跳消息" in chinese and "开启心跳消息" in chinese


def test_the_schedule_command_sets_the_heartbeat(env: Path) -> None:
    code, _, err = invoke("follow", "console:ada", "cat:cs.DC")
    assert code == 0, err
    code, out, err = invoke("schedule", "console:ada", "daily 07:30", "--heartbeat")
    assert code == 0, err
    assert re.sub(r"\s+", " ", out).strip() == "console:ada: schedule daily 07:30 (UTC), heartbeat on"
    code, out, _ = invoke("schedule", "console:ada", "daily 07:30", "--no-heartbeat")
    assert code == 0 and "heartbeat" not in out


def test_digests_rendered_outside_the_ledger_have_no_receipt() -> None:
    """A receipt needs the ledger's times; ``papertrail try``-like renders keep their old shape."""
    message = Renderer().render("console", [], "me")
    assert message.receipt is None and "Since" not in message.text


async def test_the_delivery_pass_reads_the_runs_once(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many digests in one pass share one read of the runs (core.delivery.digests.PassReceipts)."""
    for n in range(5):
        follow(db, f"console:reader{n}", "cat:cs.DC", schedule="instant")
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=at("2026-11-16T00:00")))
        session.execute(sa.update(Subscriber).values(created_at=at("2026-11-16T00:00")))
    record(db, "arxiv-rss", "2026-11-17T01:05", papers=[paper(1)], cursor=mailing("2026-11-17"))
    reads: list[tuple[datetime, datetime]] = []
    real = run_records.receipt_runs

    def counted(db: Database, since: datetime, until: datetime, **kwargs: object) -> list[SourceRun]:
        reads.append((since, until))
        return real(db, since, until, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_records, "receipt_runs", counted)
    reports, printed = await deliver(db, "2026-11-17T07:00")
    assert len(reports) == 5 and len(reads) == 1
    assert printed.count("arXiv: 1 announcement, 1 new version scanned; 1 matched your follows.") == 5


async def test_a_receipt_that_cannot_be_made_never_holds_a_digest_back(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    subscribe(sqlite_store)
    record(sqlite_store, "arxiv-rss", "2026-11-17T01:05", papers=[paper(1)], cursor=mailing("2026-11-17"))

    def unreachable(*args: object, **kwargs: object) -> list[SourceRun]:
        raise sa.exc.OperationalError("SELECT … FROM source_run", {}, Exception("database is locked"))

    monkeypatch.setattr(run_records, "receipt_runs", unreachable)
    (report,), printed = await deliver(sqlite_store, "2026-11-17T07:00")
    assert report.sent and report.items == 1
    assert "Paper 1" in printed and "Since" not in printed
    assert "goes out without its scan receipt" in caplog.text
