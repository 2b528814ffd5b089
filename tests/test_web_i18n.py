"""The web pages in English and Simplified Chinese: every page in both, how the language is chosen (``?lang``,
the cookie, a subscriber's stored language, Accept-Language), the switch, and AI guides in the page's
language. The numbers and escaping of the pages are tested in tests/test_web.py."""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import unquote

import pytest

from core.db import Database
from core.follows import subscriber_records
from core.follows.manage import follow
from core.guides import guide_records
from core.languages import translator
from core.models import RunState, utcnow
from core.papers import paper_records, run_records
from core.people import newsletters, tokens
from core.values import Guide, PaperIn
from papertrail.web.app import build_app
from papertrail.web.pages import source_reason
from tests import i18n_messages
from tests.servers import SinkHandler, smtp_sink
from tests.support.signup import KEY, context, token_in

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

ADDRESS = "email:ada@example.org"
PAPER = "2611.00001"
NEWSLETTER = "dc-weekly"
GUIDES = {
    "en": Guide("An English one-line summary.", ("First contribution.",), "The title changed."),
    "zh": Guide("一句中文总结。", ("第一项贡献。",), "标题有改动。"),
}
SWITCH = re.compile(r'<nav class="languages"[^>]*data-language-switch>(.*?)</nav>', re.S)


# A confirmation link of ADDRESS (subscribed already: its page asks, and confirms nothing new).
CONFIRM_SUBJECT = tokens.confirm_subject(ADDRESS, "a-nonce")


@dataclass
class World:
    """A small store with one of everything the pages show, and a client over it."""

    db: Database
    client: TestClient
    sink: SinkHandler

    def token(self, purpose: str, subject: str = ADDRESS) -> str:
        return tokens.sign(KEY, purpose, subject)

    def fresh(self) -> TestClient:
        """The client without cookies (a browser that never chose a language)."""
        self.client.cookies.clear()
        return self.client


@pytest.fixture
def world(sqlite_store: Database) -> Iterator[World]:
    db = sqlite_store
    now = utcnow()
    follow(db, ADDRESS, "cat:cs.DC")
    newsletters.create(
        db, NEWSLETTER, "Distributed weekly", ["cat:cs.DC"], schedule="instant", timezone="UTC"
    )
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None
    newsletters.join(db, NEWSLETTER, subscriber)

    def version(number: int, title: str) -> PaperIn:
        return PaperIn(PAPER, number, title, "An abstract.", ("Ada Lovelace",), ("cs.DC",))

    paper_records.save_versions(db, [version(1, "Asynchronous rollouts")], now=now - timedelta(days=2))
    paper_records.save_versions(
        db, [version(2, "Asynchronous rollouts, revised")], now=now - timedelta(hours=1)
    )
    revision = paper_records.versions_of(db, PAPER)[-1]
    assert revision.id is not None
    for language, guide in GUIDES.items():
        guide_records.save_guide(
            db, revision.id, language, guide, model="test", now=now - timedelta(minutes=5)
        )
    run = run_records.start_run(db, "arxiv-rss", now=now - timedelta(minutes=30))
    run_records.finish_run(db, run, RunState.ERROR, now=now - timedelta(minutes=29), error="cannot connect")
    with smtp_sink() as (sink, port):
        yield World(db, TestClient(build_app(context(db, port)), follow_redirects=False), sink)


def pages(world: World) -> dict[str, tuple[str, str, int]]:
    """Every kind of page: path -> (an English text on it, the same text in Chinese, the status)."""
    return {
        "/": ("What came in, and is everything working?", "新到了什么？一切正常吗？", 200),
        "/papers?kind=revised": ("Search, as you would write a follow", "搜索（写法与关注相同）", 200),
        "/papers?sort=random": ("unknown sort", "未知的排序方式", 400),
        f"/papers/{PAPER}": ("first stored version", "收录的第一个版本", 200),
        "/papers/2999.99999": ("Paper not found", "未找到论文", 404),
        "/sources/arxiv-rss": ("Recent runs", "最近的运行", 200),
        "/sources/nowhere": ("Unknown source", "未知数据源", 404),
        "/no/such/page": ("There is no page at", "处没有页面", 404),
        "/subscribe": ("Get arXiv digests by mail", "通过邮件接收 arXiv 摘要", 200),
        f"/unsubscribe/{world.token(tokens.UNSUBSCRIBE)}": ("Unsubscribe?", "退订？", 200),
        "/unsubscribe/garbage": ("This link is not valid", "此链接无效", 400),
        f"/manage/{world.token(tokens.MANAGE)}": (
            "Your PaperTrail subscription",
            "你的 PaperTrail 订阅",
            200,
        ),
        f"/leave/{world.token(tokens.LEAVE, tokens.leave_subject(ADDRESS, NEWSLETTER))}": (
            "Leave Distributed weekly?",
            "退出 Distributed weekly？",
            200,
        ),
        f"/confirm/{world.token(tokens.CONFIRM, CONFIRM_SUBJECT)}": (
            "Confirm your subscription?",
            "确认订阅？",
            200,
        ),
    }


def with_lang(path: str, language: str) -> str:
    return f"{path}{'&' if '?' in path else '?'}lang={language}"


def switch_links(page: str) -> dict[str, str]:
    """The language switch of a page: language tag -> link."""
    found = SWITCH.search(page)
    assert found, "no language switch on the page"
    return {
        tag: html.unescape(href)
        for href, tag in re.findall(r'<a href="([^"]*)" hreflang="([^"]+)"', found[1])
    }


def visible(page: str) -> str:
    """A page without its style sheet."""
    return re.sub(r"<style>.*?</style>", "", page, flags=re.S)


def english_sentences() -> list[str]:
    """The web catalog's English messages of several words without fields, as a page prints them."""
    return [
        html.escape(entry.id, quote=False)
        for entry in i18n_messages.catalog("zh", "web")
        if isinstance(entry.id, str) and re.search(r"\w \w", entry.id) and not re.search(r"[{}<%]", entry.id)
        if entry.string != entry.id
    ]


def test_every_page_exists_in_english_and_chinese(world: World) -> None:
    sentences = english_sentences()
    assert len(sentences) > 50
    for path, (english, chinese, status) in pages(world).items():
        en = world.fresh().get(with_lang(path, "en"))
        zh = world.fresh().get(with_lang(path, "zh"))
        assert (en.status_code, zh.status_code) == (status, status), path
        assert english in html.unescape(en.text) and chinese not in en.text, path
        assert chinese in html.unescape(zh.text) and english not in html.unescape(zh.text), path
        assert '<html lang="en">' in en.text and '<html lang="zh-Hans">' in zh.text, path
        assert (en.headers["content-language"], zh.headers["content-language"]) == ("en", "zh-Hans"), path
        assert en.headers["vary"] == zh.headers["vary"] == "Accept-Language, Cookie", path
        for page, current in ((en.text, "en"), (zh.text, "zh")):
            links = switch_links(page)
            assert set(links) == {"en", "zh-Hans"}, path
            assert all(
                link.startswith("?") and link.endswith(("lang=en", "lang=zh")) for link in links.values()
            )
            assert re.search(rf'lang="{"zh-Hans" if current == "zh" else "en"}" class="current"', page), path
            assert ">English</a> | <a" in page and ">中文</a>" in page
        # No English sentence of the catalog that the English page shows is left on the Chinese page.
        shown = visible(en.text)
        left = [s for s in sentences if s in shown and s in visible(zh.text)]
        assert not left, (path, left)


def test_english_is_the_default(world: World) -> None:
    for path, (english, _, status) in pages(world).items():
        page = world.fresh().get(path)
        assert page.status_code == status and english in html.unescape(page.text), path
        assert '<html lang="en">' in page.text and "set-cookie" not in page.headers, path


@pytest.mark.parametrize(
    ("header", "language"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh-Hans"),
        ("zh-TW", "zh-Hans"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("fr-FR, zh;q=0.5, en;q=0.4", "zh-Hans"),
        ("fr-FR, de", "en"),
        ("", "en"),
    ],
)
def test_accept_language_chooses_when_nothing_else_does(world: World, header: str, language: str) -> None:
    page = world.fresh().get("/papers", headers={"Accept-Language": header})
    assert f'<html lang="{language}">' in page.text and page.headers["content-language"] == language
    assert "set-cookie" not in page.headers  # a guess from the header is not remembered


def test_lang_is_remembered_in_a_cookie_that_beats_the_header(world: World) -> None:
    client = world.fresh()
    chosen = client.get("/papers?lang=zh", headers={"Accept-Language": "en"})
    assert '<html lang="zh-Hans">' in chosen.text
    cookie = chosen.headers["set-cookie"]
    assert cookie.startswith("papertrail_lang=zh;")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"max-age=31536000", "path=/", "samesite=lax", "httponly"} <= attributes
    # Every later page: the cookie wins over the browser's header, on any path.
    for path in ("/", f"/papers/{PAPER}", "/sources/arxiv-rss", "/no/such/page"):
        page = client.get(path, headers={"Accept-Language": "en-US,en"})
        assert '<html lang="zh-Hans">' in page.text and "set-cookie" not in page.headers, path
    # ?lang wins over the cookie, and replaces it.
    back = client.get("/?lang=en", headers={"Accept-Language": "zh-CN"})
    assert '<html lang="en">' in back.text and back.headers["set-cookie"].startswith("papertrail_lang=en;")
    assert '<html lang="en">' in client.get("/papers", headers={"Accept-Language": "zh-CN"}).text
    # A language PaperTrail does not speak is ignored, not remembered; a regional code is understood.
    client = world.fresh()
    ignored = client.get("/papers?lang=fr", headers={"Accept-Language": "zh"})
    assert '<html lang="zh-Hans">' in ignored.text and "set-cookie" not in ignored.headers
    regional = world.fresh().get("/papers?lang=zh-CN")
    assert regional.headers["set-cookie"].startswith("papertrail_lang=zh;")
    # A cookie with a value that is not a language is ignored too.
    world.fresh().cookies.set("papertrail_lang", "<script>")
    odd = world.client.get("/papers", headers={"Accept-Language": "zh"})
    assert '<html lang="zh-Hans">' in odd.text


def test_the_switch_keeps_the_query_and_escapes_it(world: World) -> None:
    page = world.fresh().get("/papers", params={"q": '<script>"x"', "cat": "cs.DC", "lang": "zh"})
    links = switch_links(page.text)
    assert links == {
        "en": "?q=%3Cscript%3E%22x%22&cat=cs.DC&lang=en",
        "zh-Hans": "?q=%3Cscript%3E%22x%22&cat=cs.DC&lang=zh",
    }
    assert 'href="?q=%3Cscript%3E%22x%22&amp;cat=cs.DC&amp;lang=en"' in page.text
    assert "<script>" not in page.text
    # Following it shows the same list in the other language.
    again = world.client.get("/papers" + links["en"])
    assert '<html lang="en">' in again.text and 'value="&lt;script&gt;&#34;x&#34;"' in again.text
    # The links carry no path: a path that looks like another host cannot become a link to it.
    for path in ("//evil.example/x", "/%5Cevil.example"):
        odd = world.fresh().get(f"http://testserver{path}")
        assert odd.status_code == 404
        assert all(link.startswith("?lang=") for link in switch_links(odd.text).values())


def test_405_answers_in_the_readers_language(world: World) -> None:
    answer = world.fresh().post("/", headers={"Accept-Language": "zh-CN"})
    assert answer.status_code == 405 and "不允许" in answer.text
    assert answer.headers["content-language"] == "zh-Hans"
    assert world.fresh().post("/").text == "POST is not allowed here"


def test_machine_pages_stay_english(world: World) -> None:
    client = world.fresh()
    client.cookies.set("papertrail_lang", "zh")
    for path in ("/healthz", "/readyz", "/metrics"):
        answer = client.get(path, headers={"Accept-Language": "zh-CN"})
        assert answer.status_code == 200 and "content-language" not in answer.headers, path
        assert not re.search(r"[\u4e00-\u9fff]", answer.text), path
    assert client.get("/healthz?lang=zh").text == "ok"


# -- a subscriber's own language ---------------------------------------------------------------------------


def set_language(world: World, language: str | None) -> None:
    subscriber = subscriber_records.get_subscriber(world.db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    subscriber_records.update_subscriber(world.db, subscriber.id, language=language)


def stored_language(world: World) -> str | None:
    subscriber = subscriber_records.get_subscriber(world.db, ADDRESS)
    assert subscriber is not None
    return subscriber.language


def test_signed_links_speak_the_subscribers_language(world: World) -> None:
    set_language(world, "zh")
    leave = tokens.leave_subject(ADDRESS, NEWSLETTER)
    for path, chinese in (
        (f"/unsubscribe/{world.token(tokens.UNSUBSCRIBE)}", "退订？"),
        (f"/manage/{world.token(tokens.MANAGE)}", "你的 PaperTrail 订阅"),
        (f"/leave/{world.token(tokens.LEAVE, leave)}", "退出 Distributed weekly？"),
        (f"/confirm/{world.token(tokens.CONFIRM, CONFIRM_SUBJECT)}", "确认订阅？"),
    ):
        # The stored language beats the browser's header...
        page = world.fresh().get(path, headers={"Accept-Language": "en-US,en"})
        assert chinese in page.text and '<html lang="zh-Hans">' in page.text, path
        assert "set-cookie" not in page.headers, path
        # ...but the reader's own choice, ?lang or the cookie, beats the stored language.
        assert '<html lang="en">' in world.fresh().get(with_lang(path, "en")).text, path
        world.fresh().cookies.set("papertrail_lang", "en")
        assert '<html lang="en">' in world.client.get(path).text, path
    # No stored language: the header decides again.
    set_language(world, None)
    page = world.fresh().get(f"/manage/{world.token(tokens.MANAGE)}", headers={"Accept-Language": "zh"})
    assert '<html lang="zh-Hans">' in page.text and 'data-language=""' in page.text and "未选择" in page.text
    assert '<html lang="en">' in world.fresh().get(f"/manage/{world.token(tokens.MANAGE)}").text


def test_one_click_unsubscribe_answers_in_the_subscribers_language(world: World) -> None:
    set_language(world, "zh")
    done = world.fresh().post(
        f"/unsubscribe/{world.token(tokens.UNSUBSCRIBE)}",
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert done.status_code == 200 and "你已退订" in done.text
    assert "set-cookie" not in done.headers
    assert "你的 1 条关注会保留" in done.text


def test_the_manage_page_stores_the_chosen_language(world: World) -> None:
    path = f"/manage/{world.token(tokens.MANAGE)}"
    client = world.fresh()
    page = client.get(path)
    assert '<select name="language">' in page.text and stored_language(world) is None
    # Nothing chosen yet: the page's own language is the one selected.
    assert re.search(r'<option value="en" lang="en" selected>English</option>', page.text)

    saved = client.post(path, data={"action": "language", "language": "zh"})
    assert saved.status_code == 303 and saved.headers["location"].endswith("?done=language")
    assert saved.headers["set-cookie"].startswith("papertrail_lang=zh;")
    assert stored_language(world) == "zh"
    after = client.get(saved.headers["location"])
    assert '<html lang="zh-Hans">' in after.text and "语言已保存" in after.text
    assert 'data-language="zh"' in after.text
    assert re.search(r'<option value="zh" lang="zh-Hans" selected>中文</option>', after.text)
    # It stays with the subscriber: another browser, with no cookie and an English header, sees Chinese.
    other = world.fresh().get(path, headers={"Accept-Language": "en"})
    assert '<html lang="zh-Hans">' in other.text

    # Back to English, from the Chinese page; a language PaperTrail does not speak is refused.
    assert client.post(path, data={"action": "language", "language": "en"}).status_code == 303
    assert stored_language(world) == "en"
    refused = world.fresh().post(path, data={"action": "language", "language": "fr"})
    assert refused.status_code == 400 and "unknown language" in html.unescape(refused.text)
    assert stored_language(world) == "en"


def test_form_errors_are_said_in_the_pages_language(world: World) -> None:
    path = f"/manage/{world.token(tokens.MANAGE)}"
    client = world.fresh()
    client.cookies.set("papertrail_lang", "zh")
    query = client.post(path, data={"action": "add", "query": "cat:cs.DC AND (au:Li"})
    assert query.status_code == 400 and "<strong>未保存：</strong>" in query.text
    assert "位置" in query.text and "at position" not in query.text and "^" in query.text
    schedule = client.post(path, data={"action": "schedule", "schedule": "hourly", "timezone": "UTC"})
    assert schedule.status_code == 400
    assert "无法读取时间设置“hourly”；请使用 &#39;instant&#39;" in schedule.text
    zone = client.post(path, data={"action": "schedule", "schedule": "daily 08:00", "timezone": "Mars/X"})
    assert zone.status_code == 400 and "未知时区“Mars/X”；请使用 IANA 名称" in zone.text
    # In English, the parsers' own words.
    english = world.fresh().post(path, data={"action": "schedule", "schedule": "hourly", "timezone": "UTC"})
    assert "Not saved:</strong> cannot read schedule &#39;hourly&#39;; use &#39;instant&#39;" in english.text
    signup = world.fresh().post(
        "/subscribe", data={"address": "x@example.org", "follows": "foo:bar", "language": "zh"}
    )
    assert signup.status_code == 400 and "未知字段" in signup.text and "unknown field" not in signup.text
    newsletter = world.fresh().post(
        "/subscribe", data={"address": "x@example.org", "newsletter": "nope", "language": "zh"}
    )
    assert newsletter.status_code == 400 and "没有名为“nope”的简报；现有简报：" in newsletter.text


def test_the_subscribe_form_stores_the_pages_language(world: World) -> None:
    form = world.fresh().get("/subscribe?lang=zh").text
    assert '<input type="hidden" name="language" value="zh">' in form
    # The form carries its language even when the browser keeps no cookie.
    world.fresh()
    done = world.client.post(
        "/subscribe", data={"address": "lin@example.org", "follows": "cat:cs.DC", "language": "zh"}
    )
    assert done.status_code == 200 and "请查收邮件" in done.text and '<html lang="zh-Hans">' in done.text
    lin = subscriber_records.get_subscriber(world.db, "email:lin@example.org")
    assert lin is not None and lin.language == "zh"
    # Without the field, the language the page is in: here from the browser's header.
    world.fresh().post(
        "/subscribe",
        data={"address": "max@example.org", "follows": "cat:cs.DC"},
        headers={"Accept-Language": "zh-CN"},
    )
    max_ = subscriber_records.get_subscriber(world.db, "email:max@example.org")
    assert max_ is not None and max_.language == "zh"
    english = world.fresh().post("/subscribe", data={"address": "eve@example.org", "follows": "cat:cs.DC"})
    assert "Check your mail" in english.text
    eve = subscriber_records.get_subscriber(world.db, "email:eve@example.org")
    assert eve is not None and eve.language == "en"
    # A bad follow is shown on the form in the page's language, the form kept.
    bad = world.fresh().post(
        "/subscribe", data={"address": "x@example.org", "follows": "cat:cs.DC AND (", "language": "zh"}
    )
    assert bad.status_code == 400 and "电子邮件地址" in bad.text
    # The confirmation link opens in the stored language, and confirming answers in it.
    token = next(
        token_in(world.sink, index)
        for index, mail in enumerate(world.sink.received)
        if "lin@example.org" in str(mail.message["To"])
    )
    ask = world.fresh().get(f"/confirm/{token}", headers={"Accept-Language": "en"})
    assert "确认订阅？" in ask.text
    confirmed = world.fresh().post(f"/confirm/{token}")
    assert confirmed.status_code == 200 and "订阅已确认" in confirmed.text
    assert unquote(re.search(r'href="(/manage/[^"]+)"', confirmed.text)[1])  # type: ignore[index]


# -- AI guides in the page's language ----------------------------------------------------------------------


def test_guides_show_in_the_pages_language_marked_machine_generated(world: World) -> None:
    for language, marker, other in (
        ("en", "AI guide to v2 (machine-generated)", "zh"),
        ("zh", "v2 的 AI 导读（机器生成）", "en"),
    ):
        paper = world.fresh().get(f"/papers/{PAPER}?lang={language}").text
        guide = GUIDES[language]
        assert marker in paper and 'data-guide="2"' in paper
        assert html.escape(guide.tldr) in paper and html.escape(guide.contributions[0]) in paper
        assert guide.changes is not None and html.escape(guide.changes) in paper
        assert GUIDES[other].tldr not in paper
        listing = world.client.get(f"/papers?lang={language}").text
        item = re.search(rf'<li data-paper="{PAPER}">(.*?)</li>', listing, flags=re.S)
        assert item is not None and html.escape(guide.tldr) in item[1]
        assert ("AI guide (machine-generated)" if language == "en" else "AI 导读（机器生成）") in item[1]
        # Lists show the TL;DR only.
        assert html.escape(guide.contributions[0]) not in item[1]


def test_no_guide_shows_nothing(world: World) -> None:
    paper_records.save_versions(
        world.db, [PaperIn("2611.00002", 1, "Unguided", "Abstract.", ("B. Author",), ("cs.DC",))]
    )
    paper = world.fresh().get("/papers/2611.00002").text
    assert 'class="guide"' not in paper and "machine-generated" not in paper
    listing = world.client.get("/papers?q=Unguided").text
    assert 'data-paper="2611.00002"' in listing and 'class="guide"' not in listing
    # v1 of the guided paper has no guide of its own: only v2's is shown.
    assert 'data-guide="1"' not in world.client.get(f"/papers/{PAPER}").text


def test_the_chart_speaks_the_pages_language(world: World) -> None:
    chart = re.search(r"<svg.*?</svg>", world.fresh().get("/?lang=zh").text, flags=re.S)
    assert chart is not None
    assert "最近 30 天每日新增（UTC）" in chart[0] and ">新论文</text>" in chart[0] and "篇修订" in chart[0]
    words = " ".join(re.findall(r">([^<]+)<", chart[0]))
    assert not re.search(r"new papers?|revisions?\b|AI-related|arrived|From", words), words


def test_guides_count_on_the_status_page_in_both_languages(world: World) -> None:
    for language, label in (("en", "New AI guides"), ("zh", "新增 AI 导读")):
        page = world.fresh().get(f"/?lang={language}").text
        card = re.search(
            r'<div class="label">([^<]+)</div>\s*<div class="value">\+<span data-count="guides_24h">(\d+)<',
            page,
        )
        assert card is not None and card[1] == label and int(card[2]) == 1  # one version, two languages


@pytest.mark.parametrize(
    ("note", "chinese"),
    [
        (
            "15 pick(s) on 2026-08-20, 15 new, 3 paper(s) new to PaperTrail",
            "2026-08-20 共 15 条推荐，其中 15 条为新增，3 篇论文首次收录",
        ),
        (
            "2 pick(s) on 2026-08-20, 0 new, 0 paper(s) new to PaperTrail; skipped 1: no id; bad",
            "2026-08-20 共 2 条推荐，其中 0 条为新增，0 篇论文首次收录；跳过 1 条：no id; bad",
        ),
        ("3 version(s) stored as history; skipped 1 line(s): {bad", "3 个版本存为历史记录；跳过 1 行：{bad"),
        # Notes written since the plural fix; the older "(s)" forms above are still in stored runs.
        ("1 version stored as history; skipped 2 lines: {bad", "1 个版本存为历史记录；跳过 2 行：{bad"),
        (
            "1 pick on 2026-08-20, 1 new, 1 paper new to PaperTrail",
            "2026-08-20 共 1 条推荐，其中 1 条为新增，1 篇论文首次收录",
        ),
        ("completed 0 of 1 paper", "已补全 1 篇论文中的 0 篇"),
        (
            "completed 3 of 4 paper(s); arXiv does not know 2401.00001",
            "已补全 4 篇论文中的 3 篇；arXiv 查无此编号：2401.00001",
        ),
        (  # a list of ids, listed as the page's language lists
            "completed 2 of 4 paper(s); arXiv does not know 2401.00001, 2401.00002",
            "已补全 4 篇论文中的 2 篇；arXiv 查无此编号：2401.00001、2401.00002",
        ),
        ("HTTP 503 from export.arxiv.org", "HTTP 503 from export.arxiv.org"),
    ],
)
def test_run_notes_are_worded_in_the_page_language_and_their_data_kept(note: str, chinese: str) -> None:
    assert source_reason(note, translator("en")) == note  # English reads exactly as stored
    assert source_reason(note, translator("zh")) == chinese


# The original 研踪 dashboard's words, as the issue lists them, and where PaperTrail shows each
# (docs/status-page.md, "Beside the original page").
ORIGINAL_STATUS_WORDS = (
    "新增论文",
    "其中 AI 相关",
    "已有论文修订",
    "新增 AI 导读",
    "arXiv 最近完成扫描",
    "全站最近入库",
    "最近完成检查",
    "最近发现新增版本",
    "库内论文最新更新时间",
    "已收录论文",
    "AI 相关",
    "有修订",
    "HF 社区发现",
    "检查未发现新内容并不是异常",
    "回填导入的论文属于历史记录",
)


def test_the_chinese_dashboard_uses_the_original_pages_words(world: World) -> None:
    page = visible(world.fresh().get("/?lang=zh").text)
    missing = [words for words in ORIGINAL_STATUS_WORDS if words not in page]
    assert not missing, missing
    browser = world.fresh().get("/papers?lang=zh").text
    for label in ("版本更新", "本站收录", "首次发表"):
        assert f">{label}</option>" in browser
    card = re.search(rf'<li data-paper="{re.escape(PAPER)}">(.*?)</li>', browser, re.S)
    assert card is not None
    assert '<span class="tag">修订</span>' in card[1] and "Ada Lovelace" in card[1] and "cs.DC" in card[1]
    assert "<summary>原文摘要</summary>" in card[1] and "An abstract." in card[1]


def test_the_headline_times_are_arxivs_last_scan_and_the_newest_arrival(world: World) -> None:
    # The fixture's arxiv-rss run ended 29 minutes ago (in error: a finished check all the same); the
    # newest arrival is the revision stored an hour ago.
    page = world.fresh().get("/?lang=en").text
    scan = re.search(r'<span data-time="arxiv-scan">(.*?)</span>', page)
    arrival = re.search(r'<span data-time="latest-arrival">(.*?)</span>', page)
    assert scan is not None and arrival is not None
    assert scan[1].startswith("arXiv's last completed scan: 29 min ago (")
    assert arrival[1].startswith("Newest arrival on this site: 1 h ago (")
    chinese = world.fresh().get("/?lang=zh").text
    scan_zh = r'<span data-time="arxiv-scan">arXiv 最近完成扫描：29 分钟前（\d{4}-[^）]+）</span>'
    assert re.search(scan_zh, chinese)
    assert re.search(r'<span data-time="latest-arrival">全站最近入库：1 小时前', chinese)


def test_a_store_without_runs_says_never(sqlite_store: Database) -> None:
    client = TestClient(build_app(context(sqlite_store, 1)), follow_redirects=False)
    page = client.get("/?lang=en").text
    assert "arXiv's last completed scan: never" in page and "Newest arrival on this site: never" in page
