"""The arXiv RSS source end to end over real HTTP on loopback, with the recorded feeds."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlmodel import select

import core.papers.paper_records
from core.db import Database
from core.models import RunState, SourceRun, Version
from core.papers import run_records
from core.papers.pipeline import ingest_once
from ingest import arxiv_rss, paper_spool
from ingest.arxiv_rss import ArxivRssSource
from ingest.http import HttpClient, Politeness
from tests.conftest import BIG_FEED, CORPUS
from tests.feed_copies import feed_copies
from tests.servers import Reply, closed_port, feed_server

# Retries on, with waits short enough for tests; a Retry-After of 120 s is more than one run sits out.
FAST = Politeness(retries=2, backoff=0.01, max_retry_wait=5)
EMPTY_FEED = CORPUS / "arxiv-rss" / "aioarxiv_empty_rss_mock_feed.xml"
ERROR_FEED = CORPUS / "arxiv-rss" / "aioarxiv_error_rss_mock_feed.xml"


def guid_versions(path: Path) -> set[tuple[str, int]]:
    """(id, version) pairs read straight from the guids, independently of the parser under test."""
    text = path.read_text(encoding="utf-8")
    return {(m[1], int(m[2])) for m in re.finditer(r"<guid[^>]*>oai:arXiv\.org:(.+?)v(\d+)</guid>", text)}


async def ingest(db: Database, url: str) -> tuple[object, SourceRun]:
    async with HttpClient("PaperTrail-tests/1 (mailto:test@example.org)", timeout=5, politeness=FAST) as http:
        report = await ingest_once(db, ArxivRssSource(http, url))
    run = run_records.latest_runs(db, 1)[0]
    return report, run


def versions(db: Database) -> list[Version]:
    with db.session() as session:
        return list(session.exec(select(Version)))


async def test_recorded_feed_is_stored_once(sqlite_store: Database) -> None:
    expected = guid_versions(BIG_FEED)
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        _, run = await ingest(sqlite_store, server.url)
        _, run2 = await ingest(sqlite_store, server.url)
    assert run.state == RunState.OK and run.fetched == 1504
    assert (run.new_papers, run.revisions) == (
        sum(1 for _, v in expected if v == 1),
        sum(1 for _, v in expected if v > 1),
    )
    stored = {(v.paper_id, v.number) for v in versions(sqlite_store)}
    assert stored == expected
    assert run.cursor and run.cursor.startswith("2024-11-28")
    # Re-ingesting the same feed creates nothing.
    assert (run2.new_papers, run2.revisions, run2.duplicates) == (0, 0, 1504)
    assert len(versions(sqlite_store)) == len(expected)
    assert "PaperTrail-tests" in server.requests[0]["User-Agent"]


async def test_conditional_get_uses_stored_etag(sqlite_store: Database) -> None:
    with feed_server(Reply(200, EMPTY_FEED.read_bytes()), etag='"v1"') as server:
        _, first = await ingest(sqlite_store, server.url)
        _, second = await ingest(sqlite_store, server.url)
    assert first.state == RunState.EMPTY
    assert server.requests[1].get("If-None-Match") == '"v1"'
    assert second.state == RunState.NOT_MODIFIED


async def test_empty_feed_is_reported_as_empty_not_as_no_news(sqlite_store: Database) -> None:
    with feed_server(Reply(200, EMPTY_FEED.read_bytes())) as server:
        _, run = await ingest(sqlite_store, server.url)
    assert run.state == RunState.EMPTY
    assert run.note and "no announcement" in run.note


def _truncated() -> bytes:
    data = BIG_FEED.read_bytes()
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(200, ERROR_FEED.read_bytes()), "Bad archive 'astroph'"),
        (Reply(200, b"<!DOCTYPE html><html><body>503 Service Unavailable</body></html>"), "HTML"),
        (Reply(200, _truncated()), "download was cut short"),
        (Reply(500, b"oops"), "HTTP 500"),
        (Reply(429, b"slow down", {"Retry-After": "120"}), "HTTP 429"),
        (Reply(404, b"not found"), "HTTP 404"),
    ],
    ids=["arxiv-error-feed", "html-page", "truncated-xml", "http-500", "http-429", "http-404"],
)
async def test_bad_responses_become_error_runs_and_store_nothing(
    sqlite_store: Database, reply: Reply, message: str
) -> None:
    with feed_server(reply) as server:
        _, run = await ingest(sqlite_store, server.url)
    assert run.state == RunState.ERROR
    assert run.error and message in run.error
    assert run.finished_at is not None
    assert versions(sqlite_store) == []
    assert run_records.validator_for(sqlite_store, server.url) is None


async def test_retry_after_is_reported(sqlite_store: Database) -> None:
    with feed_server(Reply(429, b"", {"Retry-After": "120"})) as server:
        report, _ = await ingest(sqlite_store, server.url)
    assert report.retry_after == 120  # type: ignore[attr-defined]


async def test_refused_connection(sqlite_store: Database) -> None:
    url = f"http://127.0.0.1:{closed_port()}/rss/cs"
    _, run = await ingest(sqlite_store, url)
    assert run.state == RunState.ERROR
    assert run.error and "cannot connect" in run.error


# ----------------------------------------------------------------------------------------------------------
# A large feed: spooled to a file, parsed chunk by chunk, its versions spooled past a limit and
# stored in batches within one transaction. Small limits here, so that three days cross all of them.


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arxiv_rss, "SPOOL_AFTER", 300)
    monkeypatch.setattr(paper_spool, "BATCH", 100)
    monkeypatch.setattr(core.papers.paper_records, "SAVE_BATCH", 700)


def _break_last(data: bytes, old: bytes, new: bytes) -> bytes:
    at = data.rindex(old)
    return data[:at] + new + data[at + len(old) :]


def _versions_in(data: bytes) -> set[tuple[str, int]]:
    return {
        (m[1].decode(), int(m[2]))
        for m in re.finditer(rb"<guid[^>]*>oai:arXiv\.org:(.+?)v(\d+)</guid>", data)
    }


async def test_a_large_feed_is_stored_whole(sqlite_store: Database, small_batches: None) -> None:
    data = feed_copies(3)
    expected = _versions_in(data)
    with feed_server(Reply(200, data)) as server:
        report, run = await ingest(sqlite_store, server.url)
    assert run.state == RunState.OK and run.fetched == 4512
    assert run.new_papers + run.revisions == len(expected)
    assert run.duplicates == 4512 - len(expected)  # the recorded day lists a few versions twice
    assert {(v.paper_id, v.number) for v in versions(sqlite_store)} == expected
    assert report.matches == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "cut",
    [
        lambda d: d[: d.rindex(b"</item>") + len(b"</item>")],  # every item there, the document unclosed
        lambda d: d[: len(d) - 20],
        lambda d: _break_last(d, b"</category>", b"</categ>"),  # ill-formed in the last item
    ],
    ids=["after_last_item", "last_20_bytes", "ill_formed_late"],
)
async def test_a_large_feed_cut_or_broken_late_stores_nothing(
    sqlite_store: Database, small_batches: None, cut: Callable[[bytes], bytes]
) -> None:
    """Thousands of items were read (and spooled) before the fault showed: still nothing is stored."""
    with feed_server(Reply(200, cut(feed_copies(3)))) as server:
        _, run = await ingest(sqlite_store, server.url)
    assert run.state == RunState.ERROR
    assert run.error and ("cut short" in run.error or "not well-formed" in run.error)
    assert versions(sqlite_store) == []
    assert run_records.validator_for(sqlite_store, server.url) is None


async def test_a_bad_byte_late_in_a_large_feed_costs_no_item(
    sqlite_store: Database, small_batches: None
) -> None:
    data = feed_copies(3)
    last_title = data.rindex(b"<title>") + len(b"<title>")
    broken = data[:last_title] + b"\xff" + data[last_title:]
    with feed_server(Reply(200, broken)) as server:
        _, run = await ingest(sqlite_store, server.url)
    assert run.state == RunState.OK and run.fetched == 4512
    assert run.note and run.note.startswith("1 item had invalid UTF-8 (item 4512 (oai:arXiv.org:")
    assert sum("\ufffd" in v.title for v in versions(sqlite_store)) == 1
