"""Telling a recipient's permanent refusal from the server's: refusals are judged per claimed batch.

A platform that says no to one recipient for good (a mailbox that does not exist, a blocked bot) pauses
that subscriber. A platform that says no to *everyone* (an SMTP relay answering 550 to every RCPT, a
sender address it will not accept, a login it refuses) is the operator's problem: pausing the subscribers
one by one would silence the whole service and hide the cause. So a permanent failure is not recorded
when it happens; the delivery pass collects the batch's refusals (:class:`Refused`) and judges them
together when the batch is done (:func:`judge`), grouped by channel and by the way the platform said no
(``DeliveryError.kind``, e.g. ``rcpt 550 5.7.1``):

* **the server's**, when the failure is the sender's own setup (``DeliveryError.operator``), when an alarm
  of that kind is raised on the channel already, or when enough distinct recipients were refused that way
  in the batch: at least ``threshold`` (``PAPERTRAIL_DELIVERY_ALARM_RECIPIENTS``, or every active
  subscriber of the channel when it has fewer, but never fewer than two) and at least half of the
  channel's outcomes in the batch (:data:`MIN_SHARE`: recipients the channel accepted in the same batch
  are evidence that the refusals are the recipients'). The digests are held: back in the queue with a
  back-off (:func:`hold_wait`), the attempt not counted, so an outage never dead-letters anything; the
  alarm is raised (logged at ERROR once, shown on the status page, ``/metrics`` and ``papertrail status``);
* **the recipients'**, otherwise: each subscriber is paused, as before.

An alarm clears when a batch delivers on its channel and refuses nobody that way; ``papertrail alarms
clear`` clears one by hand.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from core.channel import DeliveryError, split_address
from core.db import Database
from core.delivery import alarm_records
from core.delivery.alarm_records import HeldDigest
from core.ledger import ledger_records
from core.models import DeliveryAlarm
from core.people.masking import mask_address, mask_recipients, mask_text

log = logging.getLogger(__name__)

# Refusals of one kind must be at least this share of the channel's outcomes in the batch (those refusals
# plus the recipients it accepted) to be the server's: a relay that refuses 45 of 50 recipients is broken
# (perhaps it relays only for its own domain); 5 bad addresses among 45 delivered are the addresses'.
MIN_SHARE = 0.5
# Held digests wait as long as the alarm has been raised, within these bounds: 1, 2, 4 … minutes into an
# outage, then every half hour. A fixed short wait would resend every held digest every minute to a server
# that refuses them all; a long one would leave the service silent long after the operator fixed it.
HOLD_WAIT_MIN = timedelta(minutes=1)
HOLD_WAIT_MAX = timedelta(minutes=30)
# Unclassified refusals (an adapter that sets no kind) group together per channel under this kind.
UNCLASSIFIED = "refused"
# delivery_alarm.kind holds at most this many characters.
KIND_LENGTH = 64


@dataclass(frozen=True, slots=True)
class Refused:
    """A claimed digest the platform refused for good (or for the sender's setup), awaiting the verdict."""

    digest_id: int
    address: str
    attempts: int
    items: int
    error: DeliveryError
    # The worker whose claim made the attempt: a pause is recorded only over that claim (None: any).
    worker: str | None = None

    @property
    def channel(self) -> str:
        """The channel of the subscriber's address."""
        return split_address(self.address)[0]

    @property
    def kind(self) -> str:
        """How the platform said no (the adapter's ``DeliveryError.kind``, cut to the column's 64)."""
        return (self.error.kind or UNCLASSIFIED)[:KIND_LENGTH]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one batch's refusals mean."""

    # (channel, kind) -> the refusals that are the server's, to hold; the alarm is raised or kept.
    held: dict[tuple[str, str], list[Refused]] = field(default_factory=dict)
    # Refusals that are the recipients': those subscribers are paused.
    paused: list[Refused] = field(default_factory=list)
    # Raised alarms the batch disproved: the channel delivered and refused nobody that way.
    cleared: list[tuple[str, str]] = field(default_factory=list)


def judge(
    refused: Sequence[Refused],
    accepted: Counter[str],
    raised: Iterable[tuple[str, str]],
    *,
    threshold: int,
    population: Callable[[str], int],
) -> Verdict:
    """Sort a batch's refusals into the server's and the recipients', and say which alarms it clears.

    ``accepted`` counts the digests each channel delivered in the batch; ``raised`` are the (channel, kind)
    alarms raised now; ``population(channel)`` counts the channel's active subscribers (asked only when a
    group is smaller than ``threshold``, so a deployment with three subscribers, all refused, is judged
    server-wide too).
    """
    raised = set(raised)
    groups: defaultdict[tuple[str, str], list[Refused]] = defaultdict(list)
    for refusal in refused:
        groups[(refusal.channel, refusal.kind)].append(refusal)
    verdict = Verdict()
    for key, group in groups.items():
        recipients = len({r.address for r in group})
        settled = key in raised or any(r.error.operator for r in group)
        if settled or _many(recipients, accepted[key[0]], threshold, population, key[0]):
            verdict.held[key] = group
        else:
            verdict.paused.extend(group)
    verdict.cleared.extend(key for key in sorted(raised) if accepted[key[0]] and key not in groups)
    return verdict


def _many(
    recipients: int, accepted: int, threshold: int, population: Callable[[str], int], channel: str
) -> bool:
    """Whether ``recipients`` refused the same way, next to ``accepted`` delivered, look server-wide."""
    if recipients < 2 or recipients < MIN_SHARE * (recipients + accepted):
        return False
    return recipients >= threshold or recipients >= population(channel)


def hold_wait(first_seen: datetime, now: datetime, retry_after: float | None = None) -> timedelta:
    """How long a held digest waits: the alarm's age within the bounds, or the platform's hint if longer."""
    wait = min(max(now - first_seen, HOLD_WAIT_MIN), HOLD_WAIT_MAX)
    return max(wait, timedelta(seconds=retry_after or 0))


def settle(
    db: Database, refused: Sequence[Refused], accepted: Counter[str], *, threshold: int, now: datetime
) -> dict[int, bool]:
    """Judge and record a batch's refusals; returns digest id -> True when its subscriber was paused.

    Costs nothing for a batch without refusals and without a raised alarm beyond one read of the
    (small) alarm table.
    """
    raised = (
        {(a.channel, a.kind) for a in alarm_records.delivery_alarms(db)} if (refused or accepted) else set()
    )
    if not refused and not raised:
        return {}
    verdict = judge(
        refused,
        accepted,
        raised,
        threshold=threshold,
        population=partial(alarm_records.count_active_on_channel, db),
    )
    for channel, kind in verdict.cleared:
        if alarm_records.clear_alarms(db, channel, [kind], now=now):
            log.warning(
                "delivery alarm on %s cleared: the channel delivered again without a %r refusal",
                channel,
                kind,
                extra={"channel": channel, "alarm": kind},
            )
    outcome: dict[int, bool] = {}
    for (channel, kind), group in verdict.held.items():
        _hold(db, channel, kind, group, now)
        outcome.update((r.digest_id, False) for r in group)
    for refusal in verdict.paused:
        _pause(db, refusal, now)
        outcome[refusal.digest_id] = True
    return outcome


def sample_error(refusal: Refused) -> str:
    """A refusal's error for logs and the status page: URL credentials and the recipients masked."""
    target = split_address(refusal.address)[1]
    return mask_text(mask_recipients(str(refusal.error), target))


def _hold(db: Database, channel: str, kind: str, group: list[Refused], now: datetime) -> None:
    sample = sample_error(group[0])
    recipients = len({r.address for r in group})
    raised, first_seen = alarm_records.raise_alarm(
        db, channel, kind, recipients=recipients, held=len(group), sample=sample, now=now
    )
    if raised:
        log.error(
            "delivery alarm on %s: %d recipients refused the same way (%s) in one batch, e.g. %s; this is "
            "the server's or the sender's setup, not the recipients': their digests are held and retried, "
            "nobody is paused. Fix the channel's settings or server; the alarm clears when it delivers "
            "again (`papertrail alarms clear %s` clears it by hand)",
            channel,
            recipients,
            kind,
            sample,
            channel,
            extra={"channel": channel, "alarm": kind},
        )
    held = [
        HeldDigest(
            r.digest_id,
            r.attempts,
            mask_text(str(r.error)),
            now + hold_wait(first_seen, now, r.error.retry_after),
            r.error.delivered_parts,
        )
        for r in group
    ]
    alarm_records.hold_digests(db, held)
    log.warning(
        "%d digests on %s held by the delivery alarm (%s), retry in %s",
        len(held),
        channel,
        kind,
        hold_wait(first_seen, now),
        extra={"channel": channel, "alarm": kind},
    )


def _pause(db: Database, refusal: Refused, now: datetime) -> None:
    # The error is stored, listed by the CLI and logged: an adapter may have quoted the address's URL in it.
    error = mask_text(str(refusal.error))
    held = (refusal.worker, refusal.attempts) if refusal.worker else None
    ledger_records.finish_refused(db, refusal.digest_id, error=error, now=now, held=held)
    log.warning(
        "delivery to %s refused, subscriber paused: %s",
        mask_address(refusal.address),
        error,
        extra={"subscriber": mask_address(refusal.address), "digest": refusal.digest_id},
    )


def raised_alarms(db: Database) -> list[DeliveryAlarm]:
    """The delivery alarms raised now (``papertrail alarms``, ``papertrail status``)."""
    return alarm_records.delivery_alarms(db)


def clear_alarms(db: Database, channel: str | None, *, now: datetime) -> list[tuple[str, str]]:
    """Clear the raised alarms (of ``channel``, or all) by hand; (channel, kind) of each cleared."""
    return alarm_records.clear_alarms(db, channel, now=now)


def refused_subscribers(
    db: Database, *, reason: str | None, since: datetime | None, limit: int
) -> tuple[int, list[str]]:
    """How many subscribers a delivery refusal paused (with ``reason`` in the reason, paused ``since``),
    and the addresses of the first ``limit``."""
    return alarm_records.refused_subscribers(db, reason=reason, since=since, limit=limit)


def resume_refused(db: Database, *, reason: str | None, since: datetime | None, now: datetime) -> int:
    """Re-activate every subscriber :func:`refused_subscribers` counts; how many (a reader's own pause
    is left alone)."""
    return alarm_records.resume_refused(db, reason=reason, since=since, now=now)
