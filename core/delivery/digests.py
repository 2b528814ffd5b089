"""Sending digests: plan the due ones, claim them, render per channel, send, and record the outcome once.

One pass (:func:`send_due_digests`) is what ``papertrail digest``, the scheduler's minute tick and each
``papertrail worker`` loop run:

0. **Fan out and recommend**: the query matches matching found become the followers' Match rows (once per
   pass); the new papers are scored against the models of the readers who asked for learned
   recommendations, and the picks join the ledger as matches without a follow (core.taste.recommend).
1. **Plan**: due newsletters open their issues (copied to their members as instant matches; see
   core.people.newsletters), in the planner's first transaction; then every active subscriber with
   unassigned matches whose digest is due (by schedule, or any instant match) gets a pending digest that
   claims those matches.
2. **Claim**: take due digests (a lease per worker; ``SKIP LOCKED`` on PostgreSQL) in batches.
3. **Send** each through its channel's notifier and record: sent (matches sent, same transaction);
   retryable failure (exponential back-off, the platform's retry-after respected, dead-lettered after
   ``max_attempts``); permanent failure, judged with the batch's other refusals once the batch is done
   (core.delivery.alarm): the recipient's (subscriber paused with the reason, matches kept for later) or
   the server's (digest held for a retry, a delivery alarm raised, nobody paused).

This module runs the pass and plans; loading a claimed batch is ``core.delivery.digests_batch`` and delivering
one digest (send, record, back off) is ``core.delivery.digests_deliver``. Import them from here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import date, datetime, timedelta

from core.channel import Notifier, normalise_address, split_address
from core.db import Database, Db, Transaction
from core.delivery import alarm_records
from core.delivery.alarm import settle
from core.delivery.digests_batch import BatchLease, ClaimedBatch, batch_items
from core.delivery.digests_deliver import (
    BACKOFF_BASE,
    BACKOFF_MAX,
    DeliveryPolicy,
    DigestReport,
    SentRecorder,
    backoff,
    deliver,
)
from core.delivery.receipts import LOOKBACK, RUN_OVERLAP, RunLog, receipt_window
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.manage import fan_out
from core.ledger import ledger_records
from core.ledger.ledger_records import ClaimedDigest, DigestPlan
from core.models import Subscriber, SubscriberStatus, utcnow
from core.papers import run_records
from core.papers.health import recent_announcement
from core.papers.status import CALENDAR_SOURCES
from core.people.masking import mask_address
from core.people.newsletters import issue_due
from core.schedule import is_due, parse_schedule
from core.taste.recommend import recommend_new
from core.values import Receipt

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "MAX_RETRIES_PER_PASS",
    "PLAN_BATCH",
    "BatchLease",
    "ClaimedBatch",
    "DeliveryPolicy",
    "DigestReport",
    "PassReceipts",
    "SentRecorder",
    "backoff",
    "batch_items",
    "plan_digests",
    "plan_heartbeats",
    "resume",
    "send_due_digests",
    "worker_name",
]

log = logging.getLogger(__name__)
# Subscribers read and digests opened per planning transaction: a page of candidates (keyset by id) and
# one fixed set of statements for it, so planning costs statements per thousand subscribers, not per one;
# small enough to keep the subscriber rows locked only briefly and the page's objects few.
PLAN_BATCH = 1_000
# Digests of one pass that failed and wait for their retry, excluded from the pass's later claims by id.
# Past this many (a platform refusing everything) the pass ends early rather than bind ever more ids into
# each claim (SQLite binds at most 32,766 values per statement); the next pass goes on where it stopped.
MAX_RETRIES_PER_PASS = 10_000


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
