"""The paper browser's rows: the display row of each listed paper (its newest version, v1's date, its
community picks) and the matcher's text of each paper a search checks; for ``core.papers.browser_records``.

Core ``select`` statements on the caller's connection, inside its transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import col

from core.follows.query import And, Node, Not, Or, PaperText, Words
from core.follows.search_text import SearchQuery
from core.models import CommunityPickRow, Paper, Version
from core.papers.search_index import newest_versions

_VERSION = Version.metadata.tables["version"]


@dataclass(frozen=True, slots=True)
class PaperRow:
    """One paper in the browser, with its newest stored metadata (or its newest pick's, for a stub)."""

    id: str
    title: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    latest_version: int
    ai_related: bool
    updated_at: datetime
    ingested_at: datetime
    published_at: datetime | None
    upvotes: int = 0
    picked: bool = False
    # The stored id of the newest version (None for a stub known only from a community pick): its AI guide
    # is the one a list shows.
    version_id: int | None = None
    news: bool = True
    # The newest version's abstract as arXiv wrote it (the original page's 原文摘要; empty for a stub).
    abstract: str = ""


def page_rows(connection: sa.Connection, ids: Sequence[str]) -> list[PaperRow]:
    """The display rows of ``ids``, in that order: each paper's newest version, v1's date and its picks."""
    if not ids:
        return []
    latest_version, first_version = _VERSION.alias("latest"), _VERSION.alias("first")
    latest, first = latest_version.c, first_version.c
    rows = connection.execute(
        sa.select(
            col(Paper.id),
            col(Paper.latest_version),
            col(Paper.first_seen_at),
            sa.func.coalesce(latest.first_seen_at, col(Paper.first_seen_at)),
            first.announced_at,
            latest.title,
            latest.authors,
            latest.categories,
            latest.ai_related,
            latest.id,
            col(Paper.news),
            latest.abstract,
        )
        .select_from(Paper)
        .outerjoin(
            latest_version,
            sa.and_(latest.paper_id == col(Paper.id), latest.number == col(Paper.latest_version)),
        )
        .outerjoin(first_version, sa.and_(first.paper_id == col(Paper.id), first.number == 1))
        .where(col(Paper.id).in_(list(ids)))
    ).all()
    picks = _pick_summary(connection, ids)
    by_id = {}
    for row in rows:
        pid, number, ingested, updated_at, published, title, authors, categories, ai, vid, news = row[:11]
        abstract = row[11]
        upvotes, pick_title = picks.get(pid, (0, None))
        by_id[pid] = PaperRow(
            id=pid,
            title=title if title is not None else (pick_title or ""),
            authors=tuple(authors or ()),
            categories=tuple(categories or ()),
            latest_version=number,
            ai_related=bool(ai),
            updated_at=updated_at,
            ingested_at=ingested,
            published_at=published,
            upvotes=upvotes,
            picked=pid in picks,
            version_id=vid,
            news=bool(news),
            abstract=abstract or "",
        )
    return [by_id[pid] for pid in ids if pid in by_id]


def _pick_summary(connection: sa.Connection, papers: Sequence[str]) -> dict[str, tuple[int, str | None]]:
    """For papers with community picks: the most upvotes any pick recorded and the newest pick's title."""
    if not papers:
        return {}
    rows = connection.execute(
        sa.select(
            col(CommunityPickRow.paper_id),
            col(CommunityPickRow.upvotes),
            col(CommunityPickRow.title),
        )
        .where(col(CommunityPickRow.paper_id).in_(list(papers)))
        .order_by(col(CommunityPickRow.paper_id), col(CommunityPickRow.day))
    ).all()
    summary: dict[str, tuple[int, str | None]] = {}
    for pid, upvotes, title in rows:
        best, _ = summary.get(pid, (0, None))
        summary[pid] = (max(best, int(upvotes or 0)), title)
    return summary


def paper_texts(
    connection: sa.Connection, ids: Sequence[str], search: SearchQuery
) -> list[tuple[str, PaperText]]:
    """The follow matcher's view of each paper's newest version, in the order of ``ids``.

    A search with no word terms (``au:`` alone, or with ``cat:`` / ``id:``) never reads the title or the
    abstract, so they are left out: splitting them into terms is most of the cost of a check.
    """
    found = {
        paper.arxiv_id: PaperText.of(paper)
        for paper in newest_versions(connection, ids, text=_has_words(search.query.root))
    }
    return [(pid, found[pid]) for pid in ids if pid in found]


def _has_words(node: Node) -> bool:
    """Whether a query tree holds a title or abstract term anywhere."""
    if isinstance(node, Words):
        return True
    if isinstance(node, And | Or):
        return any(_has_words(child) for child in node.children)
    if isinstance(node, Not):
        return _has_words(node.child)
    return False
