"""Benchmark: delivering digests.

Sections (all by default; pick with ``--only render,telegram,email,workers``):

* **render**: 10,000 digests per channel (five items each, drawn from the recorded arXiv day), rendered by
  ``core.delivery.render.Renderer`` and turned into what the adapter puts on the wire (email: the MIME
  message with
  CSS inlined; Slack: the Block Kit payloads; Telegram: the split HTML parts; webhook: the signed JSON).
  CPU seconds of this process, digests per second.
* **telegram**: 2,000 messages (one-item digests to 200 chats) through the real python-telegram-bot ``Bot``
  to the fake Bot API server, which enforces 30 messages/s overall and 1/s per chat and answers 429 when
  exceeded. Achieved rate as a share of the 30/s limit (target >= 90%) and the 429s provoked (target 0).
* **email**: 1,000 emails to a real aiosmtpd server on 127.0.0.1 over one reused SMTP connection
  (target >= 100/s), and the same with a new connection per mail for comparison.
* **workers**: 3,000 due digests (console channel) on PostgreSQL, sent by one ``papertrail worker``
  process, then (fresh schema, same digests) by three at once: wall time of each and the speed-up. Needs
  PostgreSQL at ``PAPERTRAIL_TEST_POSTGRES_URL`` (default the local ``test`` database).

Usage: python bench/deliver.py [--only SECTIONS] [--digests 10000] [--telegram 2000] [--emails 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from core.config import Settings  # noqa: E402
from core.db import (  # noqa: E402
    make_engine,
)
from core.db_migrate import migrate  # noqa: E402
from core.delivery.render import Renderer  # noqa: E402
from core.reasons import CATEGORY, Reason  # noqa: E402
from core.values import (  # noqa: E402
    DigestItem,
    Guide,
    Message,
)
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402
from tests.conftest import BIG_FEED, POSTGRES_URL  # noqa: E402

ITEMS_PER_DIGEST = 5


# A guide of typical length (what core.guides.prompt keeps: one TL;DR, up to three contributions).
GUIDE = Guide(
    "The paper bounds the effect of policy lag on asynchronous rollouts and shows training keeps its speed.",
    ("A lag-aware importance weight", "A bound on the bias of stale policies", "An open-source trainer"),
)


def corpus_items() -> list[DigestItem]:
    """Every version of the recorded day as a digest item with a typical reason; every other has a guide."""
    return [
        DigestItem(
            p.arxiv_id,
            p.version,
            p.title,
            p.authors,
            p.categories,
            (Reason(CATEGORY, p.categories[0]),),
            p.abstract,
            guide=GUIDE if n % 2 else None,
        )
        for n, p in enumerate(parse_feed(BIG_FEED.read_bytes()).items)
    ]


def cpu() -> float:
    return time.process_time()


def bench_render(digests: int) -> None:
    """Render ``digests`` digests per channel and build each adapter's wire form."""
    from notifiers.email.notifier import EmailNotifier
    from notifiers.slack.blocks import build_payloads
    from notifiers.webhook.payload import digest_payload, encode_payload

    items = corpus_items()
    now = datetime.now(UTC)
    renderer = Renderer(public_url="https://papertrail.example", secret_key="bench-key", max_items=50)
    email = EmailNotifier(Settings(smtp_host="127.0.0.1", secret_key="bench-key").smtp())

    def batch(n: int) -> list[DigestItem]:
        start = (n * ITEMS_PER_DIGEST) % (len(items) - ITEMS_PER_DIGEST)
        return items[start : start + ITEMS_PER_DIGEST]

    def wire(language: str) -> dict[str, Callable[[int], object]]:
        def render(channel: str, n: int, recipient: str) -> Message:
            return renderer.render(channel, batch(n), recipient, language=language)

        return {
            "console": lambda n: render("console", n, f"user{n}").text,
            "email": lambda n: email.build(f"u{n}@example.org", render("email", n, f"u{n}@example.org")),
            "telegram": lambda n: _telegram_parts(render("telegram", n, str(n))),
            "slack": lambda n: build_payloads(render("slack", n, "C0123ABC")),
            "webhook": lambda n: encode_payload(
                digest_payload(render("webhook", n, "https://x.example"), generated_at=now)
            ),
        }

    print(
        f"render: {digests:,} digests of {ITEMS_PER_DIGEST} items per channel (CPU time), every other item"
        " with an AI guide; English, then Chinese"
    )
    english, chinese = wire("en"), wire("zh")
    for channel in english:
        spent = {}
        for language, make in (("en", english[channel]), ("zh", chinese[channel])):
            make(0)  # compile templates and load the catalog outside the timing
            start = cpu()
            for n in range(digests):
                make(n)
            spent[language] = cpu() - start
        en, zh = (spent[language] / digests * 1e3 for language in ("en", "zh"))
        print(f"  {channel:9s} en {en:6.3f} ms  zh {zh:6.3f} ms  each; zh/en {zh / en:4.2f}x")


def _telegram_parts(message: Message) -> object:
    from notifiers.telegram.format import split_message

    return split_message(message)


def bench_telegram(messages: int, chats: int = 200) -> None:
    """``messages`` one-item digests to ``chats`` chats through PTB to a fake enforcing 30/s and 1/s."""
    from notifiers.telegram.notifier import TelegramNotifier
    from tests.fakes.telegram_api import fake_telegram

    items = corpus_items()
    renderer = Renderer()
    with fake_telegram(max_per_second=30, chat_interval=1.0) as api:
        settings = Settings(telegram_token="123456:TEST-token", telegram_api_url=api.base_url)

        async def run() -> float:
            notifier = TelegramNotifier(settings.telegram())
            try:
                await notifier.send("1", renderer.render("telegram", items[:1], "1"))  # getMe, warm-up
                api.calls.clear()
                start = time.perf_counter()
                await asyncio.gather(
                    *(
                        notifier.send(
                            str(1000 + n % chats), renderer.render("telegram", [items[n % len(items)]], "x")
                        )
                        for n in range(messages)
                    )
                )
                return time.perf_counter() - start
            finally:
                await notifier.aclose()

        elapsed = asyncio.run(run())
        sent = [c for c in api.calls if c.method == "sendMessage"]
        accepted = len(sent) - api.too_many
        span = sent[-1].at - sent[0].at if len(sent) > 1 else elapsed
    rate = (accepted - 1) / span if span else 0.0
    print(
        f"telegram: {accepted:,} messages to {chats} chats in {elapsed:.1f} s: {rate:.2f} messages/s = "
        f"{rate / 30:.0%} of the 30/s limit; 429s provoked: {api.too_many}"
    )


def bench_email(emails: int) -> None:
    """``emails`` digests to aiosmtpd (its own process, as a real server would be) over one reused
    connection, and 200 with a new connection each for comparison."""
    from notifiers.email.notifier import EmailNotifier
    from tests.servers import free_port

    items = corpus_items()[:5]
    renderer = Renderer(public_url="https://papertrail.example", secret_key="bench-key")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}", "-c", "aiosmtpd.handlers.Sink"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port)
        settings = Settings(smtp_host="127.0.0.1", smtp_port=port, secret_key="bench-key")
        messages = [renderer.render("email", items, f"u{n}@example.org") for n in range(emails)]
        fresh_count = min(200, emails)

        async def reused() -> float:
            notifier = EmailNotifier(settings.smtp())
            try:
                start = time.perf_counter()
                await asyncio.gather(*(notifier.send(f"u{n}@example.org", m) for n, m in enumerate(messages)))
                return time.perf_counter() - start
            finally:
                await notifier.aclose()

        async def fresh() -> float:
            start = time.perf_counter()
            for n in range(fresh_count):
                notifier = EmailNotifier(settings.smtp())
                await notifier.send(f"u{n}@example.org", messages[n])
                await notifier.aclose()
            return time.perf_counter() - start

        one = emails / asyncio.run(reused())
        each = fresh_count / asyncio.run(fresh())
    finally:
        server.terminate()
        server.wait()
    print(
        f"email: {emails:,} mails over one SMTP connection: {one:.0f}/s (target >= 100/s); "
        f"a new connection per mail: {each:.0f}/s; reuse is {one / each:.1f}x faster"
    )


def _wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def _schema_url(schema: str) -> str:
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"


def bench_workers(subscribers: int) -> None:
    """One worker process against three, each on a fresh schema holding ``subscribers`` due digests."""
    from tests.support.due_digests import seed_due_digests

    admin = sa.create_engine(POSTGRES_URL)
    results: dict[int, float] = {}
    for count in (1, 3):
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        try:
            engine = make_engine(_schema_url(schema))
            migrate(engine)
            seed_due_digests(engine, subscribers)
            engine.dispose()
            env = {
                **os.environ,
                "PAPERTRAIL_DATABASE_URL": _schema_url(schema),
                "PAPERTRAIL_CONFIG": os.path.join(tempfile.gettempdir(), "papertrail-bench-none.toml"),
            }
            start = time.perf_counter()
            procs = [
                subprocess.Popen(
                    [sys.executable, "-m", "papertrail", "worker", "--until-idle", "--name", f"w{n}"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for n in range(count)
            ]
            for proc in procs:
                proc.wait(timeout=600)
            results[count] = time.perf_counter() - start
            with admin.connect() as conn:
                sent = conn.execute(
                    sa.text(f"SELECT count(*) FROM \"{schema}\".digest WHERE state = 'sent'")
                ).scalar_one()
            print(
                f"  {count} worker(s): {results[count]:6.1f} s wall, {sent:,} digests sent, "
                f"{sent / results[count]:6.0f}/s"
            )
        finally:
            with admin.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    print(
        f"  speed-up of three workers over one: {results[1] / results[3]:.2f}x "
        f"(machine has {os.cpu_count()} cores)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="render,telegram,email,workers")
    parser.add_argument("--digests", type=int, default=10_000)
    parser.add_argument("--telegram", type=int, default=2_000)
    parser.add_argument("--emails", type=int, default=1_000)
    parser.add_argument("--subscribers", type=int, default=3_000)
    args = parser.parse_args()
    sections = set(args.only.split(","))
    if "render" in sections:
        bench_render(args.digests)
    if "telegram" in sections:
        bench_telegram(args.telegram)
    if "email" in sections:
        bench_email(args.emails)
    if "workers" in sections:
        print(f"workers: {args.subscribers:,} due digests on PostgreSQL")
        bench_workers(args.subscribers)


if __name__ == "__main__":
    main()
