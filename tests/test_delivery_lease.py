"""A long split digest keeps its lease part by part, a slow batch keeps the leases of all its digests, and a
worker that lost a lease stops sending and records nothing over the new claim.

The first test sends a real multi-part Telegram digest (the adapter against the fake Bot API) at a slow
chat pace with a lease shorter than the whole send, while a second worker keeps trying to claim: without
the renewal after each part, the second worker takes the digest mid-send. The ledger's clock there is a
``StepClock``: the send outlasts its lease in the ledger's time however fast or busy the machine is (with
the wall clock, a loaded machine that took longer than the lease to render and send the first part let
the second worker take the digest legitimately, and the test failed).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar

import pytest

from core.channel import DeliveryError, Notifier, part_delivered
from core.config import Settings
from core.db import Database
from core.delivery.digests import DeliveryPolicy, send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import DigestState, SubscriberStatus, utcnow
from core.papers import paper_records
from core.values import Message, PaperIn, SendResult
from notifiers.telegram.notifier import TelegramNotifier
from tests.fakes.telegram_api import fake_telegram
from tests.support.ledger import seed

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

TOKEN = "123456:TEST-secret-token"
LEASE = timedelta(seconds=1)


class StepClock:
    """Stands in for ``utcnow`` in core.delivery.digests: each reading (the claim, each renewal, the finish)
    moves
    it on by ``step``, so time in the ledger passes with the send's steps, not with the machine's speed."""

    def __init__(self, start: datetime, step: timedelta) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


async def test_a_long_telegram_digest_renews_its_lease_part_by_part(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = follow(db, "telegram:777", "cat:cs.DC", schedule="instant")
    subscriber_id = result.subscriber.id or 0
    abstract = "A long abstract about asynchronous rollouts. " * 20  # shortened in the digest, still long
    paper_records.save_versions(
        db,
        [
            PaperIn(f"2611.{n:05d}", 1, "Asynchronous rollouts", abstract, ("Ada",), ("cs.DC",))
            for n in range(50)
        ],
    )
    assert match_new(db) == 50
    # Each renewal is 0.4 leases after the one before: three parts outlast the claim's lease.
    start = utcnow()
    clock = StepClock(start, LEASE * 0.4)
    monkeypatch.setattr("core.delivery.digests.utcnow", clock)
    with fake_telegram(TOKEN) as api:
        # 0.3 s between parts, so that the second worker below looks between any two of them.
        settings = Settings(telegram_token=TOKEN, telegram_api_url=api.base_url, telegram_chat_interval=0.3)
        notifier = TelegramNotifier(settings.telegram())
        sending = asyncio.create_task(
            send_due_digests(
                db, {"telegram": notifier}, Renderer(), policy=DeliveryPolicy(lease=LEASE), worker="one"
            )
        )
        taken = []
        while not sending.done():
            await asyncio.sleep(0.2)
            # Another worker looks for digests whose lease ran out, all along the send, at the ledger's time.
            taken += ledger_records.claim_digests(db, clock.now, "two", limit=10, lease=timedelta(minutes=5))
        (report,) = await sending
        await notifier.aclose()
    parts = len(api.sent())
    assert parts >= 4, "the digest must take several parts for this test to mean anything"
    assert clock.now > start + 2 * LEASE, "in the ledger's time the send must outlast the claim's lease"
    assert taken == []
    assert report.sent
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert (digest.state, digest.worker, digest.attempts, digest.parts_sent) == (
        DigestState.SENT,
        "one",
        1,
        parts,
    )


@dataclass
class PartsNotifier:
    """Sends ``parts`` parts, reporting each to the ledger; with ``store``, another worker takes the digest
    while the second part is on its way (what it claimed lands in ``between``)."""

    channel: ClassVar[str] = "console"
    max_length: ClassVar[int | None] = None
    parts: int = 4
    between: list[object] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    db: Database | None = None

    async def send(self, address: str, message: Message) -> SendResult:
        for index in range(message.skip_parts, self.parts):
            self.sent.append(index)
            if index == 1 and self.db is not None:
                # While this worker is slow, its lease runs out and another worker takes the digest.
                self.between += ledger_records.claim_digests(
                    self.db, utcnow() + timedelta(hours=1), "thief", limit=10, lease=timedelta(hours=2)
                )
            if index + 1 < self.parts:
                await part_delivered(index + 1)
        return SendResult(platform_id="ok", parts=self.parts)

    async def aclose(self) -> None:
        pass


class Died(BaseException):
    """A process dying mid-send (not an Exception: the ledger must not get to record anything)."""


async def test_progress_is_recorded_with_each_renewal(db: Database) -> None:
    """A crash mid-send leaves the parts already accepted recorded: the next claim resumes after them."""
    subscriber_id = seed(db, papers=3)
    seen: list[int] = []

    class Crashing(PartsNotifier):
        async def send(self, address: str, message: Message) -> SendResult:
            for index in range(self.parts):
                if index == 2:
                    (digest,) = ledger_records.digests_of(db, subscriber_id)
                    seen.append(digest.parts_sent)
                    raise Died  # the process dies: nothing records the attempt
                await part_delivered(index + 1)
            raise AssertionError("unreachable")

    notifiers: dict[str, Notifier] = {"console": Crashing()}
    with pytest.raises(Died):
        await send_due_digests(db, notifiers, Renderer(), worker="one")
    assert seen == [2]


async def test_a_worker_that_lost_its_lease_stops_sending(db: Database) -> None:
    subscriber_id = seed(db, papers=3)
    notifier = PartsNotifier(parts=4, db=db)
    (report,) = await send_due_digests(db, {"console": notifier}, Renderer(), worker="one")
    assert len(notifier.between) == 1, "the thief claimed the digest during the second part"
    # The first part was recorded by its renewal, the second was on its way; nothing after the failed one.
    assert notifier.sent == [0, 1]
    assert not report.sent and report.error is not None and "no longer held by one" in report.error
    # The digest is the thief's now: this worker recorded nothing over its claim.
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert (digest.state, digest.worker, digest.attempts, digest.parts_sent) == (
        DigestState.SENDING,
        "thief",
        2,
        1,
    )


@pytest.mark.parametrize("retryable", [True, False])
async def test_a_failure_after_the_lease_was_lost_leaves_the_new_claim_alone(
    db: Database, retryable: bool
) -> None:
    """A slow worker whose digest another worker took meanwhile records no failure over the new claim:
    putting it back in the queue (or pausing its subscriber) would let a third worker send it again."""
    subscriber_id = seed(db, papers=3)

    class FailsLate(PartsNotifier):
        async def send(self, address: str, message: Message) -> SendResult:
            assert self.db is not None
            self.between += ledger_records.claim_digests(
                self.db, utcnow() + timedelta(hours=1), "thief", limit=10, lease=timedelta(hours=2)
            )
            raise DeliveryError("the platform timed out", retryable=retryable)

    (report,) = await send_due_digests(db, {"console": FailsLate(db=db)}, Renderer(), worker="one")
    assert not report.sent
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert (digest.state, digest.worker, digest.attempts) == (DigestState.SENDING, "thief", 2)
    subscriber = subscriber_records.get_subscriber(db, "console:ada")
    assert subscriber is not None and subscriber.status == SubscriberStatus.ACTIVE


class LedgerClock:
    """The delivery pass's clock (``utcnow`` in core.delivery.digests), moved on only by the test: time in the
    ledger passes with the sends, whatever the machine's speed."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@dataclass
class SlowSerialNotifier:
    """Sends one digest at a time, like the email notifier's one SMTP session, each taking ``per_send`` of the
    lease in the ledger's time; another worker looks for digests whose lease ran out before and after each
    send (what it took lands in ``taken``).

    Each send also waits ``wait`` seconds of real time, longer than the batch's renewal interval (lease / 3):
    the event loop runs timers in deadline order, so a renewal due within that wait runs, and reads the
    ledger's clock, before this send resumes. No assertion depends on the machine's speed."""

    channel: ClassVar[str] = "console"
    max_length: ClassVar[int | None] = None
    db: Database
    clock: LedgerClock
    per_send: timedelta
    wait: float
    taken: list[object] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    session: asyncio.Lock = field(default_factory=asyncio.Lock)

    def steal(self) -> None:
        self.taken += ledger_records.claim_digests(
            self.db, self.clock.now, "two", limit=10, lease=timedelta(hours=1)
        )

    async def send(self, address: str, message: Message) -> SendResult:
        async with self.session:
            self.clock.now += self.per_send
            self.steal()
            await asyncio.sleep(self.wait)
            self.steal()
            self.sent.append(f"{self.channel}:{address}")
            return SendResult(platform_id=f"<{address}>")

    async def aclose(self) -> None:
        pass


async def test_a_batch_slower_than_its_lease_stays_with_its_live_worker(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four digests claimed in one batch go out one after another at 0.8 lease each (3.2 leases in all):
    the worker renews the lease of every digest it still holds every lease / 3, so another worker never
    takes one over while the first is alive and sending. Before, the claim's lease ran out mid-batch and the
    second worker sent the waiting digests too."""
    lease = timedelta(seconds=3)
    addresses = [f"console:r{n}" for n in range(4)]
    for address in addresses:
        follow(db, address, "cat:cs.DC", schedule="instant")
    paper_records.save_versions(
        db, [PaperIn("2611.00001", 1, "Rollouts", "An abstract.", ("Ada",), ("cs.DC",))]
    )
    assert match_new(db) == 1
    start = utcnow()
    clock = LedgerClock(start)
    monkeypatch.setattr("core.delivery.digests.utcnow", clock)
    notifier = SlowSerialNotifier(db, clock, per_send=lease * 0.8, wait=lease.total_seconds() / 2)
    reports = await send_due_digests(
        db, {"console": notifier}, Renderer(), policy=DeliveryPolicy(lease=lease, batch=50), worker="one"
    )
    assert clock.now - start > 3 * lease, "in the ledger's time the batch must outlast its lease"
    assert notifier.taken == []
    assert sorted(notifier.sent) == addresses
    assert [r.sent for r in reports] == [True] * 4
    for address in addresses:
        subscriber = subscriber_records.get_subscriber(db, address)
        assert subscriber is not None
        (digest,) = ledger_records.digests_of(db, subscriber.id or 0)
        assert (digest.state, digest.worker, digest.attempts) == (DigestState.SENT, "one", 1)


async def test_a_send_accepted_after_the_lease_was_lost_leaves_the_new_claim_alone(db: Database) -> None:
    """A worker that stalled past its lease, whose digest another worker took meanwhile, and whose send the
    platform then accepted, records nothing over the new claim: the new holder records its own attempt.
    It reports the delivery as late (a possible duplicate), not as sent."""
    subscriber_id = seed(db, papers=3)

    class AcceptedLate(PartsNotifier):
        async def send(self, address: str, message: Message) -> SendResult:
            assert self.db is not None
            self.between += ledger_records.claim_digests(
                self.db, utcnow() + timedelta(hours=1), "thief", limit=10, lease=timedelta(hours=2)
            )
            return SendResult(platform_id="late", parts=1)

    notifier = AcceptedLate(db=db)
    (report,) = await send_due_digests(db, {"console": notifier}, Renderer(), worker="one")
    assert len(notifier.between) == 1, "the thief claimed the digest during the send"
    assert not report.sent and report.late
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert (digest.state, digest.worker, digest.attempts, digest.platform_id) == (
        DigestState.SENDING,
        "thief",
        2,
        None,
    )
    assert len(ledger_records.pending_matches(db, subscriber_id)) == 3
