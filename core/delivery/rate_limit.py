"""Send slots: one rate limit that every process sending through the same database shares.

The contract is one call, :meth:`RateLimit.reserve`: take the next free slot of a key (slots are
``interval`` seconds apart) and wait until it begins. Each caller gets a distinct slot, so callers of one
key are spaced evenly however many tasks or processes they are. This is GCRA (the generic cell rate
algorithm): a key stores only the time its next slot begins, and a reservation moves it on by one interval.
``burst`` lets that many slots begin at once after a quiet spell (Telegram's 20 messages per minute per
group may go out at the per-chat pace, then one every 3 s), like a token bucket of that size.

Two implementations:

* :class:`LocalRateLimit` keeps the slots in memory: one process (SQLite, ``papertrail run``, tests).
* :class:`PostgresRateLimit` keeps them in the ``rate_slot`` table, one atomic upsert per reservation:
  N ``papertrail worker`` processes then hold a platform's limits together, without dividing settings.

:func:`rate_limit_for` picks one from the database. The notifiers (``notifiers/ratelimit.py``) combine
keys into a platform's rules; core knows no platform.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

# Reservations between two sweeps of keys whose slots lie long in the past (one row or entry per chat).
PRUNE_EVERY = 5_000
# A key whose next slot began this long ago holds no information any more: any new caller starts at "now".
STALE_AFTER = timedelta(hours=1)


class RateLimit(Protocol):
    """Hands out evenly spaced send slots per key."""

    async def reserve(self, key: str, interval: float, *, burst: int = 1) -> float:
        """Take the next free slot of ``key`` and wait until it begins; returns the seconds waited.

        Slots of one key begin ``interval`` seconds apart; after a quiet spell ``burst`` of them may begin
        at once. With an ``interval`` of 0 only a :meth:`postpone` makes the caller wait.
        """
        ...

    async def postpone(self, key: str, seconds: float) -> None:
        """No slot of ``key`` begins before ``seconds`` from now (a platform's "retry after")."""
        ...


class LocalRateLimit:
    """Slots in this process's memory: exact for one process, blind to any other.

    A reservation reads and moves the key's next slot with no ``await`` in between, so two tasks of one
    event loop can never get the same slot; callers are served in the order they arrive.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.clock = clock
        self.sleep = sleep
        self._next: dict[str, float] = {}
        self._since_prune = 0

    async def reserve(self, key: str, interval: float, *, burst: int = 1) -> float:
        """See :meth:`RateLimit.reserve`."""
        interval = max(interval, 0.0)
        now = self.clock()
        tolerance = (max(burst, 1) - 1) * interval
        slot = max(self._next.get(key, -math.inf), now - tolerance)
        self._next[key] = slot + interval
        self._prune(now)
        wait = slot - now
        if wait > 0:
            await self.sleep(wait)
            return wait
        return 0.0

    async def postpone(self, key: str, seconds: float) -> None:
        """See :meth:`RateLimit.postpone`."""
        self._next[key] = max(self._next.get(key, -math.inf), self.clock() + seconds)

    def _prune(self, now: float) -> None:
        self._since_prune += 1
        if self._since_prune < PRUNE_EVERY:
            return
        self._since_prune = 0
        cutoff = now - STALE_AFTER.total_seconds()
        for key in [key for key, at in self._next.items() if at < cutoff]:
            del self._next[key]


# One statement, atomic under concurrency: the row lock of ON CONFLICT serialises the callers of one key,
# and each moves next_at on by one interval, so each gets its own slot. The slot is next_at - step; the
# answer is how far that lies ahead of the database's clock, so the hosts' clocks never matter.
# clock_timestamp(), not now(): now() is the transaction's start, and a pooled connection may be reused.
_RESERVE = sa.text(
    """
    INSERT INTO rate_slot AS s (key, next_at) VALUES (:key, clock_timestamp() - :tolerance + :step)
    ON CONFLICT (key) DO UPDATE SET next_at = greatest(s.next_at, clock_timestamp() - :tolerance) + :step
    RETURNING extract(epoch FROM s.next_at - :step - clock_timestamp())::float8
    """
)
_POSTPONE = sa.text(
    """
    INSERT INTO rate_slot AS s (key, next_at) VALUES (:key, clock_timestamp() + :seconds)
    ON CONFLICT (key) DO UPDATE SET next_at = greatest(s.next_at, excluded.next_at)
    """
)
_PRUNE = sa.text("DELETE FROM rate_slot WHERE next_at < clock_timestamp() - :stale")


class PostgresRateLimit:
    """Slots in the ``rate_slot`` table: shared by every process on the database.

    One short autocommit statement per reservation, in a thread: on the event loop, a burst of reservations
    (every task of a worker starting at once) would hold up the sends whose slots have come, and a send
    that leaves late packs the platform's next second. When the
    database cannot answer, the reservation falls back to this process's own :class:`LocalRateLimit` and
    logs it: a send is then paced for this process alone, rather than failing the digest.
    """

    def __init__(self, engine: Engine, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError(f"PostgresRateLimit needs PostgreSQL, not {engine.dialect.name}")
        # An engine of its own: the store's pings every connection it lends (a second round trip per
        # reservation) and its pool would be shared with the ledger's transactions. Each statement commits on
        # its own: holding a key's row lock any longer would stall every caller of that key. A connection
        # that broke fails one reservation (paced locally, see above) and is replaced.
        self.engine = sa.create_engine(engine.url, pool_pre_ping=False).execution_options(
            isolation_level="AUTOCOMMIT"
        )
        self.sleep = sleep
        self.fallback = LocalRateLimit(sleep=sleep)
        self._since_prune = 0

    async def reserve(self, key: str, interval: float, *, burst: int = 1) -> float:
        """See :meth:`RateLimit.reserve`."""
        interval = max(interval, 0.0)
        params = {
            "key": key,
            "step": timedelta(seconds=interval),
            "tolerance": timedelta(seconds=(max(burst, 1) - 1) * interval),
        }
        try:
            wait = await asyncio.to_thread(self._reserve, params)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("shared rate limit unavailable (%s); pacing %s in this process only", exc, key)
            return await self.fallback.reserve(key, interval, burst=burst)
        if wait > 0:
            await self.sleep(wait)
            return wait
        return 0.0

    async def postpone(self, key: str, seconds: float) -> None:
        """See :meth:`RateLimit.postpone`."""
        try:
            await asyncio.to_thread(self._postpone, key, seconds)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("shared rate limit unavailable (%s); postponing %s in this process only", exc, key)
            await self.fallback.postpone(key, seconds)

    def close(self) -> None:
        """Close this limiter's database connections."""
        self.engine.dispose()

    def _reserve(self, params: dict[str, object]) -> float:
        with self.engine.connect() as conn:
            wait = float(conn.execute(_RESERVE, params).scalar_one())
            self._prune(conn)
        return wait

    def _postpone(self, key: str, seconds: float) -> None:
        with self.engine.connect() as conn:
            conn.execute(_POSTPONE, {"key": key, "seconds": timedelta(seconds=max(seconds, 0.0))})

    def _prune(self, conn: sa.Connection) -> None:
        # One row per chat ever written to: drop those whose slots are long past, now and then.
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
            conn.execute(_PRUNE, {"stale": STALE_AFTER})


def rate_limit_for(engine: Engine, *, shared: bool = True) -> RateLimit:
    """The limiter for a process on ``engine``: shared through the database on PostgreSQL, else local.

    ``shared=False`` (``PAPERTRAIL_RATE_LIMIT=local``) keeps the slots in memory even on PostgreSQL: each
    process then keeps the limits on its own, as before the shared limiter existed.
    """
    if shared and engine.dialect.name == "postgresql":
        return PostgresRateLimit(engine)
    return LocalRateLimit()
