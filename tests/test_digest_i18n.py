"""Digests in English and Simplified Chinese, with AI guides, in every channel.

Golden files of one digest with guides for each channel and language (``<channel>_<language>_guides.*``),
a guide whose text attacks every channel, Chinese digests that keep no English sentence of the templates,
and the language-aware pieces (reasons, change labels, "et al.", buttons, fallback texts, headers).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import markupsafe
import pytest

from core.config import Settings
from core.delivery.render import (
    CHANGE_LABELS,
    Renderer,
    changes_text,
    display_width,
    reason_text,
    reasons_text,
    short_authors,
)
from core.reasons import ABSTRACT, AUTHOR, CATEGORY, NEWSLETTER, PAPER, TITLE, Reason
from core.values import DigestItem, Guide, Message
from notifiers.email.notifier import EmailNotifier
from notifiers.slack.blocks import build_payloads
from notifiers.telegram.format import item_buttons, split_message
from notifiers.webhook.payload import digest_payload, encode_payload
from tests.fakes.telegram_api import parse_html
from tests.goldens import check_golden, dump_slack
from tests.hostile import HOSTILE_GUIDE, guided_items, hostile_guided_items
from tests.support.digest_outputs import (
    ALLOWED_WORDS,
    ENGLISH_PHRASES,
    FIXED,
    NEWSLETTERS,
    _readable,
    _values,
    console_output,
    receipt_for,
    slack_webhook_json,
    webhook_json,
)
from tests.support.telegram_digests import assert_well_formed

LANGUAGES = ("en", "zh")


def renderer() -> Renderer:
    """Signed links, so that the footers show the manage and unsubscribe labels."""
    return Renderer(secret_key="test-key", public_url="https://papertrail.example")


def render(channel: str, language: str, items: list[DigestItem] | None = None) -> Message:
    recipient = "ada@example.org" if channel == "email" else "12345"
    chosen = guided_items(language) if items is None else items
    return renderer().render(
        channel,
        chosen,
        recipient,
        key="digest-i18n",
        newsletters=NEWSLETTERS,
        language=language,
        receipt=receipt_for(language, len(chosen)),
    )


# --- golden files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
async def test_golden_digests_with_guides_in_every_channel(language: str) -> None:
    tag = f"{language}_guides"
    telegram = render("telegram", language)
    assert telegram.html is not None
    check_golden(f"telegram_{tag}.html", telegram.html)
    check_golden(f"slack_{tag}.json", dump_slack(build_payloads(render("slack", language))))
    check_golden(f"slack-webhook_{tag}.json", slack_webhook_json(render("slack-webhook", language)))
    email = render("email", language)
    assert email.html is not None
    check_golden(f"email_{tag}.html", email.html)
    check_golden(f"email_{tag}.txt", email.text)
    check_golden(f"console_{tag}.txt", await console_output(render("console", language)))
    check_golden(f"webhook_{tag}.json", webhook_json(render("webhook", language)))


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_channel_shows_the_guides_marked_as_machine_generated(language: str) -> None:
    label = {"en": "AI guide (machine-generated)", "zh": "AI 导读（机器生成）"}[language]
    items = guided_items(language)
    guide, _, revised, _ = (item.guide for item in items)
    assert guide is not None and revised is not None and revised.changes is not None
    for channel in ("telegram", "slack", "email", "console"):
        message = render(channel, language)
        shown = message.mrkdwn or message.html or message.text
        escape = markupsafe.escape if message.html and not message.mrkdwn else str
        # Two items have a guide, two do not.
        assert shown.count(label) == 2, channel
        assert escape(guide.tldr) in shown and escape(revised.changes) in shown
        # At most three contributions: the fourth is left out.
        assert all(escape(text) in shown for text in guide.contributions[:3])
        assert escape(guide.contributions[3]) not in shown
    payload = digest_payload(render("webhook", language), FIXED)
    assert payload["language"] == language
    guides = [item["guide"] for item in payload["items"]]
    assert guides[0] == {
        "tldr": guide.tldr,
        "contributions": list(guide.contributions[:3]),
        "changes": None,
        "machine_generated": True,
    }
    assert guides[1] is None and guides[2]["changes"] == revised.changes and guides[3] is None
    # The machine format stays English: the reasons and changes as stored, whatever the reader's language.
    assert payload["items"][2]["changes"] == list(items[2].changes)
    assert payload["items"][0]["reasons"] == list(items[0].reasons)


def test_a_digest_without_guides_shows_no_guide_label() -> None:
    items = [dataclasses.replace(item, guide=None) for item in guided_items("en")]
    for channel in ("telegram", "slack", "email", "console"):
        message = render(channel, "en", items)
        for text in (message.text, message.html or "", message.mrkdwn or ""):
            assert "AI guide" not in text and "TL;DR" not in text


# --- hostile guide text ---------------------------------------------------------------------------------


def test_hostile_guide_is_escaped_in_telegram() -> None:
    message = render("telegram", "en", hostile_guided_items())
    parts = split_message(message)
    for part in parts:
        assert_well_formed(part.text)
    shown, entities = parse_html("\n".join(part.text for part in parts))
    # The reader sees the guide's markup as text ...
    assert '<script>alert("g")</script> & <!channel> *bold*' in shown
    assert '</blockquote><a href="https://evil.example">x</a>' in shown
    # ... and no entity of it: links go to arXiv and the signed pages only, quotes are the template's.
    assert all(
        e["url"].startswith(("https://arxiv.org/abs/", "https://papertrail.example/"))
        for e in entities
        if e["type"] == "text_link"
    )
    assert sum(1 for e in entities if e["type"] == "blockquote") == 2
    for raw in ("<script>", "<b>bold</b>", '<a href="https://evil.example">', "<!here> </i>"):
        assert raw not in (message.html or "")
    assert "\u202e" not in shown and "\x1b" not in shown


def test_hostile_guide_is_escaped_in_slack() -> None:
    for channel in ("slack", "slack-webhook"):
        payloads = build_payloads(render(channel, "en", hostile_guided_items()))
        everything = json.dumps([p.body() for p in payloads], ensure_ascii=False)
        for raw in ("<!channel>", "<!here>", "<@U123>", "<https://evil.example|click>", "<script>", "<b>"):
            assert raw not in everything, raw
        for escaped in (
            "&lt;!channel&gt;",
            "&lt;!here&gt;",
            "&lt;@U123&gt;",
            "&lt;https://evil.example|click&gt;",
        ):
            assert escaped in everything, escaped
        assert "&amp;amp;" in everything  # the literal "&amp;" stays literal
        # Links in the sections are PaperTrail's own (arXiv pages, the signed manage page).
        links = re.findall(r"<(https?://[^|>]+)\|", everything)
        assert links and all(
            link.startswith(("https://arxiv.org/abs/", "https://papertrail.example/")) for link in links
        )
        assert "\u202e" not in everything and "\x1b" not in everything


def test_hostile_guide_is_escaped_in_email() -> None:
    message = render("email", "en", hostile_guided_items())
    assert message.html is not None
    lowered = message.html.lower()
    for raw in ("<script", "<b>", "</blockquote>", "<!channel>", "</i>"):
        assert raw not in lowered, raw
    assert re.search(r"<a\b[^>]*evil", lowered) is None
    assert "&lt;script&gt;alert(&#34;g&#34;)&lt;/script&gt; &amp; &lt;!channel&gt; *bold*" in message.html
    # Plain text is plain: the guide as written, without control or bidi characters.
    assert (
        '<script>alert("g")</script> & <!channel> *bold* <https://evil.example|click> evil[31m'
        in message.text
    )
    for text in (message.text, message.html):
        assert "\u202e" not in text and "\x1b" not in text


async def test_hostile_guide_in_the_console_and_the_webhook_is_data() -> None:
    printed = await console_output(render("console", "en", hostile_guided_items()))
    assert "<!channel> *bold*" in printed and "\x1b" not in printed and "\u202e" not in printed
    payload = digest_payload(render("webhook", "en", hostile_guided_items()), FIXED)
    guide = payload["items"][0]["guide"]
    assert guide["tldr"] == HOSTILE_GUIDE.tldr.replace("\u202e", "").replace("\x1b", "")
    assert guide["contributions"] == list(HOSTILE_GUIDE.contributions)
    assert payload["items"][1]["guide"]["changes"] == HOSTILE_GUIDE.changes
    assert encode_payload(payload).isascii()


# --- nothing English left in a Chinese digest -----------------------------------------------------------


@pytest.mark.parametrize("channel", ["telegram", "slack", "slack-webhook", "email", "console"])
def test_chinese_digests_contain_no_english_sentences(channel: str) -> None:
    items = guided_items("zh")
    # Cap the digest so that "…and N more" shows too.
    message = Renderer(max_items=3, secret_key="k", public_url="https://papertrail.example").render(
        channel,
        items,
        "ada@example.org",
        newsletters=NEWSLETTERS,
        language="zh",
        receipt=receipt_for("zh", len(items)),
    )
    english = Renderer(max_items=3, secret_key="k", public_url="https://papertrail.example").render(
        channel,
        guided_items("en"),
        "ada@example.org",
        newsletters=NEWSLETTERS,
        language="en",
        receipt=receipt_for("en", len(items)),
    )
    for text in _readable(message):
        stripped = re.sub(r"https://[^\s|>\"]+", " ", text)  # links are not words shown to the reader
        for value in _values(items):
            stripped = stripped.replace(value, " ")
        for phrase in ENGLISH_PHRASES:
            assert phrase not in stripped, (phrase, stripped)
        words = set(re.findall(r"[A-Za-z]{2,}", stripped)) - ALLOWED_WORDS
        assert not words, (words, stripped)
    # The comparison is meaningful: the English digest does use these phrases.
    everything = "\n".join(_readable(english))
    for phrase in ("New papers", "Why:", "AI guide", "Manage", "Since", "new versions scanned"):
        assert phrase in everything


def test_chinese_subjects_and_footers() -> None:
    message = render("email", "zh")
    assert message.language == "zh"
    assert message.subject == "PaperTrail：2 篇新论文、2 篇修订（含 Distributed weekly）"
    assert "新论文（2）" in message.text and "修订（2）" in message.text
    assert '匹配原因：作者 Zeng Li；标题含 "policy lag"' in message.text
    assert "匹配原因：通讯 dc-weekly：分类 cs.DC" in message.text
    assert "变更：标题、作者、摘要、备注、期刊引用、DOI" in message.text
    assert "Author 7 等（共 12 位作者）" in message.text
    assert "管理关注：https://papertrail.example/manage/" in message.text
    assert "退订：https://papertrail.example/unsubscribe/" in message.text
    assert '<html lang="zh-Hans">' in (message.html or "")
    # The heading's underline covers the subject in a terminal, where Chinese characters are two wide.
    subject, underline = message.text.splitlines()[:2]
    assert len(underline) == display_width(subject) > len(subject)


# --- the language-aware pieces --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "en", "zh"),
    [
        (Reason(TITLE, '"policy lag"'), 'title: "policy lag"', '标题含 "policy lag"'),
        (Reason(ABSTRACT, "rollout"), "abstract: rollout", "摘要含 rollout"),
        (Reason(AUTHOR, "Zeng Li"), "author Zeng Li", "作者 Zeng Li"),
        (Reason(CATEGORY, "cs.DC"), "category cs.DC", "分类 cs.DC"),
        (Reason(PAPER, "2411.01234"), "paper 2411.01234", "论文 2411.01234"),
        (
            Reason(AUTHOR, "Zeng Li", newsletter="dc-weekly"),
            "newsletter dc-weekly: author Zeng Li",
            "通讯 dc-weekly：作者 Zeng Li",
        ),
        (Reason(NEWSLETTER, "dc-weekly"), "newsletter dc-weekly", "通讯 dc-weekly"),
        # The matched term is shown as stored, even when it looks like a placeholder or a prefix.
        (Reason(TITLE, "{value} title: x"), "title: {value} title: x", "标题含 {value} title: x"),
    ],
)
def test_reasons_translate_their_fixed_words_only(reason: Reason, en: str, zh: str) -> None:
    assert reason_text(reason) == reason_text(reason, "en") == en == reason
    assert reason_text(reason, "zh") == zh


def test_reason_lists_change_labels_and_author_lists() -> None:
    both = (Reason(AUTHOR, "Zeng Li"), Reason(CATEGORY, "cs.DC"))
    assert reasons_text(both) == "author Zeng Li; category cs.DC"
    assert reasons_text(both, "zh") == "作者 Zeng Li；分类 cs.DC"
    every = tuple(CHANGE_LABELS)
    assert changes_text(every) == "title, authors, abstract, categories, comment, journal-ref, DOI, license"
    assert changes_text(every, "zh") == "标题、作者、摘要、分类、备注、期刊引用、DOI、许可证"
    assert changes_text(("title", "unknown-field"), "zh") == "标题、unknown-field"
    assert changes_text(()) == ""
    names = tuple(f"A{n}" for n in range(20))
    assert short_authors(names).endswith("A7, et al. (20 authors)")
    assert short_authors(names, "zh").endswith("A7 等（共 20 位作者）")
    assert short_authors(names[:3], "zh") == "A0, A1, A2"


def test_telegram_buttons_are_worded_in_the_digest_language() -> None:
    item = dataclasses.replace(guided_items("zh")[0], follows=((7, 'au:"Zeng Li"'),))
    markup = item_buttons([item], "zh")
    assert markup is not None
    [[unfollow, watch, like, dislike]] = markup.inline_keyboard
    assert (unfollow.text, unfollow.callback_data) == ('✕ 取消关注 au:"Zeng Li"', "unfollow:7")
    assert (watch.text, watch.callback_data) == ("关注论文 2611.08864", "watch:2611.08864")
    # The vote buttons are words-free in every language: 👍 and 👎 on the version shown.
    assert [(like.text, like.callback_data), (dislike.text, dislike.callback_data)] == [
        ("👍", "vote:+:2611.08864v1"),
        ("👎", "vote:-:2611.08864v1"),
    ]
    [[english, *_]] = (item_buttons([item]) or markup).inline_keyboard
    assert english.text == '✕ Unfollow au:"Zeng Li"'
    # The parts of a split digest carry the language to the buttons.
    assert {part.language for part in split_message(render("telegram", "zh"))} == {"zh"}


def test_slack_fallback_text_numbers_parts_in_the_digest_language() -> None:
    from tests.hostile import many_items

    message = Renderer(max_items=500).render("slack", many_items(60), "C1", language="zh")
    payloads = build_payloads(message)
    assert len(payloads) > 1
    assert payloads[0].text.endswith(f"（第 1/{len(payloads)} 部分）")
    assert payloads[0].blocks[0]["text"]["text"].endswith(f"(1/{len(payloads)})")


async def test_console_header_and_email_content_language() -> None:
    printed = await console_output(render("console", "zh"))
    # The console's separator line stays English (output is split on it); the digest under it is Chinese.
    assert printed.startswith("--- digest for console:12345 ---\nPaperTrail：")
    mail = EmailNotifier(Settings().smtp()).build("ada@example.org", render("email", "zh"))
    assert mail["Content-Language"] == "zh-Hans"
    assert mail["Subject"].startswith("PaperTrail：")
    english = EmailNotifier(Settings().smtp()).build("ada@example.org", render("email", "en"))
    assert english["Content-Language"] == "en"


def test_unknown_languages_render_in_english() -> None:
    english = render("email", "en")
    for language in ("fr", None):
        message = renderer().render(
            "email",
            guided_items("en"),
            "ada@example.org",
            key="digest-i18n",
            newsletters=NEWSLETTERS,
            language=language,
            receipt=receipt_for("en", 4),
        )
        assert (message.text, message.html, message.language) == (english.text, english.html, "en")


def test_one_off_mails_are_worded_in_their_language() -> None:
    values: dict[str, Any] = {
        "confirm_url": "https://papertrail.example/confirm/T",
        "follows": 2,
        "newsletters": 1,
        "schedule": "daily 08:00",
        "timezone": "Asia/Shanghai",
    }
    mail = renderer().render_mail("confirm", "确认你的 PaperTrail 订阅", language="zh", **values)
    assert mail.language == "zh" and mail.html is not None
    assert "有人（希望是你本人）请 PaperTrail 向这个地址发送 arXiv 论文简报。" in mail.text
    assert "这次订阅包含 2 条关注。" in mail.html and "并加入 1 份通讯。" in mail.html
    assert ">查看并确认订阅</a>" in mail.html
    # The confirmation goes to an unconfirmed address: whatever a caller passes along, the mail prints
    # no address and no follow.
    hostile = renderer().render_mail(
        "confirm", "x", language="en", **{**values, "address": "<b>a</b>@x", "queries": ["win.example"]}
    )
    assert "a</b>" not in hostile.text + (hostile.html or "") and "win.example" not in hostile.text
    assert "The sign-up has 2 follows." in hostile.text and "It joins 1 newsletter." in hostile.text
    known = renderer().render_mail(
        "signup-known",
        "你的 PaperTrail 订阅",
        language="zh",
        address="ada@example.org",
        manage_url="https://m",
    )
    assert "但这个地址已经订阅过了" in known.text and "管理你的关注、发送时间或订阅" in (known.html or "")


@pytest.mark.parametrize("language", LANGUAGES)
def test_values_in_translated_sentences_are_escaped_once(language: str) -> None:
    item = dataclasses.replace(
        guided_items(language)[0],
        reasons=(Reason(TITLE, '"R&D <b>"'),),
        guide=Guide("A & B", ("C & <D>",)),
    )
    slack = render("slack", language, [item]).mrkdwn or ""
    assert (
        '"R&amp;D &lt;b&gt;"' in slack
        and "A &amp; B" in slack
        and "C &amp; &lt;D&gt;" in slack
        and "&amp;amp;" not in slack
    )
    telegram = render("telegram", language, [item]).html or ""
    assert (
        "&#34;R&amp;D &lt;b&gt;&#34;" in telegram and "A &amp; B" in telegram and "&amp;amp;" not in telegram
    )
    text = render("console", language, [item]).text
    assert '"R&D <b>"' in text and "A & B" in text
