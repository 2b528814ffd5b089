"""The SQL of moving one subscription between servers: reading it whole for ``export subscription``, and
restoring a checked subscription file in one transaction for ``import subscription``.

A repository over the store's transactions (``core.people.subscription_records``), through its ORM session
(``db.session()``; the bulk writes as Core statements on that session's connection). The rules live in
:mod:`core.people.subscription`; here the restore is one transaction: the subscriber, its follows (written by
:func:`core.follows.follow_file_records.write_follows`, the code of ``import follows``), its newsletter
memberships and its history are all stored, or, on any refusal or error, none of them.

History is written to the ledger as it happened: one sent digest per digest of the file, at the time it was
sent, holding a match per received paper, for the papers this library has (a match needs its version). The
unique (subscriber, version) match keeps a paper recorded once, so importing the same file again adds
nothing, and a newsletter issue never copies to the reader a paper the file says it received.

The learned follows of a version-2 file are written in the same transaction: ``recommend`` with
the settings; a vote per version this library has (a vote points at a version, as a match does: one on a
version not stored here is skipped and counted); the library seeds by key (a seed whose paper this library
has points at that version, else at its newest stored one, else it is kept by its title and abstract). A
version-1 file says nothing about them and leaves them as they are, in every mode.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.channel import split_address
from core.db import Db
from core.follows.file import SubscriberOptions
from core.follows.follow_file_records import ImportCounts, write_follows
from core.ledger.ledger_sent import OLDEST_FIRST, sent_items
from core.models import (
    Digest,
    DigestState,
    Follow,
    LibrarySeed,
    Match,
    Newsletter,
    NewsletterMember,
    Subscriber,
    SubscriberStatus,
    Version,
    Vote,
)
from core.people.signup_records import WAITING
from core.people.subscription_file import (
    MAX_LIBRARY,
    MAX_VOTES,
    Learned,
    LibraryLine,
    Mode,
    Received,
    Subscription,
    SubscriptionExists,
    VoteLine,
)
from core.people.subscription_learned import (
    LearnedPlan,
    learned_differences,
    plan_learned,
    seed_keys,
    version_ids,
    votes_here,
)
from core.taste.taste_records import insert_seeds

_MATCH: sa.Table = Match.__table__  # type: ignore[attr-defined]
_VOTE: sa.Table = Vote.__table__  # type: ignore[attr-defined]
_SEED: sa.Table = LibrarySeed.__table__  # type: ignore[attr-defined]
# Rows per executemany and ids per IN list: well below both databases' caps on bound parameters.
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Stored:
    """One subscription as the store has it, for an export."""

    subscriber: Subscriber
    follows: tuple[Follow, ...]
    newsletters: tuple[str, ...]
    received: tuple[Received, ...]
    learned: Learned
    votes_total: int
    """The subscriber's votes: more than ``learned.votes`` when it has more than a file holds."""
    library_total: int


@dataclass(slots=True)
class Restored:
    """What an import stored."""

    created: bool
    status: str
    """The subscriber's status after the import (an existing one keeps its own)."""
    status_in_file: str
    settings_changed: bool = False
    follows: ImportCounts = field(default_factory=ImportCounts)
    follows_removed: int = 0
    newsletters_joined: int = 0
    newsletters_left: int = 0
    newsletters_missing: tuple[str, ...] = ()
    """Names in the file with no newsletter on this server: not joined."""
    papers_recorded: int = 0
    digests_recorded: int = 0
    papers_known: int = 0
    """Received papers already in this subscriber's ledger here (a re-import): not recorded again."""
    papers_missing: int = 0
    """Received papers whose version this library does not have: kept in the file only."""
    subscriber_id: int | None = None
    learned_in_file: bool = False
    """A version-2 file: its votes, seeds and ``recommend`` were imported (a version-1 file has none)."""
    votes_added: int = 0
    votes_changed: int = 0
    """Votes here that took the file's value (merging: the file's vote was the newer one)."""
    votes_kept: int = 0
    """Merging: votes here with another value, cast after the file's, kept."""
    votes_removed: int = 0
    votes_missing: int = 0
    """Votes on versions this library does not have: skipped."""
    library_added: int = 0
    library_removed: int = 0
    library_as_text: int = 0
    """Seeds whose paper this library does not have, kept by their title and abstract."""

    @property
    def learned_changed(self) -> bool:
        """Whether the votes or seeds the subscriber's model learns from changed."""
        return bool(
            self.votes_added
            or self.votes_changed
            or self.votes_removed
            or self.library_added
            or self.library_removed
        )


# Export and import of one subscription on one store.
def read(db: Db, address: str) -> Stored | None:
    """The subscriber at ``address`` with its follows (in their order), the names of its newsletters
    and what it was sent (``core.ledger.ledger_sent``, oldest first); None when there is none."""
    with db.session() as session:
        subscriber = session.exec(select(Subscriber).where(col(Subscriber.address) == address)).first()
        if subscriber is None or subscriber.id is None:
            return None
        follows = session.exec(
            select(Follow).where(col(Follow.subscriber_id) == subscriber.id).order_by(col(Follow.id))
        ).all()
        names = session.exec(
            select(Newsletter.name)
            .join(NewsletterMember, col(NewsletterMember.newsletter_id) == col(Newsletter.id))
            .where(col(NewsletterMember.subscriber_id) == subscriber.id)
            .order_by(col(Newsletter.name))
        ).all()
        # What was sent, in the order it was sent: the file reads as a history, and an import replays it.
        received = tuple(
            Received(item.arxiv_id, item.version, item.title, item.sent_at, item.digest_id)
            for item in sent_items(session.connection(), subscriber.id, order=OLDEST_FIRST)
        )
        votes, votes_total = _votes_of(session, subscriber.id)
        library, library_total = _seeds_of(session, subscriber.id)
    learned = Learned(subscriber.recommend, votes, library)
    return Stored(subscriber, tuple(follows), tuple(names), received, learned, votes_total, library_total)


def restore(db: Db, wanted: Subscription, *, mode: Mode, now: datetime) -> Restored:
    """Store ``wanted`` in one transaction (see the module's rules); raise :class:`SubscriptionExists`
    when the address exists with other settings and ``mode`` is REFUSE."""
    with db.session() as session:
        connection = session.connection()
        newsletters = _newsletter_ids(session, wanted.newsletters)
        plan = plan_learned(connection, wanted.learned) if wanted.learned is not None else None
        found = session.exec(
            select(Subscriber).where(col(Subscriber.address) == wanted.address).with_for_update()
        ).first()
        if found is None:
            subscriber = Subscriber(
                address=wanted.address,
                timezone=wanted.timezone,
                schedule=wanted.schedule,
                status=wanted.status,
                status_reason=_reason(wanted.status),
                language=wanted.language,
                heartbeat=wanted.heartbeat,
                recommend=wanted.learned.recommend if wanted.learned is not None else None,
                created_at=now,
            )
            session.add(subscriber)
            session.flush()
            restored = Restored(created=True, status=wanted.status, status_in_file=wanted.status)
        else:
            subscriber = found
            restored = Restored(created=False, status=found.status, status_in_file=wanted.status)
            assert found.id is not None
            follows = {
                f.canonical: (f.revisions, f.instant)
                for f in session.exec(select(Follow).where(col(Follow.subscriber_id) == found.id))
            }
            members = _memberships(session, found.id)
            if mode is Mode.REFUSE:
                differences = _differences(found, follows, members, wanted, newsletters)
                if plan is not None:
                    differences += learned_differences(connection, found, plan)
                if differences:
                    raise SubscriptionExists(wanted.address, differences)
            restored.settings_changed = _update_settings(session, found, wanted, mode)
            if mode is Mode.REPLACE:
                restored.follows_removed = _remove_follows(
                    session, found.id, set(follows) - {f.canonical for f in wanted.follows}
                )
                restored.newsletters_left = _leave(session, found.id, members - set(newsletters.values()))
        assert subscriber.id is not None
        restored.subscriber_id = subscriber.id
        # The follows through import follows' own writes: the subscriber exists, so only follows change.
        restored.follows = write_follows(
            connection,
            [SubscriberOptions(wanted.address)],
            wanted.follows,
            timezone=wanted.timezone,
            schedule=wanted.schedule,
            now=now,
        )
        restored.newsletters_joined = _join(session, subscriber.id, newsletters.values(), now)
        restored.newsletters_missing = tuple(n for n in wanted.newsletters if n not in newsletters)
        _record_history(connection, subscriber.id, wanted, restored)
        if plan is not None:
            restored.learned_in_file = True
            _write_votes(connection, subscriber.id, plan, mode, restored)
            _write_seeds(connection, subscriber.id, plan, mode, now, restored)
    return restored


def _reason(status: str) -> str | None:
    """The status reason of a subscriber created with ``status`` by an import."""
    if status == SubscriberStatus.ACTIVE:
        return None
    if status == SubscriberStatus.UNCONFIRMED:
        return WAITING  # as a sign-up's: it confirms by signing up here
    return f"{status} on the server it was exported from"


def _newsletter_ids(session: Session, names: Sequence[str]) -> dict[str, int]:
    """name -> id of the newsletters among ``names`` that exist here, in the file's order."""
    if not names:
        return {}
    found = dict(
        session.execute(
            sa.select(col(Newsletter.name), col(Newsletter.id)).where(col(Newsletter.name).in_(list(names)))
        ).all()
    )
    return {name: int(found[name]) for name in names if name in found}


def _memberships(session: Session, subscriber_id: int) -> set[int]:
    return set(
        session.execute(
            sa.select(col(NewsletterMember.newsletter_id)).where(
                col(NewsletterMember.subscriber_id) == subscriber_id
            )
        ).scalars()
    )


def _differences(
    found: Subscriber,
    follows: dict[str, tuple[bool, bool]],
    members: set[int],
    wanted: Subscription,
    newsletters: dict[str, int],
) -> list[str]:
    """What differs between the stored subscriber and the file, worded for the operator. The status is not
    compared: an import never changes an existing subscriber's status."""
    differences = [
        f"{name}: {here!r} here, {there!r} in the file"
        for name, here, there in (
            ("schedule", found.schedule, wanted.schedule),
            ("timezone", found.timezone, wanted.timezone),
            ("language", found.language, wanted.language),
            ("heartbeat", found.heartbeat, wanted.heartbeat),
        )
        if here != there
    ]
    given = {f.canonical: (f.revisions, f.instant) for f in wanted.follows}
    only_here = len(set(follows) - set(given))
    only_there = len(set(given) - set(follows))
    options = sum(
        1 for canonical, value in given.items() if canonical in follows and follows[canonical] != value
    )
    if only_here or only_there or options:
        differences.append(
            f"follows: {only_here} here only, {only_there} in the file only, {options} with other options"
        )
    wanted_members = set(newsletters.values())
    if members != wanted_members:
        differences.append(
            f"newsletters: {len(members - wanted_members)} here only, {len(wanted_members - members)} "
            "in the file only"
        )
    return differences


def _update_settings(session: Session, found: Subscriber, wanted: Subscription, mode: Mode) -> bool:
    """The file's schedule, timezone, language and heartbeat on an existing subscriber; True if any changed.

    Merging, a file without a language (null: never chosen) keeps the one chosen here, and a file with
    ``recommend`` null (off, also where nobody turned them on) keeps the recommendations chosen here. A
    version-1 file has no ``recommend``: it is left as it is.
    """
    language = wanted.language if wanted.language is not None or mode is Mode.REPLACE else found.language
    values: dict[str, Any] = {
        "schedule": wanted.schedule,
        "timezone": wanted.timezone,
        "language": language,
        "heartbeat": wanted.heartbeat,
    }
    if wanted.learned is not None and (wanted.learned.recommend is not None or mode is Mode.REPLACE):
        values["recommend"] = wanted.learned.recommend
    changed = {name: value for name, value in values.items() if getattr(found, name) != value}
    for name, value in changed.items():
        setattr(found, name, value)
    if changed:
        session.add(found)
        session.flush()
    return bool(changed)


def _remove_follows(session: Session, subscriber_id: int, canonicals: set[str]) -> int:
    """Delete the subscriber's follows with these canonical forms; their matches stay in the ledger."""
    if not canonicals:
        return 0
    session.execute(
        sa.delete(Follow).where(
            col(Follow.subscriber_id) == subscriber_id, col(Follow.canonical).in_(sorted(canonicals))
        )
    )
    return len(canonicals)


def _leave(session: Session, subscriber_id: int, newsletter_ids: set[int]) -> int:
    if not newsletter_ids:
        return 0
    session.execute(
        sa.delete(NewsletterMember).where(
            col(NewsletterMember.subscriber_id) == subscriber_id,
            col(NewsletterMember.newsletter_id).in_(sorted(newsletter_ids)),
        )
    )
    return len(newsletter_ids)


def _join(session: Session, subscriber_id: int, newsletter_ids: Sequence[int] | Any, now: datetime) -> int:
    """Memberships of the newsletters the subscriber is not a member of yet; returns how many were added."""
    new = set(newsletter_ids) - _memberships(session, subscriber_id)
    for newsletter_id in sorted(new):
        session.add(NewsletterMember(newsletter_id=newsletter_id, subscriber_id=subscriber_id, joined_at=now))
    session.flush()
    return len(new)


def _record_history(
    connection: sa.Connection, subscriber_id: int, wanted: Subscription, restored: Restored
) -> None:
    """The file's received papers as sent digests and matches, for the versions this library has."""
    if not wanted.received:
        return
    versions = version_ids(connection, {item.arxiv_id for item in wanted.received})
    known = _matched(connection, subscriber_id, list(versions.values()))
    by_digest: dict[int, list[tuple[Received, int]]] = defaultdict(list)
    for item in wanted.received:
        version_id = versions.get((item.arxiv_id, item.version))
        if version_id is None:
            restored.papers_missing += 1
        elif version_id in known:
            restored.papers_known += 1
        else:
            by_digest[item.digest].append((item, version_id))
    channel = split_address(wanted.address)[0]
    for items in by_digest.values():
        sent_at = min(item.sent_at for item, _ in items)
        digest_id = connection.execute(
            sa.insert(Digest)
            .values(
                subscriber_id=subscriber_id,
                created_at=sent_at,
                sent_at=sent_at,
                state=DigestState.SENT,
                item_count=len(items),
                channel=channel,
                attempts=0,
                parts_sent=0,
            )
            .returning(col(Digest.id))
        ).scalar_one()
        rows: list[dict[str, Any]] = [
            {
                "subscriber_id": subscriber_id,
                "version_id": version_id,
                # No follow and no reason: the exporting server's follows and reasons are not this one's.
                "follow_ids": [],
                "reasons": [],
                "created_at": item.sent_at,
                "instant": False,
                "digest_id": digest_id,
            }
            for item, version_id in items
        ]
        for start in range(0, len(rows), _CHUNK):
            connection.execute(sa.insert(_MATCH), rows[start : start + _CHUNK])
        restored.digests_recorded += 1
        restored.papers_recorded += len(rows)


def _matched(connection: sa.Connection, subscriber_id: int, version_ids: list[int]) -> set[int]:
    """Which of ``version_ids`` the subscriber has a match for already (sent or not)."""
    m = _MATCH.c
    found: set[int] = set()
    ordered = sorted(version_ids)
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start : start + _CHUNK]
        found.update(
            int(v)
            for v in connection.execute(
                sa.select(m.version_id).where(m.subscriber_id == subscriber_id, m.version_id.in_(chunk))
            ).scalars()
        )
    return found


# -- learned follows (version 2) -------------------------------------------------------------------------


def _votes_of(session: Session, subscriber_id: int) -> tuple[tuple[VoteLine, ...], int]:
    """The subscriber's newest :data:`MAX_VOTES` votes, oldest first, and how many it has."""
    total = session.execute(
        sa.select(sa.func.count()).select_from(_VOTE).where(_VOTE.c.subscriber_id == subscriber_id)
    ).scalar_one()
    rows = session.execute(
        sa.select(col(Version.paper_id), col(Version.number), _VOTE.c.value, _VOTE.c.created_at)
        .join(Version, col(Version.id) == _VOTE.c.version_id)
        .where(_VOTE.c.subscriber_id == subscriber_id)
        .order_by(_VOTE.c.created_at.desc(), _VOTE.c.id.desc())
        .limit(MAX_VOTES)
    ).all()
    votes = tuple(VoteLine(str(a), int(n), int(v), at) for a, n, v, at in reversed(rows))
    return votes, int(total)


def _seeds_of(session: Session, subscriber_id: int) -> tuple[tuple[LibraryLine, ...], int]:
    """The subscriber's newest :data:`MAX_LIBRARY` seeds, in the order they were added, and how many it
    has. A seed of a stored version carries that version's title and abstract: the text a server without
    the paper keeps it by."""
    s = _SEED.c
    total = session.execute(
        sa.select(sa.func.count()).select_from(_SEED).where(s.subscriber_id == subscriber_id)
    ).scalar_one()
    rows = session.execute(
        sa.select(
            s.key,
            col(Version.paper_id),
            col(Version.number),
            s.title,
            s.abstract,
            col(Version.title),
            col(Version.abstract),
        )
        .select_from(_SEED)
        .outerjoin(Version, col(Version.id) == s.version_id)
        .where(s.subscriber_id == subscriber_id)
        .order_by(s.id.desc())
        .limit(MAX_LIBRARY)
    ).all()
    seeds = tuple(
        LibraryLine(str(key), None, None, str(title), str(abstract))
        if paper is None
        else LibraryLine(str(key), str(paper), int(number), str(v_title), str(v_abstract or ""))
        for key, paper, number, title, abstract, v_title, v_abstract in reversed(rows)
    )
    return seeds, int(total)


def _write_votes(
    connection: sa.Connection, subscriber_id: int, plan: LearnedPlan, mode: Mode, restored: Restored
) -> None:
    """The file's votes on this library's versions. A version voted on both here and in the file keeps
    the newer vote when merging, the file's when replacing; replacing also removes the votes not in it."""
    restored.votes_missing = plan.votes_missing
    here = votes_here(connection, subscriber_id)
    added: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    for version_id, (value, voted_at) in plan.votes.items():
        old = here.get(version_id)
        if old is None:
            added.append(
                {
                    "subscriber_id": subscriber_id,
                    "version_id": version_id,
                    "value": value,
                    "created_at": voted_at,
                }
            )
        elif old[0] == value:
            continue  # the same vote: its time here stays (merging) or is near enough (replacing)
        elif mode is Mode.REPLACE or voted_at > old[1]:
            changed.append({"row": old[2], "new_value": value, "new_at": voted_at})
        else:
            restored.votes_kept += 1
    for start in range(0, len(added), _CHUNK):
        connection.execute(sa.insert(_VOTE), added[start : start + _CHUNK])
    if changed:
        connection.execute(
            sa.update(_VOTE)
            .where(_VOTE.c.id == sa.bindparam("row"))
            .values(value=sa.bindparam("new_value"), created_at=sa.bindparam("new_at")),
            changed,
        )
    restored.votes_added, restored.votes_changed = len(added), len(changed)
    if mode is Mode.REPLACE:
        gone = sorted(row for version, (_, _, row) in here.items() if version not in plan.votes)
        for start in range(0, len(gone), _CHUNK):
            connection.execute(sa.delete(_VOTE).where(_VOTE.c.id.in_(gone[start : start + _CHUNK])))
        restored.votes_removed = len(gone)


def _write_seeds(
    connection: sa.Connection,
    subscriber_id: int,
    plan: LearnedPlan,
    mode: Mode,
    now: datetime,
    restored: Restored,
) -> None:
    """The file's seeds by key (a key kept here already stays as it is); replacing removes the others."""
    restored.library_as_text = plan.seeds_as_text
    if mode is Mode.REPLACE:
        gone = sorted(seed_keys(connection, subscriber_id) - {seed.key for seed in plan.seeds})
        for start in range(0, len(gone), _CHUNK):
            connection.execute(
                sa.delete(_SEED).where(
                    _SEED.c.subscriber_id == subscriber_id, _SEED.c.key.in_(gone[start : start + _CHUNK])
                )
            )
        restored.library_removed = len(gone)
    restored.library_added = insert_seeds(connection, subscriber_id, plan.seeds, now=now)
