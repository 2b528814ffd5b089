"""The Telegram bot (notifiers/telegram/chat.py): the real python-telegram-bot Application against the fake
Bot API.

Updates go in as Telegram's JSON through ``Application.process_update`` (and once each through the long
polling loop and the webhook route); what comes out is what the fake Bot API received: the exact
``sendMessage`` texts (parsed from Telegram HTML as Telegram parses them), buttons, callback answers,
edited markup. The store is real SQLite; the clock is pinned to Thursday 28 Nov 2024, 15:00 UTC, the
afternoon of the recorded feed's mailing, as in tests/test_commands.py (whose migrated SQLite template
each test copies).
"""

from __future__ import annotations

import asyncio
import re
import warnings

import pytest
import telegram
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from bot.commands_base import BLOCKED, MAX_INPUT_CHARS, REMOVED, Block, Reply
from bot.commands_table import COMMANDS
from core.config import Settings
from core.db import Database
from core.delivery.chat_buttons import Action, callback_data
from core.follows import subscriber_records
from core.models import SubscriberStatus
from notifiers.telegram.chat import SECRET_HEADER, WEBHOOK_PATH, TelegramBot, TelegramBotError
from notifiers.telegram.chat_handlers import EDITED, NO_TEXT
from notifiers.telegram.chat_render import Button, html_parts, keyboard, read_callback
from notifiers.telegram.format import MAX_LENGTH, utf16_len
from tests.fakes.telegram_api import (
    ADA,
    ADA_CHAT,
    GROUP_ANONYMOUS_BOT,
    Call,
    FakeTelegram,
    Place,
    Updates,
    parse_html,
)
from tests.servers import closed_port
from tests.support.chat_commands import (
    NOW,
    backdate,
    ingest_recorded_feed,
    migrated_template_fixture,
    record_runs,
)
from tests.support.command_text import command_text
from tests.support.telegram_bot import (  # noqa: F401  (fixtures)
    ADMIN,
    LAB,
    LI,
    MEMBER,
    TOKEN,
    Chat,
    api_fixture,
    bot_settings,
    buttons,
    feed,
    shown,
    store_fixture,
    tbot_fixture,
    updates_fixture,
)

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

CJK = re.compile(r"[\u4e00-\u9fff]")


__all__ = ["migrated_template_fixture"]  # fixtures, asked for by name


def transcript_entry(said: str, calls: list[Call]) -> str:
    """``> what was said``, then each message the bot sent and its buttons, as the closing note shows it."""
    lines = [said]
    for call in calls:
        lines.append(shown(call))
        if buttons(call):
            lines.append(" ".join(f"[{label}]" for label, _ in buttons(call)))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------
# A whole private session


TRANSCRIPT = """\
> /start
Welcome to PaperTrail, Ada Lovelace! New arXiv papers matching this chat's follows will arrive in a digest daily 08:00 (UTC).
Next, follow something: /follow cat:cs.DC or /follow au:"Zeng Li". /try QUERY shows what a query would have matched lately; /help lists all commands.
[/help follow] [/try cat:cs.DC]

> /follow cat:cs.DC
Now following: cat:cs.DC
New papers and revisions, in the digest daily 08:00 (UTC).
It sees papers announced from now on; /try cat:cs.DC shows what it would have matched lately. /follows lists it.
[/try cat:cs.DC]

> /follow ti:"operating system" --instant
Now following: ti:"operating system"
New papers and revisions, sent at once.
It sees papers announced from now on; /try ti:"operating system" shows what it would have matched lately. /follows lists all 2.
[/try ti:"operating system"]

> /follows
This chat follows 2 queries:
1. cat:cs.DC
2. ti:"operating system" · instant
Remove one with /unfollow NUMBER, add one with /follow QUERY.
[✕ 1. cat:cs.DC] [✕ 2. ti:"operating system"]

> /try ti:"operating system"
ti:"operating system" would have matched 1 paper in the last 7 days:
2411.17710v1 Agent Centric Operating System -- a Comprehensive Review and Outlook for Operating System
    why: title: "operating system"
Follow it with /follow ti:"operating system".
[/follow ti:"operating system"]

> /status
Subscription telegram:4242: active
Digest: daily 08:00 (UTC); the next Fri 29 Nov 08:00 UTC (in 17 h), if anything matched
Follows: 2 · matches waiting: 19
Sources — arXiv: ok, checked 12 min ago; Hugging Face: ok, checked 3 h ago
/follows lists the follows; /digest now sends what is waiting.

> /follow cat:cs.LG AND (graph OR
That query does not parse: expected a search term after 'OR' at position 23
cat:cs.LG AND (graph OR
                       ^
Fix it and send /follow again; /help follow shows examples.

> /folow cat:cs.AI
Unknown command "folow". Did you mean /follow? /help lists all commands.
[/follow cat:cs.AI]

> (presses [/follow cat:cs.AI])
Now following: cat:cs.AI
New papers and revisions, in the digest daily 08:00 (UTC).
It sees papers announced from now on; /try cat:cs.AI shows what it would have matched lately. /follows lists all 3.
[/try cat:cs.AI]

> (presses [✕ 2. ti:"operating system"] under the /follows list)
Stopped following: ti:"operating system"
2 follows left; /follows lists them.

> cat:cs.DC au:Li
To follow that, send /follow cat:cs.DC au:Li — or /try cat:cs.DC au:Li to see what it matches.
[/follow cat:cs.DC au:Li] [/try cat:cs.DC au:Li]
"""  # noqa: E501 - the messages as sent, one line each


async def test_a_private_session_reads_as_documented(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    ada = Chat(tbot, api, updates, ADA_CHAT, ADA)
    entries: list[str] = []

    async def say(text: str) -> list[Call]:
        calls = await ada.say(text)
        assert len(calls) == 1, f"{text!r} got {len(calls)} messages"
        entries.append(transcript_entry(f"> {text}", calls))
        return calls

    await say("/start")
    await say("/follow cat:cs.DC")
    await say('/follow ti:"operating system" --instant')
    (listing,) = await say("/follows")
    backdate(db, "telegram:4242")
    await ingest_recorded_feed(db)
    record_runs(db)
    await say('/try ti:"operating system"')
    await say("/status")
    (caret,) = await say("/follow cat:cs.LG AND (graph OR")
    (unknown,) = await say("/folow cat:cs.AI")

    pressed = await ada.press(unknown, "cmd:follow cat:cs.AI")
    entries.append(transcript_entry("> (presses [/follow cat:cs.AI])", pressed))
    unfollow_second = buttons(listing)[1][1]
    pressed = await ada.press(listing, unfollow_second)
    entries.append(
        transcript_entry('> (presses [✕ 2. ti:"operating system"] under the /follows list)', pressed)
    )
    await say("cat:cs.DC au:Li")  # a query without a command, in a private chat
    assert "\n".join(entries) == TRANSCRIPT

    # Telegram HTML: the caret block is <pre>, quotes stay literal, link previews are off everywhere.
    assert caret.params["text"] == (
        "That query does not parse: expected a search term after &#x27;OR&#x27; at position 23\n"
        "<pre>cat:cs.LG AND (graph OR\n                       ^</pre>\n"
        "Fix it and send /follow again; /help follow shows examples."
    ).replace("&#x27;", "'")
    assert caret.params["parse_mode"] == "HTML"
    assert all(c.params["link_preview_options"] == {"is_disabled": True} for c in api.sent())
    # Every button press was answered; the spent suggestion lost its buttons, the list only the one pressed.
    assert len(api.calls_of("answerCallbackQuery")) == 2
    edits = api.calls_of("editMessageReplyMarkup")
    assert [e.params.get("reply_markup") for e in edits] == [
        None,
        {"inline_keyboard": [[{"text": "✕ 1. cat:cs.DC", "callback_data": buttons(listing)[0][1]}]]},
    ]
    follows = subscriber_records.follows_of(
        db,
        subscriber_records.get_subscriber(db, "telegram:4242").id or 0,  # type: ignore[union-attr]
    )
    assert [f.query for f in follows] == ["cat:cs.DC", "cat:cs.AI"]


async def test_start_sets_the_command_menu_in_every_language(tbot: TelegramBot, api: FakeTelegram) -> None:
    english, chinese = api.calls_of("setMyCommands")
    # English for everyone, Chinese for people whose Telegram app is in Chinese.
    assert english.params["commands"] == [
        {"command": info.name, "description": info.summary} for info in COMMANDS
    ]
    assert "language_code" not in english.params
    assert chinese.params["language_code"] == "zh"
    assert [c["command"] for c in chinese.params["commands"]] == [info.name for info in COMMANDS]
    for command in chinese.params["commands"]:
        assert CJK.search(command["description"]), command
        assert len(command["description"]) <= 256  # Telegram's limit on a command's description
    assert api.methods()[:3] == ["getMe", "setMyCommands", "setMyCommands"]
    assert tbot.username == "papertrail_test_bot"


# ---------------------------------------------------------------------------------------------------------
# Groups


async def test_in_a_group_only_admins_change_and_anyone_lists(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    admin = Chat(tbot, api, updates, LAB, ADMIN)
    member = Chat(tbot, api, updates, LAB, MEMBER)

    (refused,) = await member.say("/start")
    assert shown(refused) == (
        "PaperTrail is not set up in this group yet, and only its admins can set it up: "
        "ask one to send /start."
    )
    (welcome,) = await admin.say("/start@papertrail_test_bot")
    assert shown(welcome).startswith("Welcome to PaperTrail, Lab! New arXiv papers matching this group's")
    # In a group the answer quotes the command it answers.
    assert welcome.params["reply_parameters"]["message_id"] > 0
    (added,) = await admin.say("/follow cat:cs.DC")
    assert shown(added).startswith("Now following: cat:cs.DC\n")

    (refused,) = await member.say("/follow cat:cs.AI")
    assert shown(refused) == (
        "Only admins of this group can change its follows and settings. "
        "Anyone can use /follows, /status, /try and /help."
    )
    (listing,) = await member.say("/follows")
    assert shown(listing).startswith("This group follows 1 query:\n1. cat:cs.DC\n")
    # getChatMember once per person: the answer is cached.
    asked = [c.params["user_id"] for c in api.calls_of("getChatMember")]
    assert sorted(asked) == [str(ADMIN.id), str(MEMBER.id)]

    # A member pressing an unfollow button is told privately (an alert), and nothing changes.
    before = len(api.sent())
    await member.press(listing, buttons(listing)[0][1])
    assert len(api.sent()) == before
    alert = api.calls_of("answerCallbackQuery")[-1].params
    assert alert["show_alert"] is True
    assert alert["text"].startswith("Only admins of this group can change its follows")
    subscriber = subscriber_records.get_subscriber(db, "telegram:-100200300")
    assert subscriber is not None and len(subscriber_records.follows_of(db, subscriber.id or 0)) == 1

    # An anonymous admin writes as the group itself: an admin, without asking Telegram.
    anonymous = updates.message(
        LAB, GROUP_ANONYMOUS_BOT, "/follow au:Hopper", sender_chat={"id": LAB.id, "type": "supergroup"}
    )
    await feed(tbot, anonymous)
    assert shown(api.sent(LAB.id)[-1]).startswith("Now following: au:Hopper\n")
    assert len(api.calls_of("getChatMember")) == 2


async def test_a_group_leaves_other_bots_commands_and_chatter_alone(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates
) -> None:
    member = Chat(tbot, api, updates, LAB, MEMBER)
    for text in ("/follow@OtherBot cat:cs.AI", "hello everyone", "follow cat:cs.AI", "@other_bot help"):
        assert await member.say(text) == [], text
    await feed(tbot, updates.sticker(LAB, MEMBER))
    await feed(tbot, updates.edited(LAB, MEMBER, "/follow@OtherBot cat:cs.DC"))
    assert api.sent() == []
    assert api.calls_of("getChatMember") == []

    (answer,) = await member.say("@papertrail_test_bot follows")
    assert shown(answer).startswith("This group follows nothing yet.")
    (answer,) = await member.say("/STATUS@PaperTrail_Test_Bot")
    assert shown(answer).startswith("This group has no subscription yet: send /start.")


async def test_bot_added_to_a_group_greets_it_and_removed_pauses_it(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    await feed(tbot, updates.my_chat_member(LAB, ADMIN, "left", "member"))
    (hello,) = api.sent(LAB.id)
    assert shown(hello) == (
        "Hello, Lab! PaperTrail posts new arXiv papers that match this group's follows. An admin can set it "
        "up with /start and add a follow with /follow QUERY, e.g. /follow cat:cs.DC. "
        "Anyone can use /follows, /try, /status and /help."
    )
    await Chat(tbot, api, updates, LAB, ADMIN).say("/follow cat:cs.DC")
    await feed(tbot, updates.my_chat_member(LAB, ADMIN, "member", "kicked"))
    subscriber = subscriber_records.get_subscriber(db, "telegram:-100200300")
    assert subscriber is not None
    assert (subscriber.status, subscriber.status_reason) == (SubscriberStatus.PAUSED, REMOVED)
    # Promoted to admin later: no second greeting.
    before = len(api.sent())
    await feed(tbot, updates.my_chat_member(LAB, ADMIN, "member", "administrator"))
    assert len(api.sent()) == before
    await feed(tbot, updates.my_chat_member(LAB, ADMIN, "kicked", "member"))
    assert shown(api.sent(LAB.id)[-1]).startswith(
        "Hello, Lab! PaperTrail is back. This group's follows are kept"
    )


# ---------------------------------------------------------------------------------------------------------
# Odd messages


async def test_blocking_the_bot_pauses_the_chat_and_start_resumes_it(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    ada = Chat(tbot, api, updates, ADA_CHAT, ADA)
    await ada.say("/follow cat:cs.DC")
    before = len(api.sent())
    await feed(tbot, updates.my_chat_member(ADA_CHAT, ADA, "member", "kicked"))
    assert len(api.sent()) == before  # nothing can be sent to someone who blocked the bot
    subscriber = subscriber_records.get_subscriber(db, "telegram:4242")
    assert subscriber is not None
    assert (subscriber.status, subscriber.status_reason) == (SubscriberStatus.PAUSED, BLOCKED)

    # Unblocking sends my_chat_member (no greeting in a private chat), then Telegram's client sends /start.
    await feed(tbot, updates.my_chat_member(ADA_CHAT, ADA, "kicked", "member"))
    assert len(api.sent()) == before
    (back,) = await ada.say("/start")
    assert shown(back) == (
        "Welcome back. This chat follows 1 query; digests go out daily 08:00 (UTC).\n"
        f"Digests were paused ({BLOCKED}); they are on again.\n"
        "/follows lists them, /follow QUERY adds one, /help shows all commands."
    )
    subscriber = subscriber_records.get_subscriber(db, "telegram:4242")
    assert subscriber is not None and subscriber.status == SubscriberStatus.ACTIVE


async def test_a_chat_paused_by_itself_stays_paused_by_itself_when_blocked(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    ada = Chat(tbot, api, updates, ADA_CHAT, ADA)
    await ada.say("/start")
    await ada.say("/pause")
    await feed(tbot, updates.my_chat_member(ADA_CHAT, ADA, "member", "kicked"))
    subscriber = subscriber_records.get_subscriber(db, "telegram:4242")
    assert subscriber is not None and subscriber.status_reason == "paused from the chat"


async def test_edited_messages_are_not_run_again(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    await feed(tbot, updates.edited(ADA_CHAT, ADA, "/follow cat:cs.AI"))
    (answer,) = api.sent(ADA.id)
    assert shown(answer) == EDITED
    assert subscriber_records.get_subscriber(db, "telegram:4242") is None
    # In a group, an edited command to this bot gets the same answer, quoting the edited message.
    await feed(tbot, updates.edited(LAB, MEMBER, "/follow cat:cs.AI"))
    (answer,) = api.sent(LAB.id)
    assert shown(answer) == EDITED and "reply_parameters" in answer.params


async def test_stickers_get_a_hint_in_private_and_silence_in_groups(
    api: FakeTelegram, updates: Updates, db: Database
) -> None:
    # This bot gets its Bot injected (the constructor's test hook) instead of building one from settings.
    injected = telegram.Bot(TOKEN, base_url=f"{api.base_url}/bot")
    tbot = TelegramBot(Settings().telegram_bot(), db, bot=injected, clock=lambda: NOW)
    await tbot.start()
    await feed(tbot, updates.sticker(ADA_CHAT, ADA))
    (hint,) = api.sent(ADA.id)
    assert shown(hint) == NO_TEXT
    await feed(tbot, updates.sticker(LAB, MEMBER))
    # A service message in a private chat (no text, no attachment) is not answered either.
    await feed(tbot, updates.message(ADA_CHAT, ADA, None, pinned_message=api.message(ADA.id, 1)))
    assert len(api.sent()) == 1
    await tbot.stop()


async def test_a_group_upgraded_to_a_supergroup_keeps_its_subscription(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    old = Place(-4001, "group", "Lab")
    api.set_member(old.id, ADMIN.id, "administrator")
    await Chat(tbot, api, updates, old, ADMIN).say("/follow cat:cs.DC")
    # Telegram tells the old group where it went, and the new supergroup where it came from.
    await feed(tbot, updates.message(old, ADMIN, None, migrate_to_chat_id=LAB.id))
    await feed(tbot, updates.message(LAB, ADMIN, None, migrate_from_chat_id=old.id))
    assert subscriber_records.get_subscriber(db, "telegram:-4001") is None
    moved = subscriber_records.get_subscriber(db, "telegram:-100200300")
    assert moved is not None and [f.query for f in subscriber_records.follows_of(db, moved.id or 0)] == [
        "cat:cs.DC"
    ]


async def test_telegram_sized_messages_are_refused_politely(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates
) -> None:
    text = "/follow " + "(cat:cs.AI OR " * 291 + "x" * 14
    assert len(text) <= 4096 and len(text) > MAX_INPUT_CHARS
    (answer,) = await Chat(tbot, api, updates, ADA_CHAT, ADA).say(text)
    assert shown(answer) == (
        f"That message is {len(text):,} characters long; a command can be at most 2,000 (a follow query at "
        "most 1,000). Send a shorter one; /help lists the commands."
    )


async def test_the_watch_button_follows_the_paper_for_revisions(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    ada = Chat(tbot, api, updates, ADA_CHAT, ADA)
    # A digest message as the notifier would send it, with the buttons under an item.
    digest = updates.message_json(
        ADA_CHAT,
        ADA,
        "Agent Centric Operating System …",
        reply_markup={
            "inline_keyboard": [
                [
                    {"text": "Unfollow cat:cs.DC", "callback_data": "unfollow:999"},
                    {"text": "Watch revisions", "callback_data": "watch:2411.17710"},
                ]
            ]
        },
    )
    before = len(api.sent())
    await feed(tbot, updates.callback(ADA_CHAT, ADA, "watch:2411.17710", digest))
    (answer,) = api.sent(ADA.id)[before:]
    assert shown(answer).startswith("This chat is now subscribed.\nNow following: id:2411.17710\n")
    # A follow that is gone (or another chat's) is not found; data this bot never wrote is refused.
    (gone,) = await ada.send_update(updates.callback(ADA_CHAT, ADA, "unfollow:999", digest))
    assert shown(gone) == "That follow is no longer in this chat's follows. /follows lists them."
    assert await ada.send_update(updates.callback(ADA_CHAT, ADA, "watch:not-an-id", digest)) == []
    assert api.calls_of("answerCallbackQuery")[-1].params["text"].startswith("This button no longer works")
    follows = subscriber_records.follows_of(
        db,
        subscriber_records.get_subscriber(db, "telegram:4242").id or 0,  # type: ignore[union-attr]
    )
    assert [f.query for f in follows] == ["id:2411.17710"]


# ---------------------------------------------------------------------------------------------------------
# Languages


async def test_a_chinese_speaker_gets_chinese_replies_end_to_end(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    li = Chat(tbot, api, updates, Place(LI.id), LI)
    (welcome,) = await li.say("/start")
    assert shown(welcome) == (
        "欢迎使用 PaperTrail，Li Wei！"
        "与本会话的关注相匹配的 arXiv 新论文将汇总成摘要发送，时间：每天 08:00（UTC）。\n"
        '下一步，关注点什么吧：/follow cat:cs.DC 或 /follow au:"Zeng Li"。'
        "/try QUERY 显示某个查询最近会匹配到的论文；/help 列出所有命令。"
    )
    # Buttons are command lines: typed the same in every language.
    assert [label for label, _ in buttons(welcome)] == ["/help follow", "/try cat:cs.DC"]
    subscriber = subscriber_records.get_subscriber(db, f"telegram:{LI.id}")
    assert subscriber is not None and subscriber.language == "zh"  # from Telegram's language_code
    await li.say("/follow cat:cs.DC")
    await li.say("/follow ti:scheduling --instant")
    (listing,) = await li.say("/follows")
    assert shown(listing) == (
        "本会话关注了 2 个查询：\n1. cat:cs.DC\n2. ti:scheduling · 即时\n"
        "用 /unfollow NUMBER 取消关注，用 /follow QUERY 添加关注。"
    )
    assert [label for label, _ in buttons(listing)] == ["✕ 1. cat:cs.DC", "✕ 2. ti:scheduling"]
    (removed,) = await li.press(listing, buttons(listing)[0][1])
    assert shown(removed) == "已取消关注：cat:cs.DC\n还剩 1 个关注；/follows 可列出它们。"
    # What the bot writes itself is Chinese too: a stale button, an edit, a sticker.
    (gone,) = await li.send_update(updates.callback(Place(LI.id), LI, "unfollow:999"))
    assert shown(gone) == "这个关注已不在本会话的关注中。/follows 可列出当前的关注。"
    assert await li.send_update(updates.callback(Place(LI.id), LI, "watch:not-an-id")) == []
    assert api.calls_of("answerCallbackQuery")[-1].params["text"] == "这个按钮已失效。/help 列出所有命令。"
    (edited,) = await li.send_update(updates.edited(Place(LI.id), LI, "/follow cat:cs.AI"))
    assert shown(edited).startswith("编辑过的消息不会重新执行，因此没有任何更改。")
    (hint,) = await li.send_update(updates.sticker(Place(LI.id), LI))
    assert (
        shown(hint) == "PaperTrail 只读取文字命令，例如 /follow cat:cs.DC 或 /follows。/help 列出所有命令。"
    )
    # An explicit choice holds, whatever language Telegram reports afterwards.
    (chosen,) = await li.say("/language en")
    assert shown(chosen).startswith("This chat now uses English.")
    (listing,) = await li.say("/follows")
    assert shown(listing).startswith("This chat follows 1 query:")


async def test_a_group_is_greeted_and_refused_in_the_senders_language(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates, db: Database
) -> None:
    # Added by a Chinese speaker: the greeting is Chinese.
    await feed(tbot, updates.my_chat_member(LAB, LI, "left", "member"))
    (hello,) = api.sent(LAB.id)
    assert shown(hello).startswith("Lab，大家好！PaperTrail 会发布与本群组的关注相匹配的 arXiv 新论文。")
    # An anonymous admin (no language) sets the group up: until the group has a language, each member is
    # answered in their own, and a Chinese-speaking member is refused in Chinese, privately.
    anonymous = updates.message(
        LAB, GROUP_ANONYMOUS_BOT, "/follow cat:cs.DC", sender_chat={"id": LAB.id, "type": "supergroup"}
    )
    await feed(tbot, anonymous)
    assert shown(api.sent(LAB.id)[-1]).startswith("This group is now subscribed.")
    li = Chat(tbot, api, updates, LAB, LI)
    (listing,) = await li.say("/follows")
    assert shown(listing).startswith("本群组关注了 1 个查询：")
    await li.press(listing, buttons(listing)[0][1])
    alert = api.calls_of("answerCallbackQuery")[-1].params
    assert alert["show_alert"] is True
    assert alert["text"].startswith("只有本群组的管理员可以更改关注和设置。")
    subscriber = subscriber_records.get_subscriber(db, f"telegram:{LAB.id}")
    assert subscriber is not None and subscriber.language is None  # a member's language is not the group's
    # An admin whose Telegram names a language gives the group its language; then everyone reads it.
    await Chat(tbot, api, updates, LAB, ADMIN).say("/status")
    (listing,) = await li.say("/follows")
    assert shown(listing).startswith("This group follows 1 query:")


# ---------------------------------------------------------------------------------------------------------
# Replies as Telegram HTML


def test_replies_are_escaped_and_split_within_telegrams_limit() -> None:
    hostile = Reply((Block("<b>Tom & Jerry</b> \"quoted\" 'single'"), Block("a < b\n  ^", monospace=True)))
    assert html_parts(hostile) == [
        "&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; \"quoted\" 'single'\n<pre>a &lt; b\n  ^</pre>"
    ]
    long_lines = "\n".join(f"{n:04d} " + "𝔞&" * 30 for n in range(120))  # astral letters count 2 units
    reply = Reply((Block("head"), Block(long_lines, monospace=True), Block("x" * 9000)))
    parts = html_parts(reply)
    texts = [parse_html(part) for part in parts]
    assert all(utf16_len(text) <= MAX_LENGTH for text, _ in texts)
    # head + the first 42 lines; 42 lines; the last 36 lines; then 4096 + 4096 + 808 x's.
    assert [utf16_len(text) for text, _ in texts] == [
        4 + 1 + 42 * 96 - 1,
        42 * 96 - 1,
        36 * 96 - 1,
        4096,
        4096,
        808,
    ]
    # Nothing lost: the parts put back together are the blocks (cut at newlines, or inside the long line).
    joined = "".join(text for text, _ in texts).replace("\n", "")
    assert joined == ("head" + long_lines + "x" * 9000).replace("\n", "")
    # Each piece of the monospace block is its own well-formed <pre>.
    assert [e["type"] for _, entities in texts for e in entities] == ["pre", "pre", "pre"]


def test_buttons_carry_at_most_64_bytes() -> None:
    long_query = "follow " + "ti:transformer " * 5
    reply = Reply((Block("x"),), suggestions=("follow cat:cs.DC", long_query))
    markup = keyboard(reply, "/", {})
    assert markup is not None
    assert [[b.callback_data for b in row] for row in markup.inline_keyboard] == [["cmd:follow cat:cs.DC"]]
    assert callback_data(Action.WATCH, "2411.17710") == "watch:2411.17710"
    assert read_callback("unfollow:12") == Button(Action.UNFOLLOW, "12")
    assert read_callback("watch:quant-ph/0201082") == Button(Action.WATCH, "quant-ph/0201082")
    for data in ("unfollow:x", "watch:2411.17710v2", "other:1", "cmd:", "", None):
        assert read_callback(data) is None, data


# ---------------------------------------------------------------------------------------------------------
# Polling, webhook, start-up


async def test_long_polling_answers_and_stops_promptly(
    api: FakeTelegram, updates: Updates, db: Database
) -> None:
    bot = TelegramBot(bot_settings(api).telegram_bot(), db, clock=lambda: NOW)
    stop = asyncio.Event()
    polling = asyncio.create_task(bot.run_polling(stop))
    api.push_update(updates.message(ADA_CHAT, ADA, "/start"))
    api.push_update(updates.message(ADA_CHAT, ADA, "/follows"))
    for _ in range(500):
        if len(api.sent(ADA.id)) == 2:
            break
        await asyncio.sleep(0.02)
    assert [shown(c).split("\n")[0] for c in api.sent(ADA.id)] == [
        "Welcome to PaperTrail, Ada Lovelace! New arXiv papers matching this chat's follows will arrive in a "
        "digest daily 08:00 (UTC).",
        "This chat follows nothing yet. Add a follow with /follow QUERY, e.g. /follow cat:cs.DC; "
        "/help follow shows the query language.",
    ]
    stop.set()
    await asyncio.wait_for(polling, 10)  # the open long poll is cancelled, not waited out
    polls = api.calls_of("getUpdates")
    assert api.methods()[:4] == ["getMe", "setMyCommands", "setMyCommands", "deleteWebhook"]
    assert polls[0].params["timeout"] == "30"
    assert polls[-1].params["timeout"] == "0"  # the last call only confirms what was fetched
    assert api.pending_updates() == []
    assert not bot.application.running


async def test_webhook_route_checks_the_secret_and_processes_updates(
    api: FakeTelegram, updates: Updates, db: Database
) -> None:
    settings = bot_settings(
        api, telegram_mode="webhook", public_url="https://papertrail.example.org/", secret_key="k" * 32
    )
    bot = TelegramBot(settings.telegram_bot(), db, clock=lambda: NOW)
    await bot.register_webhook()
    secret = bot.webhook_secret()
    assert len(secret) == 64 and secret != "k" * 32
    assert api.webhook["url"] == "https://papertrail.example.org/telegram/webhook"
    assert api.webhook["secret_token"] == secret
    assert api.webhook["allowed_updates"] == ["message", "edited_message", "callback_query", "my_chat_member"]

    app = Starlette(routes=[bot.webhook_route()])
    update = updates.message(ADA_CHAT, ADA, "/start")

    def post_all() -> list[int]:
        with TestClient(app) as client:
            return [
                client.post(WEBHOOK_PATH, json=update).status_code,
                client.post(WEBHOOK_PATH, json=update, headers={SECRET_HEADER: "wrong"}).status_code,
                client.post(WEBHOOK_PATH, json=update, headers={SECRET_HEADER: secret[:-1]}).status_code,
                client.post(WEBHOOK_PATH, json=update, headers={SECRET_HEADER: secret}).status_code,
                client.post(WEBHOOK_PATH, content=b"{", headers={SECRET_HEADER: secret}).status_code,
                # Nested past the decoder's stack, or past the shared limit: refused, no traceback.
                *(
                    client.post(
                        WEBHOOK_PATH,
                        content=b'{"update_id": 8, "message": ' + b"[" * depth + b"]" * depth + b"}",
                        headers={SECRET_HEADER: secret},
                    ).status_code
                    for depth in (100_000, 65)
                ),
                # Authentic but malformed: dropped (and logged), yet 200 so Telegram does not resend it.
                client.post(
                    WEBHOOK_PATH, json={"update_id": 9, "message": "x"}, headers={SECRET_HEADER: secret}
                ).status_code,
                client.get(WEBHOOK_PATH, headers={SECRET_HEADER: secret}).status_code,
            ]

    # The route runs in TestClient's own thread and loop; the update is processed on the bot's loop.
    assert await asyncio.to_thread(post_all) == [401, 401, 401, 200, 400, 400, 400, 200, 405]
    (welcome,) = api.sent(ADA.id)
    assert shown(welcome).startswith("Welcome to PaperTrail, Ada Lovelace!")
    await bot.stop()

    configured = Settings(**(settings.model_dump() | {"telegram_webhook_secret": "my_secret-1"}))
    assert TelegramBot(configured.telegram_bot(), db).webhook_secret() == "my_secret-1"


async def test_webhook_settings_that_cannot_work_are_refused(api: FakeTelegram, db: Database) -> None:
    plain_http = TelegramBot(bot_settings(api, secret_key="k" * 32).telegram_bot(), db)
    with pytest.raises(TelegramBotError, match="only to https:// addresses") as raised:
        await plain_http.register_webhook()
    assert raised.value.permanent
    no_secret = TelegramBot(bot_settings(api, public_url="https://example.org").telegram_bot(), db)
    with pytest.raises(TelegramBotError, match="needs a secret"):
        no_secret.webhook_route()
    bad = TelegramBot(bot_settings(api, telegram_webhook_secret="has space").telegram_bot(), db)
    with pytest.raises(TelegramBotError, match="may hold only"):
        bad.webhook_secret()
    assert api.calls_of("setWebhook") == []


async def test_run_in_webhook_mode_registers_and_waits_for_stop(api: FakeTelegram, db: Database) -> None:
    settings = bot_settings(
        api,
        telegram_mode="webhook",
        public_url="https://papertrail.example.org",
        telegram_webhook_secret="s3",
    )
    bot = TelegramBot(settings.telegram_bot(), db)
    stop = asyncio.Event()
    running = asyncio.create_task(bot.run(stop))
    for _ in range(500):
        if api.calls_of("setWebhook"):
            break
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(running, 10)
    assert api.webhook["secret_token"] == "s3"
    assert api.calls_of("getUpdates") == []  # webhook mode never polls
    assert not bot.application.running


async def test_an_unreachable_bot_api_is_retried_until_stop(db: Database) -> None:
    settings = Settings(telegram_token=TOKEN, telegram_api_url=f"http://127.0.0.1:{closed_port()}")
    bot = TelegramBot(settings.telegram_bot(), db)
    stop = asyncio.Event()
    running = asyncio.create_task(bot.run_polling(stop))
    await asyncio.sleep(0.2)  # let it fail at least once (or not: stopping must work either way)
    stop.set()
    await asyncio.wait_for(running, 10)
    assert not bot.application.running


async def test_a_rejected_token_stops_the_bot_without_showing_the_token(
    api: FakeTelegram, db: Database
) -> None:
    settings = Settings(telegram_token="999:WRONG-token-value", telegram_api_url=api.base_url)
    bot = TelegramBot(settings.telegram_bot(), db)
    with pytest.raises(TelegramBotError) as raised:
        await bot.run_polling(asyncio.Event())
    assert raised.value.permanent
    assert "WRONG-token-value" not in str(raised.value)
    assert "rejected the bot token; check PAPERTRAIL_TELEGRAM_TOKEN" in str(raised.value)
    with pytest.raises(TelegramBotError, match="needs PAPERTRAIL_TELEGRAM_TOKEN"):
        TelegramBot(Settings().telegram_bot(), db)


# ---------------------------------------------------------------------------------------------------------
# Fuzzing


FUZZ = settings(
    max_examples=80,
    derandomize=True,
    deadline=None,  # about results, never about time
    suppress_health_check=[HealthCheck.too_slow],
)
TEXTS = st.one_of(
    st.text(max_size=200),
    command_text(),
    st.builds(lambda char, n: "/follow " + char * n, st.characters(), st.integers(1990, 4080)),
)


async def test_every_private_message_gets_exactly_one_answer(
    tbot: TelegramBot, api: FakeTelegram, updates: Updates
) -> None:
    loop = asyncio.get_running_loop()

    @FUZZ
    @given(text=TEXTS)
    def one_answer(text: str) -> None:
        before = len(api.sent(ADA.id))
        update = updates.message(ADA_CHAT, ADA, text)
        asyncio.run_coroutine_threadsafe(tbot.process(update), loop).result(timeout=60)
        sent = api.sent(ADA.id)[before:]
        assert len(sent) == 1, (text, [shown(c) for c in sent])
        assert shown(sent[0]).strip()

    await asyncio.to_thread(one_answer)
    # Every answer was valid Telegram HTML: the fake refused nothing.
    assert all(c.status == 200 for c in api.calls_of("sendMessage"))
