"""OAI-PMH gap filling end to end: recorded arXivRaw pages over loopback HTTP, resumption, errors, gaps."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from core.db import Database
from core.follows import match_records
from core.models import RunState
from core.overview import dashboard_records
from core.papers import paper_records, run_records
from core.papers.paper_records import Novelty
from core.papers.pipeline import IngestReport, ingest_paged
from core.values import PaperIn
from ingest.arxiv_oai import ArxivOaiSource
from ingest.http import HttpClient, Politeness
from papertrail.cli.app import app
from tests.conftest import CORPUS
from tests.servers import FeedServer, Reply, feed_server

LIST = CORPUS / "arxiv-oai" / "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml"
ERROR = CORPUS / "arxiv-oai" / "inspire-next_GetRecord_1305.9999.xml"
TOKEN = "1403493|1001"


def last_page() -> bytes:
    """The recorded page as the last page of its list: the resumption token emptied, as OAI-PMH does."""
    data = LIST.read_bytes()
    return re.sub(rb"<resumptionToken([^>]*)>[^<]*</resumptionToken>", rb"<resumptionToken\1/>", data)


def bad_token() -> bytes:
    """A real OAI-PMH error response with the error code of an expired token."""
    return ERROR.read_bytes().replace(b'code="idDoesNotExist"', b'code="badResumptionToken"')


def versions_in(data: bytes) -> int:
    return len(re.findall(rb"<version ", data))


async def harvest(
    db: Database, *replies: Reply, since: str | None = "2016-10-20", novelty: Novelty = Novelty.GAP
) -> tuple[IngestReport, FeedServer]:
    with feed_server(*replies) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await ingest_paged(db, ArxivOaiSource(http, server.url), since=since, novelty=novelty)
    return report, server


async def test_resumption_pages_are_followed_and_the_cursor_advances_at_the_end(
    sqlite_store: Database,
) -> None:
    report, server = await harvest(sqlite_store, Reply(200, LIST.read_bytes()), Reply(200, last_page()))
    assert report.error is None and report.state == RunState.OK
    first, second = server.paths
    assert "metadataPrefix=arXivRaw" in first and "set=cs" in first and "from=2016-10-20" in first
    assert "resumptionToken=1403493%7C1001" in second and "metadataPrefix" not in second
    total = versions_in(LIST.read_bytes())
    assert report.fetched == 2 * total and report.duplicates == total
    # Nothing was stored as news before: no gap, so the whole harvest is history, matched by nobody.
    assert dashboard_records.status(sqlite_store).versions == total
    assert match_records.unmatched_versions(sqlite_store) == []
    assert run_records.last_cursor(sqlite_store, "arxiv-oai") == "2016-10-21"


async def test_gap_fill_makes_only_newer_announcements_news(sqlite_store: Database) -> None:
    seen = datetime(2016, 10, 19, tzinfo=UTC)
    paper_records.save_versions(
        sqlite_store, [PaperIn("1610.00001", 1, "t", "a", (), ("cs.DC",), announced_at=seen)]
    )
    report, _ = await harvest(sqlite_store, Reply(200, last_page()))
    dates = [
        datetime.strptime(d.decode(), "%a, %d %b %Y %H:%M:%S %Z").replace(tzinfo=UTC)
        for d in re.findall(rb"<date>([^<]+)</date>", LIST.read_bytes())
    ]
    newer = sum(1 for d in dates if d > seen)
    assert 0 < newer < len(dates)
    assert report.new_papers + report.revisions == newer
    summary = dashboard_records.status(sqlite_store)
    assert summary.new_papers_24h + summary.revisions_24h == newer + 1  # plus the one seen before


async def test_history_flag_notifies_nobody(sqlite_store: Database) -> None:
    paper_records.save_versions(
        sqlite_store,
        [PaperIn("1610.00001", 1, "t", "a", (), ("cs.DC",), announced_at=datetime(2000, 1, 1, tzinfo=UTC))],
    )
    report, _ = await harvest(sqlite_store, Reply(200, last_page()), novelty=Novelty.HISTORY)
    assert (report.new_papers, report.revisions) == (0, 0) and report.note and "as history" in report.note


async def test_bad_resumption_token_restarts_from_the_cursor(sqlite_store: Database) -> None:
    report, server = await harvest(
        sqlite_store, Reply(200, LIST.read_bytes()), Reply(200, bad_token()), Reply(200, last_page())
    )
    assert report.error is None
    assert [("resumptionToken" in p) for p in server.paths] == [False, True, False]
    assert "from=2016-10-20" in server.paths[2]


async def test_an_error_part_way_keeps_stored_pages_and_the_old_cursor(sqlite_store: Database) -> None:
    report, _ = await harvest(sqlite_store, Reply(200, LIST.read_bytes()), Reply(500, b"down"))
    assert report.state == RunState.ERROR and "HTTP 500" in (report.error or "")
    assert dashboard_records.status(sqlite_store).versions == versions_in(LIST.read_bytes())
    assert run_records.last_cursor(sqlite_store, "arxiv-oai") is None
    run = run_records.latest_runs(sqlite_store, 1)[0]
    assert run.fetched == versions_in(LIST.read_bytes()) and run.state == RunState.ERROR


async def test_oai_error_is_explained(sqlite_store: Database) -> None:
    report, _ = await harvest(sqlite_store, Reply(200, ERROR.read_bytes()))
    assert report.state == RunState.ERROR and "idDoesNotExist" in (report.error or "")


def test_cli_since_must_be_a_date(sqlite_store: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    result = CliRunner().invoke(app, ["ingest", "--source", "arxiv-oai", "--since", "last week"])
    assert result.exit_code == 2 and "not a date" in result.stderr
    with feed_server(Reply(200, last_page())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_OAI_URL", server.url)
        result = CliRunner().invoke(
            app, ["ingest", "--source", "arxiv-oai", "--since", "2016-10-20", "--history"]
        )
    assert result.exit_code == 0, result.stderr
    assert "arxiv-oai: ok" in result.stdout and "stored as history" in result.stdout
