"""Property: the production path (match_new, then the fan-out) gives exactly what the plain evaluator gives.

The plain evaluator runs every follow's query on every version (``Query.evaluate``) and applies the follow's
options by hand: a follow sees only versions first seen after it was made, a new-only follow no revisions,
one row per (subscriber, version) with the follows in id order, each distinct reason once (from the first
follow giving it), instant when any of its follows is. The production path matches once per distinct
query, stores the query matches in bulk and fans them out in SQL. Random follows from the recorded day's
vocabulary (tests/test_match_property.py), shared among subscribers; SQLite under Hypothesis, PostgreSQL
and SQLite on a fixed mix.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import col, select

from core.db import Database
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.query import Query, parse
from core.models import Follow, Match, Version
from core.papers import paper_records
from core.reasons import reasons_from_data
from tests.conftest import migrated_store
from tests.support.match_corpus import corpus, queries

NOW = datetime(2024, 11, 28, 6, 0, tzinfo=UTC)
Row = tuple[tuple[int, ...], tuple[tuple[str, int | None], ...], bool]


@dataclass(frozen=True)
class Spec:
    """One follow: whose (subscriber index), what, with which options, made before or after the day."""

    subscriber: int
    query: Query
    revisions: bool = True
    instant: bool = False
    late: bool = False


def store_follows(db: Database, specs: Sequence[Spec]) -> dict[int, Spec]:
    """Create the subscribers and follows; returns follow id -> spec (the store keeps one follow per
    subscriber and query: a repeated one changes its options, as ``papertrail follow`` does)."""
    made: dict[int, Spec] = {}
    for spec in specs:
        subscriber, _ = subscriber_records.ensure_subscriber(
            db, f"console:s{spec.subscriber}", timezone="UTC", schedule="daily 08:00"
        )
        assert subscriber.id is not None
        follow, outcome = subscriber_records.add_follow(
            db,
            subscriber.id,
            spec.query.canonical(),
            spec.query.canonical(),
            revisions=spec.revisions,
            instant=spec.instant,
        )
        if outcome != "added":  # the same query again: the store takes the new options, keeps the date
            made[follow.id or 0] = dataclasses.replace(spec, late=made[follow.id or 0].late)
            continue
        created = NOW + timedelta(hours=1) if spec.late else NOW - timedelta(hours=1)
        with db.session() as session:
            session.execute(sa.update(Follow).where(col(Follow.id) == follow.id).values(created_at=created))
        made[follow.id or 0] = spec
    return made


def expected_rows(db: Database, follows: dict[int, Spec]) -> dict[tuple[int, int], Row]:
    """The plain evaluator's rows: (subscriber id, version id) -> (follow ids, (reason, follow), instant)."""
    with db.session() as session:
        subscriber_of = {f.id: f.subscriber_id for f in session.exec(select(Follow))}
        versions = list(session.exec(select(Version)))
    by_number = {(p.arxiv_id, p.version): p for p in corpus().papers}
    rows: dict[tuple[int, int], tuple[list[int], dict[str, int], bool]] = {}
    for version in versions:
        paper = by_number[(version.paper_id, version.number)]
        for follow_id in sorted(follows):
            spec = follows[follow_id]
            if spec.late or (version.number > 1 and not spec.revisions):
                continue
            reasons = spec.query.evaluate(paper)
            if reasons is None:
                continue
            key = (subscriber_of[follow_id], version.id or 0)
            ids, found, instant = rows.setdefault(key, ([], {}, False))
            ids.append(follow_id)
            for reason in reasons:
                found.setdefault(str(reason), follow_id)
            rows[key] = (ids, found, instant or spec.instant)
    return {k: (tuple(ids), tuple(found.items()), instant) for k, (ids, found, instant) in rows.items()}


def production_rows(db: Database) -> dict[tuple[int, int], Row]:
    """What match_new and the fan-out stored."""
    match_new(db, now=NOW)
    match_records.expand_matches(db, now=NOW)
    with db.session() as session:
        matches = list(session.exec(select(Match)))
    return {
        (m.subscriber_id, m.version_id): (
            tuple(sorted(m.follow_ids)),
            tuple((str(r), r.follow) for r in reasons_from_data(m.reasons)),
            bool(m.instant),
        )
        for m in matches
    }


def check(db: Database, specs: Sequence[Spec]) -> int:
    """Store the sampled day and the follows, run both, compare; returns the number of rows."""
    paper_records.save_versions(db, list(corpus().papers), now=NOW)
    follows = store_follows(db, specs)
    expected = expected_rows(db, follows)
    assert production_rows(db) == expected
    return len(expected)


@pytest.fixture
def fresh_sqlite(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def mixed_specs(seed: int, pool: Sequence[Query], n: int) -> list[Spec]:
    """``n`` follows over ``pool`` (so queries repeat across subscribers), options mixed."""
    rng = random.Random(seed)
    return [
        Spec(
            subscriber=rng.randrange(max(1, n // 3)),
            query=rng.choice(pool),
            revisions=rng.random() > 0.25,
            instant=rng.random() < 0.2,
            late=rng.random() < 0.1,
        )
        for _ in range(n)
    ]


PIPELINE_SETTINGS = settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
pools = st.lists(queries, min_size=1, max_size=10)
seeds = st.integers(0, 2**16)


def check_random_day(folder: Path, pool: list[Query], seed: int) -> None:
    """One example: a fresh SQLite store, 30 follows over ``pool`` with mixed options, both paths compared."""
    url = f"sqlite:///{folder}/{seed}-{len(pool)}-{id(pool)}.db"
    for db in migrated_store(url):
        check(db, mixed_specs(seed, pool, 30))


# Each example is a fresh store and a stored day (~1 s): `make test` runs two, `make test-slow` six.
@settings(PIPELINE_SETTINGS, max_examples=2)
@given(pools, seeds)
def test_production_path_equals_plain_evaluation(fresh_sqlite: Path, pool: list[Query], seed: int) -> None:
    check_random_day(fresh_sqlite, pool, seed)


@pytest.mark.slow
@PIPELINE_SETTINGS
@given(pools, seeds)
def test_production_path_equals_plain_evaluation_full(
    fresh_sqlite: Path, pool: list[Query], seed: int
) -> None:
    check_random_day(fresh_sqlite, pool, seed)


# A fixed mix that matches a lot: categories shared by many, names, phrases, booleans, NOT-only.
FIXED = [
    "cat:cs.LG",
    "cat:cs.*",
    "cat:cs.DC ANDNOT cat:cs.LG",
    "NOT cat:cs.CV",
    "learning",
    'ti:"language models"',
    "abs:graph OR abs:network",
    "(cat:cs.CL OR cat:cs.AI) AND model",
]


def test_production_path_on_both_databases(db: Database) -> None:
    names = [f'au:"{a}"' for p in corpus().papers[:8] for a in p.authors[:1]]
    pool = [parse(q) for q in itertools.chain(FIXED, names)]
    assert check(db, mixed_specs(7, pool, 60)) > 100
