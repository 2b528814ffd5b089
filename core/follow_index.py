"""The long-lived index of all active follows, kept in step with the database without full rebuilds.

``papertrail run`` keeps one :class:`FollowIndex` for the life of the process. Before each matching pass it
reads the follows' ids and options (cheap) and parses and indexes only the follows it has not seen, and
drops the ones that are gone; a one-shot command builds it once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from operator import itemgetter

from core.match import Matcher, Reasons
from core.models import Version
from core.query import QueryError, parse
from core.store import MatchRow, StoredFollow, version_to_paper

_first = itemgetter(0)

log = logging.getLogger(__name__)


class FollowIndex:
    """A :class:`Matcher` plus what each follow needs beyond its query (subscriber, options, age)."""

    def __init__(self) -> None:
        self.matcher = Matcher(())
        self.follows: dict[int, StoredFollow] = {}
        # Follows whose stored query no longer parses: remembered so they are not re-parsed every pass.
        self._broken: set[int] = set()

    def sync(self, current: Iterable[StoredFollow]) -> tuple[int, int]:
        """Make the index hold exactly ``current``; returns how many follows were (added, removed)."""
        latest = {f.id: f for f in current}
        removed = [fid for fid in self.follows if fid not in latest]
        for fid in removed:
            self.matcher.remove(fid)
            del self.follows[fid]
        self._broken &= latest.keys()
        added = 0
        for fid, stored in latest.items():
            known = self.follows.get(fid)
            if known is not None:
                # Options (new-only, instant) may change in place; the query itself never does.
                self.follows[fid] = stored
                continue
            if fid in self._broken:
                continue
            try:
                query = parse(stored.query)
            except QueryError as exc:  # valid when added; a stricter grammar must not stop matching
                log.error("follow %s no longer parses (%s); it is skipped", fid, exc)
                self._broken.add(fid)
                continue
            self.matcher.add(fid, query)
            self.follows[fid] = stored
            added += 1
        return added, len(removed)

    def match_rows(self, versions: Iterable[Version]) -> list[MatchRow]:
        """The Match rows of ``versions``: one per (subscriber, version), from the matcher's groups.

        The matcher answers once per distinct query (``match_groups``); each follow's own options are
        applied here, per follow of a matching group: a follow only sees versions first seen after it was
        created (no backlog floods), and a new-only follow skips revisions. The follows of one subscriber
        that match one version fold into one row, in follow-id order, instant if any of them is.
        """
        follows = self.follows
        match_groups = self.matcher.match_groups
        rows: list[MatchRow] = []
        if not follows:
            return rows  # nothing can match: skip tokenising every version (most of the cost)
        for version in versions:
            groups = match_groups(version_to_paper(version))
            if not groups:
                continue
            assert version.id is not None
            seen_at = version.first_seen_at
            revision = version.number > 1
            hits_of: dict[int, list[tuple[int, Reasons]]] = {}
            instant: set[int] = set()
            for follow_ids, reasons in groups:
                for follow_id in follow_ids:
                    follow = follows[follow_id]
                    if follow.created_at > seen_at or (revision and not follow.revisions):
                        continue
                    subscriber = follow.subscriber_id
                    hits = hits_of.get(subscriber)
                    if hits is None:
                        hits_of[subscriber] = [(follow_id, reasons)]
                    else:
                        hits.append((follow_id, reasons))
                    if follow.instant:
                        instant.add(subscriber)
            for subscriber, hits in hits_of.items():
                if len(hits) > 1:
                    hits.sort(key=_first)
                rows.append(MatchRow(subscriber, version.id, hits, subscriber in instant))
        return rows
