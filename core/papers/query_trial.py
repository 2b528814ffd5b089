"""Trying a follow's query before saving it: which versions stored lately it would have matched, and why.

It reads the library (``core.papers.paper_records``) with the follow language (``core.follows.query``), so
it is papers', above follows; the chat's ``try`` and ``papertrail try`` call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from core.db import Database
from core.follows.query import parse
from core.models import utcnow, version_to_paper
from core.papers import paper_records
from core.reasons import Reason


@dataclass(frozen=True, slots=True)
class TryHit:
    """A stored version a query would have matched, with why."""

    arxiv_id: str
    version: int
    title: str
    first_seen_at: datetime
    reasons: tuple[Reason, ...]


def try_query(db: Database, text: str, *, days: int = 7, now: datetime | None = None) -> list[TryHit]:
    """Which versions first seen in the last ``days`` days ``text`` would have matched, newest first.

    Raises QueryError for a query that does not parse, so people can tune a follow before saving it.
    """
    query = parse(text)
    since = (now or utcnow()) - timedelta(days=days)
    hits: list[TryHit] = []
    for version in paper_records.versions_since(db, since):
        reasons = query.evaluate(version_to_paper(version))
        if reasons is not None:
            hits.append(
                TryHit(version.paper_id, version.number, version.title, version.first_seen_at, reasons)
            )
    return hits
