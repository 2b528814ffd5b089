"""The order of a digest and what it shows: the ranking of items within a section, the cap on how many
are shown, and where learned recommendations go. On plain values as well as items, so that a worker can
rank a digest's matches before it loads them (core.delivery.digests) and the renderer shows the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from core.reasons import ABSTRACT, AUTHOR, CATEGORY, PAPER, TITLE, Reason
from core.values import DigestItem

# An item, or a lighter stand-in for one that carries what ranking needs
# (core.delivery.digests.batch_items).
_Ranked = TypeVar("_Ranked")
# The sort key of an item in a digest section, see rank_key.
RankKey = tuple[int, int, str, int]
# The sort key of a learned recommendation in its section, see recommendation_key.
RecommendationKey = tuple[float, str, int]

# Which reason comes first in a digest: watched papers and followed authors, then title hits, then
# abstract hits, then categories; Hugging Face upvotes break ties.
_REASON_RANK = {PAPER: 0, AUTHOR: 0, TITLE: 1, ABSTRACT: 2, CATEGORY: 3}
_LAST = len(_REASON_RANK)


class _WithReasons(Protocol):
    """An item, or a stand-in for one (core.ledger.ledger_records.RankedMatch): what it matched for."""

    @property
    def reasons(self) -> Sequence[Reason]: ...


class _Scored(Protocol):
    """An item, or a stand-in for one: its recommendation score (None for a follow's match)."""

    @property
    def recommended(self) -> float | None: ...


_Item = TypeVar("_Item", bound=_Scored)


def newsletter_of(item: _WithReasons) -> str | None:
    """The name of the newsletter ``item`` is a copy from, or None for a match of the reader's own follows."""
    return item.reasons[0].newsletter if item.reasons else None


def newsletter_names(items: Iterable[_WithReasons]) -> set[str]:
    """The names of the newsletters any of ``items`` comes from."""
    return {name for item in items if (name := newsletter_of(item)) is not None}


def rank_key(reasons: Iterable[Reason], upvotes: int, arxiv_id: str, version: int) -> RankKey:
    """Sort key of an item inside a digest section (best reason, more upvotes, then arXiv id).

    On plain values, so that a worker can rank a digest's matches before it loads them as items (only
    the shown ones are loaded, see :func:`shown`); :func:`item_rank` is the same key for an item.
    """
    best = min((_REASON_RANK.get(reason.field, _LAST) for reason in reasons), default=_LAST)
    return (best, -upvotes, arxiv_id, version)


def item_rank(item: DigestItem) -> RankKey:
    """Sort key of an item inside a digest section: :func:`rank_key` of its reasons, upvotes and id."""
    return rank_key(item.reasons, item.upvotes, item.arxiv_id, item.version)


def item_recommendation_rank(item: DigestItem) -> RecommendationKey:
    """Sort key of a recommended item in its section: :func:`recommendation_key` of its score and id."""
    return recommendation_key(item.recommended or 0.0, item.arxiv_id, item.version)


def shown(
    new: Iterable[_Ranked],
    revisions: Iterable[_Ranked],
    key: Callable[[_Ranked], RankKey],
    max_items: int,
) -> tuple[list[_Ranked], list[_Ranked]]:
    """The new papers and revisions a digest shows, each best first: the cap of :meth:`Renderer.view`.

    New papers come first: up to ``max_items`` of them, then revisions up to ``max_items`` in all. The
    sorts are stable, so items with equal keys keep their given order; a caller that picks the shown
    items from stand-ins (in the order the items would come) and renders just those gets the same digest.
    """
    shown_new = sorted(new, key=key)[:max_items]
    shown_rev = sorted(revisions, key=key)[: max(0, max_items - len(shown_new))]
    return shown_new, shown_rev


def recommendation_key(score: float, arxiv_id: str, version: int) -> RecommendationKey:
    """Sort key of a learned recommendation in its section: best score first, then arXiv id."""
    return (-score, arxiv_id, version)


def split_recommended(items: Iterable[_Item]) -> tuple[list[_Item], list[_Item]]:
    """``items`` split into the follows' matches and the learned recommendations, each in given order."""
    follows: list[_Item] = []
    recommended: list[_Item] = []
    for item in items:
        (follows if item.recommended is None else recommended).append(item)
    return follows, recommended


def shown_recommended(
    recommended: Iterable[_Ranked], key: Callable[[_Ranked], RecommendationKey], room: int
) -> list[_Ranked]:
    """The recommendations a digest shows, best first: what room the follows' matches left under the cap.

    Recommendations come after the follows' matches and never push one out: :func:`shown` picks the
    follows' matches first, and ``room`` is ``max_items`` less what it picked.
    """
    return sorted(recommended, key=key)[: max(0, room)]
