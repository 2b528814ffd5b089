"""Sending digests: due by schedule (or instant), rendered per channel, recorded once, failures backed off.

Matches are marked sent in the same transaction that records the digest. A retryable failure keeps them
pending and backs the subscriber off; a permanent one pauses the subscriber and says why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.delivery import DeliveryError, Notifier, normalise_address, split_address
from core.models import Subscriber, SubscriberStatus, utcnow
from core.render import Renderer
from core.schedule import is_due, parse_schedule
from core.store import PendingMatch, Store

log = logging.getLogger(__name__)

# Retryable delivery failures back off exponentially from one minute up to six hours.
BACKOFF_BASE = timedelta(minutes=1)
BACKOFF_MAX = timedelta(hours=6)


@dataclass(frozen=True, slots=True)
class DigestReport:
    """What one delivery attempt did."""

    address: str
    items: int
    sent: bool
    error: str | None = None
    paused: bool = False


async def send_due_digests(
    store: Store,
    notifiers: Mapping[str, Notifier],
    renderer: Renderer,
    *,
    now: datetime | None = None,
    force: bool = False,
    address: str | None = None,
) -> list[DigestReport]:
    """Send every due digest, optionally for one address only.

    With ``force`` every pending match goes out now, whatever the schedule and any back-off.

    Matches are marked sent in the same transaction that records the digest. A retryable failure
    keeps them pending and backs the subscriber off; a permanent one pauses the subscriber and says why.
    """
    now = now or utcnow()
    if address is not None:
        address = normalise_address(address)
    reports: list[DigestReport] = []
    # An operator asking for --now wants an attempt now, back-off or not.
    for subscriber in store.subscribers_with_pending(now, address, ignore_backoff=force):
        assert subscriber.id is not None
        pending = store.pending_matches(subscriber.id)
        if not (force or _due(subscriber, now)):
            # Between scheduled digests only the matches of instant follows go out.
            pending = [p for p in pending if p.instant]
        if pending:
            reports.append(await _deliver(store, notifiers, renderer, subscriber, pending, now))
    return reports


def _due(subscriber: Subscriber, now: datetime) -> bool:
    try:
        schedule = parse_schedule(subscriber.schedule)
        since = subscriber.last_digest_at or subscriber.created_at
        return is_due(schedule, subscriber.timezone, now, since)
    except ValueError as exc:
        log.error("subscriber %s has an unusable schedule: %s", subscriber.address, exc)
        return False


async def _deliver(
    store: Store,
    notifiers: Mapping[str, Notifier],
    renderer: Renderer,
    subscriber: Subscriber,
    pending: list[PendingMatch],
    now: datetime,
) -> DigestReport:
    assert subscriber.id is not None
    channel, target = split_address(subscriber.address)
    notifier = notifiers.get(channel)
    if notifier is None:
        # The channel's adapter is not built in (or not configured): keep everything for later.
        error = f"no notifier for channel {channel!r} in this build; matches stay pending"
        log.warning("%s: %s", subscriber.address, error)
        return DigestReport(subscriber.address, len(pending), False, error)
    message = renderer.render(channel, [p.item for p in pending], target)
    try:
        result = await notifier.send(target, message)
    except DeliveryError as exc:
        pause = not exc.retryable
        wait = timedelta(seconds=exc.retry_after) if exc.retry_after else _backoff(subscriber.failures)
        store.record_failure(
            subscriber.id,
            str(exc),
            channel=channel,
            retry_at=None if pause else now + wait,
            pause=pause,
            now=now,
        )
        log.warning("delivery to %s failed (%s): %s", subscriber.address, "paused" if pause else "retry", exc)
        return DigestReport(subscriber.address, len(pending), False, str(exc), paused=pause)
    store.record_sent(
        subscriber.id, [p.match_id for p in pending], channel=channel, platform_id=result.platform_id, now=now
    )
    return DigestReport(subscriber.address, len(pending), True)


def _backoff(failures: int) -> timedelta:
    factor: int = 2 ** min(failures, 20)
    return min(BACKOFF_MAX, BACKOFF_BASE * factor)


def resume(store: Store, address: str) -> Subscriber:
    """Re-activate a paused subscriber; its pending matches go out with the next due digest."""
    subscriber = store.get_subscriber(normalise_address(address))
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"no subscriber {address}")
    return store.update_subscriber(
        subscriber.id, status=SubscriberStatus.ACTIVE, status_reason=None, retry_at=None, failures=0
    )
