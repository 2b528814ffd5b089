"""How ledger rows become digest items: the items of (match, version) rows, what a revision changed, and
the side reads they need (upvotes, follow queries, earlier versions), each a few statements in slices.

Functions over the caller's ORM session (its transaction); used by ``store.ledger`` and ``store.claims``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.follows.reasons import reasons_from_data, recommended_score
from core.models import (
    CommunityPickRow,
    Follow,
    Match,
    Version,
)
from core.values import DigestItem

if TYPE_CHECKING:
    from core.store.ledger import RankedMatch

# Values per IN list. PostgreSQL binds at most 65,535 values in one statement and SQLite 32,766; a batch of
# a busy minute can name more (100,000 subscribers, their matches' papers), so lists are read in slices.
IN_SLICE = 5_000
_Key = TypeVar("_Key", int, str)
# Compared between a revision and the newest earlier stored version, in this order.
_TRACKED_FIELDS = (
    ("title", "title"),
    ("authors", "authors"),
    ("abstract", "abstract"),
    ("comment", "comment"),
    ("journal_ref", "journal-ref"),
    ("doi", "DOI"),
)


def items_of(session: Session, rows: Sequence[tuple[Match, Version]]) -> list[DigestItem]:
    """DigestItems for (match, version) rows, in the same order."""
    papers = {version.paper_id for _, version in rows}
    upvotes = upvotes_of(session, papers)
    earlier = earlier_versions(session, papers, [v for _, v in rows if v.number > 1])
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
            changes=changes(earlier.get((version.paper_id, version.number)), version),
            upvotes=upvotes.get(version.paper_id, 0),
            journal_ref=version.journal_ref,
            doi=version.doi,
            follows=tuple((fid, queries[fid]) for fid in sorted(match.follow_ids) if fid in queries),
            recommended=recommended_score(match.reasons),
        )
        for match, version in rows
    ]


def changes(before: Version | sa.Row[Any] | None, after: Version | sa.Row[Any]) -> tuple[str, ...]:
    """What ``after`` changed against ``before`` (title, authors, abstract, comment, journal-ref, DOI)."""
    if before is None:
        return ()
    return tuple(
        label
        for name, label in _TRACKED_FIELDS
        if _normal(getattr(before, name)) != _normal(getattr(after, name))
    )


def _normal(value: object) -> object:
    # Whitespace and line breaks differ between sources (RSS, OAI, API) for the same text.
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


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


def earlier_versions(
    session: Session, papers: set[str], revisions: Sequence[Version]
) -> dict[tuple[str, int], Version]:
    """For each revision, the newest stored version of the same paper with a lower number."""
    if not revisions:
        return {}
    wanted = {v.paper_id for v in revisions}
    stored: defaultdict[str, list[Version]] = defaultdict(list)
    for chunk in slices(wanted & papers):
        for version in session.exec(select(Version).where(col(Version.paper_id).in_(chunk))):
            stored[version.paper_id].append(version)
    found: dict[tuple[str, int], Version] = {}
    for revision in revisions:
        older = [v for v in stored[revision.paper_id] if v.number < revision.number]
        if older:
            found[(revision.paper_id, revision.number)] = max(older, key=lambda v: v.number)
    return found


def earlier_fields(session: Session, revisions: Sequence[RankedMatch]) -> dict[tuple[str, int], sa.Row[Any]]:
    """For each revision, the tracked fields of the newest stored version of its paper with a lower number.

    Only the versions below the highest revision asked for per paper are read, and only the columns
    :func:`changes` compares: the rule of :func:`earlier_versions`, for the shown revisions only.
    """
    if not revisions:
        return {}
    highest: dict[str, int] = {}
    for revision in revisions:
        highest[revision.arxiv_id] = max(highest.get(revision.arxiv_id, 0), revision.version)
    stored: defaultdict[str, list[sa.Row[Any]]] = defaultdict(list)
    for chunk in slices(highest):
        rows = session.execute(
            sa.select(
                col(Version.paper_id),
                col(Version.number),
                *(col(getattr(Version, name)) for name, _ in _TRACKED_FIELDS),
            ).where(col(Version.paper_id).in_(chunk))
        )
        for row in rows:
            if row.number < highest[row.paper_id]:
                stored[row.paper_id].append(row)
    found: dict[tuple[str, int], sa.Row[Any]] = {}
    for revision in revisions:
        older = [v for v in stored[revision.arxiv_id] if v.number < revision.version]
        if older:
            found[(revision.arxiv_id, revision.version)] = max(older, key=lambda v: v.number)
    return found
