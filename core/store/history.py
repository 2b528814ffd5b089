"""The SQL of a subscriber's history: the papers their sent digests carried (the manage page's .bib).

``store.history`` (:class:`HistoryStore`): the store's ORM session (``store.session()``). The walk goes down
the ledger's unique ``(subscriber_id, version_id)`` index from the newest match, a page at a time, each page
in its own short transaction: a download of thousands of entries never holds a transaction open while the
client reads, and costs what the subscriber's own ledger costs, not the library's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlmodel import col, select

from core.models import Digest, DigestState, Match, Paper, Version

if TYPE_CHECKING:
    from core.store.facade import Store


# Matches read per statement while walking a subscriber's ledger.
HISTORY_PAGE = 500


class HistoryStore:
    """A subscriber's sent papers."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def sent_papers(self, subscriber_id: int, *, limit: int, page: int = HISTORY_PAGE) -> Iterator[Version]:
        """The newest stored version of each paper a sent digest of the subscriber carried, at most ``limit``.

        Papers come in the order of their newest sent match (most recent first), each once, whichever of
        its versions were sent: a paper sent as v1 and again as v3 is one item, its newest stored version
        (which may be newer than any sent). Every match of a digest in state ``sent`` counts, the ones past
        the digest's display cap ("…and N more") too. Matches still pending, or in a digest that failed or
        was dead-lettered, do not. Lazy: one statement per ``page`` matches and one for their papers.
        """
        seen: set[str] = set()
        before: int | None = None
        while len(seen) < limit:
            with self._store.session() as session:
                walk = (
                    select(col(Match.version_id), col(Version.paper_id))
                    .join(Digest, col(Digest.id) == col(Match.digest_id))
                    .join(Version, col(Version.id) == col(Match.version_id))
                    .where(col(Match.subscriber_id) == subscriber_id, col(Digest.state) == DigestState.SENT)
                    .order_by(col(Match.version_id).desc())
                    .limit(page)
                )
                if before is not None:
                    walk = walk.where(col(Match.version_id) < before)
                rows = session.exec(walk).all()
                fresh: list[str] = []
                for _, paper_id in rows:
                    if paper_id not in seen and len(seen) < limit:
                        seen.add(paper_id)
                        fresh.append(paper_id)
                newest = {
                    version.paper_id: version
                    for version in (
                        []
                        if not fresh
                        else session.exec(
                            select(Version)
                            .join(
                                Paper,
                                sa.and_(
                                    col(Paper.id) == col(Version.paper_id),
                                    col(Version.number) == col(Paper.latest_version),
                                ),
                            )
                            .where(col(Paper.id).in_(fresh))
                        )
                    )
                }
            yield from (newest[paper_id] for paper_id in fresh if paper_id in newest)
            if len(rows) < page:
                return
            before = rows[-1][0]
