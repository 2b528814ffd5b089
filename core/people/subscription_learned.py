"""The learned follows of a subscription file resolved against this library: which stored
versions its votes and seeds name, and how they differ from what the subscriber has; for
``core.people.subscription_records``.

Functions on the Core connection of the caller's transaction; nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from core.db_ids import id_conditions
from core.models import LibrarySeed, Subscriber, Version, Vote
from core.people.subscription_file import Learned
from core.taste.taste_records import SeedIn

_VOTE: sa.Table = Vote.__table__  # type: ignore[attr-defined]
_SEED: sa.Table = LibrarySeed.__table__  # type: ignore[attr-defined]


def version_ids(connection: sa.Connection, papers: set[str]) -> dict[tuple[str, int], int]:
    """(arXiv id, version number) -> version id of every stored version of ``papers``."""
    v = Version.__table__.c  # type: ignore[attr-defined]
    found: dict[tuple[str, int], int] = {}
    for condition in id_conditions(connection, v.paper_id, papers):
        for paper, number, version_id in connection.execute(
            sa.select(v.paper_id, v.number, v.id).where(condition)
        ):
            found[(str(paper), int(number))] = int(version_id)
    return found


@dataclass(slots=True)
class LearnedPlan:
    """A file's learned follows resolved against this library: what an import would store."""

    recommend: int | None
    votes: dict[int, tuple[int, datetime]]
    """version id -> (value, voted at), for the votes on versions stored here."""
    votes_missing: int
    seeds: list[SeedIn]
    seeds_as_text: int


def plan_learned(connection: sa.Connection, learned: Learned) -> LearnedPlan:
    """Resolve the file's votes and seeds to the versions this library has (before anything is written)."""
    papers = {v.arxiv_id for v in learned.votes} | {s.arxiv_id for s in learned.library if s.arxiv_id}
    versions = version_ids(connection, papers)
    newest: dict[str, tuple[int, int]] = {}  # arXiv id -> (number, id) of its newest version here
    for (paper, number), found in versions.items():
        if paper not in newest or number > newest[paper][0]:
            newest[paper] = (number, found)
    votes: dict[int, tuple[int, datetime]] = {}
    for vote in learned.votes:
        version_id = versions.get((vote.arxiv_id, vote.version))
        if version_id is not None:
            votes[version_id] = (vote.value, vote.voted_at)
    seeds: list[SeedIn] = []
    as_text = 0
    for line in learned.library:
        version_id = None
        if line.arxiv_id is not None and line.version is not None:
            # A seed stands for the paper (core.taste.library_import keys it by arXiv id): another version
            # will do.
            version_id = versions.get((line.arxiv_id, line.version))
            if version_id is None and line.arxiv_id in newest:
                version_id = newest[line.arxiv_id][1]
            if version_id is None:
                as_text += 1
        if version_id is None:
            seeds.append(SeedIn(line.key, None, line.title, line.abstract))
        else:
            seeds.append(SeedIn(line.key, version_id))
    return LearnedPlan(learned.recommend, votes, len(learned.votes) - len(votes), seeds, as_text)


def votes_here(connection: sa.Connection, subscriber_id: int) -> dict[int, tuple[int, datetime, int]]:
    """version id -> (value, voted at, row id) of the subscriber's votes."""
    v = _VOTE.c
    rows = connection.execute(
        sa.select(v.version_id, v.value, v.created_at, v.id).where(v.subscriber_id == subscriber_id)
    ).all()
    return {int(version): (int(value), at, int(row)) for version, value, at, row in rows}


def seed_keys(connection: sa.Connection, subscriber_id: int) -> set[str]:
    return set(
        connection.execute(sa.select(_SEED.c.key).where(_SEED.c.subscriber_id == subscriber_id)).scalars()
    )


def learned_differences(connection: sa.Connection, found: Subscriber, plan: LearnedPlan) -> list[str]:
    """What differs in the learned follows, worded as :func:`core.people.subscription_records._differences`
    does. Votes the file has on versions not stored here are not compared: no import can store them."""
    assert found.id is not None
    differences = []
    if found.recommend != plan.recommend:
        differences.append(f"recommend: {found.recommend!r} here, {plan.recommend!r} in the file")
    here = {version: value for version, (value, _, _) in votes_here(connection, found.id).items()}
    there = {version: value for version, (value, _) in plan.votes.items()}
    other = sum(1 for version, value in there.items() if version in here and here[version] != value)
    if here != there:
        differences.append(
            f"votes: {len(set(here) - set(there))} here only, {len(set(there) - set(here))} in the file "
            f"only, {other} with the other value"
        )
    keys, wanted = seed_keys(connection, found.id), {seed.key for seed in plan.seeds}
    if keys != wanted:
        differences.append(f"library: {len(keys - wanted)} here only, {len(wanted - keys)} in the file only")
    return differences
