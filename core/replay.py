"""A signed request acts once: the step the channels' webhooks call to refuse a replayed one. The
signatures seen are remembered in the database (``core.replay_records``), shared by every process."""

from __future__ import annotations

from datetime import datetime, timedelta

from core import replay_records
from core.db import Database


def seen_before(db: Database, signature: str, signed_at: datetime, *, now: datetime, keep: timedelta) -> bool:
    """True when a request signed with ``signature`` was accepted before, by any process; else remember
    it and say False. Signatures signed more than ``keep`` before ``now`` are forgotten first: the
    signature check refuses such requests by their timestamp anyway."""
    return not replay_records.first_use(db, signature, signed_at, now=now, keep=keep)
