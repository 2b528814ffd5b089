"""The SQL of the recommendation pass: the cursor, the new papers to score, the models of the
subscribers who asked for recommendations, what each of them must not be recommended, and the write.

A repository over the store's transactions (``core.taste.recommend_records``), Core only, on a connection of
the store (``db.connection()``); the pass
itself is :mod:`core.taste.recommend`. The rules kept here:

* **Which versions.** News versions that are v1 (new papers), with an id above the cursor, and below the
  first version not yet run against the follows or not yet fanned out (its query matches still waiting):
  a version is scored only once its follow matches are in the ledger, so a paper a follow brings is
  never taken for a recommendation. A first pass (cursor 0) starts at the news first seen in the last
  :data:`FIRST_PASS_WINDOW`, never at the whole library.
* **Whose models.** Subscribers that receive matches (:func:`core.follows.fanout.receives_matches`) with
  ``recommend`` set and a stored model, a page at a time by id.
* **The write.** The Match rows (no follow; the reasons hold the score) and the cursor's advance in one
  transaction; the cursor moves only from the value the pass read (compare and set), so of two passes
  over the same versions one writes and the other's transaction writes nothing; the unique (subscriber,
  version) constraint with ``ON CONFLICT DO NOTHING`` keeps a version once per subscriber whatever runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from core.db import Db
from core.db_ids import id_conditions
from core.follows.fanout import receives_matches
from core.ledger.ledger_records import recommended_expression, unsent_condition
from core.models import (
    LibrarySeed,
    Match,
    QueryMatch,
    RecommendCursor,
    Subscriber,
    TasteModelRow,
    UTCDateTime,
    Version,
    Vote,
)

# A first pass (no cursor yet) scores the news first seen this long before it, not the whole library.
FIRST_PASS_WINDOW = timedelta(days=1)
_CURSOR_ID = 1
_MATCH = Match.metadata.tables["match"]
_QUERY_MATCH = QueryMatch.metadata.tables["query_match"]
_VERSION = Version.metadata.tables["version"]
_SUBSCRIBER = Subscriber.metadata.tables["subscriber"]
_MODEL = TasteModelRow.metadata.tables["taste_model"]
_CURSOR = RecommendCursor.metadata.tables["recommend_cursor"]
_VOTE = Vote.metadata.tables["vote"]
_SEED = LibrarySeed.metadata.tables["library_seed"]


@dataclass(frozen=True, slots=True)
class NewPaper:
    """A version to score: its row id, paper id, title and abstract."""

    version_id: int
    arxiv_id: str
    title: str
    abstract: str


@dataclass(frozen=True, slots=True)
class PaperBatch:
    """The next versions to score after cursor ``after``; once done, the cursor moves to ``through``."""

    after: int
    through: int
    papers: tuple[NewPaper, ...]


@dataclass(frozen=True, slots=True)
class ModelOf:
    """A subscriber who asked for up to ``wanted`` recommendations per digest, and its stored model."""

    subscriber_id: int
    wanted: int
    data: bytes


@dataclass(frozen=True, slots=True)
class RecommendationRow:
    """One recommendation to write: a Match row without a follow; ``hit`` is its stored reasons entry
    (:func:`core.reasons.recommendation_hit`)."""

    subscriber_id: int
    version_id: int
    hit: dict[str, Any]


# The recommendation pass's reads and its one write.
def cursor(db: Db) -> int:
    """The id through which every version has been scored; 0 before the first pass."""
    with db.connection() as connection:
        return _cursor(connection)


def next_papers(db: Db, *, now: datetime, limit: int) -> PaperBatch:
    """Up to ``limit`` new papers after the cursor, oldest first, and where the cursor goes after them.

    Only versions already run against the follows and fanned out count (see the module's rules); with
    fewer than ``limit`` the cursor goes to just below the first version still to match or to fan out (or
    the newest version),
    past the revisions and history in between, which are never scored.
    """
    v = _VERSION.c
    with db.connection() as connection:
        after = _cursor(connection)
        unmatched = connection.execute(sa.select(sa.func.min(v.id)).where(v.matched_at.is_(None))).scalar()
        # A version whose query matches still wait for the fan-out is not scored yet either, whoever reads
        # first: its follows' Match rows are not in the ledger.
        waiting = connection.execute(sa.select(sa.func.min(_QUERY_MATCH.c.version_id))).scalar()
        newest = connection.execute(sa.select(sa.func.max(v.id))).scalar()
        firsts = [int(found) for found in (unmatched, waiting) if found is not None]
        end = min(firsts) - 1 if firsts else int(newest or 0)
        start = after if after else _first_pass_start(connection, now, end)
        if end <= start:
            return PaperBatch(after, max(start, after), ())
        rows = connection.execute(
            sa.select(v.id, v.paper_id, v.title, v.abstract)
            .where(v.id > start, v.id <= end, v.news.is_(True), v.number == 1)
            .order_by(v.id)
            .limit(limit)
        ).all()
    papers = tuple(NewPaper(int(i), p, t, a) for i, p, t, a in rows)
    through = papers[-1].version_id if len(papers) == limit else end
    return PaperBatch(after, through, papers)


def recent_papers(db: Db, *, since: datetime, after: int, limit: int) -> list[NewPaper]:
    """News v1 versions first seen at or after ``since`` with ids above ``after``, oldest first, at most
    ``limit`` (``try recommended`` reads the last week a page at a time)."""
    v = _VERSION.c
    with db.connection() as connection:
        rows = connection.execute(
            sa.select(v.id, v.paper_id, v.title, v.abstract)
            .where(v.news.is_(True), v.first_seen_at >= since, v.id > after, v.number == 1)
            .order_by(v.id)
            .limit(limit)
        ).all()
    return [NewPaper(int(i), p, t, a) for i, p, t, a in rows]


def _first_pass_start(connection: sa.Connection, now: datetime, end: int) -> int:
    """Just below the first news version of the last :data:`FIRST_PASS_WINDOW` (``end`` if none)."""
    v = _VERSION.c
    first = connection.execute(
        sa.select(sa.func.min(v.id)).where(
            v.news.is_(True), v.first_seen_at >= now - FIRST_PASS_WINDOW, v.id <= end
        )
    ).scalar()
    return int(first) - 1 if first is not None else end


def models(db: Db, *, now: datetime, after: int, limit: int) -> list[ModelOf]:
    """The next ``limit`` subscribers by id after ``after`` that receive matches, want recommendations
    and have a model."""
    s, m = _SUBSCRIBER.c, _MODEL.c
    with db.connection() as connection:
        rows = connection.execute(
            sa.select(s.id, s.recommend, m.data)
            .join(_MODEL, m.subscriber_id == s.id)
            .where(
                s.id > after,
                s.recommend.is_not(None),
                s.recommend > 0,
                receives_matches(s.status, s.refused_at, now),
            )
            .order_by(s.id)
            .limit(limit)
        ).all()
    return [ModelOf(int(i), int(n), bytes(d)) for i, n, d in rows]


def excluded(db: Db, subscriber_ids: Sequence[int], low: int, high: int) -> dict[int, set[int]]:
    """Per subscriber, the versions with ids in [``low``, ``high``] not to recommend: those already in
    its ledger (a follow brought them), those it voted on and those of its imported library."""
    found: dict[int, set[int]] = defaultdict(set)
    with db.connection() as connection:
        for table in (_MATCH, _VOTE, _SEED):
            c = table.c
            for condition in id_conditions(connection, c.subscriber_id, subscriber_ids):
                rows = connection.execute(
                    sa.select(c.subscriber_id, c.version_id).where(
                        condition, c.version_id >= low, c.version_id <= high
                    )
                )
                for subscriber_id, version_id in rows:
                    found[int(subscriber_id)].add(int(version_id))
    return dict(found)


def unsent(db: Db, subscriber_ids: Sequence[int]) -> dict[int, int]:
    """Per subscriber, its recommendations not sent yet (in no digest, or in one not sent)."""
    counts: dict[int, int] = {}
    with db.connection() as connection:
        c = _MATCH.c
        for condition in id_conditions(connection, c.subscriber_id, subscriber_ids):
            rows = connection.execute(
                sa.select(c.subscriber_id, sa.func.count())
                .where(
                    condition,
                    unsent_condition(),
                    # A recommendation has no follow: the cheap test first, the JSON read after it.
                    sa.cast(c.follow_ids, sa.Text) == "[]",
                    recommended_expression().is_not(None),
                )
                .group_by(c.subscriber_id)
            )
            counts.update((int(s), int(n)) for s, n in rows)
    return counts


def write(db: Db, batch: PaperBatch, rows: Sequence[RecommendationRow], *, now: datetime) -> int | None:
    """Write ``rows`` and move the cursor to ``batch.through``, in one transaction; returns the rows
    written, or None when another pass had moved the cursor from ``batch.after`` first (nothing is
    written then)."""
    with db.connection() as connection:
        postgres = connection.dialect.name == "postgresql"
        dialect_insert = postgresql.insert if postgres else sqlite.insert
        # The row exists before the compare and set below: a first pass creates it.
        connection.execute(
            dialect_insert(_CURSOR)
            .values(id=_CURSOR_ID, through_version_id=0, ran_at=None)
            .on_conflict_do_nothing()
        )
        # First, so that a second pass over the same versions waits here (the row's lock on
        # PostgreSQL, the write lock on SQLite) and then finds the cursor moved.
        moved = connection.execute(
            sa.update(_CURSOR)
            .where(_CURSOR.c.id == _CURSOR_ID, _CURSOR.c.through_version_id == batch.after)
            .values(through_version_id=batch.through, ran_at=now)
        )
        if moved.rowcount != 1:
            return None  # nothing written: the cursor row above existed already
        if not rows:
            return 0
        return _insert(connection, rows, now)


def _cursor(connection: sa.Connection) -> int:
    """The stored cursor; 0 before the first pass wrote its row."""
    query = sa.select(_CURSOR.c.through_version_id).where(_CURSOR.c.id == _CURSOR_ID)
    value = connection.execute(query).scalar()
    return int(value or 0)


def _insert(connection: sa.Connection, rows: Sequence[RecommendationRow], now: datetime) -> int:
    """INSERT the rows as Match rows, skipping (subscriber, version) pairs already there; returns how many
    were written. One statement per database, the values bound as they go to the driver: a day's pass
    writes tens of thousands (SQLAlchemy's own executemany converted each value in Python: 1.4 s of the
    pass at 10,000 subscribers, docs/benchmarks.md)."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    dialect = connection.dialect
    if dialect.name == "postgresql":
        # One JSON document, taken apart by the server: a text[] parameter would be escaped by psycopg
        # character by character (2 s of CPU for a day's rows, against 0.1 s for this).
        result = connection.execute(
            sa.text(
                "INSERT INTO match (subscriber_id, version_id, follow_ids, reasons, created_at, instant) "
                "SELECT (e->>0)::int, (e->>1)::int, '[]'::json, e->2, :at, false "
                "FROM json_array_elements(CAST(:rows AS json)) AS e "
                "ON CONFLICT (subscriber_id, version_id) DO NOTHING"
            ).bindparams(sa.bindparam("at", type_=UTCDateTime())),
            {"rows": encode([[r.subscriber_id, r.version_id, [r.hit]] for r in rows]), "at": now},
        )
        return int(result.rowcount)
    # SQLite: the DBAPI cursor's executemany, which reports the rows it changed (a skipped pair: none).
    at = _MATCH.c.created_at.type.dialect_impl(dialect).bind_processor(dialect)
    stamp = at(now) if at is not None else now
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(
            "INSERT INTO match (subscriber_id, version_id, follow_ids, reasons, created_at, instant) "
            "VALUES (?, ?, '[]', ?, ?, 0) ON CONFLICT (subscriber_id, version_id) DO NOTHING",
            [(r.subscriber_id, r.version_id, encode([r.hit]), stamp) for r in rows],
        )
        return int(cursor.rowcount)
    finally:
        cursor.close()
