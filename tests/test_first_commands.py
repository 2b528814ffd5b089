"""A new chat's first commands arriving at once: every follow is stored and none is answered with an apology.

Telegram: 16 ``/follow`` updates from a chat PaperTrail has never seen go through the real python-telegram-bot
Application at once (each handler runs its command in a worker thread, as in production), against the fake
Bot API. Slack: 8 signed slash commands go to the real Bolt app's route at once. The core step
(:func:`core.follows.manage.follow`) is driven from threads too, with a Store per thread as separate
processes would have. Each on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from starlette.applications import Starlette
from telegram import Update

from bench.chaos_chat import run_trial
from bench.ingest import POSTGRES
from bot.commands import SORRY
from core.db import Database, make_engine
from core.follows import subscriber_records
from core.follows.manage import follow
from notifiers.slack.chat import EVENTS_PATH
from notifiers.telegram.chat import TelegramBot
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import ADA, ADA_CHAT, FakeTelegram, Updates, fake_telegram, parse_html
from tests.support.chat_commands import NOW
from tests.support.slack_bot import ADA as SLACK_ADA
from tests.support.slack_bot import DM, command_body, make_bot, signed_headers, slack_fixture  # noqa: F401

TOKEN = "123456:TEST-bot-token"
QUERIES = [f'ti:"topic {n}"' for n in range(16)]
T = TypeVar("T")


@pytest.fixture
def api() -> Iterator[FakeTelegram]:
    with fake_telegram(TOKEN) as server:
        yield server


def stored_queries(db: Database, address: str) -> list[str]:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    return sorted(f.query for f in subscriber_records.follows_of(db, subscriber.id))


async def test_concurrent_first_follows_on_telegram(api: FakeTelegram, db: Database) -> None:
    from core.config import Settings

    settings = Settings(telegram_token=TOKEN, telegram_api_url=api.base_url)
    tbot = TelegramBot(settings.telegram_bot(), db, clock=lambda: NOW)
    await tbot.start()
    try:
        app, updates = tbot.application, Updates(bot_id=api.bot_id)
        batch = [Update.de_json(updates.message(ADA_CHAT, ADA, f"/follow {q}"), app.bot) for q in QUERIES]
        await asyncio.gather(*(app.process_update(update) for update in batch))
    finally:
        await tbot.stop()
    texts = [parse_html(str(call.params["text"]))[0] for call in api.sent(ADA_CHAT.id)]
    assert len(texts) == len(QUERIES)
    assert not [text for text in texts if SORRY in text]
    assert sum("Now following" in text for text in texts) == len(QUERIES)
    assert sum("is now subscribed" in text for text in texts) == 1
    assert stored_queries(db, f"telegram:{ADA.id}") == sorted(QUERIES)


async def test_concurrent_first_follows_on_slack(slack: FakeSlack, db: Database) -> None:
    bot = make_bot(slack, db)
    queries = QUERIES[:8]
    transport = httpx.ASGITransport(app=Starlette(routes=bot.routes()))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:

        async def post(text: str) -> httpx.Response:
            body = command_body(slack, text)
            headers = {**signed_headers(body), "Content-Type": "application/x-www-form-urlencoded"}
            return await client.post(EVENTS_PATH, content=body.encode(), headers=headers)

        responses = await asyncio.gather(*(post(f"follow {q}") for q in queries))
    answers: list[dict[str, Any]] = [r.json() for r in responses]
    assert [r.status_code for r in responses] == [200] * len(queries)
    assert not [a for a in answers if SORRY in a["text"]]
    assert sum("Now following" in a["text"] for a in answers) == len(queries)
    assert stored_queries(db, f"slack:{SLACK_ADA}") == sorted(queries)


def at_once(
    db_url: str, call: Callable[[Database, int], T], n: int = 8
) -> tuple[list[T], list[BaseException]]:
    """``call(store, i)`` from ``n`` threads released together, each with its own engine (as separate
    processes would have): the results, and the exceptions raised (the failures are the finding)."""
    stores = [Database(make_engine(db_url)) for _ in range(n)]
    barrier = threading.Barrier(n)
    results: list[T] = []
    errors: list[BaseException] = []

    def run(own: Database, i: int) -> None:
        barrier.wait()
        try:
            results.append(call(own, i))
        except BaseException as exc:  # collected, asserted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(own, i)) for i, own in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for own in stores:
        own.engine.dispose()
    return results, errors


@pytest.mark.parametrize("same_query", [False, True])
def test_concurrent_core_follow_from_separate_stores(db_url: str, db: Database, same_query: bool) -> None:
    """One subscriber, every follow stored once, and exactly one call says it created the subscriber."""
    results, errors = at_once(
        db_url, lambda own, n: follow(own, "telegram:777", QUERIES[0] if same_query else QUERIES[n])
    )
    assert errors == []
    assert sum(r.subscriber_created for r in results) == 1
    expected = [QUERIES[0]] if same_query else sorted(QUERIES[:8])
    assert stored_queries(db, "telegram:777") == expected
    assert sum(r.outcome == "added" for r in results) == len(expected)


def test_concurrent_ensure_subscriber_creates_one(db_url: str, db: Database) -> None:
    """What every other first command (start, digest, timezone, language, join) calls: one creation."""
    results, errors = at_once(
        db_url,
        lambda own, _: subscriber_records.ensure_subscriber(
            own, "slack:C0NEW", timezone="UTC", schedule="instant"
        ),
    )
    assert errors == []
    created = [was_created for _, was_created in results]
    assert sorted(created) == [False] * 7 + [True]
    found = subscriber_records.get_subscriber(db, "slack:C0NEW")
    assert found is not None and found.schedule == "instant"


@pytest.mark.net
def test_the_chaos_case_runs_one_trial(tmp_path: Path) -> None:
    """``bench/chaos.py --fault first-commands`` keeps working: a SQLite trial of each chat, nothing lost."""
    for chat in ("telegram", "slack"):
        trial = run_trial("sqlite", POSTGRES, chat, 0, 14, tmp_path)
        assert (trial.stored, trial.confirmed, trial.apologies) == (trial.sent, trial.sent, 0)
