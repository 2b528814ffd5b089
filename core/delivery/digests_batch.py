"""A claimed batch of digests: keeping its leases while it is sent (:class:`BatchLease`), and loading it for
rendering: the items each digest shows, their guides, the rest.

``core.delivery.digests.send_due_digests`` claims digests in batches and reads each batch here in a fixed
number of
queries (:func:`batch_items`): the matches are ranked from light rows with the renderer's own rule, only
the items a digest will show are built in full (:func:`cap_rows`), the others are counted
(:class:`core.values.DigestRest`), and the shown items get their guides in the reader's language.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType

from core.db import Database, Db
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
from core.guides import guide_records
from core.languages import DEFAULT_LANGUAGE, reader_language
from core.ledger import ledger_records
from core.ledger.ledger_records import ClaimedDigest, RankedMatch
from core.people import newsletter_records
from core.values import DigestItem, DigestRest

# The pass's logger: operators filter delivery's records by this name.
log = logging.getLogger("core.delivery.digests")

# A batch's leases are renewed every lease / LEASE_RENEWALS: a renewal may come this many times over, less
# one, too late (an event loop busy parsing a feed, a database slow for a moment) before a lease runs out.
LEASE_RENEWALS = 3


class BatchLease:
    """Keeps a worker's claims on a batch alive while the worker is sending it (``async with``).

    A claim lasts one lease (``PAPERTRAIL_DELIVERY_LEASE_SECONDS``) from its claim, but a batch can take
    longer to send than that: fifty mails through one SMTP session at 8 s each is 400 s, while the last ones
    wait their turn. Without renewal the lease of the waiting digests ran out mid-batch, another worker took
    them over and sent them too. So every ``lease / LEASE_RENEWALS`` the worker renews the lease of every
    digest of the batch it still holds (one guarded statement, ``ledger_records.renew_leases``), until it has
    recorded that digest's outcome (:meth:`release`). A dead worker renews nothing: its digests are taken over
    one lease after its last renewal, as before.

    A digest whose renewal finds it no longer this worker's (the worker stalled past its lease and another
    worker took it) is :meth:`lost`: its send is not started.
    """

    def __init__(
        self,
        db: Database,
        claimed: list[ClaimedDigest],
        *,
        worker: str,
        lease: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        self.db = db
        self.worker = worker
        self.lease = lease
        self.clock = clock
        self._held = {c.digest_id: c.attempts for c in claimed}
        self._lost: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BatchLease:
        self._task = asyncio.create_task(self._renew_every(self.lease.total_seconds() / LEASE_RENEWALS))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def release(self, digest_id: int) -> None:
        """The digest's outcome is recorded (or it is another worker's now): renew it no more."""
        self._held.pop(digest_id, None)

    def lost(self, digest_id: int) -> bool:
        """Whether a renewal found the digest no longer this worker's."""
        return digest_id in self._lost

    def renew(self) -> None:
        """Renew the lease of every digest still held, now. Synchronous on purpose: one short statement,
        and no send of this loop can resume between the clock's reading and the write."""
        if not self._held:
            return
        try:
            renewed = ledger_records.renew_leases(
                self.db, dict(self._held), worker=self.worker, until=self.clock() + self.lease
            )
        except Exception:  # the database away for a moment: the next renewal tries again, within the lease
            log.exception("worker %s could not renew the lease of its batch", self.worker)
            return
        # Not renewed: recorded meanwhile by a thread that sends (email), or taken over by another worker.
        for digest_id in [d for d in self._held if d not in renewed]:
            self._held.pop(digest_id)
            self._lost.add(digest_id)

    async def _renew_every(self, seconds: float) -> None:
        while self._held:
            await asyncio.sleep(seconds)
            self.renew()


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
    db: Db,
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
    chose none: the language the digest will be worded in. All of it is read in one transaction (``db``'s
    when it is one: the claim's, in a delivery pass).
    """
    with db.transaction() as tx:
        return _batch_items(tx, claimed, max_items, default_language)


def _batch_items(
    db: Db, claimed: list[ClaimedDigest], max_items: int | None, default_language: str
) -> ClaimedBatch:
    ranked = ledger_records.digests_ranked(db, [c.digest_id for c in claimed])
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
    full = ledger_records.match_items(db, [row for rows in keep.values() for row in rows])
    items = with_guides(
        db,
        claimed,
        {digest_id: [full[row.match_id] for row in rows] for digest_id, rows in keep.items()},
        default_language,
    )
    names = {name for found in items.values() for name in newsletter_names(found)}
    names.update(name for summary in rest.values() for name in summary.newsletters)
    return ClaimedBatch(items, newsletter_records.newsletter_titles(db, sorted(names)) if names else {}, rest)


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
    db: Db,
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
        guides = guide_records.guides_for(db, sorted(ids), language)
        if not guides:
            continue
        for digest_id, wanted in languages.items():
            if wanted == language and digest_id in items:
                items[digest_id] = [
                    dataclasses.replace(item, guide=guides.get(item.version_id or 0))
                    for item in items[digest_id]
                ]
    return items
