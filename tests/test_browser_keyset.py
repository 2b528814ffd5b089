"""The paper browser walked by cursor, news before history, and search against a plain scan.

On both databases, over the recorded RSS day (news), the recorded snapshot sample backfilled after it
(history) and recorded Hugging Face picks (stubs among them):

* walking every page forward with ``after`` and back with ``before`` lists every paper exactly once, in the
  order its stored keys define (the keys themselves are checked against the rows by tests/browse_oracle.py
  after every kind of write, in tests/test_library_totals.py);
* the news comes first although the backfill arrived later, and ``from_history`` starts at the history;
* a search lists exactly the papers a follow of the same text matches on each paper's newest version
  (``Query.evaluate``, the matcher's own rules: the plain scan), in the browser's order, page after page,
  for words, phrases, plurals, fields, authors (checked one by one after the index) and booleans.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
import sqlalchemy as sa

from core.db import Database
from core.follows.search_text import compile_search
from core.papers import browser_records, count_records, paper_records
from core.papers.browser_query import PaperFilter, Sort, TotalKind
from core.papers.pipeline import backfill
from core.values import CommunityPick
from ingest.arxiv_rss_parse import parse_feed
from ingest.hf_daily_parse import parse_daily
from papertrail.cli.backfill import snapshot_batches
from tests.browse_oracle import assert_keys_and_index, newest_text
from tests.conftest import BIG_FEED, CORPUS

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SNAPSHOT = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"
HF_DAY = sorted((CORPUS / "hf-daily" / "api-objects-reserialized").glob("*.json"))[0]

# Searches of the recorded day and the snapshot sample: common and rare words, a plural, a hyphenated word,
# a phrase, each field, categories and archives, authors (checked paper by paper), booleans and NOT.
SEARCHES = (
    "learning",
    "models",
    "model",
    "self-supervised",
    '"large language model"',
    "ti:diffusion",
    "abs:benchmark",
    "graph neural",
    "cat:cs.LG",
    "cat:math.*",
    "cat:hep-th",
    "quantum AND cat:quant-ph",
    "transformer OR convolutional",
    "learning NOT cat:cs.LG",
    "au:Wang",
    'au:"Y. Wang"',
    "au:wang AND cat:cs.CV",
    "dark matter",
    "gaussians",
)


@pytest.fixture
def library(db: Database) -> Database:
    """News (the recorded RSS day), a later backfill (history), then a day of picks."""
    paper_records.save_versions(db, parse_feed(BIG_FEED.read_bytes()).items, now=NOW - timedelta(days=2))
    backfill(db, "snapshot", snapshot_batches(SNAPSHOT), now=NOW - timedelta(days=1))
    day = date.fromisoformat(HF_DAY.stem)
    paper_records.save_picks(db, parse_daily(HF_DAY.read_bytes(), day).picks, now=NOW - timedelta(hours=1))
    # The backfill left its papers' search entries to the indexer, which the service runs every minute.
    while paper_records.index_search(db, limit=64):
        pass
    return db


def walk(db: Database, flt: PaperFilter, per_page: int) -> list[str]:
    """Every page from the first, following ``after``; checks ``before`` leads back page by page."""
    pages: list[list[str]] = []
    page = browser_records.browse_papers(db, flt, per_page=per_page)
    assert page.before is None
    while True:
        pages.append([row.id for row in page.rows])
        if page.after is None:
            break
        following = browser_records.browse_papers(db, flt, after=page.after, per_page=per_page)
        assert following.before is not None
        back = browser_records.browse_papers(db, flt, before=following.before, per_page=per_page)
        assert [row.id for row in back.rows] == pages[-1]
        page = following
        assert len(pages) < 500, "the walk does not end"
    return [pid for ids in pages for pid in ids]


def keyed_order(db: Database, sort: Sort) -> list[str]:
    """Every paper in ``sort``'s order, sorted in Python from the stored keys."""
    columns = {
        Sort.UPDATED: "browse_key, id",
        Sort.INGESTED: "news, first_seen_at, id",
        Sort.PUBLISHED: "published_key, id",
    }[sort]
    with db.engine.connect() as connection:
        rows = connection.execute(sa.text(f"SELECT {columns} FROM paper")).all()
    return [row[-1] for row in sorted(rows, key=lambda r: tuple(r), reverse=True)]


@pytest.mark.parametrize("sort", [Sort.UPDATED, Sort.INGESTED, Sort.PUBLISHED])
def test_walking_the_pages_lists_every_paper_once_in_order(library: Database, sort: Sort) -> None:
    listed = walk(library, PaperFilter(sort=sort), per_page=97)
    assert len(listed) == len(set(listed)) == count_records.library_totals(library).papers
    assert listed == keyed_order(library, sort)


def test_news_comes_before_a_later_backfill(library: Database) -> None:
    with library.engine.connect() as connection:
        news: dict[str, bool] = {
            pid: bool(flag) for pid, flag in connection.execute(sa.text("SELECT id, news FROM paper"))
        }
    backfilled = {json.loads(line)["id"] for line in SNAPSHOT.read_text().splitlines()}
    assert not any(news[pid] for pid in backfilled), "the sample is history"
    first = browser_records.browse_papers(library, PaperFilter())
    assert all(row.news for row in first.rows) and first.has_history
    everything = walk(library, PaperFilter(), per_page=250)
    flags = [bool(news[pid]) for pid in everything]
    # All news, then all history (the backfill arrived a day after the news): the flag changes once.
    assert flags == sorted(flags, reverse=True) and not flags[-1]
    start = browser_records.browse_papers(library, PaperFilter(), from_history=True)
    assert start.rows and not any(row.news for row in start.rows)
    assert start.rows[0].id == everything[flags.index(False)]
    assert start.before is not None and not start.has_history
    # By ingestion time too; by first publication the dates alone decide.
    by_ingestion = walk(library, PaperFilter(sort=Sort.INGESTED), per_page=500)
    assert [bool(news[pid]) for pid in by_ingestion] == flags


@pytest.mark.parametrize("text", SEARCHES)
def test_a_search_lists_what_the_follow_would_match(library: Database, text: str) -> None:
    search = compile_search(text)
    texts = newest_text(library)
    order = keyed_order(library, Sort.UPDATED)
    expected = [pid for pid in order if pid in texts and search.query.evaluate(texts[pid]) is not None]
    assert expected, f"{text!r} matches nothing on the recorded data: pick another search"
    flt = PaperFilter(search=search)
    assert walk(library, flt, per_page=23) == expected
    page = browser_records.browse_papers(library, flt)
    if search.exact or page.total_kind is TotalKind.EXACT:
        assert (page.total, page.total_kind) == (len(expected), TotalKind.EXACT)
    else:  # an author search: the index's candidates, checked one by one when shown
        assert page.total_kind is TotalKind.ABOUT and page.total >= len(expected)
    # The relevance order ranks the same papers.
    ranked = browser_records.browse_papers(
        library, PaperFilter(search=search, sort=Sort.RELEVANCE), per_page=1000
    )
    assert {row.id for row in ranked.rows} == set(expected[:1000])


def test_an_author_search_is_checked_against_the_follow_rules(library: Database) -> None:
    broad = compile_search("au:Wang")
    narrow = compile_search('au:"Y. Wang"')
    assert not narrow.exact
    wide = walk(library, PaperFilter(search=broad), per_page=50)
    close = walk(library, PaperFilter(search=narrow), per_page=50)
    # The index holds surnames only: "Y. Wang" reads the same entries, and the follow rules drop the rest.
    assert set(close) < set(wide)
    # Relevance pages of a checked search never overlap and together hold every match.
    ranked: list[str] = []
    for number in range(1, 20):
        page = browser_records.browse_papers(
            library, PaperFilter(search=narrow, sort=Sort.RELEVANCE), page=number, per_page=3
        )
        ranked += [row.id for row in page.rows]
        if len(page.rows) < 3:
            break
    assert len(ranked) == len(set(ranked)) and set(ranked) == set(close)


def test_filters_and_search_combine(library: Database) -> None:
    search = compile_search("learning")
    texts = newest_text(library)
    flt = PaperFilter(search=search, ai=True)
    listed = walk(library, flt, per_page=40)
    assert listed and set(listed) <= {pid for pid in texts if search.query.evaluate(texts[pid])}
    plain = walk(library, PaperFilter(search=search), per_page=200)
    assert set(listed) < set(plain)


@pytest.mark.parametrize("plan", ["walk", "counted-over", "materialized-over-the-count", "materialized"])
def test_every_search_plan_lists_the_same_papers(
    library: Database, plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL picks a plan by how many entries match (store_browser._postgresql_candidates): each of
    the three must list what the follow matches. On SQLite the plan is one, and the test checks it too."""
    import core.papers.browser_records as browser

    if plan == "walk":  # as if every word were common: the planner walks the order's index
        monkeypatch.setattr(browser, "WALK_ABOVE", -1)
    elif plan == "counted-over":  # estimated rare, counted too many to sort: walked
        monkeypatch.setattr(browser, "MATERIALIZE_UP_TO", 3)
    elif plan == "materialized-over-the-count":  # sorted from its matches, its total "about"
        monkeypatch.setattr(browser, "SEARCH_COUNT_LIMIT", 3)
    texts = newest_text(library)
    order = keyed_order(library, Sort.UPDATED)
    for text in ("learning", "au:Wang", '"neural network"'):
        search = compile_search(text)
        expected = [pid for pid in order if pid in texts and search.query.evaluate(texts[pid]) is not None]
        assert walk(library, PaperFilter(search=search), per_page=31) == expected, text
        ranked = browser_records.browse_papers(
            library, PaperFilter(search=search, sort=Sort.RELEVANCE), per_page=1000
        )
        assert {row.id for row in ranked.rows} == set(expected), text


def test_a_backfill_leaves_its_search_entries_to_the_indexer(db: Database) -> None:
    paper_records.save_versions(db, parse_feed(BIG_FEED.read_bytes()).items, now=NOW - timedelta(days=2))
    assert paper_records.search_backlog(db) == 0  # news is searchable when it is stored
    backfill(db, "snapshot", snapshot_batches(SNAPSHOT), now=NOW - timedelta(days=1))
    first = json.loads(SNAPSHOT.read_text().splitlines()[0])
    assert paper_records.search_backlog(db) == 200
    by_id = PaperFilter(search=compile_search(f"id:{first['id']}"))
    assert (
        browser_records.browse_papers(db, by_id).rows == ()
    )  # listed by the browser, not yet found by a search
    assert_keys_and_index(db)
    assert paper_records.index_search(db, limit=150) == 150 and paper_records.search_backlog(db) == 50
    assert paper_records.index_search(db, limit=150) == 50 and paper_records.index_search(db) == 0
    assert [row.id for row in browser_records.browse_papers(db, by_id).rows] == [first["id"]]
    assert_keys_and_index(db)
    # A pick of a backfilled paper makes it news under a new key: its entry follows at once.
    paper_records.save_picks(db, [CommunityPick(first["id"], NOW.date(), "Picked", "", (), 3)], now=NOW)
    assert [row.id for row in browser_records.browse_papers(db, by_id).rows] == [first["id"]]
    assert_keys_and_index(db)
