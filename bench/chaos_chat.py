"""The chaos case ``--fault first-commands``: a new chat's first commands arriving at once.

Each trial takes a fresh database (a SQLite file, or a new PostgreSQL schema, migrated), then sends the
follows of one chat PaperTrail has never seen all at once, through the production entry points in this
process: ``TelegramBot.process`` (what the webhook route calls for each update; the real
python-telegram-bot Application, answering through the fake Bot API of tests/fakes) for 16 ``/follow``
updates, and the web app's ``POST /slack/events`` (papertrail.web.app.build_app: Bolt, signed as Slack signs)
for 8 slash commands. Each command's handler runs in a worker thread, as in the service. It counts the
follows stored against the replies sent, and the apologies among those.

Separate bot processes are not started: concurrency inside one process is where a web process running
the webhook and the Slack route meets it, and the database sees the same concurrent transactions.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import random
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from bench.day import create_database, drop_database
from core.db import Database, make_engine
from core.db_migrate import migrate
from core.follows import subscriber_records

FIRST_COMMANDS = "first-commands"
TELEGRAM_COMMANDS = 16
SLACK_COMMANDS = 8
_TOKEN = "123456:CHAOS-bot-token"
_SLACK_TOKEN = "xoxb-chaos-0123456789"
_SECRET = "chaos-signing-secret-0123456789ab"
_SORRY = "Sorry, something went wrong"


@dataclass
class ChatTrial:
    """One trial's figures: commands sent, follows stored, replies that said so, apologies."""

    database: str
    chat: str
    index: int
    sent: int
    stored: int = 0
    confirmed: int = 0
    apologies: int = 0
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        """Commands whose follow is not stored."""
        return self.sent - self.stored


def _queries(n: int, rng: random.Random) -> list[str]:
    words = ["lag", "rollout", "sparse", "kernel", "graph", "agent", "cache", "proof"]
    return [f'ti:"{rng.choice(words)} {i}"' for i in range(n)]


async def _telegram(db: Database, queries: list[str], chat_id: int) -> tuple[int, int]:
    """(replies saying "Now following", apologies) for ``queries`` sent at once by a new private chat."""
    from core.config import Settings
    from notifiers.telegram.chat import TelegramBot
    from tests.fakes.telegram_api import Person, Place, Updates, fake_telegram, parse_html

    with fake_telegram(_TOKEN) as api:
        settings = Settings(telegram_token=_TOKEN, telegram_api_url=api.base_url)
        bot = TelegramBot(settings.telegram_bot(), db)
        await bot.start()
        try:
            person = Person(chat_id, "New", "Reader")
            updates = Updates(bot_id=api.bot_id)
            batch = [updates.message(Place(chat_id), person, f"/follow {q}") for q in queries]
            await asyncio.gather(*(bot.process(update) for update in batch))
        finally:
            await bot.stop()
        texts = [parse_html(str(call.params["text"]))[0] for call in api.sent(chat_id)]
    return sum("Now following" in t for t in texts), sum(_SORRY in t for t in texts)


async def _slack(db: Database, url: str, queries: list[str], user: str) -> tuple[int, int]:
    """(replies saying "Now following", apologies) for slash commands sent at once from a new DM."""
    from core.config import Settings
    from papertrail.service.context import AppContext
    from papertrail.web.app import build_app
    from tests.fakes.slack_api import fake_slack

    with fake_slack(token=_SLACK_TOKEN) as slack:
        slack.users[user] = {"id": user, "name": "new", "locale": "en-US", "profile": {"real_name": "New"}}
        settings = Settings(
            database_url=url,
            secret_key="chaos-secret-key-0123456789abcdef",
            slack_bot_token=_SLACK_TOKEN,
            slack_signing_secret=_SECRET,
            slack_api_url=slack.base_url,
        )
        ctx = _app_context(AppContext, settings, db)
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://chaos.test") as client:

            async def post(text: str) -> dict[str, Any]:
                body = urlencode(
                    {
                        "team_id": "T0001",
                        "channel_id": f"D{user[1:]}",
                        "channel_name": "directmessage",
                        "user_id": user,
                        "command": "/papertrail",
                        "text": text,
                        "response_url": f"{slack.base_url}/response/{user}",
                    }
                )
                stamp = str(int(time.time()))
                mac = hmac.new(_SECRET.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
                headers = {
                    "X-Slack-Request-Timestamp": stamp,
                    "X-Slack-Signature": f"v0={mac}",
                    "Content-Type": "application/x-www-form-urlencoded",
                }
                response = await client.post("/slack/events", content=body.encode(), headers=headers)
                return response.json() if response.content else {"text": ""}

            answers = await asyncio.gather(*(post(f"follow {q}") for q in queries))
    texts = [str(a.get("text", "")) for a in answers]
    return sum("Now following" in t for t in texts), sum(_SORRY in t for t in texts)


def _app_context(cls: Any, settings: Any, db: Database) -> Any:
    from core.delivery.render import Renderer
    from ingest.http import HttpClient

    return cls(settings=settings, db=db, renderer=Renderer(), notifiers={}, http=HttpClient("chaos"))


def _stored(db: Database, address: str) -> int:
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None or subscriber.id is None:
        return 0
    return len(subscriber_records.follows_of(db, subscriber.id))


def run_trial(database: str, postgres: str, chat: str, index: int, seed: int, folder: Path) -> ChatTrial:
    """One trial of ``chat`` (telegram or slack) on a fresh ``database``."""
    rng = random.Random(f"{seed}/{database}/{chat}/{index}")
    url = create_database(database, postgres, folder)
    engine = make_engine(url)
    try:
        migrate(engine)
        db = Database(engine)
        started = time.perf_counter()
        if chat == "telegram":
            chat_id = rng.randrange(10**6, 10**9)
            queries = _queries(TELEGRAM_COMMANDS, rng)
            confirmed, sorry = asyncio.run(_telegram(db, queries, chat_id))
            address = f"telegram:{chat_id}"
        else:
            user = f"U0{rng.randrange(10**8, 10**9)}"
            queries = _queries(SLACK_COMMANDS, rng)
            confirmed, sorry = asyncio.run(_slack(db, url, queries, user))
            address = f"slack:{user}"
        trial = ChatTrial(database, chat, index, len(queries), _stored(db, address), confirmed, sorry)
        trial.seconds = time.perf_counter() - started
        return trial
    finally:
        engine.dispose()
        drop_database(url, postgres)


def first_commands(databases: list[str], postgres: str, trials: int, seed: int) -> int:
    """Run ``trials`` trials per database and chat and print the table; 1 when a follow was lost or
    apologised for."""
    warnings.simplefilter("ignore")
    # Each apology is logged with its traceback; the table counts them, so the console shows only the table.
    logging.disable(logging.CRITICAL)
    results: list[ChatTrial] = []
    with tempfile.TemporaryDirectory(prefix="papertrail-chaos-chat-") as tmp:
        for database in databases:
            for chat in ("telegram", "slack"):
                for index in range(trials):
                    trial = run_trial(database, postgres, chat, index, seed, Path(tmp))
                    results.append(trial)
                    print(_row(trial), flush=True)
    print()
    print("| db | chat | trials | sent | stored | confirmed | apologies | lost |")
    print("|---|---|---|---|---|---|---|---|")
    for database in databases:
        for chat in ("telegram", "slack"):
            mine = [r for r in results if r.database == database and r.chat == chat]
            print(
                f"| {database} | {chat} | {len(mine)} | {sum(r.sent for r in mine)} | "
                f"{sum(r.stored for r in mine)} | {sum(r.confirmed for r in mine)} | "
                f"{sum(r.apologies for r in mine)} | {sum(r.lost for r in mine)} |"
            )
    bad = [r for r in results if r.lost or r.apologies]
    print(f"\nfirst-commands: {len(bad)} of {len(results)} trials lost a follow or apologised")
    return 1 if bad else 0


def _row(r: ChatTrial) -> str:
    return (
        f"{r.database} {r.chat} #{r.index}: sent {r.sent}, stored {r.stored}, confirmed {r.confirmed}, "
        f"apologies {r.apologies} ({r.seconds:.1f} s)"
    )
