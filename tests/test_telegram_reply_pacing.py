"""Chat replies go through the digests' send path and rate limiter: a burst of commands from one Telegram
chat is answered at the chat's pace, every reply delivered, against a fake Bot API that enforces Telegram's
per-chat limit; a reply sits out a short flood wait and falls back to plain text as a digest does."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from core.db import Database
from notifiers.telegram.chat import TelegramBot
from notifiers.telegram.format import html_to_text
from notifiers.telegram.notifier import TelegramNotifier
from tests.fakes.telegram_api import ADA, ADA_CHAT, FakeTelegram, Updates, cant_parse, fake_telegram, flood
from tests.support.chat_commands import NOW, migrated_template_fixture
from tests.support.telegram_bot import TOKEN, api_fixture, bot_settings, feed, store_fixture

__all__ = ["api_fixture", "migrated_template_fixture", "store_fixture"]  # fixtures, asked for by name

pytestmark = [
    pytest.mark.net,
    # PTB's own RetryAfter reads its deprecated retry_after while it is built (a flood wait below).
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]

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


async def test_a_reply_sits_out_a_short_flood_wait_and_falls_back_to_plain_text(
    api: FakeTelegram, db: Database
) -> None:
    tbot = TelegramBot(bot_settings(api).telegram_bot(), db, clock=lambda: NOW)
    await tbot.start()
    try:
        api.script(flood(1), cant_parse())
        await feed(tbot, Updates(bot_id=api.bot_id).message(ADA_CHAT, ADA, "/follows"))
    finally:
        await tbot.stop()
    flooded, unparsed, resent = (call for call in api.calls if call.method == "sendMessage")
    assert (flooded.status, unparsed.status, resent.status) == (429, 400, 200)
    assert unparsed.at - flooded.at >= 1 - api.tolerance
    assert "parse_mode" not in resent.params
    assert resent.params["text"] == html_to_text(str(unparsed.params["text"])).strip()
