"""The SQL of learned follows: a reader's votes, the seeds of an imported library, the trained
models, and the texts a model is trained from.

A repository over the store's transactions (``core.taste.taste_records``), through its ORM session
(``db.session()``; bulk seeds and the training reads as Core statements on that session's connection); the
rules live in :mod:`core.taste.votes` and the model in :mod:`core.taste.model`. A vote is kept per subscriber
and version (voting
again replaces it, an undo deletes it); a seed per subscriber and key, so importing the same library twice
adds nothing.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from core.db import Db
from core.db_ids import id_conditions
from core.models import DISLIKE, LIKE, LibraryLookup, LibrarySeed, Paper, TasteModelRow, Version, Vote, utcnow

_VERSION = Version.metadata.tables["version"]
_PAPER = Paper.metadata.tables["paper"]
_LOOKUP = LibraryLookup.metadata.tables["library_lookup"]
# How far back the implicit negatives (the days' other papers) are drawn from, and how many.
IMPLICIT_WINDOW = timedelta(days=7)
IMPLICIT_NEGATIVES = 200
# The newest signals of each kind read for a training when the caller names no bound; the retrain passes the
# model's own (core.taste.model.MAX_POSITIVES, MAX_NEGATIVES), so nothing is read that the model drops.
MAX_SIGNALS = 500


@dataclass(frozen=True, slots=True)
class VoteView:
    """One vote as the ``likes`` list shows it."""

    arxiv_id: str
    version: int
    value: int
    title: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Voted:
    """What recording a vote did: the version voted on and the value it replaced (None: a new vote)."""

    arxiv_id: str
    version: int
    version_id: int
    previous: int | None


@dataclass(frozen=True, slots=True)
class TasteText:
    """A paper as a model reads it: its arXiv id (None for a library entry known only by its text)."""

    arxiv_id: str | None
    title: str
    abstract: str


@dataclass(frozen=True, slots=True)
class TrainingTexts:
    """What one subscriber's model is trained from."""

    positives: tuple[TasteText, ...]
    negatives: tuple[TasteText, ...]
    implicit: tuple[TasteText, ...]


@dataclass(frozen=True, slots=True)
class SeedIn:
    """One library entry to keep as a liked paper: a stored version, or a title and abstract."""

    key: str
    version_id: int | None
    title: str = ""
    abstract: str = ""


# Votes, seeds and models of learned follows.
def vote(
    db: Db,
    subscriber_id: int,
    arxiv_id: str,
    value: int,
    *,
    version: int | None = None,
    now: datetime | None = None,
) -> Voted | None:
    """Record ``value`` (:data:`LIKE` or :data:`DISLIKE`) on ``version`` of ``arxiv_id`` (its latest
    stored version when None); None when that paper or version is not stored."""
    if value not in (LIKE, DISLIKE):
        raise ValueError(f"a vote is {LIKE} or {DISLIKE}, not {value!r}")
    now = now or utcnow()
    with db.session() as session:
        number = version
        if number is None:
            paper = session.get(Paper, arxiv_id)
            if paper is None:
                return None
            number = paper.latest_version
        found = session.exec(
            select(Version.id).where(Version.paper_id == arxiv_id, Version.number == number)
        ).first()
        if found is None:
            return None
        version_id = int(found)
        old = session.exec(
            select(Vote).where(Vote.subscriber_id == subscriber_id, Vote.version_id == version_id)
        ).first()
        previous = old.value if old is not None else None
        if old is None:
            session.add(Vote(subscriber_id=subscriber_id, version_id=version_id, value=value, created_at=now))
        else:
            old.value, old.created_at = value, now
            session.add(old)
        return Voted(arxiv_id, number, version_id, previous)


def unvote(db: Db, subscriber_id: int, arxiv_id: str, *, version: int | None = None) -> int:
    """Undo the votes on ``arxiv_id`` (every version, or only ``version``); returns how many."""
    with db.session() as session:
        versions = select(Version.id).where(Version.paper_id == arxiv_id)
        if version is not None:
            versions = versions.where(Version.number == version)
        result = session.execute(
            sa.delete(Vote).where(
                col(Vote.subscriber_id) == subscriber_id,
                col(Vote.version_id).in_(versions.scalar_subquery()),
            )
        )
        return max(int(getattr(result, "rowcount", 0) or 0), 0)


def votes_of(db: Db, subscriber_id: int, *, limit: int = 200) -> list[VoteView]:
    """The subscriber's votes, newest first, at most ``limit``."""
    with db.session() as session:
        rows = session.execute(
            sa.select(
                col(Version.paper_id),
                col(Version.number),
                col(Vote.value),
                col(Version.title),
                col(Vote.created_at),
            )
            .join(Version, col(Version.id) == Vote.version_id)
            .where(col(Vote.subscriber_id) == subscriber_id)
            .order_by(col(Vote.created_at).desc(), col(Vote.id).desc())
            .limit(limit)
        ).all()
    return [VoteView(a, int(n), int(v), t, c) for a, n, v, t, c in rows]


def votes_on(db: Db, subscriber_id: int, version_ids: Sequence[int]) -> dict[int, int]:
    """The subscriber's vote on each of ``version_ids`` that has one: version id → value."""
    if not version_ids:
        return {}
    with db.session() as session:
        rows = session.exec(
            select(Vote.version_id, Vote.value).where(
                Vote.subscriber_id == subscriber_id, col(Vote.version_id).in_(list(version_ids))
            )
        ).all()
    return {int(v): int(value) for v, value in rows}


def liked_versions(db: Db, subscriber_id: int, *, limit: int) -> list[Version]:
    """The versions the subscriber liked (👍), most recent vote first, at most ``limit``: the liked
    papers' BibTeX download cites the version that was liked."""
    with db.session() as session:
        rows = session.exec(
            select(Version)
            .join(Vote, col(Vote.version_id) == col(Version.id))
            .where(col(Vote.subscriber_id) == subscriber_id, col(Vote.value) == LIKE)
            .order_by(col(Vote.created_at).desc(), col(Vote.id).desc())
            .limit(limit)
        )
        return list(rows)


def vote_counts(db: Db, subscriber_id: int) -> tuple[int, int, int]:
    """(likes, dislikes, library seeds) of one subscriber."""
    with db.session() as session:
        likes = session.exec(
            select(sa.func.count()).where(Vote.subscriber_id == subscriber_id, Vote.value == LIKE)
        ).one()
        dislikes = session.exec(
            select(sa.func.count()).where(Vote.subscriber_id == subscriber_id, Vote.value == DISLIKE)
        ).one()
        seeds = session.exec(select(sa.func.count()).where(LibrarySeed.subscriber_id == subscriber_id)).one()
    return int(likes), int(dislikes), int(seeds)


def add_seeds(db: Db, subscriber_id: int, seeds: Sequence[SeedIn], *, now: datetime | None = None) -> int:
    """Keep ``seeds`` as liked papers of the subscriber; returns how many were new (a key already
    kept is left as it is)."""
    if not seeds:
        return 0
    with db.session() as session:
        return insert_seeds(session.connection(), subscriber_id, seeds, now=now or utcnow())


def latest_versions(db: Db, arxiv_ids: Collection[str]) -> dict[str, int]:
    """arXiv id -> the row id of its latest stored version, for the ids PaperTrail has a version of."""
    v, p = _VERSION.c, _PAPER.c
    found: dict[str, int] = {}
    with db.session() as session:
        connection = session.connection()
        for condition in id_conditions(connection, v.paper_id, arxiv_ids):
            rows = connection.execute(
                sa.select(v.paper_id, v.id)
                .join(_PAPER, sa.and_(p.id == v.paper_id, p.latest_version == v.number))
                .where(condition)
            )
            found.update({str(paper): int(version) for paper, version in rows})
    return found


def versions_by_doi(db: Db, dois: Collection[str]) -> dict[str, tuple[str, int]]:
    """DOI (lower case) -> (arXiv id, version row id) of the newest stored version that carries it.

    ``version.doi`` has no index (a DOI arrives with few versions and every ingest would pay for one),
    so this reads the versions that carry a DOI once per slice of DOIs: an import is rare and runs in a
    worker thread of a CLI call or an upload (docs/recommendations.md, limits).
    """
    v = _VERSION.c
    doi = sa.func.lower(v.doi)
    found: dict[str, tuple[str, int]] = {}
    with db.session() as session:
        connection = session.connection()
        for condition in id_conditions(connection, doi, dois):
            rows = connection.execute(sa.select(doi, v.paper_id, v.id).where(condition).order_by(v.id))
            found.update({str(d): (str(paper), int(version)) for d, paper, version in rows})
    return found


def remembered_lookups(db: Db, arxiv_ids: Collection[str], *, now: datetime | None = None) -> dict[str, str]:
    """arXiv id -> the outcome (``not-found``, ``failed``) of an earlier look-up of it that is still
    remembered (its ``retry_at`` not yet passed), for the ids of ``arxiv_ids`` that have one."""
    table = _LOOKUP
    at = now or utcnow()
    found: dict[str, str] = {}
    with db.session() as session:
        connection = session.connection()
        for condition in id_conditions(connection, table.c.arxiv_id, arxiv_ids):
            rows = connection.execute(
                sa.select(table.c.arxiv_id, table.c.outcome).where(condition, table.c.retry_at > at)
            )
            found.update({str(arxiv_id): str(outcome) for arxiv_id, outcome in rows})
    return found


def remember_lookups(
    db: Db, outcomes: dict[str, tuple[str, datetime]], *, now: datetime | None = None
) -> None:
    """Remember each id's look-up outcome until its time (``{id: (outcome, retry_at)}``), replacing
    an earlier one; rows whose time has passed are deleted on the way: the table holds what counts."""
    at = now or utcnow()
    rows = [
        {"arxiv_id": arxiv_id, "outcome": outcome, "looked_up_at": at, "retry_at": retry_at}
        for arxiv_id, (outcome, retry_at) in outcomes.items()
    ]
    with db.session() as session:
        connection = session.connection()
        connection.execute(sa.delete(_LOOKUP).where(_LOOKUP.c.retry_at <= at))
        dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
        for start in range(0, len(rows), _SEED_CHUNK):
            insert = dialect_insert(_LOOKUP).values(rows[start : start + _SEED_CHUNK])
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=[_LOOKUP.c.arxiv_id],
                    set_={
                        "outcome": insert.excluded.outcome,
                        "looked_up_at": insert.excluded.looked_up_at,
                        "retry_at": insert.excluded.retry_at,
                    },
                )
            )


def training_texts(
    db: Db,
    subscriber_id: int,
    *,
    implicit: int = IMPLICIT_NEGATIVES,
    positives: int = MAX_SIGNALS,
    negatives: int = MAX_SIGNALS,
    now: datetime | None = None,
) -> TrainingTexts:
    """The newest ``positives`` liked papers and as many library seeds, the newest ``negatives``
    disliked papers, and up to ``implicit`` of the last week's other papers (none the reader voted
    on), drawn at random (the same draw for the same subscriber and day)."""
    now = now or utcnow()
    with db.session() as session:
        likes = _voted(session, subscriber_id, LIKE, positives)
        dislikes = _voted(session, subscriber_id, DISLIKE, negatives)
        seeded = session.execute(
            sa.select(
                col(LibrarySeed.title),
                col(LibrarySeed.abstract),
                col(Version.paper_id),
                col(Version.title),
                col(Version.abstract),
            )
            .outerjoin(Version, col(Version.id) == LibrarySeed.version_id)
            .where(col(LibrarySeed.subscriber_id) == subscriber_id)
            .order_by(col(LibrarySeed.id).desc())
            .limit(positives)
        ).all()
        voted = sa.select(col(Vote.version_id)).where(col(Vote.subscriber_id) == subscriber_id)
        window = session.exec(
            select(col(Version.id)).where(
                Version.news == sa.true(),
                col(Version.first_seen_at) >= now - IMPLICIT_WINDOW,
                col(Version.id).not_in(voted),
            )
        ).all()
        pool = [v for v in window if v is not None]
        drawn = random.Random(f"{subscriber_id}:{now.date()}").sample(pool, min(implicit, len(pool)))
        others = (
            session.exec(
                select(Version.paper_id, Version.title, Version.abstract).where(col(Version.id).in_(drawn))
            ).all()
            if drawn
            else []
        )
    liked = list(likes)
    for title, abstract, paper_id, stored_title, stored_abstract in seeded:
        if paper_id is not None:
            liked.append(TasteText(paper_id, stored_title, stored_abstract))
        else:
            liked.append(TasteText(None, title, abstract))
    known = {text.arxiv_id for text in liked} | {text.arxiv_id for text in dislikes}
    implicit_texts = tuple(TasteText(a, t, ab) for a, t, ab in others if a not in known)
    return TrainingTexts(tuple(liked), dislikes, implicit_texts)


def save_model(
    db: Db, subscriber_id: int, data: bytes, *, positives: int, negatives: int, now: datetime | None = None
) -> None:
    """Store (or replace) the subscriber's trained model."""
    with db.session() as session:
        session.merge(
            TasteModelRow(
                subscriber_id=subscriber_id,
                data=data,
                positives=positives,
                negatives=negatives,
                trained_at=now or utcnow(),
            )
        )


def drop_model(db: Db, subscriber_id: int) -> None:
    """Forget the subscriber's model (fewer than the positives a model needs are left)."""
    with db.session() as session:
        session.execute(sa.delete(TasteModelRow).where(col(TasteModelRow.subscriber_id) == subscriber_id))


def model_of(db: Db, subscriber_id: int) -> TasteModelRow | None:
    """The subscriber's stored model, if one was trained."""
    with db.session() as session:
        return session.get(TasteModelRow, subscriber_id)


# Seeds per INSERT: well below both databases' caps on bound parameters (6 a row).
_SEED_CHUNK = 500


def insert_seeds(
    connection: sa.Connection, subscriber_id: int, seeds: Sequence[SeedIn], *, now: datetime
) -> int:
    """Insert ``seeds`` in the caller's transaction, a key already kept left as it is; returns how many were
    new. :func:`core.taste.taste_records.add_seeds` and ``import subscription``
    (core.people.subscription_records) share it."""
    rows = [
        {
            "subscriber_id": subscriber_id,
            "key": seed.key,
            "version_id": seed.version_id,
            "title": seed.title,
            "abstract": seed.abstract,
            "created_at": now,
        }
        for seed in {seed.key: seed for seed in seeds}.values()
    ]
    if not rows:
        return 0
    table = LibrarySeed.metadata.tables["library_seed"]
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    before = _seed_total(connection, subscriber_id)
    for start in range(0, len(rows), _SEED_CHUNK):
        connection.execute(
            dialect_insert(table).values(rows[start : start + _SEED_CHUNK]).on_conflict_do_nothing()
        )
    return _seed_total(connection, subscriber_id) - before


def _seed_total(connection: sa.Connection, subscriber_id: int) -> int:
    table = LibrarySeed.metadata.tables["library_seed"]
    query = sa.select(sa.func.count()).select_from(table).where(table.c.subscriber_id == subscriber_id)
    return int(connection.execute(query).scalar_one())


def _voted(session: Session, subscriber_id: int, value: int, limit: int) -> tuple[TasteText, ...]:
    """The subscriber's newest ``limit`` votes of ``value``, as the papers voted on."""
    rows = session.execute(
        sa.select(col(Version.paper_id), col(Version.title), col(Version.abstract))
        .join(Vote, col(Vote.version_id) == col(Version.id))
        .where(col(Vote.subscriber_id) == subscriber_id, col(Vote.value) == value)
        .order_by(col(Vote.created_at).desc(), col(Vote.id).desc())
        .limit(limit)
    ).all()
    return tuple(TasteText(a, t, ab) for a, t, ab in rows)
