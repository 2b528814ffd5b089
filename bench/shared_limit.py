"""Benchmark: three ``papertrail worker`` processes holding Telegram's limits together.

Seeds ``--digests`` due one-message Telegram digests, one per chat, on a fresh PostgreSQL schema, starts
the fake Bot API server (tests/fakes/telegram_api.py: 30 messages/s in any one-second window, 1/s per chat,
429 with retry_after beyond) and runs ``--workers`` ``papertrail worker --until-idle`` processes against
both. Reported: the messages/s the fake accepted (first to last accepted message) as a share of 30/s
(target >= 90%), the 429s it answered (target 0), and digests left unsent.

Run twice: with the shared limiter (``PAPERTRAIL_RATE_LIMIT=shared``, the default on PostgreSQL: every
worker reserves its slots in the ``rate_slot`` table), then with ``PAPERTRAIL_RATE_LIMIT=local`` (each
worker keeps 30/s on its own, as before the shared limiter: N workers send N x 30/s).

``--adapters`` adds the same load through processes that run only the Telegram adapter on the same
limiter (no ledger): what the limiter achieves when the workers' own costs (a commit per digest on the
event loop) are out of the way.

Needs PostgreSQL at ``PAPERTRAIL_TEST_POSTGRES_URL`` (default the local ``test`` database).

Usage: python bench/shared_limit.py [--digests 900] [--workers 3] [--only shared,local] [--adapters]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from core.db import make_engine  # noqa: E402
from core.db_migrate import migrate  # noqa: E402
from core.reasons import CATEGORY, Reason  # noqa: E402
from tests.conftest import POSTGRES_URL  # noqa: E402
from tests.fakes.telegram_api import Call, fake_telegram  # noqa: E402
from tests.support.due_digests import seed_due_digests  # noqa: E402

TOKEN = "123456:BENCH-token"
QS = (0.01, 0.1, 0.5, 0.9, 0.99)
LIMIT = 30


def _schema_url(schema: str) -> str:
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"


def seed(engine: sa.Engine, digests: int) -> None:
    """``digests`` instant Telegram subscribers (chats 1000, 1001 …), each with one matched paper."""
    seed_due_digests(engine, digests, address=lambda n: f"telegram:{1000 + n}", instant_matches=True)


def _details(calls: list[Call], accepted: list[float]) -> None:
    """Arrival gaps, when the 429s came and messages accepted per second (``BENCH_VERBOSE=1``)."""
    sends = [c for c in calls if c.method == "sendMessage"]
    t0 = sends[0].at
    gaps = sorted(b.at - a.at for a, b in itertools.pairwise(sends))
    print("  gaps in ms, p1 p10 p50 p90 p99:", [round(gaps[int(q * (len(gaps) - 1))] * 1e3, 1) for q in QS])
    print("  429s at s:", [round(c.at - t0, 2) for c in sends if c.status == 429][:40])
    per_second = Counter(int(a - t0) for a in accepted)
    print("  accepted per second:", [per_second[s] for s in range(max(per_second) + 1)])


def run(mode: str, digests: int, workers: int) -> None:
    """One run on a fresh schema with ``PAPERTRAIL_RATE_LIMIT=mode``; prints its line."""
    admin = sa.create_engine(POSTGRES_URL)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        engine = make_engine(_schema_url(schema))
        migrate(engine)
        seed(engine, digests)
        engine.dispose()
        with fake_telegram(TOKEN, max_per_second=LIMIT, chat_interval=1.0) as api:
            env = {
                **os.environ,
                "PAPERTRAIL_DATABASE_URL": _schema_url(schema),
                "PAPERTRAIL_CONFIG": os.path.join(tempfile.gettempdir(), "papertrail-bench-none.toml"),
                "PAPERTRAIL_TELEGRAM_TOKEN": TOKEN,
                "PAPERTRAIL_TELEGRAM_API_URL": api.base_url,
                "PAPERTRAIL_RATE_LIMIT": mode,
                "PAPERTRAIL_LOG_LEVEL": "WARNING",
            }
            start = time.perf_counter()
            procs = [
                subprocess.Popen(
                    [sys.executable, "-m", "papertrail", "worker", "--until-idle", "--name", f"w{n}"],
                    env=env,
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for n in range(workers)
            ]
            for proc in procs:
                proc.wait(timeout=1800)
            wall = time.perf_counter() - start
            accepted = [c.at for c in api.calls if c.method == "sendMessage" and c.status == 200]
            too_many = api.too_many
            if os.environ.get("BENCH_VERBOSE"):
                _details(api.calls, accepted)
        with admin.connect() as conn:
            sent = conn.execute(
                sa.text(f"SELECT count(*) FROM \"{schema}\".digest WHERE state = 'sent'")
            ).scalar_one()
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
    span = accepted[-1] - accepted[0] if len(accepted) > 1 else 0.0
    rate = (len(accepted) - 1) / span if span else 0.0
    print(
        f"  {mode:6s} limiter, {workers} workers: {len(accepted):,} messages accepted in {span:.1f} s "
        f"({wall:.1f} s wall): {rate:.2f}/s = {rate / LIMIT:.0%} of {LIMIT}/s; 429s: {too_many:,}; "
        f"digests sent {sent:,} of {digests:,}"
    )


async def _adapter_child(api_url: str, database_url: str, mode: str, first_chat: int, count: int) -> None:
    """One process sending ``count`` one-item digests through a TelegramNotifier, 20 at a time."""
    import asyncio

    from core.config import Settings
    from core.delivery.rate_limit import rate_limit_for
    from core.delivery.render import Renderer
    from core.values import DigestItem
    from notifiers.telegram.notifier import TelegramNotifier

    engine = make_engine(database_url)
    settings = Settings(telegram_token=TOKEN, telegram_api_url=api_url)
    notifier = TelegramNotifier(settings.telegram(), slots=rate_limit_for(engine, shared=mode == "shared"))
    why = (Reason(CATEGORY, "cs.DC"),)
    item = DigestItem("2611.00001", 1, "Asynchronous rollouts", ("Ada",), ("cs.DC",), why)
    message = Renderer().render("telegram", [item], "x")
    gate = asyncio.Semaphore(20)

    async def one(chat: int) -> None:
        async with gate:
            await notifier.send(str(chat), message)

    try:
        await asyncio.gather(*(one(first_chat + n) for n in range(count)), return_exceptions=True)
    finally:
        await notifier.aclose()
        engine.dispose()


def run_adapters(mode: str, digests: int, workers: int) -> None:
    """The same load through ``workers`` processes that only run the adapter (no ledger, no rendering
    per digest): what the limiter itself achieves across processes, whatever the workers' other costs."""
    admin = sa.create_engine(POSTGRES_URL)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        engine = make_engine(_schema_url(schema))
        migrate(engine)
        engine.dispose()
        share = digests // workers

        def chats(n: int) -> list[str]:
            return [str(1000 + n * share), str(share)]

        with fake_telegram(TOKEN, max_per_second=LIMIT, chat_interval=1.0) as api:
            procs = [
                subprocess.Popen(
                    [sys.executable, __file__, "--child", api.base_url, _schema_url(schema), mode, *chats(n)],
                    cwd=ROOT,
                )
                for n in range(workers)
            ]
            for proc in procs:
                proc.wait(timeout=1800)
            accepted = [c.at for c in api.calls if c.method == "sendMessage" and c.status == 200]
            too_many = api.too_many
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
    span = accepted[-1] - accepted[0] if len(accepted) > 1 else 0.0
    rate = (len(accepted) - 1) / span if span else 0.0
    print(
        f"  {mode:6s} limiter, {workers} adapter processes: {len(accepted):,} accepted in {span:.1f} s: "
        f"{rate:.2f}/s = {rate / LIMIT:.0%} of {LIMIT}/s; 429s: {too_many:,}"
    )


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        import asyncio

        api_url, database_url, mode, first, count = sys.argv[2:7]
        asyncio.run(_adapter_child(api_url, database_url, mode, int(first), int(count)))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--digests", type=int, default=900)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--only", default="shared,local")
    parser.add_argument("--adapters", action="store_true", help="also run the adapter-only processes")
    args = parser.parse_args()
    print(f"shared limit: {args.digests:,} due Telegram digests to as many chats, PostgreSQL, fake Bot API")
    for mode in args.only.split(","):
        run(mode, args.digests, args.workers)
    if args.adapters:
        for mode in args.only.split(","):
            run_adapters(mode, args.digests, args.workers)


if __name__ == "__main__":
    main()
