"""Oracles for the paper browser's stored keys and the search index, recomputed from the stored rows.

``tests/test_library_totals.py`` runs every kind of write (ingest, backfill, gap fill, picks, stubs
completed, revisions) and calls :func:`assert_keys_and_index` after each, so the keys and the index are held
to the same standard as the library totals.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from core.db import Database
from core.follows.query import PaperText
from core.follows.search_text import paper_doc, tsvector_literal
from core.papers.sort_keys import NEWS_BIT, published_key
from core.values import AnnounceType, PaperIn


def _latest_versions(db: Database) -> dict[str, PaperIn]:
    with db.engine.connect() as connection:
        rows = connection.execute(
            sa.text(
                "SELECT v.paper_id, v.number, v.title, v.abstract, v.authors, v.categories FROM version v "
                "JOIN paper p ON p.id = v.paper_id AND p.latest_version = v.number"
            )
        ).all()

    def listed(value: Any) -> tuple[str, ...]:
        return tuple(json.loads(value) if isinstance(value, str) else value or ())

    return {
        pid: PaperIn(pid, number, title, abstract, listed(authors), listed(categories), AnnounceType.NEW)
        for pid, number, title, abstract, authors, categories in rows
    }


def expected_keys(db: Database) -> dict[str, tuple[bool, int | None, int]]:
    """Per paper: (news, browse_key or None for a stub, published_key), from the versions and picks."""
    with db.engine.connect() as connection:
        papers: dict[str, int] = {
            pid: number for pid, number in connection.execute(sa.text("SELECT id, latest_version FROM paper"))
        }
        versions = connection.execute(
            sa.text("SELECT paper_id, id, number, news, announced_at FROM version")
        ).all()
        picked = set(connection.execute(sa.text("SELECT paper_id FROM community_pick")).scalars())
    news = {pid for pid in picked}
    newest: dict[str, int] = {}
    published: dict[str, int] = {}
    for pid, vid, number, is_news, announced in versions:
        if is_news:
            news.add(pid)
        if number == papers[pid]:
            newest[pid] = vid
        if number == 1 and announced is not None:
            published[pid] = published_key(_as_datetime(announced))
    return {
        pid: (
            pid in news,
            None if pid not in newest else newest[pid] + (NEWS_BIT if pid in news else 0),
            published.get(pid, 0),
        )
        for pid in papers
    }


def _as_datetime(value: object) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def assert_keys_and_index(db: Database) -> None:
    """The stored keys equal :func:`expected_keys`; each paper's index entry is its newest version's."""
    expected = expected_keys(db)
    with db.engine.connect() as connection:
        stored = {
            pid: (bool(news), key, published)
            for pid, news, key, published in connection.execute(
                sa.text("SELECT id, news, browse_key, published_key FROM paper")
            )
        }
    assert stored.keys() == expected.keys()
    for pid, (news, key, published) in expected.items():
        got_news, got_key, got_published = stored[pid]
        assert (got_news, got_published) == (news, published), pid
        if key is None:  # a stub: news, placed among the news by when it was seen
            assert news and got_key >= NEWS_BIT, pid
        else:
            assert got_key == key, pid
    latest = _latest_versions(db)
    with db.engine.connect() as connection:
        # A paper marked stale waits for the indexer (a backfill's): only the others must have their entry.
        stale = set(connection.execute(sa.text("SELECT id FROM paper WHERE search_stale = true")).scalars())
        latest = {pid: paper for pid, paper in latest.items() if pid not in stale}
        if connection.dialect.name == "postgresql":
            entries: dict[str, str] = {
                pid: doc
                for pid, doc in connection.execute(sa.text("SELECT paper_id, doc::text FROM search_doc"))
            }
            assert latest.keys() <= entries.keys()
            for pid, paper in latest.items():
                same = connection.execute(
                    sa.text("SELECT CAST(:a AS tsvector) = CAST(:b AS tsvector)"),
                    {"a": entries[pid], "b": tsvector_literal(paper_doc(paper))},
                ).scalar_one()
                assert same, pid
            return
        # SQLite's contentless index: the entry under the paper's key holds its newest title.
        for pid, paper in latest.items():
            tokens = paper_doc(paper).title.split()
            if not tokens:
                continue
            phrase = '"' + " ".join(tokens) + '"'
            found = connection.execute(
                sa.text("SELECT count(*) FROM search_doc WHERE search_doc MATCH :q AND rowid = :key"),
                {"q": f"title : {phrase}", "key": stored[pid][1]},
            ).scalar_one()
            assert found == 1, (pid, paper.title)


def newest_text(db: Database) -> dict[str, PaperText]:
    """The follow matcher's view of every paper's newest version: the search oracle's input."""
    return {pid: PaperText.of(paper) for pid, paper in _latest_versions(db).items()}
