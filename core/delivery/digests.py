"""The delivery pass: plan the due digests, claim them, render per channel, send, and record the outcome once.

One pass (:func:`send_due_digests`) is what ``papertrail digest``, the scheduler's minute tick and each
``papertrail worker`` loop run:

0. **Fan out and recommend**: the query matches matching found become the followers' Match rows (once per
   pass); the new papers are scored against the models of the readers who asked for learned
   recommendations, and the picks join the ledger as matches without a follow (core.taste.recommend).
1. **Plan**: due newsletters open their issues (copied to their members as instant matches; see
   core.people.newsletters), in the planner's first transaction; then every active subscriber with
   unassigned matches whose digest is due (by schedule, or any instant match) gets a pending digest that
   claims those matches (:func:`plan_digests`, :func:`plan_heartbeats`).
2. **Claim**: take due digests (a lease per worker; ``SKIP LOCKED`` on PostgreSQL) in batches, each loaded
   in a fixed number of queries (:func:`batch_items`: the matches ranked from light rows with the
   renderer's own rule, only the items a digest shows built in full, the rest counted) and its leases kept
   while it is sent (:class:`BatchLease`).
3. **Send** each through its channel's notifier (:func:`deliver`) and record: sent, the moment the platform
   accepts it (:class:`SentRecorder`; matches sent, same transaction); retryable failure (exponential
   :func:`backoff`, the platform's retry-after respected, dead-lettered after ``max_attempts``); permanent
   failure, judged with the batch's other refusals once the batch is done (core.delivery.alarm): the
   recipient's (subscriber paused with the reason, matches kept for later) or the server's (digest held for
   a retry, a delivery alarm raised, nobody paused).

One module because the steps are one pass: the claimed batch and the delivery of one digest had no caller
but the pass, share its policy, report and logger, and hold its guarantees together (a digest claimed is
sent or put back; its lease outlives its send; its outcome is recorded once, by its claim). The ledger's
SQL under it is core.ledger.ledger_records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from types import TracebackType

from core.channel import (
    DeliveryError,
    LeaseLost,
    Notifier,
    normalise_address,
    on_accepted,
    on_part_delivered,
    split_address,
)
from core.db import Database, Db, Transaction
from core.delivery import alarm_records
from core.delivery.alarm import Refused, settle
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
from core.delivery.receipts import LOOKBACK, RUN_OVERLAP, RunLog, receipt_window
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.manage import fan_out
from core.guides import guide_records
from core.languages import DEFAULT_LANGUAGE, reader_language
from core.ledger import ledger_records
from core.ledger.ledger_records import ClaimedDigest, DigestPlan, RankedMatch
from core.models import Subscriber, SubscriberStatus, utcnow
from core.papers import run_records
from core.papers.health import recent_announcement
from core.papers.status import CALENDAR_SOURCES
from core.people import newsletter_records
from core.people.masking import mask_address, mask_text
from core.people.newsletters import issue_due
from core.schedule import is_due, parse_schedule
from core.taste.recommend import recommend_new
from core.values import DigestItem, DigestRest, Receipt, SendResult

log = logging.getLogger(__name__)
# Subscribers read and digests opened per planning transaction: a page of candidates (keyset by id) and
# one fixed set of statements for it, so planning costs statements per thousand subscribers, not per one;
# small enough to keep the subscriber rows locked only briefly and the page's objects few.
PLAN_BATCH = 1_000
# Digests of one pass that failed and wait for their retry, excluded from the pass's later claims by id.
# Past this many (a platform refusing everything) the pass ends early rather than bind ever more ids into
# each claim (SQLite binds at most 32,766 values per statement); the next pass goes on where it stopped.
MAX_RETRIES_PER_PASS = 10_000

# A batch's leases are renewed every lease / LEASE_RENEWALS: a renewal may come this many times over, less
# one, too late (an event loop busy parsing a feed, a database slow for a moment) before a lease runs out.
LEASE_RENEWALS = 3

# Retryable delivery failures back off exponentially from one minute up to six hours.
BACKOFF_BASE = timedelta(minutes=1)
BACKOFF_MAX = timedelta(hours=6)


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """How hard and how wide delivery goes; built from settings (``PAPERTRAIL_DELIVERY_*``, ``_WORKER_*``)."""

    max_attempts: int = 8
    lease: timedelta = timedelta(minutes=5)
    batch: int = 50
    concurrency: int = 20
    # Distinct recipients refused the same way in one batch that make it the server's refusal, not
    # theirs (core.delivery.alarm; PAPERTRAIL_DELIVERY_ALARM_RECIPIENTS).
    alarm_recipients: int = 5
    # arXiv's calendar, as the status page reads it: which days heartbeats go out on, and when a source
    # counts as stale in a scan receipt (PAPERTRAIL_ARXIV_HOLIDAYS, PAPERTRAIL_ARXIV_STALE_GRACE_HOURS).
    holidays: frozenset[date] = frozenset()
    stale_grace: timedelta = timedelta(hours=4)


@dataclass(frozen=True, slots=True)
class DigestReport:
    """What one delivery attempt did."""

    address: str
    items: int
    sent: bool
    error: str | None = None
    paused: bool = False
    dead: bool = False
    digest_id: int = 0
    # A refusal waiting for its batch's verdict (core.delivery.alarm); None once recorded.
    refused: Refused | None = None
    # Delivered by a worker whose claim had passed to another one meanwhile (it stalled past its lease):
    # not recorded over the new holder's claim, and possibly a duplicate. Counted apart from failures.
    late: bool = False


def worker_name() -> str:
    """A name for this process in the ledger's claims: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def send_due_digests(
    db: Database,
    notifiers: Mapping[str, Notifier],
    renderer: Renderer,
    *,
    now: datetime | None = None,
    force: bool = False,
    address: str | None = None,
    policy: DeliveryPolicy | None = None,
    worker: str | None = None,
    stop: asyncio.Event | None = None,
) -> list[DigestReport]:
    """Plan, claim and send every due digest (optionally for one address only); one pass.

    With ``force`` every pending match goes out now, whatever the schedule and any back-off. Each digest
    is attempted at most once per pass. Once ``stop`` is set nothing more is claimed: the pass ends after
    the batch in flight.

    Raises ``LookupError`` for an ``address`` no subscriber has ("nothing pending" hid a typo).
    """
    # A pass can outlast a lease (thousands of digests at a platform's rate): each batch is claimed at the
    # clock's time, so that its lease really runs from the claim. A caller's fixed ``now`` (tests) wins.
    fixed = now

    def clock() -> datetime:
        return fixed if fixed is not None else utcnow()

    policy = policy or DeliveryPolicy()
    worker = worker or worker_name()
    if address is not None:
        address = normalise_address(address)
        if subscriber_records.get_subscriber(db, address) is None:
            raise LookupError(
                f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY"
            )
    # The pass's one fan-out, then learned recommendations join the ledger before planning, as matches
    # without a follow. In a thread: a day's new papers scored for thousands of models is seconds of CPU the
    # event loop (and the chat bots sharing it) should not wait for.
    fanned_out = await asyncio.to_thread(_recommend, db, clock())

    def claim(tx: Transaction) -> _Claim | None:
        # The claim and what its batch needs to be sent are read in one transaction: the items each digest
        # shows (the rest are counted: DigestRest), the raised alarms, and at the first claim the runs the
        # scan receipts are made from. Nothing is sent inside it: the claim is committed, with its lease,
        # before the first send.
        claimed = ledger_records.claim_digests(
            tx,
            clock(),
            worker,
            limit=policy.batch,
            lease=policy.lease,
            address=address,
            ignore_schedule=force,
            exclude=retrying,
        )
        if not claimed:
            return None
        batch = batch_items(
            tx, claimed, max_items=renderer.max_items, default_language=renderer.default_language
        )
        alarmed = bool(alarm_records.delivery_alarms(tx))
        receipts.preload(tx, claimed)
        return _Claim(claimed, batch, alarmed=alarmed)

    # The first batch is claimed in the planner's last transaction: what was just planned is claimed
    # without a transaction of its own (a claim that fails rolls that page back with it: planned again
    # by the next pass, nothing lost).
    first: list[_Claim | None] = []

    def claim_first(tx: Transaction) -> None:
        if not (stop and stop.is_set()):
            first.append(claim(tx))

    # Digests attempted in this pass that are back in the queue (a retryable failure), kept out of the
    # later claims so that each is attempted once per pass. Sent, refused and dead-lettered ones cannot be
    # claimed again anyway: naming them too would grow every claim with the pass (100,000 ids is more
    # than a statement can bind).
    retrying: list[int] = []
    receipts = PassReceipts(db, clock(), holidays=policy.holidays, grace=policy.stale_grace)
    plan_digests(
        db,
        notifiers,
        now=clock(),
        force=force,
        address=address,
        holidays=policy.holidays,
        fanned_out=fanned_out,
        then=claim_first,
    )
    reports: list[DigestReport] = []
    gate = asyncio.Semaphore(policy.concurrency)

    async def attempt(claimed: ClaimedDigest, batch: ClaimedBatch, lease: BatchLease) -> DigestReport:
        items, rest = batch.items[claimed.digest_id], batch.rest_of(claimed.digest_id)
        titles = batch.titles_for(items, rest)
        # "N matched your follows": learned recommendations did not match a follow, so they are not counted.
        followed = sum(1 for item in items if item.recommended is None) + rest.new + rest.revisions
        receipt = receipts.receipt(claimed, matched=followed)
        async with gate:
            if lease.lost(claimed.digest_id):
                return _lost_before_send(claimed, worker, len(items) + rest.count)
            report = await deliver(
                db, notifiers, renderer, claimed, items, policy, titles, worker, clock, rest, receipt
            )
        if report.refused is None:  # recorded (a refusal is, once the batch is judged)
            lease.release(claimed.digest_id)
        return report

    while True:
        if first:
            taken = first.pop()  # claimed already: sent whatever happens, or its lease would hold it
        elif (stop and stop.is_set()) or len(retrying) > MAX_RETRIES_PER_PASS:
            break
        else:
            with db.transaction() as tx:
                taken = claim(tx)
        if taken is None:
            break
        claimed = taken.claimed
        # The batch's leases are renewed until each digest's outcome is recorded: a batch may take longer
        # to send than one lease (fifty mails through one slow SMTP session).
        async with BatchLease(db, claimed, worker=worker, lease=policy.lease, clock=clock) as lease:
            sent = await asyncio.gather(*(attempt(c, taken.batch, lease) for c in claimed))
            done = _settle_refusals(db, sent, policy, alarmed=taken.alarmed)
        retrying.extend(r.digest_id for r in done if not (r.sent or r.paused or r.dead))
        reports.extend(done)
        if len(claimed) < policy.batch:
            break  # the claim took every digest that was due: claiming again would find none
    return reports


@dataclasses.dataclass(frozen=True, slots=True)
class _Claim:
    """A claimed batch, loaded: its digests, what they show, and whether an alarm was raised at the claim."""

    claimed: list[ClaimedDigest]
    batch: ClaimedBatch
    alarmed: bool


def _lost_before_send(claimed: ClaimedDigest, worker: str, items: int) -> DigestReport:
    """The report of a digest whose claim passed to another worker before its send started (this worker
    stalled past its lease): not sent here, its row left to the new holder."""
    error = f"digest {claimed.digest_id} is no longer held by {worker} (its lease ran out); not sent"
    log.warning(
        "%s",
        error,
        extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id, "worker": worker},
    )
    return DigestReport(claimed.address, items, False, error, digest_id=claimed.digest_id)


def _recommend(db: Database, now: datetime) -> bool:
    """The fan-out and the recommendation pass (core.taste.recommend); whether both were done. A failure is
    logged and the digests go without the new recommendations, which the next pass writes (its cursor did
    not move); the planner then fans out itself."""
    try:
        recommend_new(db, now=now)
    except Exception:  # the database away for a moment, a model that cannot be used: never hold digests back
        log.exception("recommendation pass failed; digests are planned without new recommendations")
        return False
    return True


def _settle_refusals(
    db: Database, done: list[DigestReport], policy: DeliveryPolicy, *, alarmed: bool = True
) -> list[DigestReport]:
    """Judge the batch's refusals together (core.delivery.alarm) and report what became of each: paused,
    or held by a delivery alarm for a retry. Also clears the alarms the batch's deliveries disproved.

    ``alarmed``: whether an alarm was raised when the batch was claimed. A batch without refusals has
    nothing to settle when none was (an alarm raised meanwhile is cleared by the channel's next batch).
    """
    refused = [report.refused for report in done if report.refused is not None]
    if not refused and not alarmed:
        return done
    accepted = Counter(split_address(report.address)[0] for report in done if report.sent)
    paused = settle(db, refused, accepted, threshold=policy.alarm_recipients, now=utcnow())
    return [
        dataclasses.replace(report, refused=None, paused=paused.get(report.digest_id, False))
        if report.refused is not None
        else report
        for report in done
    ]


# A claimed batch: its leases kept while it is sent, and its items loaded for rendering.
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


# Delivering one claimed digest: render, send, record the outcome once, back off.
class SentRecorder:
    """Records one claimed digest as sent, once, from whichever thread first sees the platform accept it.

    The ledger hands it to the adapter (:func:`core.channel.on_accepted`). An adapter with its own
    sending
    thread calls it there the moment the platform accepted the message, before that thread takes the next
    one: a worker killed at any instant leaves at most the sends then in flight unrecorded, one per send
    slot, instead of every digest that thread got through while the event loop was busy elsewhere.

    It never raises: a failed write (the database away for a moment) is kept in ``error`` and tried again
    when the ledger calls it after ``send`` returns, on the event loop. ``clock`` is the delivery pass's
    (a test's fixed time): the sent time becomes the subscriber's ``last_digest_at``, which schedules and
    scan receipts count from.

    With ``worker`` only that worker's claim (at the claimed attempt) is recorded. If the claim passed to
    another worker meanwhile (this one stalled past its lease), nothing is written over the new holder's
    state: ``late`` is set and the delivery is logged as a possible duplicate.
    """

    def __init__(
        self,
        db: Database,
        claimed: ClaimedDigest,
        clock: Callable[[], datetime] = utcnow,
        worker: str = "",
    ) -> None:
        self.db = db
        self.claimed = claimed
        self.clock = clock
        self.worker = worker
        self.recorded = False
        self.late = False
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self, result: SendResult) -> None:
        """Record ``result`` for the claimed digest, unless that was done already."""
        with self._lock:
            if self.recorded:
                return
            held = (self.worker, self.claimed.attempts) if self.worker else None
            try:
                recorded = ledger_records.finish_sent(
                    self.db,
                    self.claimed.digest_id,
                    platform_id=result.platform_id,
                    parts=self.claimed.parts_sent + result.parts,
                    now=self.clock(),
                    moved_to=result.moved_to,
                    held=held,
                )
            except Exception as exc:  # recorded again, or raised, by the caller on the event loop
                claimed = self.claimed
                log.warning(
                    "digest %s was delivered but recording it failed: %s",
                    claimed.digest_id,
                    exc,
                    extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
                )
                self.error = exc
                return
            self.recorded = True
            self.error = None
            if not recorded and held is not None:
                self.late = True
                claimed = self.claimed
                log.warning(
                    "digest %s was delivered by %s after its claim (attempt %d) passed to another worker: "
                    "not recorded over the new claim, and possibly delivered twice",
                    claimed.digest_id,
                    self.worker,
                    claimed.attempts,
                    extra={
                        "subscriber": mask_address(claimed.address),
                        "digest": claimed.digest_id,
                        "worker": self.worker,
                    },
                )


async def deliver(
    db: Database,
    notifiers: Mapping[str, Notifier],
    renderer: Renderer,
    claimed: ClaimedDigest,
    items: list[DigestItem],
    policy: DeliveryPolicy,
    titles: Mapping[str, str],
    worker: str = "",
    clock: Callable[[], datetime] = utcnow,
    rest: DigestRest | None = None,
    receipt: Receipt | None = None,
) -> DigestReport:
    """Deliver one claimed digest: render it, send it through its channel (renewing its lease per part
    sent), and record the outcome once (sent, a retry or dead letter, or a refusal left to the batch's
    verdict). Never raises for a failed send: an adapter's crash is a retryable failure."""
    channel, target = split_address(claimed.address)
    # Reports count every item of the digest, shown or not (all of them are marked sent with it).
    count = len(items) + (rest.count if rest else 0)
    notifier = notifiers.get(channel)
    recorder = SentRecorder(db, claimed, clock, worker)

    async def renew(parts: int) -> None:
        # A split digest goes out at a chat's pace (a 500-item Telegram digest is ~40 messages at 1/s):
        # each accepted part renews the lease, so it never runs out mid-send and no other worker repeats it.
        if not ledger_records.renew_lease(
            db,
            claimed.digest_id,
            worker=worker,
            attempts=claimed.attempts,
            parts_sent=parts,
            until=clock() + policy.lease,
        ):
            raise LeaseLost(
                f"digest {claimed.digest_id} is no longer held by {worker} after {parts} parts "
                "(its lease ran out and another worker took it); stopped sending"
            )

    try:
        if notifier is None:
            raise DeliveryError(f"no notifier for channel {channel!r} in this process", retryable=True)
        message = renderer.render(
            channel,
            items,
            target,
            address=claimed.address,
            key=f"papertrail-digest-{claimed.digest_id}",
            newsletters=titles,
            language=claimed.language,
            rest=rest,
            receipt=receipt,
            heartbeat=claimed.heartbeat,
        )
        if claimed.parts_sent:
            message = dataclasses.replace(message, skip_parts=claimed.parts_sent)
        with on_part_delivered(renew), on_accepted(recorder):
            result = await notifier.send(target, message)
    except LeaseLost as exc:
        # The digest is another worker's now: leave its row alone (that worker records it), just say so.
        log.warning(
            "%s",
            exc,
            extra={
                "subscriber": mask_address(claimed.address),
                "digest": claimed.digest_id,
                "worker": worker,
            },
        )
        return DigestReport(claimed.address, count, False, str(exc), digest_id=claimed.digest_id)
    except DeliveryError as exc:
        return _record_failure(db, claimed, exc, count, policy, worker, clock)
    except Exception as exc:  # an adapter bug must not stop the other deliveries, nor lose the digest
        log.exception(
            "delivery of digest %s to %s crashed",
            claimed.digest_id,
            mask_address(claimed.address),
            extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
        )
        error = DeliveryError(f"unexpected error in the {channel} adapter: {exc!r}", retryable=True)
        return _record_failure(db, claimed, error, count, policy, worker, clock)
    # Adapters that send from the event loop return right after the platform's acceptance: record it now
    # (no await in between). One that sent from its own thread has normally recorded it there already.
    recorder(result)
    if not recorder.recorded:
        raise recorder.error or RuntimeError(f"digest {claimed.digest_id} was sent but not recorded")
    if recorder.late:
        late = f"delivered after the claim of {worker} passed to another worker; not recorded"
        return DigestReport(claimed.address, count, False, late, digest_id=claimed.digest_id, late=True)
    if result.moved_to:
        log.info(
            "subscriber %s moved to %s",
            mask_address(claimed.address),
            result.moved_to,
            extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
        )
    return DigestReport(claimed.address, count, True, digest_id=claimed.digest_id)


def _record_failure(
    db: Database,
    claimed: ClaimedDigest,
    exc: DeliveryError,
    items: int,
    policy: DeliveryPolicy,
    worker: str | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> DigestReport:
    # The pass's clock, like the claim's and the sent time's: the back-off runs from this attempt.
    now = clock()
    # The error is stored, listed by the CLI and logged: an adapter may have quoted the address's URL in it.
    error = mask_text(str(exc))
    # Only this worker's claim is failed: if its lease ran out meanwhile and another worker took the digest
    # (and may be sending it right now), putting it back in the queue would let a third one send it again.
    held = (worker, claimed.attempts) if worker else None
    if not exc.retryable or exc.operator:
        # Whose refusal this is (the recipient's or the server's) is judged with the batch's others.
        refused = Refused(claimed.digest_id, claimed.address, claimed.attempts, items, exc, worker)
        return DigestReport(
            claimed.address, items, False, error, digest_id=claimed.digest_id, refused=refused
        )
    dead = claimed.attempts >= policy.max_attempts
    wait = max(backoff(claimed.attempts), timedelta(seconds=exc.retry_after or 0))
    if not ledger_records.finish_retry(
        db,
        claimed.digest_id,
        error=error,
        retry_at=now + wait,
        parts_sent=exc.delivered_parts,
        dead=dead,
        now=now,
        held=held,
    ):
        log.warning(
            "digest %s failed after the claim of %s passed to another worker (or it was sent meanwhile); "
            "left to its holder: %s",
            claimed.digest_id,
            worker,
            error,
            extra={
                "subscriber": mask_address(claimed.address),
                "digest": claimed.digest_id,
                "worker": worker,
            },
        )
        return DigestReport(claimed.address, items, False, error, digest_id=claimed.digest_id)
    if dead:
        log.error(
            "digest %s to %s dead-lettered after %d attempts: %s; `papertrail retry` re-queues it",
            claimed.digest_id,
            mask_address(claimed.address),
            claimed.attempts,
            error,
            extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
        )
    else:
        log.warning(
            "delivery to %s failed, retry in %s: %s",
            mask_address(claimed.address),
            wait,
            error,
            extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
        )
    return DigestReport(claimed.address, items, False, error, dead=dead, digest_id=claimed.digest_id)


def backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failed attempt: 1, 2, 4 … minutes, at most six hours."""
    factor: int = 2 ** min(max(attempts - 1, 0), 20)
    return min(BACKOFF_MAX, BACKOFF_BASE * factor)


# Planning: the digests and heartbeats that are due, and the pass's scan receipts.
def plan_digests(
    db: Database,
    notifiers: Mapping[str, Notifier],
    *,
    now: datetime,
    force: bool = False,
    address: str | None = None,
    holidays: Collection[date] = (),
    fanned_out: bool = False,
    then: Callable[[Transaction], object] | None = None,
) -> int:
    """Open a digest for every subscriber that is due, then the heartbeats that are due; returns how many
    were opened. ``then`` runs last, in the transaction of the last page (the delivery pass's first claim).

    Subscribers on a channel this process has no notifier for are left alone: their matches stay pending
    until a process that can deliver them plans them. Newsletters that are due open their issues first, in
    the first page's transaction, so that the members' copies go into the digests planned here.
    ``holidays`` are arXiv's (no heartbeat for a mailing that does not exist); an operator's ``force``
    sends what is pending, never a heartbeat. ``fanned_out``: the caller has just fanned out what matching
    found (the delivery pass's recommendation pass); otherwise planning does it first.
    """
    # Newsletters and subscribers plan from Match rows: what matching found is fanned out first.
    if not fanned_out:
        fan_out(db, now=now)
    opened = 0
    after = 0
    while True:
        # A page of candidates at a time, by id, each page one transaction (read, lock, open): a busy
        # minute's 100,000 subscribers are never all in memory nor all locked, and each page costs the same
        # few statements.
        with db.transaction() as tx:
            if not after:  # the first page
                issue_due(tx, now=now, due=_due, force=force, address=address)
            candidates = ledger_records.subscribers_to_plan(
                tx,
                now,
                address,
                channels=list(notifiers),
                ignore_backoff=force,
                after=after,
                limit=PLAN_BATCH,
            )
            if candidates:
                after = candidates[-1].id or 0
                plans = [
                    # Between scheduled digests only the matches of instant follows go out.
                    DigestPlan(
                        subscriber.id or 0,
                        split_address(subscriber.address)[0],
                        not (force or _due(subscriber, now)),
                    )
                    for subscriber in candidates
                ]
                opened += len(ledger_records.open_digests(tx, plans, now=now))
            if len(candidates) < PLAN_BATCH:
                # After the digests, in the last page's transaction: a subscriber whose digest was just
                # opened has one open, and gets no heartbeat.
                if not force:
                    opened += plan_heartbeats(tx, notifiers, now=now, address=address, holidays=holidays)
                if then is not None:
                    then(tx)
                return opened


def plan_heartbeats(
    db: Db,
    notifiers: Mapping[str, Notifier],
    *,
    now: datetime,
    address: str | None = None,
    holidays: Collection[date] = (),
) -> int:
    """Open a heartbeat for every subscriber who asked for one and whose scheduled digest time has come
    with nothing matched, on an arXiv announcement day; returns how many were opened.

    An announcement day: arXiv announced a mailing in the 24 hours before ``now``
    (:func:`core.papers.health.recent_announcement`, which knows the calendar and ``holidays``). At most one
    heartbeat per announcement, and none when any digest went to the subscriber since it; instant
    schedules have no digest time and get none. A heartbeat is delivered like any digest (claimed, retried,
    recorded once), so it is sent once even with several planners and workers. Each page of candidates is
    read and opened in one transaction (``db``'s when it is one: the planner's last page).
    """
    try:
        announced = recent_announcement(now, holidays)
    except ValueError as exc:  # no mailing in 30 days: PAPERTRAIL_ARXIV_HOLIDAYS lists too many
        log.error("no heartbeats: %s", exc)
        return 0
    if announced is None:
        return 0
    opened = 0
    after = 0
    while True:
        with db.transaction() as tx:
            candidates = ledger_records.heartbeat_candidates(
                tx, now, announced, address, channels=list(notifiers), after=after, limit=PLAN_BATCH
            )
            plans = [
                DigestPlan(subscriber.id or 0, split_address(subscriber.address)[0], instant_only=False)
                for subscriber in candidates
                if _heartbeat_due(subscriber, now)
            ]
            opened += len(ledger_records.open_heartbeats(tx, plans, not_since=announced, now=now))
        if len(candidates) < PLAN_BATCH:
            return opened
        after = candidates[-1].id or 0


def _heartbeat_due(subscriber: Subscriber, now: datetime) -> bool:
    """The subscriber's scheduled digest time has come (an instant schedule has none)."""
    return subscriber.schedule.strip().casefold() != "instant" and _due(subscriber, now)


class PassReceipts:
    """The scan receipts of one delivery pass (core.delivery.receipts), from source runs read once when the
    first
    receipt is needed: the runs of the :data:`~core.delivery.receipts.LOOKBACK` before the pass (and an hour
    more),
    which covers the window of every digest planned within that hour. A digest planned earlier (a retry)
    or later (by another worker, during this pass) reads the runs of its own window."""

    # Digests planned this long before the pass still have their window in the pass's runs.
    SLACK = timedelta(hours=1)

    def __init__(self, db: Database, now: datetime, *, holidays: Collection[date], grace: timedelta) -> None:
        self.db = db
        self.now = now
        self.holidays = holidays
        self.grace = grace
        self._log: tuple[datetime, datetime, RunLog] | None = None

    def _load(self, since: datetime, until: datetime, db: Db | None = None) -> RunLog:
        runs = run_records.receipt_runs(
            db or self.db, since, until, overlap=RUN_OVERLAP, sources=CALENDAR_SOURCES
        )
        return RunLog(runs, holidays=self.holidays, grace=self.grace)

    def runs_for(self, since: datetime, until: datetime, db: Db | None = None) -> RunLog:
        """A run log that covers the window (since, until] (read in ``db`` when given: a transaction)."""
        if self._log is None:
            start, end = min(since, self.now - LOOKBACK - self.SLACK), max(until, self.now)
            self._log = (start, end, self._load(start, end, db))
        lo, hi, log = self._log
        if lo <= since and until <= hi:
            return log
        return self._load(since, until, db)

    def preload(self, tx: Transaction, claimed: Sequence[ClaimedDigest]) -> None:
        """Read the pass's runs in ``tx`` (the first claim's transaction), for the window of the first
        receipt, as :meth:`receipt` would read them on its own. In a savepoint: a read that fails is undone
        alone and never holds the claim back; the first receipt then reads the runs again on its own."""
        if self._log is not None:
            return
        window = next((w for w in map(_window, claimed) if w is not None), None)
        if window is None:
            return
        try:
            with tx.savepoint() as part:
                self.runs_for(*window, db=part)
        except Exception as exc:  # the receipts read them again at the first one (and log a failure)
            log.warning("the scan receipts' runs were not read with the claim: %s", exc)

    def receipt(self, claimed: ClaimedDigest, *, matched: int) -> Receipt | None:
        """The receipt of a claimed digest of ``matched`` items; None for one claimed without its times,
        or when it cannot be made (logged): a receipt never holds a digest back."""
        window = _window(claimed)
        if window is None:
            return None
        since, until = window
        try:
            runs = self.runs_for(since, until)
            return runs.receipt(since=since, until=until, matched=matched, timezone=claimed.timezone)
        except Exception:  # the database away for a moment, a calendar the settings broke
            log.exception(
                "digest %s goes out without its scan receipt",
                claimed.digest_id,
                extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
            )
            return None


def _window(claimed: ClaimedDigest) -> tuple[datetime, datetime] | None:
    """The receipt window of a claimed digest; None for one claimed without its times."""
    if claimed.created_at is None or claimed.subscriber_created_at is None:
        return None
    return receipt_window(claimed.last_digest_at, claimed.subscriber_created_at, claimed.created_at)


def _due(subscriber: Subscriber, now: datetime) -> bool:
    try:
        schedule = parse_schedule(subscriber.schedule)
        since = subscriber.last_digest_at or subscriber.created_at
        return is_due(schedule, subscriber.timezone, now, since)
    except ValueError as exc:
        log.error(
            "subscriber %s has an unusable schedule: %s",
            mask_address(subscriber.address),
            exc,
            extra={"subscriber": subscriber.address},
        )
        return False


def resume(db: Database, address: str) -> Subscriber:
    """Re-activate a paused subscriber and re-queue its dead digests; pending matches go out when due."""
    address = normalise_address(address)
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"no subscriber {address}")
    ledger_records.requeue_dead(db, address=address)
    return subscriber_records.update_subscriber(
        db, subscriber.id, status=SubscriberStatus.ACTIVE, status_reason=None, retry_at=None, failures=0
    )
