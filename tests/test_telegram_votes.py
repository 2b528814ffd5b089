"""Votes from a Telegram digest: the real notifier sends a digest of recorded papers to the fake Bot API,
and the real bot (python-telegram-bot's Application) answers the presses of its 👍 / 👎 buttons.

The digest comes out of the real pipeline: a chat follows a query, the recorded arXiv day of 28 Nov 2024 is
ingested, and ``send_due_digests`` delivers through :class:`TelegramNotifier`. Each press is a callback
query on that very message as the fake stored it, so the keyboard the bot edits is the one it sent.
"""

from __future__ import annotations

from typing import Any

from core.db import Database
from core.delivery.chat_buttons import Action
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.models import DISLIKE, LIKE
from core.taste.votes import votes
from notifiers.ratelimit import RateLimiter
from notifiers.telegram.chat import TelegramBot
from notifiers.telegram.chat_render import Button, VotePress, read_callback, read_vote, voted_markup
from notifiers.telegram.notifier import TelegramNotifier
from tests.fakes.telegram_api import ADA, ADA_CHAT, Call, FakeTelegram, Place, Updates
from tests.support.chat_commands import NOW, backdate, ingest_recorded_feed, migrated_template_fixture
from tests.support.telegram_bot import (
    ADMIN,
    LAB,
    LI,
    MEMBER,
    Chat,
    api_fixture,
    bot_settings,
    buttons,
    store_fixture,
    tbot_fixture,
    updates_fixture,
)

# fixtures, asked for by name
__all__ = ["api_fixture", "migrated_template_fixture", "store_fixture", "tbot_fixture", "updates_fixture"]

PAPER = "2411.17710v1"  # the recorded day's one paper with "operating system" in its title
LIKE_DATA, DISLIKE_DATA = f"vote:+:{PAPER}", f"vote:-:{PAPER}"


async def digest_to(chat: Chat, db: Database, api: FakeTelegram) -> Call:
    """Follow ti:"operating system" in ``chat``, ingest the recorded day, deliver the digest; its message."""
    await chat.say('/follow ti:"operating system"')
    address = f"telegram:{chat.place.id}"
    backdate(db, address)
    await ingest_recorded_feed(db)
    notifier = TelegramNotifier(bot_settings(api).telegram(), limiter=RateLimiter())
    try:
        reports = await send_due_digests(
            db, {"telegram": notifier}, Renderer(), now=NOW, force=True, address=address
        )
    finally:
        await notifier.aclose()
    assert [(r.items, r.sent) for r in reports] == [(1, True)]
    return api.sent(chat.place.id)[-1]


def vote_labels(api: FakeTelegram, chat: Chat, digest: Call) -> list[str]:
    """The labels of the vote buttons under the digest as Telegram shows them now (edits included)."""
    message = api.message(chat.place.id, chat.message_id(digest))
    rows = message["reply_markup"]["inline_keyboard"]
    return [b["text"] for row in rows for b in row if b["callback_data"].startswith("vote:")]


def answered(api: FakeTelegram) -> dict[str, Any]:
    """The parameters of the last answerCallbackQuery."""
    return api.calls_of("answerCallbackQuery")[-1].params


def vote_of(db: Database, address: str) -> list[tuple[str, int, int]]:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    return [(v.arxiv_id, v.version, v.value) for v in votes(db, subscriber.id)]


async def test_a_digest_carries_vote_buttons_that_vote_and_undo(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    ada = Chat(tbot, api, updates, ADA_CHAT, ADA)
    await ada.say("/start")
    digest = await digest_to(ada, db, api)
    # One row under the paper: unfollow the follow that matched, watch the paper, 👍, 👎.
    (follow,) = subscriber_records.follows_of(
        db,
        subscriber_records.get_subscriber(db, "telegram:4242").id or 0,  # type: ignore[union-attr]
    )
    assert buttons(digest) == [
        ('✕ Unfollow ti:"operating system"', f"unfollow:{follow.id}"),
        ("Watch 2411.17710", "watch:2411.17710"),
        ("👍", LIKE_DATA),
        ("👎", DISLIKE_DATA),
    ]

    # 👍: the vote is recorded, the presser gets a toast (not an alert), the button shows it is chosen,
    # and nothing is posted to the chat.
    assert await ada.press(digest, LIKE_DATA) == []
    assert vote_of(db, "telegram:4242") == [("2411.17710", 1, LIKE)]
    assert answered(api)["text"] == f"👍 Liked {PAPER}. Press again to take it back."
    assert answered(api)["show_alert"] is False
    assert vote_labels(api, ada, digest) == ["👍 ✓", "👎"]
    # 👎 replaces it; the check moves.
    await ada.press(digest, DISLIKE_DATA)
    assert vote_of(db, "telegram:4242") == [("2411.17710", 1, DISLIKE)]
    assert vote_labels(api, ada, digest) == ["👍", "👎 ✓"]
    # The chosen button pressed again takes the vote back.
    await ada.press(digest, DISLIKE_DATA)
    assert vote_of(db, "telegram:4242") == []
    assert answered(api)["text"] == f"Vote on {PAPER} taken back."
    assert vote_labels(api, ada, digest) == ["👍", "👎"]
    # The other buttons of the row were left as they were.
    rows = api.message(ADA.id, ada.message_id(digest))["reply_markup"]["inline_keyboard"]
    assert [b["text"] for b in rows[0][:2]] == ['✕ Unfollow ti:"operating system"', "Watch 2411.17710"]
    assert len(api.calls_of("editMessageReplyMarkup")) == 3
    # The chat command sees the same votes.
    (listed,) = await ada.say("/likes")
    assert "has not voted" in str(listed.params["text"])
    # Liked by command meanwhile: the plain 👍 does what it shows (like), it does not take the like back.
    await ada.say("/like 2411.17710")
    await ada.press(digest, LIKE_DATA)
    assert vote_of(db, "telegram:4242") == [("2411.17710", 1, LIKE)]
    assert vote_labels(api, ada, digest) == ["👍 ✓", "👎"]


async def test_in_a_group_only_admins_vote_and_members_are_told_privately(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    admin = Chat(tbot, api, updates, LAB, ADMIN)
    member = Chat(tbot, api, updates, LAB, MEMBER)
    await admin.say("/start")
    digest = await digest_to(admin, db, api)
    posted = len(api.sent(LAB.id))

    await member.press(digest, LIKE_DATA)
    assert answered(api)["show_alert"] is True
    assert answered(api)["text"].startswith("Only admins of this group can vote for it")
    assert vote_of(db, f"telegram:{LAB.id}") == []
    assert api.calls_of("editMessageReplyMarkup") == []

    await admin.press(digest, LIKE_DATA)
    assert vote_of(db, f"telegram:{LAB.id}") == [("2411.17710", 1, LIKE)]
    assert vote_labels(api, admin, digest) == ["👍 ✓", "👎"]
    assert len(api.sent(LAB.id)) == posted  # the group's chat stays quiet


async def test_a_chinese_reader_gets_the_toast_in_chinese_and_stale_data_is_refused(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    li = Chat(tbot, api, updates, Place(LI.id), LI)
    await li.say("/start")
    digest = await digest_to(li, db, api)
    await li.press(digest, LIKE_DATA)
    assert answered(api)["text"] == f"👍 已喜欢 {PAPER}。再按一次可撤回。"
    # A version the store does not hold (a button older than a reset), and data this bot never wrote.
    await li.press(digest, "vote:+:2411.17710v9")
    assert answered(api)["show_alert"] is True
    assert answered(api)["text"] == "PaperTrail 没有存储 2411.17710v9。"
    await li.press(digest, "vote:*:2411.17710v1")
    assert answered(api)["text"] == "这个按钮已失效。/help 列出所有命令。"
    assert vote_of(db, f"telegram:{LI.id}") == [("2411.17710", 1, LIKE)]


def test_vote_data_reads_back_and_fits_64_bytes() -> None:
    assert read_callback("vote:+:2411.17710v1") == Button(Action.VOTE, "+:2411.17710v1")
    assert read_vote("-:hep-th/9901001v12") == VotePress(DISLIKE, "hep-th/9901001", 12)
    for data in ("vote:+:2411.17710", "vote:=:2411.17710v1", "vote:+:2411.17710v0", "vote:+:x/1v1", "vote:"):
        assert read_callback(data) is None, data
    # The longest id form with a four-digit version stays within Telegram's 64 bytes (ASCII only).
    longest = "vote:-:math-ph.XX/9901001v9999"
    assert read_callback(longest) is not None and len(longest) <= 64
    assert voted_markup(None, PAPER, LIKE) is None
