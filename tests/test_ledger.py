"""The delivery ledger on SQLite and PostgreSQL: retries, back-off, dead letters, refusals, moves, resumes.

The notifier here is a scripted implementation of our own Notifier protocol (the adapters themselves are
tested against their platforms' fakes elsewhere); what is under test is the ledger around it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from core.channel import DeliveryError, Notifier
from core.db import Database
from core.delivery.digests import DeliveryPolicy, backoff, plan_digests, resume, send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import DigestState, SubscriberStatus, utcnow
from core.overview import dashboard_records
from core.papers import paper_records
from core.values import Message, PaperIn, SendResult
from tests.support.ledger import ScriptedNotifier, paper, seed

Script = Callable[[str, Message], SendResult]


def notifiers(notifier: ScriptedNotifier) -> dict[str, Notifier]:
    return {"console": notifier}


async def test_sent_once_and_never_again(db: Database) -> None:
    subscriber_id = seed(db)
    notifier = ScriptedNotifier()
    (report,) = await send_due_digests(db, notifiers(notifier), Renderer())
    assert report.sent and report.items == 2
    assert await send_due_digests(db, notifiers(notifier), Renderer(), force=True) == []
    assert len(notifier.sent) == 1 and notifier.sent[0][1].key == f"papertrail-digest-{report.digest_id}"
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert (digest.state, digest.attempts, digest.item_count) == (DigestState.SENT, 1, 2)
    assert ledger_records.pending_matches(db, subscriber_id) == []


async def test_retry_backs_off_respects_retry_after_then_dead_letters(db: Database) -> None:
    subscriber_id = seed(db)
    policy = DeliveryPolicy(max_attempts=3)
    flaky = DeliveryError("SMTP server busy", retryable=True, retry_after=900)
    notifier = ScriptedNotifier([flaky, DeliveryError("still down", retryable=True)] * 2)
    renderer = Renderer()
    start = utcnow()

    (first,) = await send_due_digests(db, notifiers(notifier), renderer, policy=policy)
    assert not first.sent and not first.dead and not first.paused
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert digest.state == DigestState.PENDING and digest.error == "SMTP server busy"
    assert digest.next_attempt_at is not None
    # The platform asked for 15 minutes, longer than the first back-off step (1 minute).
    assert digest.next_attempt_at - start >= timedelta(seconds=900)
    assert await send_due_digests(db, notifiers(notifier), renderer, policy=policy) == []  # backing off

    later = digest.next_attempt_at + timedelta(seconds=1)
    (second,) = await send_due_digests(db, notifiers(notifier), renderer, policy=policy, now=later)
    assert not second.sent and not second.dead
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert digest.attempts == 2 and digest.next_attempt_at is not None
    assert digest.next_attempt_at - utcnow() > backoff(2) - timedelta(seconds=5)

    (third,) = await send_due_digests(db, notifiers(notifier), renderer, policy=policy, force=True)
    assert third.dead and not third.sent
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert digest.state == DigestState.DEAD and digest.attempts == 3
    assert dashboard_records.status(db).dead_digests == 1
    assert len(ledger_records.pending_matches(db, subscriber_id)) == 2  # dead-lettered, not lost
    (dead, address) = ledger_records.dead_digests(db)[0]
    assert (dead.id, address) == (digest.id, "console:ada")
    # Nothing more goes out for a dead digest until an operator re-queues it.
    assert await send_due_digests(db, notifiers(notifier), renderer, policy=policy, force=True) == []

    notifier.outcomes.clear()
    assert ledger_records.requeue_dead(db) == 1
    (final,) = await send_due_digests(db, notifiers(notifier), renderer, policy=policy)
    assert final.sent and final.items == 2
    assert (
        ledger_records.pending_matches(db, subscriber_id) == []
        and dashboard_records.status(db).dead_digests == 0
    )


async def test_refusal_pauses_keeps_matches_and_resume_sends_them_with_new_ones(db: Database) -> None:
    subscriber_id = seed(db)
    notifier = ScriptedNotifier([DeliveryError("Forbidden: bot was blocked by the user", retryable=False)])
    (report,) = await send_due_digests(db, notifiers(notifier), Renderer())
    assert report.paused and not report.sent
    subscriber = subscriber_records.get_subscriber(db, "console:ada")
    assert subscriber is not None and subscriber.status == SubscriberStatus.PAUSED
    assert subscriber.status_reason == "Forbidden: bot was blocked by the user"
    assert len(ledger_records.pending_matches(db, subscriber_id)) == 2
    assert [d.state for d in ledger_records.digests_of(db, subscriber_id)] == [DigestState.FAILED]
    assert await send_due_digests(db, notifiers(notifier), Renderer(), force=True) == []  # paused

    resume(db, "console:ada")
    paper_records.save_versions(db, [paper("2611.09999")])
    match_new(db)
    (again,) = await send_due_digests(db, notifiers(notifier), Renderer())
    assert again.sent and again.items == 3


async def test_a_moved_chat_is_followed(db: Database) -> None:
    seed(db, "console:old-group")
    notifier = ScriptedNotifier([SendResult(platform_id="1", moved_to="console:new-supergroup")])
    (report,) = await send_due_digests(db, notifiers(notifier), Renderer())
    assert report.sent
    assert subscriber_records.get_subscriber(db, "console:old-group") is None
    assert subscriber_records.get_subscriber(db, "console:new-supergroup") is not None


async def test_a_retry_resumes_after_the_parts_already_delivered(db: Database) -> None:
    subscriber_id = seed(db)
    partial = DeliveryError("429 after two parts", retryable=True, retry_after=1, delivered_parts=2)
    notifier = ScriptedNotifier([partial, SendResult(platform_id="p3", parts=2)])
    await send_due_digests(db, notifiers(notifier), Renderer())
    (report,) = await send_due_digests(db, notifiers(notifier), Renderer(), force=True)
    assert report.sent
    assert notifier.sent[-1][1].skip_parts == 2
    (digest,) = ledger_records.digests_of(db, subscriber_id)
    assert digest.parts_sent == 4


async def test_an_adapter_crash_is_recorded_as_retryable_and_others_still_go_out(db: Database) -> None:
    seed(db, "console:a")
    follow(db, "console:b", "cat:cs.DC", schedule="instant")
    paper_records.save_versions(db, [paper("2611.08888")])
    match_new(db)
    notifier = ScriptedNotifier([RuntimeError("bug in adapter")])
    reports = await send_due_digests(db, notifiers(notifier), Renderer())
    assert sorted((r.address, r.sent) for r in reports) == [("console:a", False), ("console:b", True)]
    failed = next(r for r in reports if not r.sent)
    assert failed.error is not None and "unexpected error in the console adapter" in failed.error


async def test_no_notifier_for_a_channel_keeps_matches_unplanned(db: Database) -> None:
    subscriber_id = seed(db, "email:ada@example.org")
    assert await send_due_digests(db, notifiers(ScriptedNotifier()), Renderer(), force=True) == []
    assert ledger_records.digests_of(db, subscriber_id) == []
    assert len(ledger_records.pending_matches(db, subscriber_id)) == 2
    assert dashboard_records.status(db).pending_matches == 2


@pytest.mark.parametrize("instant", [True, False])
async def test_between_slots_only_instant_matches_leave(db: Database, instant: bool) -> None:
    follow(db, "console:ada", "cat:cs.DC", schedule="weekly sun 03:00", instant=instant)
    paper_records.save_versions(db, [paper("2611.00001")])
    match_new(db)
    notifier = ScriptedNotifier()
    reports = await send_due_digests(db, notifiers(notifier), Renderer())
    assert [r.items for r in reports] == ([1] if instant else [])


async def test_a_revision_says_what_changed_and_ranks_come_from_reasons(db: Database) -> None:
    follow(db, "console:ada", 'cat:cs.DC OR au:"Ada Lovelace" OR ti:rollouts', schedule="instant")
    paper_records.save_versions(db, [paper("2611.00001", 1, "Old title")])
    before = PaperIn(
        "2611.00001", 2, "New title", "An abstract.", ("Ada Lovelace",), ("cs.DC",), journal_ref="J. 1"
    )
    paper_records.save_versions(db, [before, paper("2611.00002", 1, "Asynchronous rollouts")])
    match_new(db)
    notifier = ScriptedNotifier()
    (report,) = await send_due_digests(db, notifiers(notifier), Renderer())
    assert report.sent
    items = {f"{item.arxiv_id}v{item.version}": item for item in notifier.sent[0][1].items}
    assert items["2611.00001v2"].changes == ("title", "journal-ref")
    assert items["2611.00002v1"].changes == ()
    assert "changed: title, journal-ref" in notifier.sent[0][1].text
    # Each item knows the follows that matched it (the Telegram digest's "unfollow" buttons use them).
    (stored,) = subscriber_records.follows_of(
        db,
        subscriber_records.get_subscriber(db, "console:ada").id or 0,  # type: ignore[union-attr]
    )
    assert items["2611.00002v1"].follows == ((stored.id, stored.query),)


async def test_each_batch_is_claimed_at_the_clocks_time(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pass can outlast a lease: a batch claimed late must get a lease that runs from its own claim.
    import core.delivery.digests

    seed(db, "console:a")
    follow(db, "console:b", "cat:cs.DC", schedule="instant")
    paper_records.save_versions(db, [paper("2611.07777")])
    match_new(db)
    start = utcnow()
    ticks = iter(range(1000))
    monkeypatch.setattr(core.delivery.digests, "utcnow", lambda: start + timedelta(minutes=10 * next(ticks)))
    leases: list[timedelta] = []

    class LeaseProbe(ScriptedNotifier):
        async def send(self, address: str, message: Message) -> SendResult:
            digest_id = int(message.key.rsplit("-", 1)[1])
            (digest,) = [
                d
                for s in ("console:a", "console:b")
                for d in ledger_records.digests_of(
                    db,
                    subscriber_records.get_subscriber(db, s).id or 0,  # type: ignore[union-attr]
                )
                if d.id == digest_id
            ]
            assert digest.lease_until is not None
            leases.append(digest.lease_until - start)
            return await super().send(address, message)

    reports = await send_due_digests(
        db, {"console": LeaseProbe()}, Renderer(), policy=DeliveryPolicy(batch=1)
    )
    assert [r.sent for r in reports] == [True, True]
    assert leases[1] - leases[0] >= timedelta(minutes=10)


@pytest.mark.parametrize("outcome", ["sent", "retry"])
def test_an_outcome_from_a_stale_claim_changes_nothing(db: Database, outcome: str) -> None:
    """``finish_sent`` and ``finish_retry`` from a worker whose claim another worker took over (its lease ran
    out), or from an earlier attempt, leave the new holder's digest, matches and subscriber as they were."""
    subscriber_id = seed(db)
    now = utcnow()
    lease = timedelta(minutes=5)
    assert plan_digests(db, notifiers(ScriptedNotifier()), now=now) == 1
    (first,) = ledger_records.claim_digests(db, now + timedelta(seconds=1), "one", limit=10, lease=lease)
    (second,) = ledger_records.claim_digests(db, now + 2 * lease, "two", limit=10, lease=lease)
    assert (first.digest_id, first.attempts, second.attempts) == (second.digest_id, 1, 2)
    (before,) = ledger_records.digests_of(db, subscriber_id)
    subscriber_before = subscriber_records.get_subscriber(db, "console:ada")
    for held in [("one", 1), ("two", 1), ("one", 2)]:  # the old claim, and two claims that never were
        if outcome == "sent":
            recorded = ledger_records.finish_sent(
                db, first.digest_id, platform_id="late", parts=1, now=now + 3 * lease, held=held
            )
        else:
            recorded = ledger_records.finish_retry(
                db,
                first.digest_id,
                error="timeout",
                retry_at=now + 4 * lease,
                parts_sent=1,
                dead=False,
                now=now + 3 * lease,
                held=held,
            )
        assert recorded is False
    (after,) = ledger_records.digests_of(db, subscriber_id)
    assert after.model_dump() == before.model_dump()
    assert len(ledger_records.pending_matches(db, subscriber_id)) == 2
    subscriber = subscriber_records.get_subscriber(db, "console:ada")
    assert subscriber is not None and subscriber_before is not None
    assert (subscriber.last_digest_at, subscriber.failures, subscriber.retry_at) == (
        subscriber_before.last_digest_at,
        subscriber_before.failures,
        subscriber_before.retry_at,
    )
    # The holder's own outcome is recorded.
    assert ledger_records.finish_sent(
        db, first.digest_id, platform_id="ok", parts=1, now=now, held=("two", 2)
    )
    (sent,) = ledger_records.digests_of(db, subscriber_id)
    assert (sent.state, sent.worker, sent.platform_id) == (DigestState.SENT, "two", "ok")
