"""Loading a claimed batch of digests for rendering: the items each digest shows, their guides, the rest.

``core.delivery.digests.send_due_digests`` claims digests in batches and reads each batch here in a fixed
number of
queries (:func:`batch_items`): the matches are ranked from light rows with the renderer's own rule, only
the items a digest will show are built in full (:func:`cap_rows`), the others are counted
(:class:`core.values.DigestRest`), and the shown items get their guides in the reader's language.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from core.delivery.ranking import (
    RankKey,
    RecommendationKey,
    newsletter_names,
    newsletter_of,
    rank_key,
    recommendation_key,
    shown,
    shown_recommended,
    split_recommended,
)
from core.i18n.languages import DEFAULT_LANGUAGE, reader_language
from core.store.facade import Store
from core.store.ledger import ClaimedDigest, RankedMatch
from core.values import DigestItem, DigestRest


@dataclass(frozen=True, slots=True)
class ClaimedBatch:
    """What a claimed batch needs for rendering, read in a fixed number of queries for the whole batch."""

    # Digest id -> the items it shows (all of them without a cap), in match order, with the guides in
    # the reader's language.
    items: dict[int, list[DigestItem]]
    # Newsletter name -> title, for every newsletter the batch's items (shown or not) were copied from.
    newsletters: dict[str, str]
    # Digest id -> its items past the cap, counted but not loaded (absent: none).
    rest: dict[int, DigestRest] = dataclasses.field(default_factory=dict)

    def rest_of(self, digest_id: int) -> DigestRest:
        """The items of ``digest_id`` the digest will not show, summarised."""
        return self.rest.get(digest_id) or DigestRest()

    def titles_for(self, items: list[DigestItem], rest: DigestRest | None = None) -> dict[str, str]:
        """The titles of the newsletters ``items`` (and ``rest``) were copied from (a deleted one keeps
        its name)."""
        names = newsletter_names(items) | (rest.newsletters if rest else frozenset())
        return {name: self.newsletters.get(name, name) for name in names}


def batch_items(
    store: Store,
    claimed: list[ClaimedDigest],
    *,
    max_items: int | None = None,
    default_language: str = DEFAULT_LANGUAGE,
) -> ClaimedBatch:
    """The items, guides and newsletter titles of a claimed batch: a fixed number of queries per batch
    (ranking rows, upvotes, items, follows, earlier versions, one per language for guides, one for
    titles), whatever the number of digests in it.

    With ``max_items`` (the renderer's cap) only the items each digest will show are loaded in full: a
    day of category follows gives a subscriber ~400 matches of which a digest shows 50, and building the
    other 350 (texts, authors, what revisions changed) was most of a worker's time. The matches are
    ranked first from light rows with the renderer's own rule (:func:`core.delivery.ranking.shown`), and the
    rest
    are passed on as counts (:class:`DigestRest`), so the rendered digest is the same as with every item.

    Guides are read in each reader's language, ``default_language`` (the renderer's) for a reader who
    chose none: the language the digest will be worded in.
    """
    ranked = store.claims.digests_ranked([c.digest_id for c in claimed])
    keep: dict[int, list[RankedMatch]] = {}
    rest: dict[int, DigestRest] = {}
    for digest_id, rows in ranked.items():
        keep[digest_id], left = cap_rows(rows, max_items)
        if left:
            followed, recommended = split_recommended(left)
            rest[digest_id] = DigestRest(
                new=sum(1 for row in followed if not row.is_revision),
                revisions=sum(1 for row in followed if row.is_revision),
                recommended=len(recommended),
                newsletters=frozenset(newsletter_names(left)),
                own=any(newsletter_of(row) is None for row in left),
            )
    full = store.claims.match_items([row for rows in keep.values() for row in rows])
    items = with_guides(
        store,
        claimed,
        {digest_id: [full[row.match_id] for row in rows] for digest_id, rows in keep.items()},
        default_language,
    )
    names = {name for found in items.values() for name in newsletter_names(found)}
    names.update(name for summary in rest.values() for name in summary.newsletters)
    return ClaimedBatch(items, store.newsletters.newsletter_titles(sorted(names)) if names else {}, rest)


def _ranked_key(row: RankedMatch) -> RankKey:
    # The renderer's rule (core.delivery.ranking.item_rank) on the light row.
    return rank_key(row.reasons, row.upvotes, row.arxiv_id, row.version)


def _recommendation_key(row: RankedMatch) -> RecommendationKey:
    # The renderer's rule (core.delivery.render.item_recommendation_rank) on the light row.
    return recommendation_key(row.recommended or 0.0, row.arxiv_id, row.version)


def cap_rows(rows: list[RankedMatch], max_items: int | None) -> tuple[list[RankedMatch], list[RankedMatch]]:
    """``rows`` split into the ones a digest capped at ``max_items`` shows and the rest, each in match
    order (the renderer sorts the shown ones itself; a stable sort of them in match order gives the
    order it would give them among all items). The follows' matches are picked first; learned
    recommendations only fill the room they leave (:func:`core.delivery.ranking.shown_recommended`)."""
    if max_items is None:
        return rows, []
    followed, recommended = split_recommended(rows)
    new, revisions = shown(
        (row for row in followed if not row.is_revision),
        (row for row in followed if row.is_revision),
        _ranked_key,
        max_items,
    )
    picked = shown_recommended(recommended, _recommendation_key, max_items - len(new) - len(revisions))
    chosen = {row.match_id for row in (*new, *revisions, *picked)}
    return [row for row in rows if row.match_id in chosen], [
        row for row in rows if row.match_id not in chosen
    ]


def with_guides(
    store: Store,
    claimed: list[ClaimedDigest],
    items: dict[int, list[DigestItem]],
    default_language: str = DEFAULT_LANGUAGE,
) -> dict[int, list[DigestItem]]:
    """A claimed batch's items with their stored guides in each reader's language (``default_language``
    for none): one query per language in the batch. A guide not made yet is not waited for."""
    languages = {c.digest_id: reader_language(c.language, default=default_language) for c in claimed}
    for language in set(languages.values()):
        ids = {
            item.version_id
            for digest_id, wanted in languages.items()
            if wanted == language
            for item in items.get(digest_id, [])
            if item.version_id is not None
        }
        guides = store.guides.guides_for(sorted(ids), language)
        if not guides:
            continue
        for digest_id, wanted in languages.items():
            if wanted == language and digest_id in items:
                items[digest_id] = [
                    dataclasses.replace(item, guide=guides.get(item.version_id or 0))
                    for item in items[digest_id]
                ]
    return items
