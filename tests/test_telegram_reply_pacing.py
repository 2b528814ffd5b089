"""Chat replies go through the digests' rate limiter: a burst of commands from one Telegram chat is answered
at the chat's pace, every reply delivered, against a fake Bot API that enforces Telegram's per-chat limit."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from core.db import Database
from notifiers.telegram.chat import TelegramBot
from notifiers.telegram.notifier import TelegramNotifier
from tests.fakes.telegram_api import ADA, ADA_CHAT, FakeTelegram, Updates, fake_telegram
from tests.support.chat_commands import NOW, migrated_template_fixture
from tests.support.telegram_bot import TOKEN, bot_settings, feed, store_fixture

__all__ = ["migrated_template_fixture", "store_fixture"]  # fixtures, asked for by name

pytestmark = pytest.mark.net

BURST = 4
INTERVAL = 0.5


@pytest.fixture(name="paced_api")
def paced_api_fixture() -> Iterator[FakeTelegram]:
    with fake_telegram(TOKEN, chat_interval=INTERVAL) as api:
        yield api


async def test_a_burst_of_replies_to_one_chat_is_paced_and_none_is_lost(
    paced_api: FakeTelegram, db: Database
) -> None:
    settings = bot_settings(paced_api, telegram_chat_interval=INTERVAL)
    notifier = TelegramNotifier(settings.telegram())
    tbot = TelegramBot(settings.telegram_bot(), db, clock=lambda: NOW, limiter=notifier.limiter)
    await tbot.start()
    try:
        updates = Updates(bot_id=paced_api.bot_id)
        burst = [updates.message(ADA_CHAT, ADA, "/help") for _ in range(BURST)]
        await asyncio.gather(*(feed(tbot, update) for update in burst))
    finally:
        await tbot.stop()
        await notifier.aclose()
    sent = paced_api.sent(ADA_CHAT.id)
    assert paced_api.too_many == 0  # paced before sending, never refused
    assert len(sent) >= BURST  # every reply went out (/help may take more than one message)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(sent)]
    assert min(gaps) >= INTERVAL - paced_api.tolerance
