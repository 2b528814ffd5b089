"""Client-side rate limits for chat platforms: stay under the published limits instead of collecting 429s.

A :class:`RateLimiter` combines three rules, each optional:

* ``per_second``: an overall rate across every destination (Telegram: 30 messages/s per bot);
* ``interval``: the least time between two messages to one destination (Telegram and Slack: 1 s per chat);
* ``window``: at most N messages per destination in a window (Telegram groups: 20/minute).

Each rule is a key of a :class:`core.delivery.rate_limit.RateLimit`, which hands out evenly spaced slots: in
memory
for one process, or in PostgreSQL so that every worker on the database shares the same slots (the shell
chooses, ``core.delivery.rate_limit.rate_limit_for``). Keys are ``SCOPE`` for the overall rate,
``SCOPE:DEST`` per
destination and ``SCOPE:DEST#window`` for the window, so adapters of different platforms never share one.
The overall rate is even spacing (30/s: a message every 35 ms, see HEADROOM), never a burst: a burst
leaves the event loop one request at a time and reaches the platform late enough to collide with the next
second's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.delivery.rate_limit import LocalRateLimit, RateLimit

# The overall rate is paced at this share of the platform's: a request leaves on its slot but reaches the
# platform a little late now and then (event loop, database round trip, a new connection), and a late one
# followed by punctual ones packs N+1 arrivals into a platform's one-second window. 5% is 50 ms of play
# per second at any rate, and costs 5% of the throughput.
HEADROOM = 0.95
# A wait longer than this for a destination's shared slot means another process wrote to it just now.
LATE = 0.01
# An overall slot woken up for later than this (beyond the planned wait) is given up, at most this often.
MAX_LATE = 0.04
MAX_RETAKES = 3
# Destinations whose next local slot is remembered (a shortcut for the parts of one digest); then reset.
MAX_REMEMBERED = 10_000


@dataclass(frozen=True, slots=True)
class Window:
    """At most ``count`` messages per destination in any ``seconds``-long window."""

    count: int
    seconds: float


class RateLimiter:
    """Awaits until a message to a destination may go out under every configured rule."""

    def __init__(
        self,
        *,
        per_second: float | None = None,
        interval: float = 0.0,
        window_for: Callable[[str], Window | None] = lambda _key: None,
        slots: RateLimit | None = None,
        scope: str = "",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``slots``: where the slots live (a fresh in-memory one by default); ``scope``: the keys' prefix;
        ``clock`` and ``sleep``: this process's own time (tests pass fakes)."""
        self.per_second = per_second
        self.interval = interval
        self.window_for = window_for
        self.slots: RateLimit = slots if slots is not None else LocalRateLimit()
        self.scope = scope
        # When this process may next write to each destination it wrote to (monotonic clock).
        self._next_local: dict[str, float] = {}
        self.clock = clock
        self.sleep = sleep

    async def acquire(self, key: str) -> None:
        """Wait for a slot for the destination ``key`` under every rule, and take it.

        The order saves round trips to a shared store: a destination's next slot is usually known here
        (this process sent its previous part), so that wait comes first and costs nothing; then the overall
        slot, the one that queues; the destination's shared slot is taken last, at the moment of sending,
        and holds up the send only when another process wrote to the destination just now.
        """
        destination = f"{self.scope}:{key}"
        ahead = self._next_local.get(destination, -math.inf) - self.clock()
        if ahead > 0:
            await self.sleep(ahead)
        window = self.window_for(key)
        if window is not None and window.count > 0:
            # A window of N in S seconds is a slot every S/N seconds with a burst of N: the first N go out at
            # the destination's own pace, then the window's pace holds.
            await self.slots.reserve(
                destination + "#window", window.seconds / window.count, burst=window.count
            )
        await self._overall()
        # A wait here means another process wrote to this destination a moment ago: the overall slot passed
        # meanwhile, so take a new one; if that is late too, the destination's next slot counts from the send.
        if (
            await self.slots.reserve(destination, self.interval) > LATE
            and await self._overall() > LATE
            and self.interval > 0
        ):
            await self.slots.postpone(destination, self.interval)
        if self.interval > 0:
            self._next_local[destination] = self.clock() + self.interval
            if len(self._next_local) > MAX_REMEMBERED:
                self._next_local.clear()  # only a shortcut: the shared slots still hold

    async def _overall(self) -> float:
        """Take an overall slot; one this process woke too late for is given up and another taken.

        A send 0.1 s behind its slot, followed by punctual ones, is the 31st message in one second: on a
        starved machine (or after a slow round trip to the database) the slot has effectively passed.
        """
        if not self.per_second:
            return 0.0
        waited = 0.0
        for _ in range(MAX_RETAKES + 1):
            asked = self.clock()
            waited = await self.slots.reserve(self.scope, 1.0 / (self.per_second * HEADROOM))
            if self.clock() - asked - waited <= MAX_LATE:
                break
        return waited

    async def postpone(self, key: str, seconds: float) -> None:
        """The platform said "retry after": no message to ``key`` before ``seconds`` from now."""
        await self.slots.postpone(f"{self.scope}:{key}", seconds)
