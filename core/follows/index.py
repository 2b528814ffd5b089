"""The long-lived index of all active follows, kept in step with the database without full rebuilds.

``papertrail run`` keeps one :class:`FollowIndex` for the life of the process. Before each matching pass it
reads the follows' ids and options (cheap) and parses and indexes only the follows it has not seen, and
drops the ones that are gone; a one-shot command builds it once. :func:`match_new` is that pass: the
ingest (``core.papers.pipeline``) calls it after storing a batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from core.db import Database
from core.follows import match_records, subscriber_records
from core.follows.match import Matcher
from core.follows.match_records import QueryHit
from core.follows.query import Query, QueryError, parse
from core.follows.subscriber_records import StoredFollow
from core.models import Version, version_to_paper

log = logging.getLogger(__name__)
# Versions matched per transaction: a day's announcement (about 1,500) in one.
MATCH_BATCH = 5_000


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
        # Many follows share a text (cat:cs.LG): parse each distinct text once per pass, and let the follows
        # that share it share one Query (at a million follows, 18 s of parsing become about 4 s).
        parsed: dict[str, Query | QueryError] = {}
        for fid, stored in latest.items():
            known = self.follows.get(fid)
            if known is not None:
                # Options (new-only, instant) may change in place; the query itself never does.
                self.follows[fid] = stored
                continue
            if fid in self._broken:
                continue
            query = parsed.get(stored.query)
            if query is None:
                try:
                    query = parse(stored.query)
                except QueryError as exc:
                    query = exc
                parsed[stored.query] = query
            if isinstance(query, QueryError):  # valid when added; a stricter grammar must not stop matching
                log.error("follow %s no longer parses (%s); it is skipped", fid, query)
                self._broken.add(fid)
                continue
            self.matcher.add(fid, query)
            self.follows[fid] = stored
            added += 1
        return added, len(removed)

    def query_hits(self, versions: Iterable[Version]) -> list[QueryHit]:
        """What matching writes for ``versions``: one hit per (version, distinct matching query).

        The matcher answers once per distinct query (``match_groups``), so this costs what the versions'
        text and the distinct queries cost, whatever the number of follows sharing each. Each follow's
        options and its subscriber are applied when the hits are fanned out
        (``match_records.expand_matches``).
        """
        rows: list[QueryHit] = []
        if not self.follows:
            return rows  # nothing can match: skip tokenising every version (most of the cost)
        match_groups = self.matcher.match_groups
        # The normal forms of each group's query, worked out once per group per pass (the matcher hands
        # out the same follow-id tuple for a query until its follows change). Follows that share a
        # matcher slot share a normal form; a set guards the day they might not.
        forms: dict[int, tuple[tuple[int, ...], tuple[str, ...]]] = {}
        follows = self.follows
        for version in versions:
            assert version.id is not None
            for follow_ids, reasons in match_groups(version_to_paper(version)):
                known = forms.get(id(follow_ids))
                if known is None:
                    # The tuple is kept with its forms so that its id() is not reused during the pass.
                    canon = tuple(sorted({follows[f].canonical for f in follow_ids}))
                    known = forms[id(follow_ids)] = (follow_ids, canon)
                for canonical in known[1]:
                    rows.append(QueryHit(version.id, canonical, reasons))
        return rows


def match_new(db: Database, *, now: datetime | None = None, index: FollowIndex | None = None) -> int:
    """Match every not-yet-matched version once against all active follows; returns query matches written.

    ``index`` is the process's long-lived follow index (brought up to date here); without one a fresh
    index is built. Each version is matched once per distinct query (:meth:`FollowIndex.query_hits`) and
    the hits of a batch of versions are written in one bulk load, in the transaction that marks the
    versions matched. They reach each follower's Match rows, with each follow's options applied, when
    they are fanned out (:func:`core.follows.match_records.expand_matches`), which planning, guides and a
    chat's pending count do first.
    """
    index = index or FollowIndex()
    total = 0
    while True:
        # A batch is one transaction: its versions and the follows read, its hits written and its versions
        # marked matched. Matching is CPU only (no network) between the reads and the writes.
        with db.transaction() as tx:
            versions = match_records.unmatched_versions(tx, limit=MATCH_BATCH)
            if not versions:
                return total
            index.sync(subscriber_records.active_follows(tx))
            hits = index.query_hits(versions)
            total += match_records.record_query_matches(
                tx, [v.id for v in versions if v.id is not None], hits, now=now
            )
        if len(versions) < MATCH_BATCH:
            return total  # the batch took every version waiting: no need to read again to find none
        # Let this batch go before the next one loads: otherwise two batches (2 x 5,000 versions) are
        # held at once, the peak memory of matching a large feed.
        del versions, hits
