"""The bulk follows SQL: importing a checked follows file in one transaction, and reading follows for export.

``core.follows.follow_file_records`` (:class:`FollowFileStore`): Core only, on a connection of the store
(``db.connection()``). Like ``paper_records.save_versions`` it writes with Core statements
in batches (executemany, ``INSERT ... ON CONFLICT DO NOTHING``), never one ORM object per line: 100,000
follows are a few statements, not 100,000 round trips.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from core.channel import NEWSLETTER_CHANNEL
from core.db import Db
from core.follows.file import ExportedFollow, FollowLine, SubscriberOptions
from core.models import Follow, Subscriber, SubscriberStatus

_SUBSCRIBERS: sa.Table = Subscriber.__table__  # type: ignore[attr-defined]
_FOLLOWS: sa.Table = Follow.__table__  # type: ignore[attr-defined]
# Keys per IN (...) look-up: well below SQLite's cap on bound parameters.
_CHUNK = 500
# Rows fetched at a time by an export: memory stays flat whatever the number of follows.
_EXPORT_BATCH = 5000


@dataclass(slots=True)
class ImportCounts:
    """What an import did. ``inactive`` counts named subscribers that are not active (not matched)."""

    subscribers_created: int = 0
    subscribers_updated: int = 0
    follows_added: int = 0
    follows_updated: int = 0
    follows_unchanged: int = 0
    inactive: int = 0


# Bulk import and export of follows (a follows file).
def import_follows(
    db: Db,
    subscribers: Iterable[SubscriberOptions],
    follows: Sequence[FollowLine],
    *,
    timezone: str,
    schedule: str,
    now: datetime,
) -> ImportCounts:
    """Store the subscribers and follows of a checked file in one transaction; idempotent.

    A new subscriber is created active with the options given, else ``timezone`` and ``schedule``
    (what ``papertrail follow`` does: an operator's action, no confirmation mail). An existing one
    keeps its status and gets the options the file gives. A follow is (subscriber, canonical query):
    a new one is added with the query as written, an existing one gets the file's new_only/instant.
    """
    with db.connection() as connection:
        return write_follows(connection, subscribers, follows, timezone=timezone, schedule=schedule, now=now)


def export_rows(db: Db, statuses: Sequence[str], address: str | None = None) -> Iterator[ExportedFollow]:
    """Every follow of the subscribers in ``statuses`` (or of ``address`` alone), by address then
    follow number, read in batches. Newsletters' hidden subscribers are left out (their definition
    is not a follow list)."""
    s, f = _SUBSCRIBERS.c, _FOLLOWS.c
    query = (
        sa.select(s.address, f.query, s.schedule, s.timezone, s.language, f.revisions, f.instant)
        .select_from(_FOLLOWS.join(_SUBSCRIBERS, s.id == f.subscriber_id))
        .where(s.status.in_(list(statuses)), ~s.address.startswith(f"{NEWSLETTER_CHANNEL}:"))
        .order_by(s.address, f.id)
    )
    if address is not None:
        query = query.where(s.address == address)
    with db.connection() as connection:
        result = connection.execution_options(yield_per=_EXPORT_BATCH).execute(query)
        for row in result:
            yield ExportedFollow(*row)


def write_follows(
    connection: sa.Connection,
    subscribers: Iterable[SubscriberOptions],
    follows: Sequence[FollowLine],
    *,
    timezone: str,
    schedule: str,
    now: datetime,
) -> ImportCounts:
    """The writes of :func:`core.follows.follow_file_records.import_follows` on ``connection``, in the
    caller's transaction.

    ``import subscription`` (core.people.subscription_records) stores a subscription's follows with it, inside
    the transaction that also writes the subscriber, its newsletters and its history.
    """
    counts = ImportCounts()
    wanted = {s.address: s for s in subscribers}
    existing = _subscribers(connection, list(wanted))
    created = [address for address in wanted if address not in existing]
    new_rows = [
        {
            "address": address,
            "timezone": wanted[address].timezone or timezone,
            "schedule": wanted[address].schedule or schedule,
            "language": wanted[address].language,
            "status": SubscriberStatus.ACTIVE.value,
            "failures": 0,
            "created_at": now,
        }
        for address in created
    ]
    if new_rows:
        # ON CONFLICT: a `papertrail follow` may create one of them meanwhile; it is then kept.
        connection.execute(_insert(connection, _SUBSCRIBERS).on_conflict_do_nothing(), new_rows)
    counts.subscribers_created = len(new_rows)
    changes = []
    for address, (subscriber_id, *stored, status) in existing.items():
        given = wanted[address]
        merged = [
            new if new is not None else old
            for new, old in zip((given.timezone, given.schedule, given.language), stored, strict=True)
        ]
        if merged != stored:
            changes.append(dict(zip(("sid", "tz", "sched", "lang"), (subscriber_id, *merged), strict=True)))
        if status != SubscriberStatus.ACTIVE:
            counts.inactive += 1
    if changes:
        connection.execute(
            _SUBSCRIBERS.update()
            .where(_SUBSCRIBERS.c.id == sa.bindparam("sid"))
            .values(
                timezone=sa.bindparam("tz"),
                schedule=sa.bindparam("sched"),
                language=sa.bindparam("lang"),
            ),
            changes,
        )
    counts.subscribers_updated = len(changes)
    ids = {address: row[0] for address, row in existing.items()}
    ids.update((address, row[0]) for address, row in _subscribers(connection, created).items())
    _write_follow_rows(connection, follows, ids, existing, now, counts)
    return counts


def _write_follow_rows(
    connection: sa.Connection,
    follows: Sequence[FollowLine],
    ids: dict[str, int],
    existing: dict[str, tuple[Any, ...]],
    now: datetime,
    counts: ImportCounts,
) -> None:
    # Only subscribers that were there before can have follows already.
    stored = _follows_of(connection, [ids[a] for a in existing])
    added: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    for follow in follows:
        subscriber_id = ids[follow.address]
        found = stored.get((subscriber_id, follow.canonical))
        if found is None:
            added.append(
                {
                    "subscriber_id": subscriber_id,
                    "query": follow.query,
                    "canonical": follow.canonical,
                    "created_at": now,
                    "revisions": follow.revisions,
                    "instant": follow.instant,
                }
            )
        elif found[1:] != (follow.revisions, follow.instant):
            changed.append({"fid": found[0], "rev": follow.revisions, "inst": follow.instant})
        else:
            counts.follows_unchanged += 1
    if added:
        connection.execute(_insert(connection, _FOLLOWS).on_conflict_do_nothing(), added)
    if changed:
        connection.execute(
            _FOLLOWS.update()
            .where(_FOLLOWS.c.id == sa.bindparam("fid"))
            .values(revisions=sa.bindparam("rev"), instant=sa.bindparam("inst")),
            changed,
        )
    counts.follows_added, counts.follows_updated = len(added), len(changed)


def _insert(connection: sa.Connection, table: sa.Table) -> Any:
    """The dialect's INSERT, for its ON CONFLICT clause."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def _subscribers(connection: sa.Connection, addresses: list[str]) -> dict[str, tuple[Any, ...]]:
    """address -> (id, timezone, schedule, language, status) of the stored ones among ``addresses``."""
    s = _SUBSCRIBERS.c
    found: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(addresses), _CHUNK):
        chunk = addresses[start : start + _CHUNK]
        rows = connection.execute(
            sa.select(s.address, s.id, s.timezone, s.schedule, s.language, s.status).where(
                s.address.in_(chunk)
            )
        )
        for address, *rest in rows:
            found[address] = tuple(rest)
    return found


def _follows_of(
    connection: sa.Connection, subscriber_ids: list[int]
) -> dict[tuple[int, str], tuple[int, bool, bool]]:
    """(subscriber id, canonical) -> (follow id, revisions, instant) for the follows of ``subscriber_ids``."""
    f = _FOLLOWS.c
    found: dict[tuple[int, str], tuple[int, bool, bool]] = {}
    for start in range(0, len(subscriber_ids), _CHUNK):
        chunk = subscriber_ids[start : start + _CHUNK]
        rows = connection.execute(
            sa.select(f.subscriber_id, f.canonical, f.id, f.revisions, f.instant).where(
                f.subscriber_id.in_(chunk)
            )
        )
        for subscriber_id, canonical, follow_id, revisions, instant in rows:
            found[(subscriber_id, canonical)] = (follow_id, bool(revisions), bool(instant))
    return found
