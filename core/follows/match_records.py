"""What matching reads and writes: versions waiting to be matched, the query matches found, and their
fan-out into the followers' Match rows (``core.follows.fanout``); ``core.follows.match_records``.

Talks to the database through the store's session: versions are read as ORM rows, the matches are
written with Core statements on the session's connection (a bulk load and a fan-out in SQL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Db
from core.db_bulk import bulk_insert
from core.db_ids import ID_CHUNK
from core.follows.fanout import FAN_OUT_VERSIONS, ReasonsJson, fan_out, pending_versions
from core.models import (
    QueryMatch,
    Version,
    utcnow,
)
from core.reasons import Reason


class QueryHit(NamedTuple):
    """One distinct follow query (by its normal form) matched one version, with the query's reasons."""

    version_id: int
    canonical: str
    reasons: Sequence[Reason]


_QUERY_MATCH_TABLE = QueryMatch.metadata.tables["query_match"]
_QUERY_MATCH_COLUMNS = ("version_id", "canonical", "reasons")
# The first half of the fan-out's advisory lock (two 32-bit keys: this and the schema's hash), a space of
# its own beside the single 64-bit keys of core.db_migrate and papertrail.service.leader.
_FAN_OUT_LOCK_KEY = 0x5054_464F  # "PTFO"
_VERSION_TABLE = Version.metadata.tables["version"]


# The matcher's versions and query matches, and the fan-out to Match rows.
def unmatched_versions(db: Db, limit: int = 5000) -> list[Version]:
    """Versions not yet run against the follows, oldest first."""
    with db.session() as session:
        rows = session.exec(
            select(Version).where(col(Version.matched_at).is_(None)).order_by(col(Version.id)).limit(limit)
        )
        return list(rows)


def record_query_matches(
    db: Db,
    version_ids: Iterable[int],
    matches: Iterable[QueryHit],
    *,
    now: datetime | None = None,
) -> int:
    """Write what matching found, one row per (version, distinct query), and mark the versions matched.

    Both happen in one transaction, so every version is matched exactly once; the rows go to the
    database in one bulk load (executemany on SQLite, COPY on PostgreSQL), as ``save_versions`` writes
    versions. They wait there for :meth:`expand_matches`. Returns the number of rows written.
    """
    now = now or utcnow()
    encode = ReasonsJson()
    rows = [[version_id, canonical, encode(reasons)] for version_id, canonical, reasons in matches]
    with db.session() as session:
        connection = session.connection()
        if rows:
            bulk_insert(connection, _QUERY_MATCH_TABLE, _QUERY_MATCH_COLUMNS, rows, encoded={"reasons"})
        ids = list(version_ids)
        for start in range(0, len(ids), ID_CHUNK):
            connection.execute(
                sa.update(_VERSION_TABLE)
                .where(_VERSION_TABLE.c.id.in_(ids[start : start + ID_CHUNK]))
                .values(matched_at=now)
            )
    return len(rows)


def expand_matches(db: Db, *, now: datetime | None = None, then: Callable[[Db], object] | None = None) -> int:
    """Fan the waiting query matches out to their followers' Match rows; returns the rows written.

    Planning, guides and a subscriber's pending count call this first, so the ledger they read is
    complete; the status page, ``/metrics`` and ``status`` read only, and never pay for it. A slice of
    versions per transaction (``core.follows.fanout``); a slice shorter than :data:`FAN_OUT_VERSIONS` was
    the last, and ends the fan-out without a read that would find nothing. On PostgreSQL one process fans
    out at a time: a transaction-scoped advisory lock (per schema) that a second caller waits for, a
    slice at most, before it fans out what is left; so when this returns, everything matched before the
    call is in the ledger, whoever fanned it out.

    ``then`` runs in the last slice's transaction, after it: a caller's read of the complete ledger,
    without a transaction of its own (if it raises, that slice rolls back with it).
    """
    now = now or utcnow()
    total = 0
    while True:
        with db.transaction() as tx, tx.connection() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key, hashtext(current_schema()))"),
                    {"key": _FAN_OUT_LOCK_KEY},
                )
            versions = pending_versions(connection, FAN_OUT_VERSIONS)
            if versions:
                total += fan_out(connection, versions, now)
            if len(versions) < FAN_OUT_VERSIONS:
                if then is not None:
                    then(tx)
                return total
