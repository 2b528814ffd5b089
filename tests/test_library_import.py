"""A reader's library becomes seeds: stored papers by arXiv id or DOI, unknown ids through the arXiv API
(over loopback, recorded answers), the rest by their text; every unused entry is reported."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.db import Database, make_engine
from core.follows import match_records
from core.languages import translator
from core.papers import paper_records
from core.taste import taste_records
from core.taste.library_file import read_library
from core.taste.library_import import FAILURE_MEMORY, NOT_FOUND_MEMORY, import_library
from ingest.arxiv_api import ArxivApiSource
from ingest.http import HttpClient, Politeness
from tests.servers import Reply, feed_server
from tests.support.library_files import BODIES, LIBRARY, NOW, _reader


def _read(name: str):  # type: ignore[no-untyped-def]
    path = LIBRARY / name
    return read_library(path.read_bytes(), path.name)


@pytest.mark.parametrize("name", ["zotero.bib", "jabref.bib", "mendeley.bib", "zotero.ris", "zotero.json"])
async def test_every_entry_is_used_or_reported_and_reimport_adds_nothing(db: Database, name: str) -> None:
    sid = _reader(db)
    read = _read(name)
    report = await import_library(db, sid, read, lookup=None, now=NOW)
    # Every entry of the file is counted once: used, or named with its reason.
    assert report.used + len(report.unused) == report.entries == len(read.entries) + len(read.problems)
    assert report.stored >= 1 and report.added == report.used > 0
    assert taste_records.vote_counts(db, sid)[2] == report.added
    again = await import_library(db, sid, _read(name), lookup=None, now=NOW)
    assert again.added == 0 and again.used == report.used


async def test_unknown_ids_are_looked_up_and_stored_as_history(db: Database) -> None:
    sid = _reader(db)
    read = _read("jabref.bib")
    missing = [
        e.arxiv_id for e in read.entries if e.arxiv_id and not paper_records.versions_of(db, e.arxiv_id)
    ]
    assert missing, "jabref.bib names papers the recorded day does not hold"
    assert missing == ["astro-ph/0601001"]
    (answer,) = BODIES.glob("id_astro-ph_0601001_*.xml")
    with feed_server(Reply(200, answer.read_bytes())) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await import_library(db, sid, read, lookup=ArxivApiSource(http, server.url), now=NOW)
    assert report.fetched == 1 and paper_records.versions_of(db, "astro-ph/0601001")
    assert "id_list=" in server.paths[0]
    # Stored as history: nobody is notified of it.
    assert all(v.paper_id != "astro-ph/0601001" for v in match_records.unmatched_versions(db))


async def test_an_unreachable_api_is_reported_per_entry_and_loses_nothing_else(db: Database) -> None:
    sid = _reader(db)
    read = _read("jabref.bib")
    with feed_server(Reply(503, b"busy")) as server:
        async with HttpClient("t", politeness=Politeness(retries=0)) as http:
            report = await import_library(db, sid, read, lookup=ArxivApiSource(http, server.url), now=NOW)
    assert report.fetched == 0 and report.stored >= 1 and report.lookup_failed
    # The one paper not stored has no abstract in the file: it is named, with what to do.
    (problem,) = report.unused
    assert problem.key == "Gould2006"
    assert "could not be reached; import the file again in an hour" in problem.said(translator("en"))
    assert report.stored == 4


async def test_a_broken_file_keeps_its_good_entries_and_every_problem(db: Database) -> None:
    sid = _reader(db)
    read = _read("broken.bib")
    assert read.problems and read.entries
    report = await import_library(db, sid, read, lookup=None, now=NOW)
    assert set(read.problems) <= set(report.unused)
    assert report.used == len(read.entries) - (len(report.unused) - len(read.problems))
    zh = [problem.said(translator("zh")) for problem in report.unused]
    assert all(text for text in zh)


async def test_the_seeds_train_the_readers_model(db: Database) -> None:
    sid = _reader(db)
    assert taste_records.model_of(db, sid) is None
    report = await import_library(db, sid, _read("zotero.json"), lookup=None, now=NOW)
    assert report.added >= 3
    model = taste_records.model_of(db, sid)
    assert model is not None and model.positives == report.added


# Two entries arXiv does not know (valid ids, no abstract), as a reader's file names them.
GHOSTS = (
    b"@article{ghost1, title = {A ghost}, eprint = {2306.99998}, archivePrefix = {arXiv}}\n"
    b"@article{ghost2, title = {Another ghost}, eprint = {2306.99999}, archivePrefix = {arXiv}}\n"
)
# arXiv's recorded answer to an id it does not know: a feed without entries.
NOTHING = BODIES / "id_0808.05394_s0_m100_7b0c7d0a7cdd.xml"


async def test_ids_arxiv_does_not_know_are_asked_for_once_by_every_process(db: Database, db_url: str) -> None:
    """Importing the same library again, from this process or another one on the same database, does not
    ask arXiv again for ids it answered without, until NOT_FOUND_MEMORY has passed."""
    sid = _reader(db)
    read = read_library(GHOSTS, "ghosts.bib")
    other = Database(make_engine(db_url))  # a second process's store on the same database
    try:
        with feed_server(Reply(200, NOTHING.read_bytes())) as server:
            async with HttpClient("t", politeness=Politeness(retries=0)) as http:
                api = ArxivApiSource(http, server.url)
                first = await import_library(db, sid, read, lookup=api, now=NOW)
                assert len(server.paths) == 1 and "2306.99998" in server.paths[0]
                again = await import_library(db, sid, read, lookup=api, now=NOW + timedelta(hours=1))
                elsewhere = await import_library(other, sid, read, lookup=api, now=NOW + timedelta(days=6))
                assert len(server.paths) == 1, "asked arXiv again for ids it does not know"
                later = NOW + NOT_FOUND_MEMORY + timedelta(seconds=1)
                await import_library(other, sid, read, lookup=api, now=later)
                assert len(server.paths) == 2, "a week later the ids are asked for again"
    finally:
        other.engine.dispose()
    en = translator("en")
    for report in (first, again, elsewhere):
        assert not report.lookup_failed and report.used == 0
        assert sorted(p.said(en) for p in report.unused) == [
            f"entry {key} (line {line}): arXiv does not know {arxiv_id}, and the entry has no abstract "
            "to learn from"
            for key, line, arxiv_id in (("ghost1", 1, "2306.99998"), ("ghost2", 2, "2306.99999"))
        ]


async def test_a_failed_lookup_is_not_repeated_for_an_hour(db: Database, db_url: str) -> None:
    sid = _reader(db)
    read = read_library(GHOSTS, "ghosts.bib")
    other = Database(make_engine(db_url))
    try:
        with feed_server(Reply(503, b"busy"), Reply(200, NOTHING.read_bytes())) as server:
            async with HttpClient("t", politeness=Politeness(retries=0)) as http:
                api = ArxivApiSource(http, server.url)
                first = await import_library(db, sid, read, lookup=api, now=NOW)
                again = await import_library(other, sid, read, lookup=api, now=NOW + timedelta(minutes=30))
                assert len(server.paths) == 1, "asked arXiv again within the hour after it failed"
                later = NOW + FAILURE_MEMORY + timedelta(seconds=1)
                after = await import_library(other, sid, read, lookup=api, now=later)
                assert len(server.paths) == 2
    finally:
        other.engine.dispose()
    en = translator("en")
    for report in (first, again):
        assert report.lookup_failed
        said = [p.said(en) for p in report.unused]
        assert all("could not be reached; import the file again in an hour" in text for text in said)
    assert not after.lookup_failed and all("arXiv does not know" in p.said(en) for p in after.unused)
