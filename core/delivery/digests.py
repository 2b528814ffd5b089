"""Sending digests: plan the due ones, claim them, render per channel, send, and record the outcome once.

One pass (:func:`send_due_digests`) is what ``papertrail digest``, the scheduler's minute tick and each
``papertrail worker`` loop run:

0. **Recommend**: the new papers are scored against the models of the readers who asked for learned
   recommendations, and the picks join the ledger as matches without a follow (core.taste.recommend).
1. **Plan**: due newsletters open their issues (copied to their members as instant matches; see
   core.people.newsletters); then every active subscriber with unassigned matches whose digest is due (by
   schedule, or any instant match) gets a pending digest that claims those matches.
2. **Claim**: take due digests (a lease per worker; ``SKIP LOCKED`` on PostgreSQL) in batches.
3. **Send** each through its channel's notifier and record: sent (matches sent, same transaction);
   retryable failure (exponential back-off, the platform's retry-after respected, dead-lettered after
   ``max_attempts``); permanent failure, judged with the batch's other refusals once the batch is done
   (core.delivery.alarm): the recipient's (subscriber paused with the reason, matches kept for later) or
   the server's (digest held for a retry, a delivery alarm raised, nobody paused).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from core.delivery.alarm import Refused, settle
from core.delivery.contract import (
    DeliveryError,
    LeaseLost,
    Notifier,
    normalise_address,
    on_accepted,
    on_part_delivered,
    split_address,
)
from core.delivery.receipts import LOOKBACK, RUN_OVERLAP, RunLog, receipt_window
from core.delivery.render import (
    RankKey,
    RecommendationKey,
    Renderer,
    newsletter_names,
    newsletter_of,
    rank_key,
    recommendation_key,
    shown,
    shown_recommended,
    split_recommended,
)
from core.delivery.schedule import is_due, parse_schedule
from core.i18n.languages import DEFAULT_LANGUAGE, reader_language
from core.models import Subscriber, SubscriberStatus, utcnow
from core.papers.health import recent_announcement
from core.papers.status import CALENDAR_SOURCES
from core.people.masking import mask_address, mask_text
from core.people.newsletters import open_due_issues
from core.store.facade import Store
from core.store.ledger import ClaimedDigest, DigestPlan, RankedMatch
from core.taste.recommend import recommend_new
from core.values import DigestItem, DigestRest, Receipt, SendResult

log = logging.getLogger(__name__)

# Retryable delivery failures back off exponentially from one minute up to six hours.
BACKOFF_BASE = timedelta(minutes=1)
BACKOFF_MAX = timedelta(hours=6)
# Subscribers read and digests opened per planning transaction: a page of candidates (keyset by id) and
# one fixed set of statements for it, so planning costs statements per thousand subscribers, not per one;
# small enough to keep the subscriber rows locked only briefly and the page's objects few.
PLAN_BATCH = 1_000
# Digests of one pass that failed and wait for their retry, excluded from the pass's later claims by id.
# Past this many (a platform refusing everything) the pass ends early rather than bind ever more ids into
# each claim (SQLite binds at most 32,766 values per statement); the next pass goes on where it stopped.
MAX_RETRIES_PER_PASS = 10_000


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


def worker_name() -> str:
    """A name for this process in the ledger's claims: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def send_due_digests(
    store: Store,
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
        if store.subscribers.get_subscriber(address) is None:
            raise LookupError(
                f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY"
            )
    # Learned recommendations join the ledger before planning, as matches without a follow (issue 17). In a
    # thread: a day's new papers scored for thousands of models is seconds of CPU the event loop (and the
    # chat bots sharing it) should not wait for.
    await asyncio.to_thread(_recommend, store, clock())
    plan_digests(store, notifiers, now=clock(), force=force, address=address, holidays=policy.holidays)
    receipts = PassReceipts(store, clock(), holidays=policy.holidays, grace=policy.stale_grace)
    reports: list[DigestReport] = []
    # Digests attempted in this pass that are back in the queue (a retryable failure), kept out of the
    # later claims so that each is attempted once per pass. Sent, refused and dead-lettered ones cannot be
    # claimed again anyway: naming them too would grow every claim with the pass (100,000 ids is more
    # than a statement can bind).
    retrying: list[int] = []
    gate = asyncio.Semaphore(policy.concurrency)

    async def attempt(claimed: ClaimedDigest, batch: ClaimedBatch) -> DigestReport:
        items, rest = batch.items[claimed.digest_id], batch.rest_of(claimed.digest_id)
        titles = batch.titles_for(items, rest)
        # "N matched your follows": learned recommendations did not match a follow, so they are not counted.
        followed = sum(1 for item in items if item.recommended is None) + rest.new + rest.revisions
        receipt = receipts.receipt(claimed, matched=followed)
        async with gate:
            return await _deliver(
                store, notifiers, renderer, claimed, items, policy, titles, worker, clock, rest, receipt
            )

    while (
        not (stop and stop.is_set())
        and len(retrying) <= MAX_RETRIES_PER_PASS
        and (
            claimed := store.claims.claim_digests(
                clock(),
                worker,
                limit=policy.batch,
                lease=policy.lease,
                address=address,
                ignore_schedule=force,
                exclude=retrying,
            )
        )
    ):
        # Only the items each digest shows are loaded in full; the rest are counted (DigestRest).
        batch = batch_items(
            store, claimed, max_items=renderer.max_items, default_language=renderer.default_language
        )
        done = _settle_refusals(store, await asyncio.gather(*(attempt(c, batch) for c in claimed)), policy)
        retrying.extend(r.digest_id for r in done if not (r.sent or r.paused or r.dead))
        reports.extend(done)
    return reports


def _recommend(store: Store, now: datetime) -> None:
    """The recommendation pass (core.taste.recommend); a failure is logged and the digests go without the new
    recommendations, which the next pass writes (its cursor did not move)."""
    try:
        recommend_new(store, now=now)
    except Exception:  # the database away for a moment, a model that cannot be used: never hold digests back
        log.exception("recommendation pass failed; digests are planned without new recommendations")


def _settle_refusals(store: Store, done: list[DigestReport], policy: DeliveryPolicy) -> list[DigestReport]:
    """Judge the batch's refusals together (core.delivery.alarm) and report what became of each: paused,
    or held by a delivery alarm for a retry. Also clears the alarms the batch's deliveries disproved."""
    refused = [report.refused for report in done if report.refused is not None]
    accepted = Counter(split_address(report.address)[0] for report in done if report.sent)
    paused = settle(store, refused, accepted, threshold=policy.alarm_recipients, now=utcnow())
    return [
        dataclasses.replace(report, refused=None, paused=paused.get(report.digest_id, False))
        if report.refused is not None
        else report
        for report in done
    ]


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
    ranked first from light rows with the renderer's own rule (:func:`core.delivery.render.shown`), and the
    rest
    are passed on as counts (:class:`DigestRest`), so the rendered digest is the same as with every item.

    Guides are read in each reader's language, ``default_language`` (the renderer's) for a reader who
    chose none: the language the digest will be worded in.
    """
    ranked = store.claims.digests_ranked([c.digest_id for c in claimed])
    keep: dict[int, list[RankedMatch]] = {}
    rest: dict[int, DigestRest] = {}
    for digest_id, rows in ranked.items():
        keep[digest_id], left = _cap(rows, max_items)
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
    items = _with_guides(
        store,
        claimed,
        {digest_id: [full[row.match_id] for row in rows] for digest_id, rows in keep.items()},
        default_language,
    )
    names = {name for found in items.values() for name in newsletter_names(found)}
    names.update(name for summary in rest.values() for name in summary.newsletters)
    return ClaimedBatch(items, store.newsletters.newsletter_titles(sorted(names)) if names else {}, rest)


def _ranked_key(row: RankedMatch) -> RankKey:
    # The renderer's rule (core.delivery.render.item_rank) on the light row.
    return rank_key(row.reasons, row.upvotes, row.arxiv_id, row.version)


def _recommendation_key(row: RankedMatch) -> RecommendationKey:
    # The renderer's rule (core.delivery.render.item_recommendation_rank) on the light row.
    return recommendation_key(row.recommended or 0.0, row.arxiv_id, row.version)


def _cap(rows: list[RankedMatch], max_items: int | None) -> tuple[list[RankedMatch], list[RankedMatch]]:
    """``rows`` split into the ones a digest capped at ``max_items`` shows and the rest, each in match
    order (the renderer sorts the shown ones itself; a stable sort of them in match order gives the
    order it would give them among all items). The follows' matches are picked first; learned
    recommendations only fill the room they leave (:func:`core.delivery.render.shown_recommended`)."""
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


def plan_digests(
    store: Store,
    notifiers: Mapping[str, Notifier],
    *,
    now: datetime,
    force: bool = False,
    address: str | None = None,
    holidays: Collection[date] = (),
) -> int:
    """Open a digest for every subscriber that is due, then the heartbeats that are due; returns how many
    were opened.

    Subscribers on a channel this process has no notifier for are left alone: their matches stay pending
    until a process that can deliver them plans them. Newsletters that are due open their issues first,
    so that the members' copies go into the digests planned here. ``holidays`` are arXiv's (no heartbeat
    for a mailing that does not exist); an operator's ``force`` sends what is pending, never a heartbeat.
    """
    # Fans what matching found out to the followers first: newsletters and subscribers plan from Match rows.
    open_due_issues(store, now=now, due=_due, force=force, address=address)
    opened = 0
    after = 0
    while True:
        # A page of candidates at a time, by id: a busy minute's 100,000 subscribers are never all in
        # memory, and each page costs the same few statements.
        candidates = store.ledger.subscribers_to_plan(
            now, address, channels=list(notifiers), ignore_backoff=force, after=after, limit=PLAN_BATCH
        )
        if not candidates:
            break
        after = candidates[-1].id or 0
        plans = [
            # Between scheduled digests only the matches of instant follows go out.
            DigestPlan(
                subscriber.id or 0, split_address(subscriber.address)[0], not (force or _due(subscriber, now))
            )
            for subscriber in candidates
        ]
        opened += len(store.ledger.open_digests(plans, now=now))
        if len(candidates) < PLAN_BATCH:
            break
    # After the digests: a subscriber whose digest was just opened has one open, and gets no heartbeat.
    if not force:
        opened += plan_heartbeats(store, notifiers, now=now, address=address, holidays=holidays)
    return opened


def plan_heartbeats(
    store: Store,
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
    recorded once), so it is sent once even with several planners and workers.
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
        candidates = store.ledger.heartbeat_candidates(
            now, announced, address, channels=list(notifiers), after=after, limit=PLAN_BATCH
        )
        if not candidates:
            return opened
        after = candidates[-1].id or 0
        plans = [
            DigestPlan(subscriber.id or 0, split_address(subscriber.address)[0], instant_only=False)
            for subscriber in candidates
            if _heartbeat_due(subscriber, now)
        ]
        opened += len(store.ledger.open_heartbeats(plans, not_since=announced, now=now))
        if len(candidates) < PLAN_BATCH:
            return opened


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

    def __init__(self, store: Store, now: datetime, *, holidays: Collection[date], grace: timedelta) -> None:
        self.store = store
        self.now = now
        self.holidays = holidays
        self.grace = grace
        self._log: tuple[datetime, datetime, RunLog] | None = None

    def _load(self, since: datetime, until: datetime) -> RunLog:
        runs = self.store.runs.receipt_runs(since, until, overlap=RUN_OVERLAP, sources=CALENDAR_SOURCES)
        return RunLog(runs, holidays=self.holidays, grace=self.grace)

    def runs_for(self, since: datetime, until: datetime) -> RunLog:
        """A run log that covers the window (since, until]."""
        if self._log is None:
            start, end = min(since, self.now - LOOKBACK - self.SLACK), max(until, self.now)
            self._log = (start, end, self._load(start, end))
        lo, hi, log = self._log
        if lo <= since and until <= hi:
            return log
        return self._load(since, until)

    def receipt(self, claimed: ClaimedDigest, *, matched: int) -> Receipt | None:
        """The receipt of a claimed digest of ``matched`` items; None for one claimed without its times,
        or when it cannot be made (logged): a receipt never holds a digest back."""
        if claimed.created_at is None or claimed.subscriber_created_at is None:
            return None
        since, until = receipt_window(
            claimed.last_digest_at, claimed.subscriber_created_at, claimed.created_at
        )
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


class SentRecorder:
    """Records one claimed digest as sent, once, from whichever thread first sees the platform accept it.

    The ledger hands it to the adapter (:func:`core.delivery.contract.on_accepted`). An adapter with its own
    sending
    thread calls it there the moment the platform accepted the message, before that thread takes the next
    one: a worker killed at any instant leaves at most the sends then in flight unrecorded, one per send
    slot, instead of every digest that thread got through while the event loop was busy elsewhere.

    It never raises: a failed write (the database away for a moment) is kept in ``error`` and tried again
    when the ledger calls it after ``send`` returns, on the event loop. ``clock`` is the delivery pass's
    (a test's fixed time): the sent time becomes the subscriber's ``last_digest_at``, which schedules and
    scan receipts count from.
    """

    def __init__(self, store: Store, claimed: ClaimedDigest, clock: Callable[[], datetime] = utcnow) -> None:
        self.store = store
        self.claimed = claimed
        self.clock = clock
        self.recorded = False
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self, result: SendResult) -> None:
        """Record ``result`` for the claimed digest, unless that was done already."""
        with self._lock:
            if self.recorded:
                return
            try:
                self.store.outcomes.finish_sent(
                    self.claimed.digest_id,
                    platform_id=result.platform_id,
                    parts=self.claimed.parts_sent + result.parts,
                    now=self.clock(),
                    moved_to=result.moved_to,
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


async def _deliver(
    store: Store,
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
    channel, target = split_address(claimed.address)
    # Reports count every item of the digest, shown or not (all of them are marked sent with it).
    count = len(items) + (rest.count if rest else 0)
    notifier = notifiers.get(channel)
    recorder = SentRecorder(store, claimed, clock)

    async def renew(parts: int) -> None:
        # A split digest goes out at a chat's pace (a 500-item Telegram digest is ~40 messages at 1/s):
        # each accepted part renews the lease, so it never runs out mid-send and no other worker repeats it.
        if not store.claims.renew_lease(
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
        return _record_failure(store, claimed, exc, count, policy, worker, clock)
    except Exception as exc:  # an adapter bug must not stop the other deliveries, nor lose the digest
        log.exception(
            "delivery of digest %s to %s crashed",
            claimed.digest_id,
            mask_address(claimed.address),
            extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
        )
        error = DeliveryError(f"unexpected error in the {channel} adapter: {exc!r}", retryable=True)
        return _record_failure(store, claimed, error, count, policy, worker, clock)
    # Adapters that send from the event loop return right after the platform's acceptance: record it now
    # (no await in between). One that sent from its own thread has normally recorded it there already.
    recorder(result)
    if not recorder.recorded:
        raise recorder.error or RuntimeError(f"digest {claimed.digest_id} was sent but not recorded")
    if result.moved_to:
        log.info(
            "subscriber %s moved to %s",
            mask_address(claimed.address),
            result.moved_to,
            extra={"subscriber": mask_address(claimed.address), "digest": claimed.digest_id},
        )
    return DigestReport(claimed.address, count, True, digest_id=claimed.digest_id)


def _with_guides(
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


def _record_failure(
    store: Store,
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
    store.outcomes.finish_retry(
        claimed.digest_id,
        error=error,
        retry_at=now + wait,
        parts_sent=exc.delivered_parts,
        dead=dead,
        now=now,
        held=held,
    )
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


def resume(store: Store, address: str) -> Subscriber:
    """Re-activate a paused subscriber and re-queue its dead digests; pending matches go out when due."""
    address = normalise_address(address)
    subscriber = store.subscribers.get_subscriber(address)
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"no subscriber {address}")
    store.outcomes.requeue_dead(address=address)
    return store.subscribers.update_subscriber(
        subscriber.id, status=SubscriberStatus.ACTIVE, status_reason=None, retry_at=None, failures=0
    )
