"""What a subscriber was sent, as papers: each paper once, at its newest stored version, in the order of its
most recent sending (the BibTeX download of a reader's history).

What counts as sent is ``core.ledger.ledger_sent``'s; the versions are ``core.papers``'.
"""

from __future__ import annotations

from collections.abc import Iterator

from core.db import Database
from core.ledger.ledger_sent import NEWEST_FIRST, sent_items
from core.models import Version
from core.papers.status import newest_versions

HISTORY_CHUNK = 500
"""Papers read per chunk: each chunk's ledger pages and versions in short transactions."""


def sent_papers(
    db: Database, subscriber_id: int, *, limit: int, chunk: int = HISTORY_CHUNK
) -> Iterator[Version]:
    """The newest stored version of each paper the subscriber was sent, at most ``limit``, lazily.

    A paper sent as v1 and again as v3 is one entry, its newest stored version. ``chunk`` papers are read
    at a time, each chunk's ledger pages and versions in short transactions, so a long download never
    holds one open while its client reads.
    """
    seen: set[str] = set()
    papers: list[str] = []
    for item in sent_items(db, subscriber_id, order=NEWEST_FIRST):
        if item.arxiv_id in seen:
            continue
        seen.add(item.arxiv_id)
        papers.append(item.arxiv_id)
        if len(papers) == chunk or len(seen) == limit:
            yield from _newest(db, papers)
            papers = []
            if len(seen) == limit:
                return
    yield from _newest(db, papers)


def _newest(db: Database, papers: list[str]) -> Iterator[Version]:
    newest = newest_versions(db, papers)
    return (newest[paper] for paper in papers if paper in newest)
