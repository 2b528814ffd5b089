"""Sending to Slack: the one send path of both Slack adapters (the bot's ``notifiers.slack.notifier`` and the
incoming webhook's ``notifiers.slack.webhook``) and of the chat bot's own posts (``notifiers.slack.chat``:
late replies and button answers, App Home publishes), so that all of them keep Slack's rate limits (one
message per second per channel) and handle its 429 alike; the callers keep only their client and their
error tables.

:func:`send_one` posts one message: it waits for the limiter, and a 429 whose Retry-After is short is waited
out and the message posted again. :func:`send_parts` sends a digest's parts with it, minding ``skip_parts``
and ``delivered_parts``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from core.channel import DeliveryError, part_delivered
from core.retry_after import retry_after_seconds as http_retry_after
from notifiers.ratelimit import RateLimiter
from notifiers.slack.blocks import SlackPayload

log = logging.getLogger(__name__)

T = TypeVar("T")

# A Retry-After up to this long is waited out in place (and the same message posted again); a longer one
# ends the attempt with a retryable error carrying the hint: the ledger reschedules a digest, a chat reply
# is dropped (and logged).
MAX_INLINE_WAIT = 5.0
# How often one message is posted again after short rate limits before giving up for this attempt.
MAX_INLINE_RETRIES = 3


def retry_after_seconds(headers: Mapping[str, Any]) -> float | None:
    """The Retry-After header in seconds (Slack sends an integer), or None when absent or unreadable."""
    for name, value in headers.items():
        if name.lower() == "retry-after":
            return http_retry_after(str(value))
    return None


async def send_one(post: Callable[[], Awaitable[T]], *, limiter: RateLimiter, key: str) -> T:
    """Post one message to the destination ``key`` when ``limiter`` gives it a slot; return what ``post``
    returns.

    ``post`` sends it and raises :class:`DeliveryError` (translated by the caller's error table). A rate
    limit of at most :data:`MAX_INLINE_WAIT` seconds is waited out and the message posted again, at most
    :data:`MAX_INLINE_RETRIES` times; any other failure is re-raised, after holding ``key`` for as long as
    Slack asked.
    """
    retries = 0
    while True:
        await limiter.acquire(key)
        try:
            return await post()
        except DeliveryError as exc:
            if _wait_in_place(exc) and retries < MAX_INLINE_RETRIES:
                retries += 1
                log.info("Slack rate limit: waiting %.1f s to post again", exc.retry_after)
                await limiter.postpone(key, exc.retry_after or 0.0)
                continue
            if exc.retry_after is not None:
                await limiter.postpone(key, exc.retry_after)
            raise


async def send_parts(
    payloads: Sequence[SlackPayload],
    *,
    skip: int,
    post: Callable[[SlackPayload], Awaitable[str | None]],
    limiter: RateLimiter,
    key: str,
) -> str | None:
    """Post each payload after the first ``skip`` ones with :func:`send_one`, paced by ``limiter`` under
    ``key``.

    ``post`` sends one message and raises :class:`DeliveryError` (translated); a failure is re-raised with
    ``delivered_parts`` set, counting the skipped parts. Returns the platform id of the first message this
    call posted.
    """
    first: str | None = None
    for index, payload in enumerate(payloads):
        if index < skip:
            continue
        try:
            platform_id = await send_one(partial(post, payload), limiter=limiter, key=key)
        except DeliveryError as exc:
            exc.delivered_parts = index
            raise
        first = first or platform_id
        if index + 1 < len(payloads):
            # Renews the digest's lease (the ledger records the last part itself); LeaseLost stops here.
            await part_delivered(index + 1)
    return first


def _wait_in_place(exc: DeliveryError) -> bool:
    return exc.retryable and exc.retry_after is not None and exc.retry_after <= MAX_INLINE_WAIT
