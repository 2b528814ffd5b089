"""Matcher: all active follows compiled into one index; matching costs in the paper's text, not in follows.

Each query is filed under its anchors (``Query.anchors``): keys of which a matching paper must carry at
least one. A paper yields its own keys (its words, categories, archives, surnames and id); only the queries
filed under those keys are evaluated fully. Queries without a positive anchor (``NOT cat:cs.CV``) are
evaluated for every paper. Identical queries of several follows are evaluated once.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.query import Key, PaperText, Query
from core.values import PaperIn


class Matcher:
    """An immutable index over ``(follow_id, query)`` pairs; build a new one when follows change."""

    def __init__(self, follows: Iterable[tuple[int, Query]]) -> None:
        """Index ``follows``; a follow id may appear only once."""
        slot_of: dict[Query, int] = {}
        self._queries: list[Query] = []
        self._follow_ids: list[list[int]] = []
        seen: set[int] = set()
        for follow_id, query in follows:
            if follow_id in seen:
                raise ValueError(f"follow id {follow_id} appears twice")
            seen.add(follow_id)
            slot = slot_of.get(query)
            if slot is None:
                slot = slot_of[query] = len(self._queries)
                self._queries.append(query)
                self._follow_ids.append([])
            self._follow_ids[slot].append(follow_id)

        index: dict[Key, list[int]] = {}
        always: list[int] = []
        for slot, query in enumerate(self._queries):
            anchors = query.anchors()
            if anchors is None:
                always.append(slot)
            else:
                for key in anchors:
                    index.setdefault(key, []).append(slot)
        self._index = {key: tuple(slots) for key, slots in index.items()}
        self._always = tuple(always)
        self.size = len(seen)
        """Number of follows indexed."""
        self.last_candidates = 0
        """Distinct queries evaluated fully by the last :meth:`match` call (a diagnostic, not thread-safe)."""

    @property
    def always_evaluated(self) -> int:
        """Number of distinct queries without a positive anchor, evaluated for every paper."""
        return len(self._always)

    def match(self, paper: PaperIn | PaperText) -> list[tuple[int, tuple[str, ...]]]:
        """Return ``(follow_id, reasons)`` for every follow that matches ``paper``, in follow-id order."""
        text = paper if isinstance(paper, PaperText) else PaperText.of(paper)
        candidates = set(self._always)
        for key in text.keys:
            slots = self._index.get(key)
            if slots is not None:
                candidates.update(slots)
        self.last_candidates = len(candidates)
        results: list[tuple[int, tuple[str, ...]]] = []
        for slot in candidates:
            reasons = self._queries[slot].evaluate(text)
            if reasons is not None:
                results.extend((follow_id, reasons) for follow_id in self._follow_ids[slot])
        results.sort(key=lambda item: item[0])
        return results
