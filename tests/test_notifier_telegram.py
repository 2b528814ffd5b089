"""Telegram notifier: the real python-telegram-bot Bot against the fake Bot API on 127.0.0.1.

Golden digests, splitting at 4096 UTF-16 units between items, every failure the Bot API answers with, resuming
a half-delivered digest, and the client-side rate limiter against a server that enforces Telegram's limits.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator

import pytest
import telegram

from core.channel import DeliveryError
from core.config import Settings
from core.reasons import TITLE, Reason
from core.values import DigestItem, Guide, Message
from notifiers.ratelimit import RateLimiter, Window
from notifiers.telegram.format import MAX_LENGTH, html_to_text, shorten_html, split_message, utf16_len
from notifiers.telegram.notifier import TelegramNotifier
from tests.fakes.telegram_api import (
    PASS,
    FakeTelegram,
    Scripted,
    blocked,
    cant_parse,
    chat_not_found,
    deactivated,
    fake_telegram,
    flood,
    kicked,
    migrated,
    not_ok,
    parse_html,
    server_error,
)
from tests.goldens import check_golden
from tests.hostile import guided_items, hostile_items, hostile_receipt, many_items, sample_receipt
from tests.servers import closed_port
from tests.support.telegram_digests import TOKEN, assert_well_formed, digest, renderer, two_items

# PTB 22's own RetryAfter constructor reads its deprecated int retry_after; the adapter takes either form.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def settings_for(
    api_url: str,
    *,
    token: str | None = TOKEN,
    per_second: float = 1000.0,
    chat_interval: float = 0.0,
) -> Settings:
    """Settings pointing at the fake; no rate limits unless a test asks for them."""
    return Settings(
        telegram_token=token,
        telegram_api_url=api_url,
        telegram_max_per_second=per_second,
        telegram_chat_interval=chat_interval,
    )


@pytest.fixture
def api() -> Iterator[FakeTelegram]:
    with fake_telegram(TOKEN) as server:
        yield server


@pytest.fixture
async def notifier(api: FakeTelegram) -> AsyncIterator[TelegramNotifier]:
    adapter = TelegramNotifier(settings_for(api.base_url).telegram())
    yield adapter
    await adapter.aclose()


def long_digest() -> Message:
    """A digest that takes several messages (30 items of ~600 characters)."""
    message = digest(many_items(30))
    assert len(split_message(message)) >= 3
    return message


def assert_whole_blocks(parts: list[str], blocks: tuple[str, ...]) -> None:
    """Each part is a run of consecutive blocks (never a piece of one), and together they are all blocks."""
    position = 0
    for part in parts:
        run = ""
        while position < len(blocks) and run.strip() != part:
            run += blocks[position]
            position += 1
        assert run.strip() == part, "a part is not made of whole item blocks"
    assert position == len(blocks)


def sent_texts(api: FakeTelegram, chat: int | str | None = None) -> list[str]:
    return [str(call.params["text"]) for call in api.sent(chat)]


async def test_sends_a_digest_as_telegram_html(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    message = digest(two_items())
    result = await notifier.send("777", message)

    assert api.methods() == ["getMe", "sendMessage"]
    assert api.calls[1].params == {
        "chat_id": "777",
        "text": (message.html or "").strip(),
        "parse_mode": "HTML",
        "link_preview_options": {"is_disabled": True},
        # One row of buttons per item: watch the paper and vote on that version (and unfollow the follow
        # that matched, when the item knows its follows; these test items do not).
        "reply_markup": {
            "inline_keyboard": [
                [
                    {"callback_data": "watch:2611.08864", "text": "Watch 2611.08864"},
                    {"callback_data": "vote:+:2611.08864v1", "text": "👍"},
                    {"callback_data": "vote:-:2611.08864v1", "text": "👎"},
                ],
                [
                    {"callback_data": "watch:2611.01234", "text": "Watch 2611.01234"},
                    {"callback_data": "vote:+:2611.01234v2", "text": "👍"},
                    {"callback_data": "vote:-:2611.01234v2", "text": "👎"},
                ],
            ]
        },
    }
    assert (result.platform_id, result.parts, result.moved_to) == ("1", 1, None)
    shown, entities = parse_html(str(api.calls[1].params["text"]))
    assert shown.startswith("PaperTrail: 1 new paper, 1 revision\n")
    assert "New papers (1)" in shown and "Revisions (1)" in shown
    assert "changed: title, comment" in shown and "Why: author Zeng Li" in shown
    links = [e["url"] for e in entities if e["type"] == "text_link"]
    assert links == ["https://arxiv.org/abs/2611.08864", "https://arxiv.org/abs/2611.01234"]


async def test_hostile_digest_golden_and_escaped(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    message = digest(
        hostile_items(), chat="12345", public_url="https://papertrail.example", receipt=hostile_receipt(5)
    )
    assert message.html is not None
    check_golden("telegram_hostile.html", message.html)

    await notifier.send("12345", message)
    (text,) = sent_texts(api)
    assert_well_formed(text)
    shown, entities = parse_html(text)
    # Markup in titles, names and abstracts reaches the reader as text, never as Telegram markup.
    assert '<script>alert("x")</script> & <b>bold</b> <a href="https://evil.example">click</a>' in shown
    assert "Ada <Lovelace>" in shown and "</p><img src=x onerror=alert(1)>" in shown
    assert {e["type"] for e in entities} <= {"bold", "italic", "code", "text_link", "expandable_blockquote"}
    # The links are PaperTrail's own: arXiv's abstract pages and each paper's BibTeX entry here.
    links = [e["url"] for e in entities if e["type"] == "text_link"]
    assert sorted(url for url in links if url.startswith("https://papertrail.example/")) == [
        f"https://papertrail.example/papers/{item.arxiv_id}.bib" for item in hostile_items()
    ]
    assert all(url.startswith(("https://arxiv.org/abs/", "https://papertrail.example/")) for url in links)
    assert "\x1b" not in shown and "\x00" not in shown
    # The 10,000-character abstract is cut to the template's 600 characters.
    quotes = [shown[e["offset"] : e["offset"] + e["length"]] for e in entities if "blockquote" in e["type"]]
    assert max(len(q) for q in quotes) <= 600


async def send_split(api: FakeTelegram, message: Message) -> list[str]:
    """Send ``message`` and check its parts: each within the limit, well-formed, whole blocks only."""
    adapter = TelegramNotifier(settings_for(api.base_url).telegram(), limiter=RateLimiter())
    try:
        result = await adapter.send("12345", message)
    finally:
        await adapter.aclose()
    parts = sent_texts(api)
    assert len(parts) == result.parts
    for part in parts:
        assert utf16_len(part) <= MAX_LENGTH
        assert_well_formed(part)
    assert_whole_blocks(parts, message.html_blocks)
    return parts


async def test_500_matches_split_between_items_golden(api: FakeTelegram) -> None:
    message = digest(many_items(500), max_items=500, chat="12345", receipt=sample_receipt(500))
    parts = await send_split(api, message)
    assert len(parts) > 1
    check_golden(
        "telegram_many.html",
        "".join(
            f"<!-- part {n}/{len(parts)}: {utf16_len(p)} UTF-16 units -->\n{p}\n"
            for n, p in enumerate(parts, 1)
        ),
    )


def chinese_items(count: int) -> list[DigestItem]:
    """``count`` matches with Chinese titles and guides and an emoji (2 UTF-16 units), as a zh reader sees."""
    guide = Guide(
        "本文提出一种异步强化学习训练方法，在策略滞后有界时保持收敛。🚀",
        ("滞后感知的重要性权重", "偏差上界的理论分析", "开源实现，吞吐量提升两倍"),
        "新增大规模实验。",
    )
    return [
        dataclasses.replace(
            item,
            title=f"第 {n} 篇：异步训练中的策略滞后与混合专家模型 & <规模>",
            authors=("李增", "王小明"),
            abstract="我们研究异步强化学习中的策略滞后问题。" * 12,
            guide=guide,
        )
        for n, item in enumerate(many_items(count))
    ]


async def test_long_chinese_digest_splits_by_utf16_units(api: FakeTelegram) -> None:
    items = chinese_items(120)
    message = renderer(500).render("telegram", items, "12345", language="zh")
    parts = await send_split(api, message)
    assert len(parts) > 3
    # Packed by UTF-16 units (one per Chinese character), not by UTF-8 bytes (three): every part but the
    # last is too full to take the next block.
    longest = max(utf16_len(block) for block in message.html_blocks)
    assert all(utf16_len(part) > MAX_LENGTH - longest for part in parts[:-1])
    assert all(len(part.encode("utf-8")) > MAX_LENGTH for part in parts[:-1])
    shown = "".join(parse_html(part)[0] for part in parts)
    assert shown.count("AI 导读（机器生成）") == 120 and shown.count("异步训练中的策略滞后") == 120
    assert "匹配原因：标题含 asynchronous" in shown and "新论文（" in shown and "修订（" in shown
    # Every part's buttons are worded in Chinese.
    keyboards = [call.params["reply_markup"]["inline_keyboard"] for call in api.sent()]
    labels = {button["text"].split(" ")[0] for rows in keyboards for row in rows for button in row}
    assert labels == {"关注论文", "👍", "👎"}


def test_split_chinese_digest_keeps_the_parts_of_the_english_one() -> None:
    # The same digest in both languages splits between items: Chinese wording never cuts one in half.
    for language in ("en", "zh"):
        message = renderer(500).render("telegram", guided_items(language) * 40, "1", language=language)
        parts = split_message(message)
        assert len(parts) > 1
        assert all(utf16_len(part.text) <= MAX_LENGTH for part in parts)
        assert_whole_blocks([part.text for part in parts], message.html_blocks)


async def test_every_item_keeps_its_buttons_within_100_a_message(api: FakeTelegram) -> None:
    # Items without an abstract are short enough for 35 to a message; with four buttons each (unfollow,
    # watch, 👍, 👎) Telegram would refuse the keyboard, so a message takes at most 25 of them.
    items = [
        DigestItem(
            f"2611.{n:05d}", 1, "A", ("B",), ("cs.LG",), (Reason(TITLE, "a"),), follows=((n + 1, "ti:a"),)
        )
        for n in range(60)
    ]
    message = digest(items, max_items=60)
    assert [len(part.items) for part in split_message(message)] == [25, 25, 10]
    await send_split(api, message)  # the fake refuses more than 100 buttons, as Telegram does
    keyboards = [call.params["reply_markup"]["inline_keyboard"] for call in api.sent()]
    rows = [row for keyboard in keyboards for row in keyboard]
    assert len(rows) == 60 and all(len(row) == 4 for row in rows)
    assert all(len(keyboard) * 4 <= 100 for keyboard in keyboards)
    assert {row[2]["callback_data"] for row in rows} == {f"vote:+:2611.{n:05d}v1" for n in range(60)}


def test_capped_digest_says_how_many_more() -> None:
    message = digest(many_items(30), max_items=20)
    last = split_message(message)[-1].text
    assert "…and 10 more not shown" in html_to_text(last)


def test_oversize_block_is_cut_well_formed() -> None:
    title = "<&> 🚀" * 2000  # 12,000 UTF-16 units of text that escaping lengthens further
    message = digest([dataclasses.replace(two_items()[0], title=title)])
    parts = split_message(message)
    for part in parts:
        assert utf16_len(part.text) <= MAX_LENGTH
        assert_well_formed(part.text)
    cut = shorten_html(f"<b><a href='https://arxiv.org/abs/1'>{title}</a></b>\n", MAX_LENGTH)
    assert utf16_len(cut) <= MAX_LENGTH and cut.endswith("…\n\n")
    assert_well_formed(cut)
    assert parse_html(cut)[0].startswith("<&> 🚀<&>")


async def test_short_flood_wait_is_sat_out(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    api.script(flood(1))
    result = await notifier.send("777", digest(two_items()))

    first, second = (c for c in api.calls if c.method == "sendMessage")
    assert (first.status, second.status, result.parts) == (429, 200, 1)
    assert second.at - first.at >= 0.95  # retry_after honoured, not hammered


async def test_long_flood_wait_goes_back_to_the_ledger(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    api.script(flood(120))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send("777", digest(two_items()))

    error = caught.value
    assert (error.retryable, error.retry_after, error.delivered_parts) == (True, 120.0, 0)
    assert [c.status for c in api.calls if c.method == "sendMessage"] == [429]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (blocked(), "bot was blocked by the user"),
        (kicked(), "bot was kicked from the group chat"),
        (deactivated(), "user is deactivated"),
    ],
)
async def test_forbidden_is_permanent(
    api: FakeTelegram, notifier: TelegramNotifier, reply: Scripted, reason: str
) -> None:
    api.script(reply)
    with pytest.raises(DeliveryError) as caught:
        await notifier.send("777", digest(two_items()))
    assert caught.value.retryable is False
    assert reason in str(caught.value) and TOKEN not in str(caught.value)


async def test_migrated_group_is_followed(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    message = long_digest()
    api.script_chat(-4001, migrated(-1004001))
    result = await notifier.send("-4001", message)

    assert result.moved_to == "telegram:-1004001"
    assert sent_texts(api, -4001) == []
    assert sent_texts(api, -1004001) == [part.text for part in split_message(message)]


async def test_unparsable_markup_falls_back_to_plain_text(
    api: FakeTelegram, notifier: TelegramNotifier
) -> None:
    api.script(cant_parse())
    message = digest(two_items())
    result = await notifier.send("777", message)

    rejected, resent = (c for c in api.calls if c.method == "sendMessage")
    assert rejected.status == 400 and resent.status == 200 and result.parts == 1
    assert "parse_mode" not in resent.params
    assert resent.params["text"] == html_to_text(str(rejected.params["text"])).strip()
    assert "Policy lag in asynchronous rollouts" in resent.params["text"]
    assert "<b>" not in resent.params["text"]


@pytest.mark.parametrize(
    ("reply", "retryable"),
    [(server_error(), True), (not_ok(), True), (chat_not_found(), False)],
)
async def test_server_errors_and_unknown_chats(
    api: FakeTelegram, notifier: TelegramNotifier, reply: Scripted, retryable: bool
) -> None:
    api.script(reply)
    with pytest.raises(DeliveryError) as caught:
        await notifier.send("777", digest(two_items()))
    assert caught.value.retryable is retryable
    assert caught.value.delivered_parts == 0


async def test_resume_after_failures_mid_digest(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    message = long_digest()
    expected = [part.text for part in split_message(message)]

    api.script(PASS, server_error())
    with pytest.raises(DeliveryError) as first:
        await notifier.send("777", message)
    assert (first.value.retryable, first.value.delivered_parts) == (True, 1)

    api.script(PASS, server_error())
    with pytest.raises(DeliveryError) as second:
        await notifier.send("777", dataclasses.replace(message, skip_parts=first.value.delivered_parts))
    assert second.value.delivered_parts == 2  # counts the skipped part

    result = await notifier.send("777", dataclasses.replace(message, skip_parts=2))
    assert result.parts == len(expected)
    assert sent_texts(api) == expected  # every part exactly once, in order
    assert result.platform_id == "3"  # the first part this attempt delivered


async def test_fully_delivered_digest_sends_nothing(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    message = digest(two_items())
    result = await notifier.send("777", dataclasses.replace(message, skip_parts=1))
    assert (result.parts, result.platform_id) == (1, None)
    assert api.calls == []


async def test_plain_text_digest_without_html(api: FakeTelegram, notifier: TelegramNotifier) -> None:
    await notifier.send("777", Message(subject="s", text="hello <b> & goodbye"))
    (call,) = api.sent()
    assert call.params["text"] == "hello <b> & goodbye" and "parse_mode" not in call.params


def test_long_plain_text_splits_at_blank_lines() -> None:
    paragraphs = [f"Item {n}: " + "word " * 200 for n in range(12)]
    parts = split_message(Message(subject="s", text="\n\n".join(paragraphs)))
    assert len(parts) > 1 and not any(part.is_html for part in parts)
    assert all(utf16_len(part.text) <= MAX_LENGTH for part in parts)
    for paragraph in paragraphs:  # each paragraph whole, in exactly one part
        assert sum(paragraph.strip() in part.text for part in parts) == 1


async def test_missing_token_is_a_configuration_error(api: FakeTelegram) -> None:
    adapter = TelegramNotifier(settings_for(api.base_url, token=None).telegram())
    with pytest.raises(DeliveryError) as caught:
        await adapter.send("777", dataclasses.replace(long_digest(), skip_parts=1))
    assert caught.value.retryable is True and caught.value.delivered_parts == 1
    assert "PAPERTRAIL_TELEGRAM_TOKEN" in str(caught.value)
    assert api.calls == []


async def test_rejected_token_never_appears_in_the_error(api: FakeTelegram) -> None:
    adapter = TelegramNotifier(settings_for(api.base_url, token="999:wrong-secret").telegram())
    with pytest.raises(DeliveryError) as caught:
        await adapter.send("777", digest(two_items()))
    await adapter.aclose()
    assert caught.value.retryable is True
    assert "PAPERTRAIL_TELEGRAM_TOKEN" in str(caught.value) and "wrong-secret" not in str(caught.value)
    assert api.methods() == ["getMe"]


@pytest.mark.net
async def test_unreachable_api_is_retryable() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    adapter = TelegramNotifier(settings_for(url).telegram())
    with pytest.raises(DeliveryError) as caught:
        await adapter.send("777", digest(two_items()))
    await adapter.aclose()
    assert caught.value.retryable is True and url in str(caught.value)
    assert TOKEN not in str(caught.value)


async def test_bad_address_is_permanent(notifier: TelegramNotifier) -> None:
    with pytest.raises(DeliveryError) as caught:
        await notifier.send("ada", digest(two_items()))
    assert caught.value.retryable is False and "telegram:12345" in str(caught.value)


async def test_shared_bot_is_used_as_is_and_left_open(api: FakeTelegram) -> None:
    bot = telegram.Bot(TOKEN, base_url=f"{api.base_url}/bot")
    adapter = TelegramNotifier(settings_for(api.base_url, token=None).telegram(), bot=bot)
    await adapter.send("777", digest(two_items()))
    await adapter.aclose()
    await bot.send_message(chat_id=777, text="still open")  # the shell's Bot survives the notifier
    await bot.shutdown()
    assert api.methods() == ["sendMessage", "sendMessage"]


def test_group_chats_get_the_per_minute_window() -> None:
    adapter = TelegramNotifier(settings_for("http://127.0.0.1:1").telegram())
    assert adapter.window_for("-1004001") == Window(20, 60.0)
    assert adapter.window_for("777") is None


@pytest.mark.net
async def test_rate_limiter_provokes_no_429() -> None:
    """Five chats, two digests each, against a server enforcing 4 messages/s overall and 1/s per chat."""
    message = digest(two_items())
    chats = [str(1000 + n) for n in range(5)]
    with fake_telegram(TOKEN, max_per_second=4, chat_interval=1.0) as api:
        adapter = TelegramNotifier(settings_for(api.base_url, per_second=4, chat_interval=1.0).telegram())

        async def twice(chat: str) -> None:
            for _ in range(2):
                await adapter.send(chat, message)

        try:
            await asyncio.gather(*(twice(chat) for chat in chats))
        finally:
            await adapter.aclose()
        assert api.too_many == 0
        assert sorted(c.chat_id for c in api.sent()) == sorted(chats * 2)


@pytest.mark.net
async def test_fake_enforces_the_limits_it_checks() -> None:
    """The control for the test above: the same burst without a limiter collects 429s."""
    with fake_telegram(TOKEN, max_per_second=4, chat_interval=1.0) as api:
        bot = telegram.Bot(TOKEN, base_url=f"{api.base_url}/bot")
        outcomes = await asyncio.gather(
            *(bot.send_message(chat_id=1000 + n % 5, text="x") for n in range(10)), return_exceptions=True
        )
        await bot.shutdown()
    assert api.too_many > 0
    assert sum(isinstance(o, telegram.error.RetryAfter) for o in outcomes) == api.too_many
