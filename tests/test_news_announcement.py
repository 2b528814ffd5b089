"""Whether a version is news is decided by arXiv's announcement of it, not by which source stored it first.

A reader's library import and the completion of Hugging Face picks through the arXiv API both store
versions as history, and both can run before the day's announcement reaches PaperTrail. The announcement
then makes those versions news, once, and every follower whose follow they answer is owed them: what one
reader uploads never changes what anyone else receives.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlmodel import select

from core.db import Database
from core.follows import match_records, subscriber_records
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import Version
from core.papers import paper_records, run_records
from core.papers.paper_records import Novelty
from core.papers.pipeline import complete_papers, ingest_once
from core.taste.library_file import read_library
from core.taste.library_import import import_library
from core.values import AnnounceType, CommunityPick, PaperIn
from ingest.arxiv_rss import ArxivRssSource
from ingest.arxiv_rss_parse import parse_feed
from ingest.http import HttpClient, Politeness
from tests.conftest import BIG_FEED
from tests.recorded_lookup import RecordedLookup, bibtex_naming
from tests.servers import Reply, feed_server

FAST = Politeness(retries=0)
DAY = parse_feed(BIG_FEED.read_bytes()).items
# The follow the loss was first measured with: 19 versions of the recorded day answer it.
QUERY = "cat:cs.DC"


def answers(paper: PaperIn) -> bool:
    return "cs.DC" in paper.categories


EXPECTED = {(p.arxiv_id, p.version) for p in DAY if answers(p)}


async def announce(db: Database) -> None:
    """The day's RSS announcement, fetched over loopback and stored and matched as production does."""
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        async with HttpClient("PaperTrail-tests/1", timeout=5, politeness=FAST) as http:
            await ingest_once(db, ArxivRssSource(http, server.url))


def owed(db: Database, address: str) -> set[tuple[str, int]]:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    return {(p.item.arxiv_id, p.item.version) for p in ledger_records.pending_matches(db, subscriber.id)}


def reader_id(db: Database) -> int:
    """The reader who uploads a library."""
    reader, _ = subscriber_records.ensure_subscriber(
        db, "email:ada@example.org", timezone="UTC", schedule="daily 08:00"
    )
    assert reader.id is not None
    return reader.id


def first_of_each(n: int) -> list[PaperIn]:
    """``n`` versions of the day that answer the follow, one per paper."""
    chosen: dict[str, PaperIn] = {}
    for paper in DAY:
        if answers(paper) and paper.arxiv_id not in chosen:
            chosen[paper.arxiv_id] = paper
    return list(chosen.values())[:n]


def test_the_recorded_day_holds_the_measured_case() -> None:
    assert len(EXPECTED) == 19


async def test_a_control_day_delivers_every_match(db: Database) -> None:
    follow(db, "email:bob@example.org", QUERY)
    await announce(db)
    assert owed(db, "email:bob@example.org") == EXPECTED


async def test_a_library_import_before_the_announcement_takes_nothing_from_anyone(db: Database) -> None:
    follow(db, "email:bob@example.org", QUERY)
    reader = reader_id(db)
    imported = first_of_each(9)
    lookup = RecordedLookup(DAY)
    report = await import_library(db, reader, read_library(bibtex_naming(imported), "ada.bib"), lookup=lookup)
    assert report.fetched == 9 and sorted(lookup.asked) == sorted(p.arxiv_id for p in imported)
    # A follower who arrives after the upload, before the announcement, is owed the day as well.
    follow(db, "telegram:42", QUERY)
    await announce(db)
    assert owed(db, "email:bob@example.org") == EXPECTED
    assert owed(db, "telegram:42") == EXPECTED
    run = run_records.latest_runs(db, 1)[0]
    assert (run.new_papers + run.revisions, run.duplicates) == (1504, 0)
    assert run.note and "9 versions stored before as history, news now" in run.note


async def test_hugging_face_picks_completed_before_the_announcement_are_delivered(db: Database) -> None:
    follow(db, "email:bob@example.org", QUERY)
    picked = first_of_each(5)
    paper_records.save_picks(
        db,
        [
            CommunityPick(p.arxiv_id, date(2024, 11, 28), p.title, p.abstract, p.authors, upvotes=3)
            for p in picked
        ],
    )
    report = await complete_papers(db, RecordedLookup(DAY))
    assert report.fetched == 5
    assert match_records.unmatched_versions(db) == []  # history until arXiv announces it
    await announce(db)
    assert owed(db, "email:bob@example.org") == EXPECTED


async def test_an_announced_version_is_news_once(db: Database) -> None:
    follow(db, "email:bob@example.org", QUERY)
    reader = reader_id(db)
    await import_library(
        db, reader, read_library(bibtex_naming(first_of_each(9)), "ada.bib"), lookup=RecordedLookup(DAY)
    )
    await announce(db)
    bob = subscriber_records.get_subscriber(db, "email:bob@example.org")
    assert bob is not None and bob.id is not None
    first = ledger_records.pending_matches(db, bob.id)
    # The same announcement again, and the same papers looked up again: nothing is news twice.
    await announce(db)
    await complete_papers(db, RecordedLookup(DAY))
    again = ledger_records.pending_matches(db, bob.id)
    assert sorted(p.match_id for p in again) == sorted(p.match_id for p in first)
    run = run_records.latest_runs(db, 2)[-1]
    assert (run.new_papers, run.revisions) == (0, 0)
    with db.session() as session:
        stored = list(session.exec(select(Version)))
    assert len(stored) == 1504 and all(v.news for v in stored)


@pytest.mark.parametrize("kind", ["new", "replace"])
async def test_the_announcement_decides_the_stored_version(db: Database, kind: str) -> None:
    """A promoted version carries the announcement's date and type, as if the feed had stored it."""
    paper = next(p for p in DAY if answers(p) and (p.version == 1) == (kind == "new"))
    api_view = dataclasses.replace(
        paper,
        source="arxiv-api",
        announced_at=datetime(2024, 11, 1, tzinfo=UTC),
        announce_type=AnnounceType.NEW if paper.version == 1 else AnnounceType.REPLACE,
    )
    paper_records.save_versions(db, [api_view], novelty=Novelty.HISTORY)
    await announce(db)
    (version,) = [v for v in paper_records.versions_of(db, paper.arxiv_id) if v.number == paper.version]
    assert version.news and version.source == paper.source
    assert version.announced_at == paper.announced_at
    assert version.announce_type == paper.announce_type.value


def test_a_gap_fill_announces_history_past_the_threshold_only(db: Database) -> None:
    """An OAI gap fill makes a stored history version news only when announced after the newest news."""
    news, late, early = first_of_each(3)
    paper_records.save_versions(db, [news])  # the newest announcement stored as news: the threshold
    assert news.announced_at is not None
    after = dataclasses.replace(late, announced_at=news.announced_at + timedelta(days=1))
    before = dataclasses.replace(early, announced_at=news.announced_at - timedelta(days=1))
    paper_records.save_versions(db, [after, before], novelty=Novelty.HISTORY)
    saved = paper_records.save_versions(db, [after, before], novelty=Novelty.GAP)
    assert (saved.announced, saved.duplicates, len(saved.new_version_ids)) == (1, 1, 1)
    news_flags = {
        p.arxiv_id: next(v.news for v in paper_records.versions_of(db, p.arxiv_id) if v.number == p.version)
        for p in (after, before)
    }
    assert news_flags == {after.arxiv_id: True, before.arxiv_id: False}
