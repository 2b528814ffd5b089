"""The arXiv API client over loopback HTTP with recorded responses: look-ups, paging, the error feed."""

from __future__ import annotations

import re
from datetime import date

import pytest

from core.db import Database
from core.follows import match_records
from core.models import RunState
from core.papers import paper_records
from core.papers.pipeline import complete_papers
from core.papers.status import show_paper
from core.values import CommunityPick
from ingest.arxiv_api import ArxivApiSource
from ingest.http import HttpClient, Politeness
from tests.conftest import CORPUS
from tests.servers import Reply, feed_server

BODIES = CORPUS / "arxiv-api" / "arxivpy-2026-golden-bodies"


def body(name: str) -> bytes:
    (path,) = BODIES.glob(f"{name}_*.xml")
    return path.read_bytes()


async def test_community_stub_is_completed_as_history(sqlite_store: Database) -> None:
    pick = CommunityPick("1707.08567", date(2024, 3, 1), "From HF", "summary", (), upvotes=5)
    paper_records.save_picks(sqlite_store, [pick])
    with feed_server(Reply(200, body("id_1707.08567_s0_m100"))) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await complete_papers(sqlite_store, ArxivApiSource(http, server.url + "query"))
    assert report.state == RunState.OK and report.fetched == 1
    assert "id_list=1707.08567" in server.paths[0]
    view = show_paper(sqlite_store, "1707.08567")
    assert view.versions and view.sources == ("arxiv-api", "hf-daily") and view.upvotes == 5
    assert paper_records.papers_without_versions(sqlite_store) == []
    assert match_records.unmatched_versions(sqlite_store) == []  # history: nobody is notified


async def test_unknown_ids_are_named(sqlite_store: Database) -> None:
    paper_records.save_picks(sqlite_store, [CommunityPick("0808.05394", date(2024, 3, 1), "t", "s", ())])
    with feed_server(Reply(200, body("id_0808.05394_s0_m100"))) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await complete_papers(sqlite_store, ArxivApiSource(http, server.url))
    assert report.note and "arXiv does not know 0808.05394" in report.note


async def test_error_feed_becomes_a_failed_run(sqlite_store: Database) -> None:
    paper_records.save_picks(sqlite_store, [CommunityPick("2401.00001", date(2024, 3, 1), "t", "s", ())])
    with feed_server(Reply(400, body("id_abc_s0_m100"))) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await complete_papers(sqlite_store, ArxivApiSource(http, server.url))
    # arXiv's explanation from the error feed, not just the status code.
    assert report.state == RunState.ERROR and "incorrect id format for abc" in (report.error or "").lower()


@pytest.mark.net
async def test_query_pages_by_slices() -> None:
    pages = [body(f"q_testing_s{start}_m10") for start in (0, 10, 20)]
    with feed_server(*(Reply(200, page) for page in pages)) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            api = ArxivApiSource(http, server.url)
            got = [page async for page in api.query("testing", limit=30, slice_size=10)]
    assert [re.search(r"start=(\d+)", p)[1] for p in server.paths] == ["0", "10", "20"]  # type: ignore[index]
    assert sum(len(p.papers) for p in got) == sum(len(re.findall(rb"<entry>", page)) for page in pages)
