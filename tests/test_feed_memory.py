"""The memory of a large feed's ingest stays bounded (the Python heap, by tracemalloc).

The feeds are the recorded day repeated (tests/feed_copies.py). Batch and spool sizes are made small so that
a feed of a few MB shows what a 64 MiB one would: the fixed budgets (versions kept in memory, one batch of
rows, one matching batch) then stay far below the body. ``bench/feed_memory.py`` measures the resident set
of a real ``papertrail ingest`` (docs/benchmarks.md, "Feed memory").
"""

from __future__ import annotations

import io
import tracemalloc
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

import core.follows.index
import core.papers.paper_records
import ingest.arxiv_rss
from core.db import Database
from core.follows import match_records
from core.follows.index import match_new
from core.follows.search_text import paper_doc
from core.papers import paper_records
from core.papers.pipeline import ingest_once
from ingest import paper_spool
from ingest.arxiv_rss import ArxivRssSource
from ingest.arxiv_rss_parse import parse_feed
from ingest.http import HttpClient, Politeness
from tests.feed_copies import feed_copies
from tests.servers import Reply, feed_server

T = TypeVar("T")


def peak_heap(fn: Callable[[], T]) -> tuple[T, int]:
    """``fn()`` and the peak of the Python heap allocated while it ran, in bytes."""
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def three_days() -> bytes:
    return feed_copies(3)  # 4,512 items, 8.4 MB


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Spool past 300 versions in 100-version batches; store and match 500 versions at a time."""
    # raising=False: the same test runs on the code before the fix, where it fails on the memory bound.
    monkeypatch.setattr(ingest.arxiv_rss, "SPOOL_AFTER", 300, raising=False)
    monkeypatch.setattr(paper_spool, "BATCH", 100, raising=False)
    monkeypatch.setattr(core.papers.paper_records, "SAVE_BATCH", 500, raising=False)
    monkeypatch.setattr(core.follows.index, "MATCH_BATCH", 500)
    yield


def test_parsing_holds_the_versions_not_the_tree(three_days: bytes) -> None:
    """The whole ElementTree and every item's dict used to exist at once: 4.8x the body on this heap."""
    page, peak = peak_heap(lambda: parse_feed(three_days))
    assert len(page.items) == 4512
    # What is left is the versions themselves (about 1.2x the body: the text, as str); 1.4x measured.
    assert peak < 2 * len(three_days)


def test_parsing_a_file_into_a_spool_holds_a_batch(three_days: bytes, small_batches: None) -> None:
    body = io.BytesIO(three_days)
    page, peak = peak_heap(lambda: parse_feed(body, spool_after=300))
    assert len(page.items) == 4512
    assert peak < 0.5 * len(three_days)  # 0.37x measured: a chunk's elements, 300 versions, the shells


@pytest.mark.net
async def test_downloading_holds_no_body(three_days: bytes) -> None:
    with feed_server(Reply(200, three_days)) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            tracemalloc.start()
            try:
                with await http.download(server.url) as download:
                    peak = tracemalloc.get_traced_memory()[1]
                    assert download.size == len(three_days)
                    assert download.body.read() == three_days
            finally:
                tracemalloc.stop()
    assert peak < 0.25 * len(three_days)  # 0.09x measured


async def test_a_large_feeds_ingest_holds_batches_not_the_feed(
    sqlite_store: Database, three_days: bytes, small_batches: None
) -> None:
    """Before: the chunks and the joined body, the tree, every version, rows for all and two matching
    batches, more than 5x the body on this heap. Now: a spooled body, a few batches."""
    # The search text's token caches (bounded LRU caches of core.follows: at most 2**16 entries each) are
    # the process's, not the ingest's: filled here first, so the bound measures what one ingest holds
    # whatever ran before in this process (in a fresh process they held 6 MB more of the peak).
    for paper in parse_feed(three_days).items:
        paper_doc(paper)
    with feed_server(Reply(200, three_days)) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            tracemalloc.start()
            try:
                report = await ingest_once(sqlite_store, ArxivRssSource(http, server.url))
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert (report.error, report.fetched) == (None, 4512)
    assert report.new_papers + report.revisions + report.duplicates == 4512
    assert peak < len(three_days)  # 0.48x measured; 5.9x before


def test_matching_holds_one_batch_at_a_time(sqlite_store: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """match_new used to load each batch while still holding the previous one."""
    monkeypatch.setattr(core.follows.index, "MATCH_BATCH", 400)
    paper_records.save_versions(
        sqlite_store, parse_feed(feed_copies(1)).items
    )  # 1,504 versions: four batches
    one_batch = peak_heap(lambda: len(match_records.unmatched_versions(sqlite_store, limit=400)))[1]
    matched_versions, peak = peak_heap(lambda: match_new(sqlite_store))
    assert matched_versions == 0  # no follows: nothing to write, only versions to mark
    assert not match_records.unmatched_versions(sqlite_store)
    assert peak < 1.4 * one_batch  # 1.03x measured; 1.8x before
