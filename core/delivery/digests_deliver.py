"""Delivering one claimed digest: render it, send it through its channel, and record the outcome once.

:func:`deliver` is what ``core.delivery.digests.send_due_digests`` runs for each digest of a claimed batch. A
sent
digest is recorded by a :class:`SentRecorder` the moment the platform accepts it; a retryable failure is
put back with an exponential :func:`backoff` (dead-lettered after ``DeliveryPolicy.max_attempts``); a
permanent one is reported as a refusal, which the pass judges with the batch's others
(core.delivery.alarm).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from core.channel import (
    DeliveryError,
    LeaseLost,
    Notifier,
    on_accepted,
    on_part_delivered,
    split_address,
)
from core.db import Database
from core.delivery.alarm import Refused
from core.delivery.render import Renderer
from core.ledger import ledger_records
from core.ledger.ledger_records import ClaimedDigest
from core.models import utcnow
from core.people.masking import mask_address, mask_text
from core.values import DigestItem, DigestRest, Receipt, SendResult

# The pass's logger: delivery is one step of it, and operators filter its records by this name.
log = logging.getLogger("core.delivery.digests")

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
