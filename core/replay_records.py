"""Signed requests already accepted, shared by every process on the database; ``core.replay_records``.

Core only, on a connection of the store (``db.connection()``): one purge and one INSERT ... ON CONFLICT DO
NOTHING per request, so two processes receiving the same signed request at once accept it once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from core.db import Db
from core.db_bulk import dialect_insert
from core.models import SlackReplay

_REPLAY: sa.Table = SlackReplay.__table__  # type: ignore[attr-defined]


# Signatures of accepted Slack requests (``slack_replay``).
def first_use(db: Db, signature: str, signed_at: datetime, *, now: datetime, keep: timedelta) -> bool:
    """Remember ``signature`` (of a request signed at ``signed_at``); False when it was seen before.

    Signatures signed more than ``keep`` before ``now`` are forgotten first: the caller's signature
    check refuses such requests by their timestamp anyway.
    """
    with db.connection() as connection:
        connection.execute(sa.delete(_REPLAY).where(_REPLAY.c.signed_at < now - keep))
        inserted = connection.execute(
            dialect_insert(connection, _REPLAY)
            .values(signature=signature, signed_at=signed_at)
            .on_conflict_do_nothing(index_elements=["signature"])
            .returning(_REPLAY.c.signature)
        ).first()
        return inserted is not None
