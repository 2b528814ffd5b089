"""Sending a digest's parts to Slack, shared by both Slack adapters (the bot's ``notifiers.slack.notifier``
and the incoming webhook's ``notifiers.slack.webhook``), so that they behave alike on ``skip_parts``, rate
limits and ``delivered_parts``; the adapters keep only their client and their error tables."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from core.channel import DeliveryError, part_delivered
from core.retry_after import retry_after_seconds as http_retry_after
from notifiers.ratelimit import RateLimiter
from notifiers.slack.blocks import SlackPayload

log = logging.getLogger(__name__)

# A Retry-After up to this long is waited out in place (and the same part sent again); a longer one ends
# the attempt with a retryable error carrying the hint, so the ledger reschedules the digest.
MAX_INLINE_WAIT = 5.0
# How often one part is retried in place after short rate limits before giving up for this attempt.
MAX_INLINE_RETRIES = 3


def retry_after_seconds(headers: Mapping[str, Any]) -> float | None:
    """The Retry-After header in seconds (Slack sends an integer), or None when absent or unreadable."""
    for name, value in headers.items():
        if name.lower() == "retry-after":
            return http_retry_after(str(value))
    return None


async def send_parts(
    payloads: Sequence[SlackPayload],
    *,
    skip: int,
    post: Callable[[SlackPayload], Awaitable[str | None]],
    limiter: RateLimiter,
    key: str,
) -> str | None:
    """Post each payload after the first ``skip`` ones, paced by ``limiter`` under ``key``.

    ``post`` sends one message and raises :class:`DeliveryError` (translated). A short rate limit is waited
    out and the same part sent again; any other failure is re-raised with ``delivered_parts`` set, counting
    the skipped parts. Returns the platform id of the first message this call posted.
    """
    first: str | None = None
    for index, payload in enumerate(payloads):
        if index < skip:
            continue
        retries = 0
        while True:
            await limiter.acquire(key)
            try:
                platform_id = await post(payload)
            except DeliveryError as exc:
                if _wait_in_place(exc) and retries < MAX_INLINE_RETRIES:
                    retries += 1
                    log.info("Slack rate limit: waiting %.1f s to resend part %d", exc.retry_after, index + 1)
                    await limiter.postpone(key, exc.retry_after or 0.0)
                    continue
                if exc.retry_after is not None:
                    await limiter.postpone(key, exc.retry_after)
                exc.delivered_parts = index
                raise
            break
        first = first or platform_id
        if index + 1 < len(payloads):
            # Renews the digest's lease (the ledger records the last part itself); LeaseLost stops here.
            await part_delivered(index + 1)
    return first


def _wait_in_place(exc: DeliveryError) -> bool:
    return exc.retryable and exc.retry_after is not None and exc.retry_after <= MAX_INLINE_WAIT
