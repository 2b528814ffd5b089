"""The Telegram bot against the fake Bot API: chats, users, what a chat was shown."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from telegram import Update

from core.config import Settings
from core.db import Database
from notifiers.telegram.chat import TelegramBot
from tests.fakes.telegram_api import (
    Call,
    FakeTelegram,
    Person,
    Place,
    Updates,
    fake_telegram,
    parse_html,
)
from tests.support.chat_commands import (
    NOW,
    open_copy,
)

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same.
    warnings.simplefilter("ignore")


TOKEN = "123456:TEST-bot-token"


LAB = Place(-100200300, "supergroup", "Lab")


ADMIN = Person(7, "Grace", "Hopper")


MEMBER = Person(8, "Bob")


LI = Person(9, "Li", "Wei", "liwei", language_code="zh-hans")


@pytest.fixture(name="db")
def store_fixture(migrated_template: Path, tmp_path: Path) -> Iterator[Database]:
    """A real SQLite store: a copy of a migrated file (much faster than migrating for every test)."""
    yield from open_copy(migrated_template, tmp_path)


@pytest.fixture(name="api")
def api_fixture() -> Iterator[FakeTelegram]:
    with fake_telegram(TOKEN) as server:
        server.set_member(LAB.id, ADMIN.id, "creator")
        yield server


def bot_settings(api: FakeTelegram, **extra: Any) -> Settings:
    """Settings pointing at the fake Bot API."""
    return Settings(telegram_token=TOKEN, telegram_api_url=api.base_url, **extra)


@pytest.fixture(name="tbot")
async def tbot_fixture(api: FakeTelegram, db: Database) -> AsyncIterator[TelegramBot]:
    bot = TelegramBot(bot_settings(api).telegram_bot(), db, clock=lambda: NOW)
    await bot.start()
    yield bot
    await bot.stop()


@pytest.fixture(name="updates")
def updates_fixture(api: FakeTelegram) -> Updates:
    return Updates(bot_id=api.bot_id)


def shown(call: Call) -> str:
    """The text a sendMessage shows, parsed from its HTML as Telegram parses it."""
    return parse_html(str(call.params["text"]))[0]


def buttons(call: Call) -> list[tuple[str, str]]:
    """(label, callback data) of every button of a sent message."""
    markup = call.params.get("reply_markup") or {}
    return [(b["text"], b["callback_data"]) for row in markup.get("inline_keyboard", []) for b in row]


async def feed(tbot: TelegramBot, update: dict[str, Any]) -> None:
    """One update through the Application, as Telegram's JSON."""
    app = tbot.application
    await app.process_update(Update.de_json(update, app.bot))


class Chat:
    """A person in a chat with the bot: sends updates, collects what the bot sent back."""

    def __init__(self, tbot: TelegramBot, api: FakeTelegram, updates: Updates, place: Place, person: Person):
        self.tbot, self.api, self.updates, self.place, self.person = tbot, api, updates, place, person

    async def send_update(self, update: dict[str, Any]) -> list[Call]:
        """Feed one update; the bot's messages in answer."""
        before = len(self.api.sent(self.place.id))
        await feed(self.tbot, update)
        return self.api.sent(self.place.id)[before:]

    async def say(self, text: str) -> list[Call]:
        """Send a text message; the bot's messages in answer."""
        return await self.send_update(self.updates.message(self.place, self.person, text))

    async def press(self, call: Call, data: str) -> list[Call]:
        """Press the button with ``data`` under the message ``call`` sent."""
        message = self.api.message(self.place.id, self.message_id(call))
        return await self.send_update(self.updates.callback(self.place, self.person, data, message))

    def message_id(self, call: Call) -> int:
        """The id Telegram gave the message ``call`` sent."""
        return self.api.sent(self.place.id).index(call) + 1  # the fake numbers each chat's messages from 1
