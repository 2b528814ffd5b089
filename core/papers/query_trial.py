"""Trying a follow's query before saving it: which versions stored lately it would have matched, and why.

It reads the library (``core.papers.paper_records``) with the follow language (``core.follows.query``), so
it is papers', above follows; the chat's ``try`` and ``papertrail try`` call it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from core.db import Database
from core.follows.query import parse
from core.models import utcnow, version_to_item, version_to_paper
from core.papers import paper_records
from core.values import DigestItem


def try_query(db: Database, text: str, *, days: int = 7, now: datetime | None = None) -> list[DigestItem]:
    """Which versions first seen in the last ``days`` days ``text`` would have matched, newest first, each
    as a reader sees it (with why it matched; what a revision changed is not read: a reply does not say it).

    Raises QueryError for a query that does not parse, so people can tune a follow before saving it.
    """
    query = parse(text)
    since = (now or utcnow()) - timedelta(days=days)
    hits: list[DigestItem] = []
    for version in paper_records.versions_since(db, since):
        reasons = query.evaluate(version_to_paper(version))
        if reasons is not None:
            hits.append(version_to_item(version, reasons=reasons))
    return hits
