"""PAPERTRAIL_DEFAULT_LANGUAGE: the language of readers who chose none, everywhere PaperTrail falls back.

Under ``default_language="zh"`` a subscriber without a language gets exactly what a subscriber who chose
Chinese gets (the same digest bytes on every channel, the Chinese guides), chats and web requests that name
no language PaperTrail speaks are answered in Chinese, and sign-up mails are Chinese. A choice still wins:
a reader's own, then the platform's (Telegram ``language_code``, Slack locale) or the browser's
``Accept-Language``. The default ``en`` changes nothing (the rest of the suite runs under it).
"""

from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlmodel import select
from typer.testing import CliRunner

from bot.commands import handle
from bot.commands_base import ChatContext
from bot.commands_table import COMMANDS
from core.config import Settings
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.manage import follow
from core.guides import guide_records
from core.guides.service import make_reader_guides
from core.languages import reader_language
from core.models import Match
from core.people import tokens
from core.values import Message
from ingest.llm import ChatClient
from notifiers.slack.blocks import build_payloads
from notifiers.slack.chat import SlackBot
from notifiers.telegram.chat import TelegramBot
from notifiers.webhook.payload import digest_payload
from papertrail.cli.app import app
from papertrail.service.context import build_context
from papertrail.service.runtime import Jobs
from papertrail.web.app import build_app
from tests.cli_helpers import invoke
from tests.conftest import BIG_FEED
from tests.fakes.openai_api import DEFAULT_GUIDE, DEFAULT_GUIDE_ZH, FakeOpenAI, fake_openai
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram, Person, Place, Updates, fake_telegram
from tests.goldens import check_golden, dump_slack
from tests.hostile import guided_items
from tests.servers import Reply, SinkHandler, closed_port, feed_server, smtp_sink
from tests.support.chat_commands import NOW, migrated_template_fixture, open_copy
from tests.support.digest_outputs import (
    FIXED,
    NEWSLETTERS,
    console_output,
    receipt_for,
    slack_webhook_json,
    webhook_json,
)
from tests.support.guides import NOW as GUIDES_NOW
from tests.support.guides import _paper, _seed, _settings
from tests.support.signup import KEY, cli_env, context, token_in
from tests.support.slack_bot import (
    ADA,
    DM,
    EVE,
    LAB,
    ROOT,
    SECRET,
    event_body,
    post,
    serve,
    slack_fixture,
    slash,
)
from tests.support.slack_bot import TOKEN as SLACK_TOKEN
from tests.support.telegram_bot import TOKEN as TELEGRAM_TOKEN
from tests.support.telegram_bot import Chat, shown

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

# fixtures, asked for by name
__all__ = ["migrated_template_fixture", "slack_fixture"]

CJK = re.compile(r"[\u4e00-\u9fff]")
CHINESE = Settings(default_language="zh")


# -- the setting -------------------------------------------------------------------------------------------


def test_the_setting_is_english_unless_set_and_refuses_languages_papertrail_does_not_speak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().default_language == "en"
    monkeypatch.setenv("PAPERTRAIL_DEFAULT_LANGUAGE", " ZH ")
    assert Settings().default_language == "zh"
    for wrong in ("de", "zh-CN", "chinese", ""):
        monkeypatch.setenv("PAPERTRAIL_DEFAULT_LANGUAGE", wrong)
        with pytest.raises(ValidationError, match="PAPERTRAIL_DEFAULT_LANGUAGE must be one of en, zh"):
            Settings()


def test_an_unknown_default_language_stops_the_command_line_at_start(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAPERTRAIL_DEFAULT_LANGUAGE", "fr")
    code, _, err = invoke("follows", "console:me")
    assert code == 2
    assert (
        "invalid settings: default_language: PAPERTRAIL_DEFAULT_LANGUAGE must be one of en, zh "
        "(the language of readers who chose none), not 'fr'" in " ".join(err.split())
    )


def test_reader_language_takes_the_first_choice_papertrail_speaks() -> None:
    assert reader_language(None, "zh-TW", default="en") == "zh"
    assert reader_language("en", "zh-CN", default="zh") == "en"
    assert reader_language("de-DE", None, default="zh") == "zh"  # a language PaperTrail does not speak
    assert reader_language(default="en") == "en"
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        reader_language("en", default="fr")


# -- digests -----------------------------------------------------------------------------------------------


def chinese_default() -> Renderer:
    return Renderer(secret_key="test-key", public_url="https://papertrail.example", default_language="zh")


def english_default() -> Renderer:
    return Renderer(secret_key="test-key", public_url="https://papertrail.example")


def digest(renderer: Renderer, channel: str, language: str | None) -> Message:
    recipient = "ada@example.org" if channel == "email" else "12345"
    items = guided_items("zh")
    return renderer.render(
        channel,
        items,
        recipient,
        key="digest-i18n",
        newsletters=NEWSLETTERS,
        language=language,
        # The goldens' receipt in the Chinese reader's zone (tests/test_digest_i18n.py).
        receipt=receipt_for("zh", len(items)),
    )


async def test_a_reader_without_a_language_gets_the_chinese_goldens_under_zh() -> None:
    # The explicit-zh golden files of tests/test_digest_i18n.py, byte for byte, for a reader who chose none.
    renderer = chinese_default()
    telegram = digest(renderer, "telegram", None)
    assert telegram.html is not None
    check_golden("telegram_zh_guides.html", telegram.html)
    check_golden("slack_zh_guides.json", dump_slack(build_payloads(digest(renderer, "slack", None))))
    check_golden("slack-webhook_zh_guides.json", slack_webhook_json(digest(renderer, "slack-webhook", None)))
    email = digest(renderer, "email", None)
    assert email.html is not None
    check_golden("email_zh_guides.html", email.html)
    check_golden("email_zh_guides.txt", email.text)
    check_golden("console_zh_guides.txt", await console_output(digest(renderer, "console", None)))
    check_golden("webhook_zh_guides.json", webhook_json(digest(renderer, "webhook", None)))


@pytest.mark.parametrize(
    "channel", ["telegram", "slack", "slack-webhook", "email", "console", "webhook", "apprise"]
)
def test_every_channel_renders_none_under_zh_as_an_explicit_zh(channel: str) -> None:
    unchosen = digest(chinese_default(), channel, None)
    assert unchosen == digest(english_default(), channel, "zh")
    assert unchosen.language == "zh" and CJK.search(unchosen.subject) and CJK.search(unchosen.text)
    # A reader who chose English keeps English under a Chinese default, and the default en is as before.
    english = digest(chinese_default(), channel, "en")
    assert english == digest(english_default(), channel, None) == digest(english_default(), channel, "en")
    assert english.language == "en" and not CJK.search(english.subject)


def test_the_webhook_payload_and_the_mail_headers_carry_the_default() -> None:
    assert digest_payload(digest(chinese_default(), "webhook", None), FIXED)["language"] == "zh"
    assert digest_payload(digest(english_default(), "webhook", None), FIXED)["language"] == "en"
    values = {"confirm_url": "https://p.example/confirm/x", "follows": 1, "newsletters": 0}
    values |= {"schedule": "daily 08:00", "timezone": "UTC"}
    mail = chinese_default().render_mail("confirm", "subject", language=None, **values)
    assert mail == english_default().render_mail("confirm", "subject", language="zh", **values)
    assert '<html lang="zh-Hans">' in (mail.html or "")


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with fake_openai() as server:
        yield server


async def test_the_running_service_makes_and_sends_chinese_guides_to_readers_without_a_language(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    # build_context wires the setting into the renderer, the guide step and the digests, as in production.
    out = io.StringIO()
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/default.db",
            arxiv_rss_url=feed.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            http_backoff=0.01,
            llm_url=llm.url,
            llm_model="fake-model",
            default_language="zh",
        )
        ctx = build_context(settings, console=out)
        try:
            for address, language in (("console:ada", None), ("console:bo", "en")):
                follow(ctx.db, address, "cat:cs.OS")
                subscriber = subscriber_records.get_subscriber(ctx.db, address)
                assert subscriber is not None and subscriber.id is not None
                subscriber_records.update_subscriber(ctx.db, subscriber.id, language=language)
            await Jobs(ctx).ingest("arxiv-rss")
            with ctx.db.session() as session:
                matched = sorted(set(session.exec(select(Match.version_id))))
            assert matched
            assert sorted(guide_records.guides_for(ctx.db, matched, "zh")) == matched
            assert sorted(guide_records.guides_for(ctx.db, matched, "en")) == matched  # bo chose English
            systems = [r.messages[0]["content"] for r in llm.requests]
            assert sum("Simplified Chinese" in s for s in systems) == len(matched)
            await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, force=True)
        finally:
            await ctx.aclose()
    digests = out.getvalue().split("--- digest for ")
    unchosen = next(d for d in digests if d.startswith("console:ada"))
    english = next(d for d in digests if d.startswith("console:bo"))
    assert DEFAULT_GUIDE_ZH["tldr"] in unchosen and DEFAULT_GUIDE["tldr"] not in unchosen
    assert "新论文" in unchosen and "New papers" not in unchosen
    assert DEFAULT_GUIDE["tldr"] in english and "新论文" not in english


# -- guide selection (both databases) ----------------------------------------------------------------------


def test_guides_are_selected_in_the_default_for_readers_without_a_language(db: Database) -> None:
    [unchosen] = _seed(db, _paper("2611.00041"), readers=(None,))
    # Under zh, readers without a language read Chinese: a Chinese guide, no English one.
    assert guide_records.languages_in_use(db, "zh") == ["zh"]
    assert [
        s.version_id for s in guide_records.versions_needing_guides(db, "zh", 10, default_language="zh")
    ] == [unchosen]
    assert guide_records.versions_needing_guides(db, "en", 10, default_language="zh") == []
    # Under en (the default), as before.
    assert guide_records.languages_in_use(db) == ["en"]
    assert [s.version_id for s in guide_records.versions_needing_guides(db, "en", 10)] == [unchosen]
    assert guide_records.versions_needing_guides(db, "zh", 10) == []
    # A reader who chose English adds English, after the default: the daily cap serves the default first.
    [chosen] = _seed(db, _paper("2611.00042"), readers=("en",))
    assert guide_records.languages_in_use(db, "zh") == ["zh", "en"]
    assert [
        s.version_id for s in guide_records.versions_needing_guides(db, "en", 10, default_language="zh")
    ] == [chosen]


async def test_the_guide_step_asks_for_the_default_language_first(db: Database, llm: FakeOpenAI) -> None:
    _seed(db, _paper("2611.00051"), readers=(None, "en"))
    settings = _settings(llm, default_language="zh", llm_daily_limit=1)
    client = ChatClient(settings.llm())
    try:
        reports = await make_reader_guides(db, client, settings, now=GUIDES_NOW)
    finally:
        await client.aclose()
    # The cap of one guide goes to the default's readers; English waits for tomorrow's room.
    assert [(r.language, r.made, r.capped) for r in reports] == [("zh", 1, False), ("en", 0, True)]
    assert "Simplified Chinese" in llm.requests[0].messages[0]["content"]


# -- chat replies ------------------------------------------------------------------------------------------


@pytest.fixture
def chat_store(migrated_template: Path, tmp_path: Path) -> Iterator[Database]:
    yield from open_copy(migrated_template, tmp_path)


def test_chat_replies_follow_choice_then_platform_then_the_default(chat_store: Database) -> None:
    def say(text: str, platform: str | None, settings: Settings = CHINESE) -> Any:
        ctx = ChatContext("telegram:4242", chat_name="Ada", language=platform)
        return handle(chat_store, settings.chat(), ctx, text, now=NOW)

    # No choice, no platform language (or one PaperTrail does not speak): the operator's default.
    for platform in (None, "de-DE"):
        reply = say("/follows", platform)
        assert reply.language == "zh" and reply.text.startswith("本会话还没有任何关注。"), platform
    shown_language = say("/language", None)
    assert shown_language.text.startswith(
        "PaperTrail 在本会话中使用中文，即你的 Telegram 或 Slack 设置中的语言（未设置时使用中文）。"
    )
    assert say("/language", None, Settings()).text.startswith(
        "PaperTrail speaks English in this chat, the language of your Telegram or Slack settings "
        "(or English when they name none)."
    )
    # The platform names English: English, whatever the default.
    assert say("/follows", "en-GB").text.startswith("This chat follows nothing yet.")
    # Under en, a chat without any language is English, as it always was.
    assert say("/follows", None, Settings()).language == "en"
    # The reader's own choice beats everything.
    say("/start", None)
    say("/language en", "zh-CN")
    assert say("/follows", "zh-CN").text.startswith("This chat follows nothing yet.")
    assert say("/nonsense", None).language == "en"


@pytest.fixture
def telegram_api() -> Iterator[FakeTelegram]:
    with fake_telegram(TELEGRAM_TOKEN) as server:
        yield server


async def test_telegram_speaks_the_default_to_a_user_whose_app_names_no_language(
    telegram_api: FakeTelegram, chat_store: Database
) -> None:
    settings = Settings(
        telegram_token=TELEGRAM_TOKEN, telegram_api_url=telegram_api.base_url, default_language="zh"
    )
    tbot = TelegramBot(settings.telegram_bot(), chat_store, clock=lambda: NOW)
    await tbot.start()
    try:
        updates = Updates(bot_id=telegram_api.bot_id)
        nobody = Person(31, "Wu", language_code="")
        english = Person(32, "Grace", language_code="en")
        quiet = Chat(tbot, telegram_api, updates, Place(nobody.id), nobody)
        (welcome,) = await quiet.say("/start")
        assert shown(welcome).startswith("欢迎使用 PaperTrail，Wu！")
        (hint,) = await quiet.send_update(updates.sticker(Place(nobody.id), nobody))
        assert shown(hint).startswith("PaperTrail 只读取文字命令")
        subscriber = subscriber_records.get_subscriber(chat_store, f"telegram:{nobody.id}")
        assert subscriber is not None and subscriber.language is None  # the default is not stored
        (hello,) = await Chat(tbot, telegram_api, updates, Place(english.id), english).say("/start")
        assert shown(hello).startswith("Welcome to PaperTrail, Grace!")
        (chosen,) = await quiet.say("/language en")
        assert shown(chosen).startswith("This chat now uses English.")
        (listing,) = await quiet.say("/follows")
        assert shown(listing).startswith("This chat follows nothing yet.")
    finally:
        await tbot.stop()
    # The command menu for everyone is in the default; English has its own for English apps.
    everyone, english_menu = telegram_api.calls_of("setMyCommands")
    assert "language_code" not in everyone.params
    assert all(CJK.search(command["description"]) for command in everyone.params["commands"])
    assert english_menu.params["language_code"] == "en"
    assert english_menu.params["commands"] == [
        {"command": info.name, "description": info.summary} for info in COMMANDS
    ]


def test_slack_speaks_the_default_when_the_locale_names_no_language_papertrail_speaks(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    settings = Settings(
        slack_bot_token=SLACK_TOKEN,
        slack_signing_secret=SECRET,
        slack_api_url=slack.base_url,
        default_language="zh",
    )
    opened = {"type": "app_home_opened", "user": ROOT, "channel": "D0ROOT", "tab": "home", "event_ts": "1.0"}
    with serve(SlackBot(settings.slack_bot(), sqlite_store, clock=lambda: NOW)) as client:
        german = slash(client, slack, "follows", EVE, LAB)  # Eve's Slack is in German
        english = slash(client, slack, "follows", ADA, DM)  # Ada's in British English
        assert post(client, event_body(opened), "application/json").status_code == 200  # Root has none
        (home,) = slack.wait_for("views.publish")
    assert german["text"].startswith("本频道还没有任何关注。")
    assert english["text"].startswith("This chat follows nothing yet.")
    assert CJK.search(json.dumps(home.params["view"], ensure_ascii=False))


# -- web pages and sign-up mails ---------------------------------------------------------------------------

ADDRESS = "email:ada@example.org"


@pytest.fixture
def site(sqlite_store: Database) -> Iterator[tuple[TestClient, SinkHandler]]:
    follow(sqlite_store, ADDRESS, "cat:cs.DC")  # a subscriber who never chose a language
    with smtp_sink() as (sink, port):
        ctx = context(sqlite_store, port, default_language="zh")
        yield TestClient(build_app(ctx), follow_redirects=False), sink


def test_pages_without_a_cookie_or_accept_language_are_chinese_under_zh(
    site: tuple[TestClient, SinkHandler],
) -> None:
    client, _ = site
    manage = f"/manage/{tokens.sign(KEY, tokens.MANAGE, ADDRESS)}"
    for path, chinese in (
        ("/", "新到了什么？一切正常吗？"),
        ("/papers", "搜索（写法与关注相同）"),
        ("/no/such/page", "处没有页面"),
        ("/subscribe", "通过邮件接收 arXiv 摘要"),
        (manage, "你的 PaperTrail 订阅"),
        (f"/unsubscribe/{tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)}", "退订？"),
    ):
        page = client.get(path)
        assert chinese in page.text and '<html lang="zh-Hans">' in page.text, path
        assert page.headers["content-language"] == "zh-Hans" and "set-cookie" not in page.headers, path
        # A browser that asks for English (or one PaperTrail speaks after others) still gets English.
        for header in ("en", "fr-FR, en;q=0.5"):
            asked = client.get(path, headers={"Accept-Language": header})
            assert '<html lang="en">' in asked.text and not CJK.search(asked.headers["content-language"])
        assert '<html lang="zh-Hans">' in client.get(path, headers={"Accept-Language": "fr, de"}).text
    # The cookie beats the default, and ?lang beats both.
    client.cookies.set("papertrail_lang", "en")
    assert '<html lang="en">' in client.get("/papers").text
    client.cookies.clear()
    assert '<html lang="en">' in client.get("/papers?lang=en").text
    client.cookies.clear()  # ?lang=en was remembered
    assert client.post("/").text == "此处不允许 POST 请求"
    assert client.get("/healthz").text == "ok"  # machines' pages stay English


def test_the_manage_page_names_the_language_a_reader_without_a_choice_gets(
    site: tuple[TestClient, SinkHandler],
) -> None:
    client, _ = site
    manage = f"/manage/{tokens.sign(KEY, tokens.MANAGE, ADDRESS)}"
    assert '<span data-language="">未选择（摘要使用中文，本站默认）</span>' in client.get(manage).text
    english = client.get(manage, headers={"Accept-Language": "en"}).text
    assert "not chosen (digests in 中文, this site's default)" in english


def test_the_sign_up_mail_is_chinese_under_zh(site: tuple[TestClient, SinkHandler]) -> None:
    client, sink = site
    form = {"address": "li@example.org", "follows": "cat:cs.DC"}
    assert client.post("/subscribe", data=form).status_code == 200
    mail = sink.received[-1].message
    assert mail["Subject"] == "确认你的 PaperTrail 订阅" and mail["Content-Language"] == "zh-Hans"
    # A known address that never chose a language gets its manage mail in the page's language (a choice
    # the request made beats the default).
    again = client.post("/subscribe", data={**form, "address": "ada@example.org", "language": "en"})
    assert again.status_code == 200
    assert sink.received[-1].message["Subject"] == "Your PaperTrail subscription"
    english = client.post(
        "/subscribe", data={**form, "address": "bo@example.org"}, headers={"Accept-Language": "en-US"}
    )
    assert english.status_code == 200
    assert sink.received[-1].message["Subject"] == "Confirm your PaperTrail subscription"


def test_the_command_line_sign_up_mail_follows_the_setting(
    sqlite_url: str,
    sqlite_store: Database,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    with smtp_sink() as (sink, port):
        cli_env(monkeypatch, sqlite_url, port, tmp_path)
        monkeypatch.setenv("PAPERTRAIL_DEFAULT_LANGUAGE", "zh")
        result = CliRunner().invoke(app, ["subscribe", "email:carol@example.org", "cat:cs.DC"])
        assert result.exit_code == 0, result.stderr
        assert "confirmation link sent" in result.stdout  # the operator's command line stays English
        mail = sink.received[-1].message
        assert mail["Subject"] == "确认你的 PaperTrail 订阅"
        assert token_in(sink)
        chosen = CliRunner().invoke(app, ["subscribe", "email:dan@example.org", "--language", "en"])
        assert chosen.exit_code == 0, chosen.stderr
        assert sink.received[-1].message["Subject"] == "Confirm your PaperTrail subscription"
    subscriber = subscriber_records.get_subscriber(sqlite_store, "email:carol@example.org")
    assert subscriber is not None and subscriber.language is None  # it follows the setting, not a copy
