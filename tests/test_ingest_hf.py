"""Hugging Face daily papers end to end: a recorded day over loopback HTTP, attached to arXiv papers."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.db import Database
from core.overview import dashboard_records
from core.papers import paper_records, run_records
from core.papers.pipeline import ingest_community
from core.papers.status import show_paper
from ingest.arxiv_rss_parse import parse_feed
from ingest.hf_daily import HfDailySource
from ingest.http import HttpClient, Politeness
from papertrail.cli.app import app
from tests.conftest import BIG_FEED, CORPUS
from tests.servers import Reply, feed_server

DAY = date(2026, 8, 21)
RECORDED = CORPUS / "hf-daily" / "api-objects-reserialized" / "2026-08-21.json"


async def test_recorded_day_is_attached_to_papers(sqlite_store: Database) -> None:
    items = json.loads(RECORDED.read_bytes())
    ids = {item["paper"]["id"] for item in items}
    with feed_server(Reply(200, RECORDED.read_bytes())) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            source = HfDailySource(http, server.url.replace("/rss/", "/api/"))
            report = await ingest_community(sqlite_store, source, DAY)
            again = await ingest_community(sqlite_store, source, DAY)
    assert report.error is None and report.fetched == len(ids)
    assert again.duplicates == len(ids)  # the same day again: signals refreshed, nothing new
    assert server.paths == ["/api/daily_papers?date=2026-08-21"] * 2
    summary = dashboard_records.status(sqlite_store)
    assert summary.community_24h == len(ids) and summary.papers == len(ids)
    top = max(items, key=lambda item: item["paper"]["upvotes"])
    view = show_paper(sqlite_store, top["paper"]["id"])
    assert view.upvotes == top["paper"]["upvotes"] and view.sources == ("hf-daily",)


async def test_html_instead_of_json_is_a_failing_run(sqlite_store: Database) -> None:
    with feed_server(Reply(200, b"<!DOCTYPE html><html>Bad gateway</html>")) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await ingest_community(sqlite_store, HfDailySource(http, server.url), DAY)
    assert report.error and "HTML" in report.error
    assert run_records.latest_runs(sqlite_store, 1)[0].state == "error"


def test_cli_ingest_hf_daily_then_show(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A paper known from arXiv first, then picked on Hugging Face: one paper, two sources.
    paper = parse_feed(BIG_FEED.read_bytes()).items[0]
    paper_records.save_versions(sqlite_store, [paper])
    day = [
        {
            "paper": {
                "id": paper.arxiv_id,
                "title": paper.title,
                "summary": "s",
                "authors": [],
                "publishedAt": "2024-11-27T00:00:00.000Z",
                "upvotes": 12,
            },
            "title": paper.title,
            "publishedAt": "2024-11-28T00:00:00.000Z",
            "numComments": 2,
        }
    ]
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    with feed_server(Reply(200, json.dumps(day).encode())) as server:
        monkeypatch.setenv("PAPERTRAIL_HF_API_URL", server.url)
        result = CliRunner().invoke(app, ["ingest", "--source", "hf-daily", "--date", "2024-11-28"])
    assert result.exit_code == 0, result.stderr
    assert "date=2024-11-28" in server.paths[0]
    shown = json.loads(CliRunner().invoke(app, ["show", paper.arxiv_id, "--json"]).stdout)
    assert shown["sources"] == ["arxiv-rss", "hf-daily"] and shown["upvotes"] == 12
    assert shown["community"][0]["day"] == "2024-11-28"
    bad = CliRunner().invoke(app, ["ingest", "--source", "hf-daily", "--date", "yesterday"])
    assert bad.exit_code == 2 and "not a date" in bad.stderr
