"""Per-follow options (new papers only; instant delivery) and `papertrail try`, over the recorded feed."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows.manage import follow
from core.follows.query import QueryError
from core.papers.pipeline import ingest_once
from core.papers.query_trial import try_query
from ingest.arxiv_rss import ArxivRssSource
from ingest.http import HttpClient
from notifiers.console.notifier import ConsoleNotifier
from papertrail.cli.app import app
from tests.conftest import BIG_FEED
from tests.servers import Reply, feed_server


def dc_versions() -> tuple[set[str], set[str]]:
    """Versioned ids of the cs.DC items, new and revised, read with regular expressions."""
    new: set[str] = set()
    revised: set[str] = set()
    for block in re.findall(r"<item>(.*?)</item>", BIG_FEED.read_text(encoding="utf-8"), flags=re.S):
        if "<category>cs.DC</category>" in block:
            guid = re.search(r"oai:arXiv\.org:(.+?v(\d+))</guid>", block)
            assert guid is not None
            (new if guid[2] == "1" else revised).add(guid[1])
    return new, revised


async def ingest_feed(db: Database) -> None:
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        async with HttpClient("t", timeout=10) as http:
            report = await ingest_once(db, ArxivRssSource(http, server.url))
    assert report.error is None


def sent_ids(text: str) -> set[str]:
    return set(re.findall(r"· (\S+v\d+)$", text, flags=re.M))


async def test_new_only_and_instant_follows(sqlite_store: Database) -> None:
    new, revised = dc_versions()
    assert new and revised
    follow(sqlite_store, "console:newonly", "cat:cs.DC", revisions=False)
    follow(sqlite_store, "console:mixed", "cat:cs.DC")  # daily digest, not due yet
    result = follow(sqlite_store, "console:mixed", 'ti:"operating system"', instant=True)
    assert result.outcome == "added" and result.follow.instant
    again = follow(sqlite_store, "console:mixed", 'ti:"Operating  System"', instant=True)
    assert again.outcome == "unchanged"
    await ingest_feed(sqlite_store)

    out = io.StringIO()
    notifiers = {"console": ConsoleNotifier(out)}
    reports = await send_due_digests(sqlite_store, notifiers, Renderer(max_items=500))
    # Not due by schedule: only the instant follow's match goes out now.
    assert [(r.address, r.items) for r in reports] == [("console:mixed", 1)]
    assert sent_ids(out.getvalue()) == {"2411.17710v1"}
    assert "Agent Centric Operating System" in out.getvalue()

    out.truncate(0)
    out.seek(0)
    reports = await send_due_digests(sqlite_store, notifiers, Renderer(max_items=500), force=True)
    by_address = {r.address: r.items for r in reports}
    assert by_address == {"console:newonly": len(new), "console:mixed": len(new | revised) - 1}
    digests = out.getvalue().split("--- digest for ")
    newonly = next(d for d in digests if d.startswith("console:newonly"))
    assert sent_ids(newonly) == new


async def test_try_query_shows_matches_with_reasons(sqlite_store: Database) -> None:
    await ingest_feed(sqlite_store)
    new, revised = dc_versions()
    hits = try_query(sqlite_store, "cat:cs.DC")
    assert {f"{h.arxiv_id}v{h.version}" for h in hits} == new | revised
    assert all(h.reasons == ("category cs.DC",) for h in hits)
    # Newest first: the order the store gave the versions their ids as it first saw them.
    ids = [h.version_id or 0 for h in hits]
    assert 0 not in ids and ids == sorted(ids, reverse=True)
    with pytest.raises(QueryError, match="position"):
        try_query(sqlite_store, "cat:cs.DC AND (")


def test_try_command(sqlite_store: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import asyncio

    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    asyncio.run(ingest_feed(sqlite_store))
    result = CliRunner().invoke(app, ["try", "cat:cs.DC", "--limit", "2"])
    assert result.exit_code == 0, result.stderr
    assert "why: category cs.DC" in result.stdout
    total = len(set.union(*dc_versions()))
    assert f"{total} matches in the last 7 days, 2 shown" in result.stdout
    result = CliRunner().invoke(app, ["try", "tit:graph"])
    assert result.exit_code == 2 and "unknown field" in result.stderr
    result = CliRunner().invoke(app, ["follow", "console:me", "cat:cs.DC", "--new-only", "--instant"])
    assert "[new papers only, instant]" in result.stdout
