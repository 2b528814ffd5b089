"""How ledger rows become digest items: the items of (match, version) rows and the side reads they need
(upvotes, follow queries, and what each revision changed from core.papers.revisions), each a few statements
in slices.

Functions over the caller's ORM session (its transaction); used by ``core.ledger.ledger_records`` and
``core.ledger.claim_records``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

import sqlalchemy as sa
from sqlmodel import Session, col

from core.models import (
    CommunityPickRow,
    Follow,
    Match,
    Version,
)
from core.papers.revisions import changes_of
from core.reasons import reasons_from_data, recommended_score
from core.values import DigestItem

# Values per IN list. PostgreSQL binds at most 65,535 values in one statement and SQLite 32,766; a batch of
# a busy minute can name more (100,000 subscribers, their matches' papers), so lists are read in slices.
IN_SLICE = 5_000
_Key = TypeVar("_Key", int, str)


def items_of(session: Session, rows: Sequence[tuple[Match, Version]]) -> list[DigestItem]:
    """DigestItems for (match, version) rows, in the same order."""
    papers = {version.paper_id for _, version in rows}
    upvotes = upvotes_of(session, papers)
    changed = changes_of(session.connection(), [(v.paper_id, v.number) for _, v in rows])
    queries = follow_queries(session, {fid for match, _ in rows for fid in match.follow_ids})
    return [
        DigestItem(
            version_id=version.id,
            arxiv_id=version.paper_id,
            version=version.number,
            title=version.title,
            authors=tuple(version.authors),
            categories=tuple(version.categories),
            reasons=reasons_from_data(match.reasons),
            abstract=version.abstract,
            comment=version.comment,
            changes=changed[(version.paper_id, version.number)],
            upvotes=upvotes.get(version.paper_id, 0),
            journal_ref=version.journal_ref,
            doi=version.doi,
            follows=tuple((fid, queries[fid]) for fid in sorted(match.follow_ids) if fid in queries),
            recommended=recommended_score(match.reasons),
        )
        for match, version in rows
    ]


def slices(keys: Iterable[_Key], size: int = IN_SLICE) -> Iterator[list[_Key]]:
    """``keys`` without repeats, sorted, in lists of at most ``size``: one IN list each."""
    ordered = sorted(set(keys))
    for start in range(0, len(ordered), size):
        yield ordered[start : start + size]


def follow_queries(session: Session, ids: set[int]) -> dict[int, str]:
    """Follow id -> query, for the follows that still exist."""
    found: dict[int, str] = {}
    for chunk in slices(ids):
        rows = session.execute(sa.select(col(Follow.id), col(Follow.query)).where(col(Follow.id).in_(chunk)))
        found.update((int(fid), str(query)) for fid, query in rows)
    return found


def upvotes_of(session: Session, papers: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for chunk in slices(papers):
        rows = session.execute(
            sa.select(col(CommunityPickRow.paper_id), sa.func.max(col(CommunityPickRow.upvotes)))
            .where(col(CommunityPickRow.paper_id).in_(chunk))
            .group_by(col(CommunityPickRow.paper_id))
        )
        found.update((paper, int(votes or 0)) for paper, votes in rows)
    return found
