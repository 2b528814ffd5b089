"""Languages in the chat commands: the ``language`` command, the defaults from the platform, and every
reply in Simplified Chinese for a chat that speaks it.

The same store (tests/test_commands.py's templates: the recorded feed, a chat following two queries) is
used in English and in Chinese, so that each Chinese reply can be held against the English one: it must
carry Chinese, and no English sentence of the English reply may be left in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.commands import handle
from bot.commands_base import ChatContext, Problem, Reply
from bot.commands_table import BY_NAME, COMMANDS, command_list, overview, page
from core.config import Settings
from core.db import Database
from core.follows import subscriber_records
from core.follows.query import QueryError, parse
from core.languages import translator
from core.models import SubscriberStatus
from core.people import newsletters
from tests.support.chat_commands import (
    GROUP_ADMIN,
    GROUP_MEMBER,
    NOW,
    PRIVATE,
    migrated_template_fixture,
    open_copy,
    record_runs,
    subscribed_template_fixture,
)

__all__ = ["migrated_template_fixture", "subscribed_template_fixture"]  # fixtures, asked for by name

CJK = re.compile(r"[\u4e00-\u9fff]")
ZH_PRIVATE = ChatContext("telegram:4242", chat_name="Ada Lovelace", language="zh-CN")
EN_PRIVATE = ChatContext("telegram:4242", chat_name="Ada Lovelace", language="en-GB")
ZH_GROUP_MEMBER = ChatContext(
    GROUP_MEMBER.address, is_group=True, can_change=False, chat_name="Lab", language="zh-hans"
)
ZH_GROUP_ADMIN = ChatContext(
    GROUP_ADMIN.address, is_group=True, can_change=True, chat_name="Lab", language="zh"
)
ZH_SLACK = ChatContext(
    "slack:C0123ABC",
    platform="slack",
    is_group=True,
    chat_name="#lab",
    language="zh-CN",
    prefix="/papertrail ",
)


@pytest.fixture
def db(migrated_template: Path, tmp_path: Path) -> Iterator[Database]:
    yield from open_copy(migrated_template, tmp_path)


def say(db: Database, text: str, ctx: ChatContext = ZH_PRIVATE) -> Reply:
    reply = handle(db, Settings().chat(), ctx, text, now=NOW)
    assert reply.text.strip(), text
    return reply


def language_of(db: Database, address: str) -> str | None:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None
    return subscriber.language


# ---------------------------------------------------------------------------------------------------------
# The language command


def test_language_shows_the_language_and_the_choices(db: Database) -> None:
    shown = say(db, "/language", PRIVATE)
    assert shown.ok and shown.language == "en"
    assert shown.text == (
        "PaperTrail speaks English in this chat, the language of your Telegram or Slack settings "
        "(or English when they name none).\n"
        "Change it with /language en (English) or /language zh (中文). "
        "Replies, digests and AI reading guides follow it."
    )
    assert shown.suggestions == ("language zh",)
    # Showing changes nothing: no subscriber is created for it.
    assert subscriber_records.get_subscriber(db, PRIVATE.address) is None
    chinese = say(db, "/language", ZH_GROUP_MEMBER)  # anyone may look, in a group too
    assert chinese.ok and chinese.language == "zh"
    assert chinese.text.startswith("PaperTrail 在本群组中使用中文，即你的 Telegram 或 Slack 设置中的语言")
    assert chinese.suggestions == ("language en",)


def test_language_sets_the_language_and_answers_in_it(db: Database) -> None:
    say(db, "/start", PRIVATE)
    assert language_of(db, PRIVATE.address) is None  # the platform named none
    chosen = say(db, "/language zh", PRIVATE)
    assert chosen.ok and chosen.language == "zh"
    assert (
        chosen.text == "本会话现在使用中文。\n从现在起，回复和摘要（以及本服务器生成的 AI 导读）都使用中文。"
    )
    assert language_of(db, PRIVATE.address) == "zh"
    # From now on every reply is Chinese, whatever the platform says.
    assert say(db, "/follows", PRIVATE).text.startswith("本会话还没有任何关注。")
    assert say(db, "/language", EN_PRIVATE).text.startswith("PaperTrail 在本会话中使用中文。")
    again = say(db, "/language chinese", PRIVATE)
    assert again.text.startswith("本会话已经在使用中文。")
    back = say(db, "/language en", PRIVATE)
    assert back.text == (
        "This chat now uses English.\n"
        "Replies and digests, with their AI reading guides where this server makes them, are in English from "
        "now on."
    )
    assert language_of(db, PRIVATE.address) == "en"


def test_language_without_a_subscription_creates_one_with_the_choice(db: Database) -> None:
    reply = say(db, "/language zh", PRIVATE)
    assert reply.ok
    subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert subscriber is not None and subscriber.language == "zh"
    assert subscriber.status == SubscriberStatus.ACTIVE


@pytest.mark.parametrize(
    ("typed", "language"),
    [
        ("zh", "zh"),
        ("ZH", "zh"),
        ("zh-CN", "zh"),
        ("zh_Hans", "zh"),
        ("zh-Hant-TW", "zh"),
        ("chinese", "zh"),
        ("Chinese", "zh"),
        ("中文", "zh"),
        ("简体中文", "zh"),
        ("ｚｈ", "zh"),  # full width, as some keyboards type it
        ("en", "en"),
        ("EN", "en"),
        ("en-US", "en"),
        ("English", "en"),
        ("英文", "en"),
    ],
)
def test_language_accepts_codes_and_names(db: Database, typed: str, language: str) -> None:
    other = "en" if language == "zh" else "zh"
    say(db, f"/language {other}", PRIVATE)
    reply = say(db, f"/language {typed}", PRIVATE)
    assert reply.ok and reply.language == language, reply.text
    assert language_of(db, PRIVATE.address) == language


@pytest.mark.parametrize("typed", ["fr", "klingon", "zh en", "de-DE", "x" * 300, "<b>"])
def test_a_language_papertrail_does_not_speak_is_refused_with_the_choices(db: Database, typed: str) -> None:
    say(db, "/start", PRIVATE)
    reply = say(db, f"/language {typed}", PRIVATE)
    assert reply.error == Problem.BAD_ARGUMENT
    assert reply.text.startswith('PaperTrail does not speak "')
    assert reply.text.endswith('". Choose /language en (English) or /language zh (中文).')
    assert len(reply.text) < 200  # what was typed is cut
    assert reply.suggestions == ("language en", "language zh")
    assert language_of(db, PRIVATE.address) is None
    chinese = say(db, "/language fr", ZH_PRIVATE)
    assert chinese.text == "PaperTrail 不支持“fr”。请选择 /language en (English) 或 /language zh (中文)。"


def test_a_group_member_may_look_but_not_choose(db: Database) -> None:
    say(db, "/start", GROUP_ADMIN)
    refused = say(db, "/language zh", GROUP_MEMBER)
    assert refused.error == Problem.NOT_ALLOWED
    assert refused.text.startswith("Only admins of this group can change its follows and settings.")
    assert language_of(db, GROUP_ADMIN.address) is None
    # A Chinese-speaking member is refused in Chinese, and still changes nothing.
    refused = say(db, "/language zh", ZH_GROUP_MEMBER)
    assert refused.error == Problem.NOT_ALLOWED
    assert refused.text.startswith("只有本群组的管理员可以更改关注和设置。")
    assert language_of(db, GROUP_ADMIN.address) is None
    assert say(db, "/language", GROUP_MEMBER).ok
    chosen = say(db, "/language 中文", GROUP_ADMIN)
    assert chosen.ok and chosen.text.startswith("本群组现在使用中文。")
    # Now the group speaks Chinese to everyone, whatever their own settings.
    assert CJK.search(say(db, "/follows", GROUP_MEMBER).text)


def test_a_mistyped_language_word_suggests_the_command_that_sets_it(db: Database) -> None:
    reply = say(db, "中文", PRIVATE)
    assert reply.error == Problem.UNKNOWN_COMMAND
    assert reply.text == 'Unknown command "中文". Did you mean /language? /help lists all commands.'
    assert reply.suggestions == ("language zh",)
    assert say(db, "/english", ZH_PRIVATE).suggestions == ("language en",)
    assert say(db, "/lang zh", PRIVATE).ok  # a short form of the command


# ---------------------------------------------------------------------------------------------------------
# Defaults from the platform


def test_a_new_chat_takes_the_platforms_language(db: Database) -> None:
    welcome = say(db, "/start", ZH_PRIVATE)
    assert welcome.language == "zh"
    assert welcome.text.split("\n")[0] == (
        "欢迎使用 PaperTrail，Ada Lovelace！"
        "与本会话的关注相匹配的 arXiv 新论文将汇总成摘要发送，时间：每天 08:00（UTC）。"
    )
    assert language_of(db, ZH_PRIVATE.address) == "zh"
    # Any command that creates the subscription stores it, a follow as well as start.
    follow = say(db, "/follow cat:cs.DC", ChatContext("telegram:5151", language="zh-TW"))
    assert follow.text.startswith("本会话已订阅。\n已关注：cat:cs.DC\n")
    assert language_of(db, "telegram:5151") == "zh"
    say(db, "/timezone Berlin", ChatContext("telegram:5252", language="en-US"))
    assert language_of(db, "telegram:5252") == "en"


@pytest.mark.parametrize("code", [None, "", "fr", "de-DE", "zh;DROP"])
def test_an_unknown_platform_language_is_not_stored_and_replies_are_english(
    db: Database, code: str | None
) -> None:
    ctx = ChatContext("telegram:6161", language=code)
    welcome = say(db, "/start", ctx)
    assert welcome.language == "en" and welcome.text.startswith("Welcome to PaperTrail!")
    assert language_of(db, ctx.address) is None


def test_a_chat_without_a_language_takes_the_platforms_when_it_names_one(db: Database) -> None:
    say(db, "/follow cat:cs.DC", PRIVATE)
    assert language_of(db, PRIVATE.address) is None
    assert CJK.search(say(db, "/follows", ZH_PRIVATE).text)
    assert language_of(db, PRIVATE.address) == "zh"
    # Stored now: the chat stays Chinese even when the next message comes from an English app.
    assert CJK.search(say(db, "/follows", EN_PRIVATE).text)
    assert language_of(db, PRIVATE.address) == "zh"


def test_an_explicit_choice_is_never_overwritten_by_the_platform(db: Database) -> None:
    say(db, "/start", ZH_PRIVATE)
    say(db, "/language en", ZH_PRIVATE)
    for text in ("/follows", "/status", "/help", "/start"):
        reply = say(db, text, ZH_PRIVATE)
        assert reply.language == "en" and not CJK.search(reply.text.replace("中文", "")), text
    assert language_of(db, ZH_PRIVATE.address) == "en"


def test_a_group_members_language_answers_them_but_does_not_decide_the_groups(db: Database) -> None:
    say(db, "/start", GROUP_ADMIN)  # the admin's app named no language
    assert language_of(db, GROUP_ADMIN.address) is None
    member = say(db, "/follows", ZH_GROUP_MEMBER)
    assert member.language == "zh" and member.text.startswith("本群组还没有任何关注。")
    assert language_of(db, GROUP_ADMIN.address) is None
    assert say(db, "/follows", GROUP_MEMBER).language == "en"
    # An admin whose app speaks Chinese gives the group its default.
    say(db, "/follows", ZH_GROUP_ADMIN)
    assert language_of(db, GROUP_ADMIN.address) == "zh"


# ---------------------------------------------------------------------------------------------------------
# Every reply in Chinese


@pytest.fixture
def twin_stores(subscribed_template: Path, tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    """Two copies of the subscribed store with a newsletter: PRIVATE follows two queries, 19 matches wait."""
    copies = [open_copy(subscribed_template, tmp_path / name) for name in ("en", "zh")]
    pair: list[Database] = []
    for name, copy in zip(("en", "zh"), copies, strict=True):
        (tmp_path / name).mkdir()
        prepared = next(copy)
        record_runs(prepared)
        newsletters.create(
            prepared, "dc-weekly", "Distributed systems weekly", ["cat:cs.DC"], schedule="weekly mon 09:00",
            timezone="Europe/Berlin", now=NOW,
        )  # fmt: skip
        pair.append(prepared)
    yield pair[0], pair[1]
    for copy in copies:
        next(copy, None)  # disposes the engine


# Each case runs after the ones before it, in both stores, so that later commands see earlier changes.
SESSION = (
    "/start",
    "/help",
    "/help follow",
    "/help digest",
    "/help zzz",
    "/help folow",
    "/follows",
    "/follow cat:cs.AI --new-only",
    "/follow cat:cs.AI --new-only",
    "/follow cat:cs.AI --instant",
    "/follow",
    "/follow cat:cs.AI --bogus",
    "/follow cat:cs.LG AND (graph OR",
    '/try ti:"operating system"',
    "/try cat:cs.DC",
    "/try zzzqqqxyz",
    "/try",
    "/status",
    "/digest",
    "/digest daily 25:00",
    "/digest weekly xyz 9",
    "/digest sometimes",
    "/digest weekly mon 9am",
    "/digest now",
    "/digest now",
    "/timezone",
    "/timezone Europe/Berln",
    "/timezone PST",
    "/timezone nowhere-at-all-really",
    "/timezone UTC+2",
    "/timezone Europe/Berlin",
    "/unfollow",
    "/unfollow 9",
    "/unfollow cat:cs.XX",
    "/unfollow 3",
    "/join",
    "/join dc-weekli",
    "/join dc-weekly",
    "/join dc-weekly",
    "/leave",
    "/leave dc-weekly",
    "/leave dc-weekly",
    "/pause",
    "/pause",
    "/digest now",
    "/status",
    "/resume",
    "/resume",
    "/likes",
    "/like",
    "/like foo",
    "/like 2411.99999",
    "/like 2411.17710v9",
    "/like 2411.17710",
    "/like 2411.17710",
    "/dislike arXiv:2411.17710v1",
    "/likes",
    "/unvote 2411.17710",
    "/unvote 2411.17710",
    "/help like",
    "/recommend",
    "/recommend on",
    "/recommend on 99",
    "/recommend maybe",
    "/try recommended",
    "/recommend off",
    "/help recommend",
    "/language",
    "/folow cat:cs.AI",
    "cat:cs.AI au:Li",
    "/blah",
    "",
    "x" * 2100,
)
# Sentences the two languages share: data (paper lines, a vote list's lines, newsletter lines), not wording.
_DATA = re.compile(r"^((?:👍 |👎 )?\d{4}\.\d{4,5}v\d+ |dc-weekly — |\d+\. |/\S+ \S)")
# The title of the paper the session votes on: data too, quoted after a vote's wording.
_VOTED_TITLE = "Agent Centric Operating System -- a Comprehensive Review and Outlook"
_SENTENCES = re.compile(r"(?<=[.?!:;])\s+")
_WORD = re.compile(r"[A-Za-z']{2,}[,.;:!?]?")  # a plain English word, not a query or a command


def english_sentences(text: str) -> list[str]:
    """The sentences of an English reply that are wording: three words or more, on lines that are not data."""
    found = []
    for line in text.split("\n"):
        if _DATA.match(line.strip()):
            continue
        for sentence in _SENTENCES.split(line):
            words = [word for word in sentence.split() if _WORD.fullmatch(word)]
            if len(words) >= 3 and sentence.strip().rstrip("…") not in _VOTED_TITLE:
                found.append(sentence.strip())
    return found


def test_every_reply_is_chinese_for_a_chinese_chat(twin_stores: tuple[Database, Database]) -> None:
    english_store, chinese_store = twin_stores
    english_ctx = ChatContext(PRIVATE.address, chat_name="Ada Lovelace", language="en")
    say(english_store, "/language en", english_ctx)
    say(chinese_store, "/language zh", english_ctx)  # the choice, not the platform, decides
    seen_commands = set()
    for text in SESSION:
        english = say(english_store, text, english_ctx)
        chinese = say(chinese_store, text, english_ctx)
        assert (chinese.command, chinese.error) == (english.command, english.error), text
        if chinese.command != "language":  # which offers the other language
            assert chinese.suggestions == english.suggestions, text  # command lines: never translated
        assert chinese.language == "zh", text
        assert CJK.search(chinese.text), (text, chinese.text)
        for sentence in english_sentences(english.text):
            assert sentence not in chinese.text, (text, sentence)
        seen_commands.add(chinese.command)
    # Every command was heard in Chinese (and the answers without one: unknown, empty, too long).
    assert {info.name for info in COMMANDS} <= seen_commands


def test_slack_and_group_replies_name_the_place_in_chinese(db: Database) -> None:
    say(db, "/start", ZH_SLACK)
    follows = say(db, "/papertrail follows", ZH_SLACK)
    assert follows.text.startswith("本频道还没有任何关注。用 /papertrail follow QUERY 添加关注")
    refused = say(
        db,
        "/papertrail pause",
        ChatContext(
            ZH_SLACK.address, platform="slack", is_group=True, can_change=False, prefix="/papertrail "
        ),
    )
    assert refused.text.startswith("只有本频道的管理员可以更改关注和设置。")


# Every form of core.follows.query's errors (message and hint), one query each.
BAD_QUERIES = (
    '"open', 'ti:""', "foo:bar", "tit:bar", "all:x", "https://arxiv.org/abs/2411.17710", "http://example.com",
    "ti:", "ti:foo*", "-x", r"$\alpha$", "!!!", "au:--", "cat:c", "cat:xx.YY", "cat:cs.ZZ", "cat:cs.DCC",
    "cat:hep-th.X", "cat:cs.*x", "id:abc", "id:2411.17710v2", "", "a )", "a OR", "a OR )", "AND a", "()",
    "(a", "x" * 1001, " ".join(["w"] * 51), "(" * 25 + "a" + ")" * 25,
)  # fmt: skip


@pytest.mark.parametrize("query", BAD_QUERIES)
def test_why_a_query_does_not_parse_is_said_in_both_languages(query: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse(query)
    error = caught.value
    # English is the parser's own text, word for word; Chinese says every part of it again.
    assert error.said(translator("en")) == str(error)
    chinese = error.said(translator("zh"))
    assert CJK.search(chinese)
    assert error.message not in chinese, chinese
    assert not error.hint or error.hint not in chinese, chinese
    assert f"位置 {error.position}" in chinese


def test_a_query_error_reply_is_chinese_with_the_caret_under_the_query(db: Database) -> None:
    reply = say(db, "/follow cat:cs.LG AND (graph OR")
    assert reply.error == Problem.BAD_QUERY
    assert [block.text for block in reply.blocks] == [
        "无法解析这个查询：“OR”后面应有检索词（位置 23）",
        "cat:cs.LG AND (graph OR\n                       ^",
        "请修改后重新发送 /follow；/help follow 提供示例。",
    ]
    assert reply.blocks[1].monospace


# ---------------------------------------------------------------------------------------------------------
# Help in both languages


def test_help_lists_every_command_in_both_languages(db: Database) -> None:
    english = say(db, "/help", PRIVATE).text
    chinese = say(db, "/help", ZH_PRIVATE).text
    assert english.startswith(
        "PaperTrail sends new arXiv papers and revisions that match this chat's follows"
    )
    assert chinese.startswith(
        "PaperTrail 会按你设定的时间，把与本会话的关注相匹配的 arXiv 新论文和修订汇总成摘要发给你。"
    )
    for info in COMMANDS:
        usage = f"/{info.name}{' ' + info.usage if info.usage else ''} — "
        assert f"{usage}{info.summary}" in english
        (line,) = [line for line in chinese.split("\n") if line.startswith(usage)]
        assert CJK.search(line), line
    assert "/language [en|zh] — the language of replies, digests and guides" in english
    assert "/language [en|zh] — 回复、摘要和导读所用的语言" in chinese
    assert chinese.split("\n")[-2:] == ['示例：/follow cat:cs.DC au:"Zeng Li"', "/help follow 介绍查询语法。"]


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_help_page_exists_in_both_languages(db: Database, name: str) -> None:
    english = say(db, f"/help {name}", PRIVATE)
    chinese = say(db, f"/help {name}", ZH_PRIVATE)
    assert english.ok and chinese.ok
    assert english.text == page(name, "/") and chinese.text == page(name, "/", translator("zh"))
    assert CJK.search(chinese.text) and chinese.text != english.text
    # The examples keep the command words: what is typed is the same in every language.
    for example in re.findall(r"(?<!\w)/\w+", english.text):
        assert example in chinese.text, (name, example)


def test_help_texts_use_the_platforms_prefix_in_both_languages() -> None:
    zh = translator("zh")
    assert "/papertrail follow QUERY" in overview("/papertrail ", zh)
    assert "/papertrail language [en|zh] — 回复、摘要和导读所用的语言" in command_list("/papertrail ", zh)
    assert command_list("/") == command_list("/", translator("en"))


def test_an_apology_is_in_the_chats_language_even_when_the_database_is_gone(db: Database) -> None:
    say(db, "/language zh", PRIVATE)
    db.engine.dispose()
    with db.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE follow"))
    # The subscriber's language can still be read: the apology is in it.
    broken = handle(db, Settings().chat(), PRIVATE, "/follow cat:cs.DC", now=NOW)
    assert broken.error is Problem.INTERNAL
    assert broken.text == "抱歉，PaperTrail 这边出了点问题。请过几分钟再试。"
    with db.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE subscriber"))
    # Nothing can be read: the platform's language, else English.
    assert handle(db, Settings().chat(), ZH_PRIVATE, "/status", now=NOW).text.startswith("抱歉")
    assert handle(db, Settings().chat(), PRIVATE, "/status", now=NOW).text.startswith("Sorry")


def test_try_words_its_reasons_in_the_chats_language(twin_stores: tuple[Database, Database]) -> None:
    english_store, chinese_store = twin_stores
    ctx = ChatContext(PRIVATE.address, language="en")
    say(chinese_store, "/language zh", ctx)
    english = say(english_store, "/try cat:cs.DC", ctx)
    chinese = say(chinese_store, "/try cat:cs.DC", ctx)
    assert "why: category cs.DC" in english.text
    # The fixed words of a reason are translated; the matched value (the category) is shown as stored.
    assert "分类 cs.DC" in chinese.text and "category cs.DC" not in chinese.text
