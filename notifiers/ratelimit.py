"""Client-side rate limits for chat platforms: stay under the published limits instead of collecting 429s.

A :class:`RateLimiter` combines three rules, each optional:

* ``per_second``: an overall rate across every destination (Telegram: 30 messages/s per bot);
* ``interval``: the least time between two messages to one destination (Telegram and Slack: 1 s per chat);
* ``window``: at most N messages per destination within a sliding window (Telegram groups: 20/minute).

The limiter is per process and per event loop. Waiting callers are served in arrival order per destination,
and the overall rate is a sliding one-second window, so a burst never exceeds the limit in any second.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Window:
    """At most ``count`` messages per destination in any ``seconds``-long window."""

    count: int
    seconds: float


class RateLimiter:
    """Awaits until a message to ``key`` may go out under every configured rule."""

    def __init__(
        self,
        *,
        per_second: float | None = None,
        interval: float = 0.0,
        window_for: Callable[[str], Window | None] = lambda _key: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_second = per_second
        self.interval = interval
        self.window_for = window_for
        self.clock = clock
        self._overall: deque[float] = deque()
        self._last: dict[str, float] = {}
        self._recent: defaultdict[str, deque[float]] = defaultdict(deque)
        self._key_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._overall_lock = asyncio.Lock()

    async def acquire(self, key: str) -> None:
        """Wait for a slot for ``key`` and take it."""
        async with self._key_locks[key]:
            await self._wait_for_key(key)
            await self._wait_overall()
            now = self.clock()
            self._last[key] = now
            if self.window_for(key) is not None:
                self._recent[key].append(now)

    def postpone(self, key: str, seconds: float) -> None:
        """The platform said "retry after": no message to ``key`` before ``seconds`` from now."""
        self._last[key] = max(self._last.get(key, 0.0), self.clock() + seconds - self.interval)

    async def _wait_for_key(self, key: str) -> None:
        while True:
            now = self.clock()
            wait = self._last.get(key, -1e18) + self.interval - now
            window = self.window_for(key)
            if window is not None:
                recent = self._recent[key]
                while recent and recent[0] <= now - window.seconds:
                    recent.popleft()
                if len(recent) >= window.count:
                    wait = max(wait, recent[0] + window.seconds - now)
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    async def _wait_overall(self) -> None:
        if not self.per_second:
            return
        # The overall budget is whole messages per second: 30/s means 30 in any one-second window.
        budget = max(1, int(self.per_second))
        span = budget / self.per_second
        async with self._overall_lock:
            while True:
                now = self.clock()
                while self._overall and self._overall[0] <= now - span:
                    self._overall.popleft()
                if len(self._overall) < budget:
                    self._overall.append(now)
                    return
                await asyncio.sleep(self._overall[0] + span - now)
