"""The maintained library totals equal a recount after every kind of write, on both databases.

The oracle is ``count_records.recount_library``: the counting queries the status page ran on
every load before the totals were maintained. Each write below goes through the call production uses
(``save_versions`` for ingest, backfill and gap fill, ``core.papers.pipeline.backfill`` over the snapshot
reader, ``save_picks``, ``save_guide``), on the recorded corpus where there is one.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import col

from core.db import Database
from core.guides import guide_records
from core.models import GuideRow
from core.overview import dashboard_records
from core.papers import count_records, paper_records
from core.papers.count_records import LibraryTotals, add_to_totals, rebuild_library_totals
from core.papers.paper_records import Novelty
from core.papers.pipeline import backfill
from core.values import AnnounceType, CommunityPick, Guide, PaperIn
from ingest.arxiv_oai_parse import parse_oai
from ingest.arxiv_rss_parse import parse_feed
from ingest.hf_daily_parse import parse_daily
from papertrail.cli.backfill import snapshot_batches
from tests.browse_oracle import assert_keys_and_index
from tests.conftest import BIG_FEED, CORPUS

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SNAPSHOT = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"
OAI_LIST = CORPUS / "arxiv-oai" / "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml"
HF_DAYS = sorted((CORPUS / "hf-daily" / "api-objects-reserialized").glob("*.json"))


def exact(db: Database) -> LibraryTotals:
    """The maintained totals, after checking them against the recount.

    The browser's sort keys and the search index are checked against their oracles too: every write below
    must keep them as exact as the totals.
    """
    totals = count_records.library_totals(db)
    assert totals == count_records.recount_library(db)
    assert_keys_and_index(db)
    return totals


def paper(arxiv_id: str, number: int, *, ai: bool = False, title: str = "A study of sums") -> PaperIn:
    """A version; AI-related through its category when ``ai``."""
    return PaperIn(
        arxiv_id=arxiv_id,
        version=number,
        title=title,
        abstract="We count things.",
        authors=("Ada Lovelace",),
        categories=("cs.LG",) if ai else ("math.CO",),
        announce_type=AnnounceType.NEW if number == 1 else AnnounceType.REPLACE,
        announced_at=NOW - timedelta(days=1),
    )


def pick(arxiv_id: str, day: date, upvotes: int = 1) -> CommunityPick:
    """A Hugging Face pick of ``arxiv_id`` on ``day``."""
    return CommunityPick(arxiv_id, day, "Picked", "A summary", ("Ada Lovelace",), upvotes)


def test_every_kind_of_write_keeps_the_totals_equal_to_a_recount(db: Database) -> None:
    assert exact(db) == LibraryTotals()
    # The backfill of the recorded snapshot sample, through what `papertrail backfill snapshot` runs.
    backfill(db, "snapshot", snapshot_batches(SNAPSHOT), now=NOW - timedelta(days=3))
    after_backfill = exact(db)
    assert after_backfill.papers == 200 and after_backfill.revised_papers > 0
    assert after_backfill.news_new == after_backfill.news_revisions == 0
    # Running it again stores nothing: every version is a duplicate.
    backfill(db, "snapshot", snapshot_batches(SNAPSHOT), now=NOW - timedelta(days=2))
    assert exact(db) == after_backfill

    # The recorded RSS day, as the daily ingest stores it (news), then the same feed again.
    feed = parse_feed(BIG_FEED.read_bytes()).items
    paper_records.save_versions(db, feed, now=NOW - timedelta(hours=30))
    after_day = exact(db)
    assert after_day.news_new > 0 and after_day.news_revisions > 0 and after_day.ai_papers > 0
    paper_records.save_versions(db, feed, now=NOW - timedelta(hours=29))
    assert exact(db) == after_day

    # A gap fill over the recorded OAI list: only what was announced after the newest news is news.
    paper_records.save_versions(
        db, parse_oai(OAI_LIST.read_bytes()).papers, now=NOW - timedelta(hours=20), novelty=Novelty.GAP
    )
    exact(db)

    # Community picks: recorded days (new papers as stubs, known ones flagged), a day seen again.
    for day_file in HF_DAYS[:3]:
        day = date.fromisoformat(day_file.stem)
        paper_records.save_picks(
            db, parse_daily(day_file.read_bytes(), day).picks, now=NOW - timedelta(hours=10)
        )
        exact(db)
    day = date.fromisoformat(HF_DAYS[0].stem)
    paper_records.save_picks(
        db, parse_daily(HF_DAYS[0].read_bytes(), day).picks, now=NOW - timedelta(hours=9)
    )
    # A pick of a paper the backfill stored, and a second pick of it on another day.
    backfilled = json.loads(SNAPSHOT.read_text().splitlines()[0])["id"]
    paper_records.save_picks(db, [pick(backfilled, date(2026, 11, 30))], now=NOW - timedelta(hours=8))
    paper_records.save_picks(db, [pick(backfilled, date(2026, 12, 1))], now=NOW - timedelta(hours=7))
    exact(db)

    # Revisions: a v1 that is not AI-related, then an AI-related v2 (the paper starts to count twice), a
    # stub completed by arXiv's metadata (history), a v3 of an already revised paper.
    paper_records.save_versions(db, [paper("2612.00001", 1)], now=NOW - timedelta(hours=6))
    before = exact(db)
    paper_records.save_versions(db, [paper("2612.00001", 2, ai=True)], now=NOW - timedelta(hours=5))
    after = exact(db)
    assert (after.ai_papers, after.revised_papers) == (before.ai_papers + 1, before.revised_papers + 1)
    stub = parse_daily(HF_DAYS[1].read_bytes(), date.fromisoformat(HF_DAYS[1].stem)).picks[0].arxiv_id
    paper_records.save_versions(
        db, [paper(stub, 1, ai=True)], now=NOW - timedelta(hours=4), novelty=Novelty.HISTORY
    )
    paper_records.save_versions(db, [paper("2612.00001", 3)], now=NOW - timedelta(hours=3))
    # One batch with a new paper's v1 and v2 together, and two papers at once.
    paper_records.save_versions(
        db,
        [paper("2612.00002", 1), paper("2612.00002", 2), paper("2612.00003", 1, ai=True)],
        now=NOW - timedelta(hours=2),
    )
    exact(db)

    # Guides change no library total; their 24-hour number is counted from an index (checked below).
    version_ids = paper_records.save_versions(db, [paper("2612.00004", 1, ai=True)], now=NOW).new_version_ids
    guide_records.save_guide(db, version_ids[0], "en", Guide("Short."), model="m", now=NOW)
    final = exact(db)

    # The status page, /metrics and `papertrail status` show the maintained numbers.
    counts, metrics, status = (
        dashboard_records.dashboard_counts(db, NOW),
        dashboard_records.metric_counts(db),
        dashboard_records.status(db, NOW),
    )
    assert (counts.papers, counts.ai_papers, counts.revised_papers, counts.community_papers) == (
        final.papers,
        final.ai_papers,
        final.revised_papers,
        final.community_papers,
    )
    assert metrics.papers == status.papers == final.papers and status.versions == final.versions
    assert metrics.versions_by_kind == {"new": final.news_new, "revision": final.news_revisions}


def test_random_writes_keep_the_totals_equal_to_a_recount(db: Database) -> None:
    """Seeded random batches over a small id space: news, history and gap fills, revisions, picks."""
    rng = random.Random(15)
    ids = [f"2612.{n:05d}" for n in range(1, 41)]
    novelties = list(Novelty)
    for step in range(40):
        now = NOW + timedelta(minutes=step)
        if rng.random() < 0.3:
            chosen = rng.sample(ids, rng.randint(1, 6))
            paper_records.save_picks(
                db, [pick(i, date(2026, 12, 1 + rng.randint(0, 3))) for i in chosen], now=now
            )
        else:
            batch = [
                paper(rng.choice(ids), rng.randint(1, 4), ai=rng.random() < 0.3)
                for _ in range(rng.randint(1, 12))
            ]
            paper_records.save_versions(db, batch, now=now, novelty=rng.choice(novelties))
        exact(db)


def test_the_migration_builds_the_totals_from_the_stored_rows(db: Database) -> None:
    backfill(db, "snapshot", snapshot_batches(SNAPSHOT), now=NOW)
    paper_records.save_versions(db, parse_feed(BIG_FEED.read_bytes()).items, now=NOW)
    paper_records.save_picks(db, [pick("0704.0001", date(2026, 12, 1))], now=NOW)
    expected = count_records.recount_library(db)
    with db.engine.begin() as connection:
        # As if the rows had been stored before migration 0017: no flags, no totals.
        connection.execute(sa.text("UPDATE paper SET ai_related = false, revised = false, picked = false"))
        connection.execute(sa.text("DELETE FROM library_total"))
        assert rebuild_library_totals(connection) == expected
    assert exact(db) == expected


def test_a_missing_totals_row_is_a_clear_error(db: Database) -> None:
    with db.engine.begin() as connection:
        connection.execute(sa.text("DELETE FROM library_total"))
    with pytest.raises(RuntimeError, match="library_total row is missing"):
        paper_records.save_versions(db, [paper("2612.00001", 1)])
    with pytest.raises(RuntimeError, match="library_total row is missing"):
        count_records.library_totals(db)


def _in_threads(count: int, work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def run(index: int) -> None:
        try:
            start.wait()
            work(index)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_concurrent_increments_are_not_lost(pg_store: Database) -> None:
    def add(_: int) -> None:
        for _ in range(25):
            with pg_store.engine.begin() as connection:
                add_to_totals(connection, versions=1, papers=2)

    _in_threads(8, add)
    totals = count_records.library_totals(pg_store)
    assert (totals.versions, totals.papers) == (200, 400)


def test_concurrent_writers_flipping_the_same_papers_count_each_once(pg_store: Database) -> None:
    """Eight writers store revisions (some AI-related) of the same 60 papers and pick them, at once."""
    ids = [f"2612.{n:05d}" for n in range(1, 61)]
    paper_records.save_versions(pg_store, [paper(i, 1) for i in ids], novelty=Novelty.HISTORY)

    def write(index: int) -> None:
        rng = random.Random(index)
        # Every writer its own version number (no unique conflicts), the papers in the same order.
        for start in range(0, len(ids), 15):
            chunk = ids[start : start + 15]
            paper_records.save_versions(pg_store, [paper(i, index + 2, ai=rng.random() < 0.5) for i in chunk])
            paper_records.save_picks(pg_store, [pick(i, date(2026, 12, 1 + index)) for i in chunk])

    _in_threads(8, write)
    totals = exact(pg_store)
    assert totals.revised_papers == totals.community_papers == len(ids)
    assert totals.news_revisions == 8 * len(ids)


def _guided_since_by_grouping(db: Database, since: datetime) -> int:
    """The count of "AI guides +N" as it was before the maintained totals: a grouping of every guide."""
    first = (
        sa.select(col(GuideRow.version_id), sa.func.min(col(GuideRow.created_at)).label("first"))
        .group_by(col(GuideRow.version_id))
        .subquery()
    )
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.count()).select_from(first).where(first.c.first >= since)
            ).scalar_one()
        )


def test_guided_versions_in_a_window_equal_the_grouping(db: Database) -> None:
    versions = [paper(f"2612.{n:05d}", 1) for n in range(1, 9)]
    ids = paper_records.save_versions(db, versions, now=NOW - timedelta(days=3)).new_version_ids
    rng = random.Random(7)
    for vid in ids:
        for language in ("en", "zh"):
            if rng.random() < 0.7:
                made = NOW - timedelta(hours=rng.randint(0, 60))
                guide_records.save_guide(db, vid, language, Guide("T."), model="m", now=made)
    for hours in (0, 1, 12, 24, 36, 48, 72):
        since = NOW - timedelta(hours=hours)
        assert guide_records.count_guided_versions_since(db, since) == _guided_since_by_grouping(db, since)


def test_a_version_guided_yesterday_is_not_counted_for_todays_second_language(db: Database) -> None:
    (vid,) = paper_records.save_versions(
        db, [paper("2612.00001", 1)], now=NOW - timedelta(days=2)
    ).new_version_ids
    guide_records.save_guide(db, vid, "en", Guide("T."), model="m", now=NOW - timedelta(hours=30))
    guide_records.save_guide(db, vid, "zh", Guide("T."), model="m", now=NOW - timedelta(hours=1))
    assert guide_records.count_guided_versions_since(db, NOW - timedelta(hours=24)) == 0
    assert guide_records.count_guided_versions_since(db, NOW - timedelta(hours=48)) == 1


def test_the_window_queries_use_the_news_index(db: Database) -> None:
    """The 24-hour numbers read the partial index of news by arrival, not the version table."""
    since = NOW - timedelta(hours=24)
    with db.engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            plan = connection.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT count(*) FROM version WHERE news = 1 AND first_seen_at >= ?",
                (since.replace(tzinfo=None).isoformat(" "),),
            ).all()
        else:
            connection.exec_driver_sql("SET enable_seqscan = off")
            plan = connection.exec_driver_sql(
                "EXPLAIN SELECT count(*) FROM version WHERE news = true AND first_seen_at >= %(s)s",
                {"s": since},
            ).all()
    assert "ix_version_news_first_seen_at" in " ".join(str(row) for row in plan)
