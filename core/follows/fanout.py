"""Matches by query, then by subscriber: the two SQL steps between the matcher and the delivery ledger.

Matching writes one ``query_match`` row per distinct follow query and version (:func:`write_query_matches`),
so its cost follows the distinct queries, however many people follow each. Fanning out (:func:`fan_out`)
turns them into the ledger's ``match`` rows, one per (subscriber, version), inside the database with one
``INSERT ... SELECT`` per slice of versions: it applies each follow's options (created before the version
was first seen; revisions wanted) and keeps the subscribers that receive matches (:func:`receives_matches`:
active ones, and those a delivery refusal paused recently, whose matches are held for them), folds the
follows of one subscriber into one row, and deletes the query matches it consumed, in one transaction. The
unique (subscriber, version) constraint with ``ON CONFLICT DO NOTHING`` keeps each version at most once per
subscriber even when two processes fan out the same slice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from core.models import Follow, Match, QueryMatch, Subscriber, SubscriberStatus, UTCDateTime, Version
from core.reasons import Reason

_QUERY_MATCH = QueryMatch.metadata.tables["query_match"]
_MATCH = Match.metadata.tables["match"]
_FOLLOW = Follow.metadata.tables["follow"]
_SUBSCRIBER = Subscriber.metadata.tables["subscriber"]
_VERSION = Version.metadata.tables["version"]
_MATCH_COLUMNS = ("subscriber_id", "version_id", "follow_ids", "reasons", "created_at", "instant")
# Versions fanned out per statement and transaction: at a public instance's size one version of a popular
# category is thousands of Match rows, and a transaction should stay seconds long.
FAN_OUT_VERSIONS = 50
# A subscriber the delivery ledger paused after a refusal is still matched this long, its matches held
# (planning skips paused subscribers) and sent after its resume, within the digest cap. Past it, a pause
# that nobody resumed costs no more Match rows: an address that is gone for good stops growing the ledger.
HOLD_MATCHES_FOR = timedelta(days=14)


def receives_matches(status: Any, refused_at: Any, now: datetime) -> sa.ColumnElement[bool]:
    """The SQL test of a subscriber that matching and fan-out serve, given its ``status`` and
    ``refused_at`` columns: active, or paused by a delivery refusal less than :data:`HOLD_MATCHES_FOR`
    ago. A reader's own pause, an unsubscribe or an unconfirmed sign-up collects nothing."""
    return sa.or_(
        status == SubscriberStatus.ACTIVE,
        sa.and_(status == SubscriberStatus.PAUSED, refused_at >= now - HOLD_MATCHES_FOR),
    )


class ReasonsJson:
    """The JSON text of a query's reasons, ``[{"field": …, "term": …}, …]``, made once per distinct reason.

    A day's query matches repeat the same few reasons (a category, a followed name) thousands of times.
    """

    def __init__(self) -> None:
        self._made: dict[Reason, str] = {}

    def __call__(self, reasons: Sequence[Reason]) -> str:
        """``reasons`` as JSON text."""
        made = self._made
        parts = []
        for reason in reasons:
            text = made.get(reason)
            if text is None:
                text = made[reason] = json.dumps(reason.as_data(), ensure_ascii=False, separators=(",", ":"))
            parts.append(text)
        return "[" + ",".join(parts) + "]"


def pending_versions(connection: sa.Connection, limit: int) -> list[int]:
    """Up to ``limit`` versions with query matches waiting to be fanned out, oldest first."""
    qm = _QUERY_MATCH.c
    query = sa.select(qm.version_id).group_by(qm.version_id).order_by(qm.version_id).limit(limit)
    return [int(v) for v in connection.execute(query).scalars()]


def fan_out(connection: sa.Connection, version_ids: Sequence[int], now: datetime) -> int:
    """Turn the query matches of ``version_ids`` into Match rows and delete them; returns rows written."""
    qm, f, s, v = _QUERY_MATCH.c, _FOLLOW.c, _SUBSCRIBER.c, _VERSION.c
    postgres = connection.dialect.name == "postgresql"
    if postgres:
        follow_ids: Any = sa.func.json_agg(f.id)
        hits: Any = sa.func.json_agg(sa.func.json_build_object("follow", f.id, "reasons", qm.reasons))
        instant: Any = sa.func.bool_or(f.instant)
    else:
        follow_ids = sa.func.json_group_array(f.id)
        # json() marks the stored text as JSON, so that it nests as an array rather than as a string.
        hits = sa.func.json_group_array(
            sa.func.json_object("follow", f.id, "reasons", sa.func.json(qm.reasons))
        )
        instant = sa.func.max(f.instant)
    source = (
        sa.select(
            f.subscriber_id,
            qm.version_id,
            follow_ids,
            hits,
            sa.bindparam("fanned_at", now, type_=UTCDateTime()),
            instant,
        )
        .select_from(
            _QUERY_MATCH.join(_VERSION, v.id == qm.version_id)
            .join(_FOLLOW, f.canonical == qm.canonical)
            .join(_SUBSCRIBER, s.id == f.subscriber_id)
        )
        .where(
            qm.version_id.in_(version_ids),
            receives_matches(s.status, s.refused_at, now),
            # A follow sees only versions first seen after it was made (no backlog floods) ...
            f.created_at <= v.first_seen_at,
            # ... and a new-only follow no revisions.
            sa.or_(f.revisions.is_(True), v.number == 1),
        )
        .group_by(f.subscriber_id, qm.version_id)
    )
    dialect_insert = postgresql.insert if postgres else sqlite.insert
    insert = dialect_insert(_MATCH).from_select(_MATCH_COLUMNS, source).on_conflict_do_nothing()
    before = _count(connection, version_ids)
    connection.execute(insert)
    # Counted rather than read from rowcount, which SQLite reports as -1 for an INSERT ... SELECT.
    written = _count(connection, version_ids) - before
    connection.execute(sa.delete(_QUERY_MATCH).where(qm.version_id.in_(version_ids)))
    return written


def _count(connection: sa.Connection, version_ids: Sequence[int]) -> int:
    query = sa.select(sa.func.count()).select_from(_MATCH).where(_MATCH.c.version_id.in_(version_ids))
    return int(connection.execute(query).scalar_one())
