"""Send slots: the in-memory limiter, the PostgreSQL one shared by several connections, and the Telegram
adapter on both against a fake that enforces Telegram's limits.

Two ``PostgresRateLimit`` instances on two engines stand for two worker processes: they share nothing but
the database (``bench/shared_limit.py`` runs real ``papertrail worker`` processes).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from core.config import Settings
from core.db import make_engine
from core.delivery.rate_limit import LocalRateLimit, PostgresRateLimit, RateLimit, rate_limit_for
from notifiers.ratelimit import HEADROOM, RateLimiter, Window
from notifiers.telegram.notifier import TelegramNotifier
from tests.fakes.telegram_api import fake_telegram
from tests.schema_template import apply_template
from tests.support.telegram_digests import TOKEN, digest, two_items

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


class FakeTime:
    """A clock that moves only when told (or, with ``advance``, by what callers sleep): exact waits."""

    def __init__(self, *, advance: bool = False) -> None:
        self.now = 0.0
        self.advance = advance
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.advance:
            self.now += seconds


@pytest.fixture
def pg_engines(postgres_url: str) -> Iterator[list[sa.Engine]]:
    """Three engines (three connection pools) on one migrated PostgreSQL schema."""
    engines = [make_engine(postgres_url) for _ in range(3)]
    apply_template(engines[0])
    yield engines
    for engine in engines:
        engine.dispose()


# -- in memory --------------------------------------------------------------------------------------------


async def test_local_slots_are_evenly_spaced_in_arrival_order() -> None:
    fake = FakeTime()
    limit = LocalRateLimit(clock=fake.clock, sleep=fake.sleep)
    waits = await asyncio.gather(*(limit.reserve("k", 0.25) for _ in range(5)))
    assert waits == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert await limit.reserve("other", 0.25) == 0.0  # keys are independent


async def test_local_burst_then_pace() -> None:
    """A window of 20 per 60 s: 20 slots at once after a quiet spell, then one every 3 s."""
    fake = FakeTime()
    limit = LocalRateLimit(clock=fake.clock, sleep=fake.sleep)
    waits = [await limit.reserve("group", 3.0, burst=20) for _ in range(22)]
    assert waits[:20] == [0.0] * 20
    assert waits[20:] == pytest.approx([3.0, 6.0])


async def test_local_postpone_holds_even_without_an_interval() -> None:
    fake = FakeTime()
    limit = LocalRateLimit(clock=fake.clock, sleep=fake.sleep)
    await limit.postpone("chat", 5.0)
    assert await limit.reserve("chat", 0.0) == 5.0
    assert await limit.reserve("chat", 1.0) == 5.0  # the postponed slot itself, then one interval on
    assert await limit.reserve("chat", 1.0) == 6.0


async def test_a_chat_slot_is_taken_when_the_message_leaves() -> None:
    """A message that waited for the overall rate takes its chat's slot then: the next one is 1 s later."""
    fake = FakeTime(advance=True)
    slots = LocalRateLimit(clock=fake.clock, sleep=fake.sleep)
    limiter = RateLimiter(
        per_second=1.0, interval=1.0, slots=slots, scope="t", clock=fake.clock, sleep=fake.sleep
    )  # overall slots 1/0.95 s apart
    await limiter.acquire("a")  # overall slot 0
    await limiter.acquire("b")  # chat b's slot at 0, the overall one at 1.05: sent 1.05 s late
    assert fake.now == pytest.approx(1 / HEADROOM)
    # Chat b's slot is taken when it is sent, not before its wait for the overall rate.
    assert await slots.reserve("t:b", 1.0) == pytest.approx(1.0)


async def test_window_rule_keeps_its_key_apart() -> None:
    fake = FakeTime()
    slots = LocalRateLimit(clock=fake.clock, sleep=fake.sleep)
    limiter = RateLimiter(
        window_for=lambda key: Window(2, 10.0) if key.startswith("-") else None, slots=slots
    )
    for _ in range(3):
        await limiter.acquire("-100")
    assert fake.slept == [5.0]


@pytest.mark.db
def test_sqlite_gets_the_local_limiter(tmp_path: object) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(rate_limit_for(engine), LocalRateLimit)
    engine.dispose()


# -- PostgreSQL ---------------------------------------------------------------------------------------------


def test_postgres_gives_concurrent_reservers_distinct_slots(pg_engines: list[sa.Engine]) -> None:
    """12 threads on three connection pools reserve 10 one-second slots each at once: 120 distinct slots."""
    slots: list[float] = []
    lock = threading.Lock()

    async def recorded(seconds: float) -> None:
        pass  # no real waiting: the slot is what matters here

    def reserve_many(engine: sa.Engine) -> None:
        limit = PostgresRateLimit(engine, sleep=recorded)
        for _ in range(10):
            asked = time.monotonic()
            wait = asyncio.run(limit.reserve("telegram", 1.0))
            with lock:
                slots.append(asked + wait)

    threads = [threading.Thread(target=reserve_many, args=(pg_engines[n % 3],)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert isinstance(rate_limit_for(pg_engines[0]), PostgresRateLimit)
    first = min(slots)
    # Each slot is its own second (the offsets carry only the threads' scheduling jitter).
    assert sorted(round(slot - first) for slot in slots) == list(range(120))


async def test_two_limiters_on_postgres_space_one_key_together(pg_engines: list[sa.Engine]) -> None:
    """Two 'processes' sending 8 messages each to one key at 10/s: 16 sends 0.1 s apart in all."""
    limits = [PostgresRateLimit(engine) for engine in pg_engines[:2]]
    times: list[float] = []

    async def sender(limit: RateLimit) -> None:
        for _ in range(8):
            await limit.reserve("slack:C1", 0.1)
            times.append(time.monotonic())

    await asyncio.gather(*(sender(limit) for limit in limits))
    times.sort()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) > 0.03, gaps  # 0.1 s apart, less scheduling jitter on a busy machine (0.058 seen)
    assert times[-1] - times[0] == pytest.approx(1.5, abs=0.3)


async def test_postpone_is_shared(pg_engines: list[sa.Engine]) -> None:
    one, other = PostgresRateLimit(pg_engines[0]), PostgresRateLimit(pg_engines[1])
    await one.postpone("telegram:777", 0.5)
    started = time.monotonic()
    await other.reserve("telegram:777", 1.0)
    assert time.monotonic() - started >= 0.4


async def test_database_failure_falls_back_to_local_pacing(pg_engines: list[sa.Engine]) -> None:
    limit = PostgresRateLimit(pg_engines[0])
    with pg_engines[0].begin() as conn:
        conn.execute(sa.text("DROP TABLE rate_slot"))
    assert await limit.reserve("k", 0.05) == 0.0
    assert await limit.reserve("k", 0.05) > 0.0  # paced by the fallback, not failing the send


# -- the Telegram adapter on shared slots -------------------------------------------------------------------


def _settings(api_url: str) -> Settings:
    return Settings(
        telegram_token=TOKEN,
        telegram_api_url=api_url,
        telegram_max_per_second=4,
        telegram_chat_interval=1.0,
    )


async def _two_workers_send(api_url: str, slots: list[RateLimit]) -> list[object]:
    """Two adapters (two 'workers'), each sending a digest to 5 chats of its own, twice; the outcomes."""
    adapters = [TelegramNotifier(_settings(api_url).telegram(), slots=s) for s in slots]
    message = digest(two_items())

    async def twice(adapter: TelegramNotifier, chat: str) -> None:
        for _ in range(2):
            await adapter.send(chat, message)

    try:
        return await asyncio.gather(
            *(twice(adapter, str(1000 + 10 * n + c)) for n, adapter in enumerate(adapters) for c in range(5)),
            return_exceptions=True,
        )
    finally:
        for adapter in adapters:
            await adapter.aclose()


async def test_two_telegram_workers_on_postgres_keep_the_overall_rate(pg_engines: list[sa.Engine]) -> None:
    with fake_telegram(TOKEN, max_per_second=4, chat_interval=1.0) as api:
        outcomes = await _two_workers_send(api.base_url, [PostgresRateLimit(e) for e in pg_engines[:2]])
    assert outcomes == [None] * 10
    assert api.too_many == 0
    assert len(api.sent()) == 20


@pytest.mark.net
async def test_two_telegram_workers_with_local_limits_collect_429s() -> None:
    """The control: each worker alone keeps 4/s, together they send 8/s and the fake answers 429."""
    with fake_telegram(TOKEN, max_per_second=4, chat_interval=1.0) as api:
        await _two_workers_send(api.base_url, [LocalRateLimit(), LocalRateLimit()])
    assert api.too_many > 0
