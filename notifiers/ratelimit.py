"""Client-side rate limits for chat platforms: stay under the published limits instead of collecting 429s.

A :class:`RateLimiter` combines three rules, each optional:

* ``per_second``: an overall rate across every destination (Telegram: 30 messages/s per bot);
* ``interval``: the least time between two messages to one destination (Telegram and Slack: 1 s per chat);
* ``window``: at most N messages per destination in a window (Telegram groups: 20/minute).

Each rule is a key of a :class:`core.rate_limit.RateLimit`, which hands out evenly spaced slots: in memory
for one process, or in PostgreSQL so that every worker on the database shares the same slots (the shell
chooses, ``core.rate_limit.rate_limit_for``). Keys are ``SCOPE`` for the overall rate, ``SCOPE:DEST`` per
destination and ``SCOPE:DEST#window`` for the window, so adapters of different platforms never share one.
The overall rate is even spacing (30/s: one message every 35 ms, see HEADROOM), never a burst: a burst leaves the
event loop one request at a time and reaches the platform late enough to collide with the next second's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.rate_limit import LocalRateLimit, RateLimit

# The overall rate is paced at this share of the platform's: a request leaves on its slot but reaches the
# platform a little late now and then (event loop, database round trip, a new connection), and a late one
# followed by punctual ones packs N+1 arrivals into a platform's one-second window. 5% is 50 ms of play
# per second at any rate, and costs 5% of the throughput.
HEADROOM = 0.95
# A message that waited longer than this for the overall rate, after its destination's slot, went out late:
# the destination's next slot is then counted from the actual send, not from the slot it had reserved.
LATE = 0.01


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
    ) -> None:
        """``slots``: where the slots live (a fresh in-memory one by default); ``scope``: the keys' prefix."""
        self.per_second = per_second
        self.interval = interval
        self.window_for = window_for
        self.slots: RateLimit = slots if slots is not None else LocalRateLimit()
        self.scope = scope

    async def acquire(self, key: str) -> None:
        """Wait for a slot for the destination ``key`` under every rule, and take it."""
        destination = f"{self.scope}:{key}"
        await self.slots.reserve(destination, self.interval)
        late = 0.0
        window = self.window_for(key)
        if window is not None and window.count > 0:
            # A window of N in S seconds is a slot every S/N seconds with a burst of N: the first N go out at
            # the destination's own pace, then the window's pace holds.
            late += await self.slots.reserve(
                destination + "#window", window.seconds / window.count, burst=window.count
            )
        if self.per_second:
            late += await self.slots.reserve(self.scope, 1.0 / (self.per_second * HEADROOM))
        if late > LATE and self.interval > 0:
            # Waiting for the overall rate pushed this send past its destination slot; without this the next
            # message to the destination could follow it at once (its slot, reserved earlier, has passed).
            await self.slots.postpone(destination, self.interval)

    async def postpone(self, key: str, seconds: float) -> None:
        """The platform said "retry after": no message to ``key`` before ``seconds`` from now."""
        await self.slots.postpone(f"{self.scope}:{key}", seconds)
