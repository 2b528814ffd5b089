"""Test set-up: Match rows written straight into the ledger, for tests of what comes after matching.

Matching itself (query matches, fan-out, follow options) is tested through ``core.follows.index.match_new``
in
tests/test_match_pipeline.py; tests of planning, guides and rendering only need rows to exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from core.db import Database
from core.models import Match
from core.reasons import Reason, hit_data


def add_matches(
    db: Database,
    subscriber_id: int,
    version_ids: Iterable[int],
    reasons: Sequence[Reason],
    *,
    follow_id: int | None = None,
    now: datetime,
    instant: bool = False,
) -> None:
    """One Match row of ``subscriber_id`` per version, each with ``reasons`` given by ``follow_id``."""
    with db.session() as session:
        for version_id in version_ids:
            session.add(
                Match(
                    subscriber_id=subscriber_id,
                    version_id=version_id,
                    follow_ids=[] if follow_id is None else [follow_id],
                    reasons=[hit_data(reasons, follow=follow_id)],
                    created_at=now,
                    instant=instant,
                )
            )
