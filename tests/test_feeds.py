"""Atom feeds (papertrail/web/feeds.py, core/delivery/feeds.py, core/delivery/feed_records.py) through the web
app, on SQLite
and PostgreSQL.

Every feed is checked three ways: feedparser reads it without complaint (``bozo`` false), it validates
against a RELAX NG schema of RFC 4287 (tests/atom.rng: written for these tests, since no Atom schema is
installed; lxml cannot read the RFC's compact syntax), and the RFC's rules a grammar cannot say are checked
in Python (:func:`rfc4287_rules`). What a feed lists is compared with an oracle written here from the
stored rows, not with the store's own reads.
"""

from __future__ import annotations

import dataclasses
import html
import re
import warnings
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from lxml import etree
from sqlmodel import col

from core.db import Database
from core.delivery import feed_records
from core.delivery.feed_links import query_feed_path
from core.delivery.feeds import PRIVATE_FEED_ENTRIES, QUERY_FEED_ENTRIES
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.follows.query import PaperText, QueryError, parse
from core.guides import guide_records
from core.languages import translator
from core.ledger import ledger_records
from core.models import Follow, Match, Subscriber, Version
from core.papers import paper_records
from core.people import tokens
from core.values import Guide, PaperIn
from papertrail.web.atom import Feed, Link, serialize, xml_text
from papertrail.web.feeds import FEED_CACHE_SECONDS, FEED_MAX_AUTHORS, FeedCache, Rendered
from tests.hostile import HOSTILE_GUIDE, hostile_items
from tests.support.private_feeds import (
    ADDRESS,
    NS,
    T0,
    abs_id,
    app_client,
    dc_papers,
    entry_ids,
    feed_path,
    recorded,
    revision_of,
    valid_feed,
)
from tests.support.token_clients import variants
from tests.support.web import KEY
from tests.support.web_headers import assert_secured

with warnings.catch_warnings():
    warnings.simplefilter("ignore")


# -- what every feed must be -----------------------------------------------------------------------------


def oracle(db: Database, query: str, limit: int) -> list[str]:
    """The entry ids a query feed must list, from the stored rows: news versions that match ``query`` on
    their own text, of papers whose newest version matches it too (what the search index holds), newest
    arrival first, at most ``limit``."""
    parsed = parse(query)
    with db.session() as session:
        rows = session.execute(
            sa.select(
                *(
                    col(getattr(Version, name))
                    for name in (
                        "id",
                        "paper_id",
                        "number",
                        "title",
                        "abstract",
                        "authors",
                        "categories",
                        "news",
                    )
                )
            )
        ).all()

    def matches(row: Any) -> bool:
        paper = PaperIn(
            row.paper_id, row.number, row.title, row.abstract, tuple(row.authors), tuple(row.categories)
        )
        return parsed.evaluate(PaperText.of(paper)) is not None

    newest: dict[str, Any] = {}
    for row in rows:
        if row.paper_id not in newest or row.number > newest[row.paper_id].number:
            newest[row.paper_id] = row
    kept = [r for r in rows if r.news and matches(r) and matches(newest[r.paper_id])]
    kept.sort(key=lambda r: r.id, reverse=True)
    return [abs_id(r.paper_id, r.number) for r in kept[:limit]]


# -- the query feed ----------------------------------------------------------------------------------------


def test_query_feed_lists_the_newest_matching_versions_revisions_as_their_own(db: Database) -> None:
    paper_records.save_versions(db, recorded(), now=T0)
    revised = next(p for p in dc_papers() if "cs.LG" not in p.categories)
    paper_records.save_versions(db, [revision_of(revised)], now=T0 + timedelta(hours=1))
    v2 = paper_records.versions_of(db, revised.arxiv_id)[-1]
    assert v2.id is not None and v2.number == 2
    guide = Guide("The revision adds experiments.", ("More data", "A bound"))
    guide_records.save_guide(db, v2.id, "en", guide, model="m", now=T0 + timedelta(hours=2))
    guide_records.save_guide(
        db, v2.id, "zh", Guide("修订版补充了实验。"), model="m", now=T0 + timedelta(hours=2)
    )
    client = app_client(db)

    # 177 papers of the recorded day: the bound cuts the feed at the newest 50 versions.
    busy = client.get("/feeds", params={"q": "cat:cs.LG ANDNOT cat:cs.CV"})
    expected = oracle(db, "cat:cs.LG ANDNOT cat:cs.CV", QUERY_FEED_ENTRIES)
    assert len(expected) == QUERY_FEED_ENTRIES and entry_ids(valid_feed(busy.content)[0]) == expected

    query = "cat:cs.DC ANDNOT cat:cs.LG"
    response = client.get("/feeds", params={"q": query})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    assert response.headers["cache-control"] == f"public, max-age={FEED_CACHE_SECONDS}"
    doc, parsed = valid_feed(response.content)
    ids = entry_ids(doc)
    assert ids == oracle(db, query, QUERY_FEED_ENTRIES) and 10 < len(ids) < QUERY_FEED_ENTRIES
    # The revision is an entry of its own, first (the newest arrival), and v1 stays an entry too.
    assert ids[0] == abs_id(revised.arxiv_id, 2) and abs_id(revised.arxiv_id, 1) in ids
    assert parsed.feed.title == "PaperTrail: cat:cs.DC AND NOT cat:cs.LG"
    assert doc.findtext("a:updated", namespaces=NS) == "2026-12-01T10:00:00Z"  # the newest entry's (guide)
    self_link = doc.find("a:link[@rel='self']", NS)
    assert self_link is not None
    assert self_link.get("href") == "http://localhost:8080" + query_feed_path("cat:cs.DC AND NOT cat:cs.LG")

    by_id = {e.id: e for e in parsed.entries}
    revision = by_id[abs_id(revised.arxiv_id, 2)]
    assert revision.title == f"{revised.title} (revised) (revision v2)"
    assert revision.link == abs_id(revised.arxiv_id, 2)
    assert revision.updated == "2026-12-01T10:00:00Z" and revision.published
    content = revision.content[0].value
    assert "Revision v2" in content and "title, abstract" in content
    assert "AI guide to v2 (machine-generated)" in content and "The revision adds experiments." in content
    assert "More data" in content and "修订版" not in content
    first = by_id[abs_id(revised.arxiv_id, 1)]
    assert first.title == revised.title and "machine-generated" not in first.content[0].value
    assert [a.name for a in first.authors] == list(revised.authors[:FEED_MAX_AUTHORS])
    assert {t.term for t in first.tags} == set(revised.categories)
    assert first.summary == " ".join(revised.abstract.split())
    for entry in parsed.entries:
        assert "cs.DC" in {t.term for t in entry.tags} and "cs.LG" not in {t.term for t in entry.tags}

    chinese = client.get("/feeds", params={"q": query, "lang": "zh"})
    assert chinese.status_code == 200 and chinese.headers["etag"] != response.headers["etag"]
    zh_doc, zh = valid_feed(chinese.content)
    zh_self = zh_doc.find("a:link[@rel='self']", NS)
    assert zh_self is not None and str(zh_self.get("href")).endswith("&lang=zh")
    zh_revision = {e.id: e for e in zh.entries}[abs_id(revised.arxiv_id, 2)]
    assert (
        zh_revision.title.endswith("（修订版 v2）") and "修订版补充了实验。" in zh_revision.content[0].value
    )
    assert "The revision adds experiments." not in zh_revision.content[0].value


def test_query_feed_of_an_author_is_checked_paper_by_paper(db: Database) -> None:
    paper_records.save_versions(db, recorded()[:400], now=T0)
    # au: is answered by the index only approximately (the last surname word): each candidate is checked.
    author = next(p.authors[0] for p in recorded()[:400] if len(p.authors[0].split()) == 2)
    query = f'au:"{author}"'
    doc, _ = valid_feed(app_client(db).get("/feeds", params={"q": query}).content)
    assert entry_ids(doc) == oracle(db, query, QUERY_FEED_ENTRIES) != []


def test_bad_queries_get_400_with_the_parsers_message(sqlite_store: Database) -> None:
    client = app_client(sqlite_store)
    text = "cat:cs.DC AND (au:Li"
    with pytest.raises(QueryError) as caught:
        parse(text)
    for language in ("en", "zh"):
        response = client.get("/feeds", params={"q": text, "lang": language})
        assert response.status_code == 400
        assert response.headers["content-type"].startswith("text/plain")
        said = caught.value.said(translator(language))
        assert said in response.text and response.text.endswith(caught.value.excerpt())
        assert response.text.splitlines()[-1].endswith("^")
    assert "无法解析查询" in client.get("/feeds", params={"q": text, "lang": "zh"}).text
    missing = client.get("/feeds")
    assert missing.status_code == 400 and "/feeds?q=cat:cs.LG" in missing.text
    # Parses, but the index cannot search it: the compiler's reason, as /papers says it.
    lonely = client.get("/feeds", params={"q": "NOT cat:cs.LG"})
    assert lonely.status_code == 400 and lonely.text.startswith("cannot search for 'NOT cat:cs.LG': ")
    hostile = client.get("/feeds", params={"q": "ti:\x1b[31m (<script>"})
    assert hostile.status_code == 400 and "\x1b" not in hostile.text


def test_conditional_get_gives_304_until_new_papers_arrive(sqlite_store: Database) -> None:
    now = [T0 + timedelta(days=1)]
    papers = dc_papers()
    paper_records.save_versions(sqlite_store, papers[:10], now=T0)
    client = app_client(sqlite_store, clock=lambda: now[0])
    query = {"q": "cat:cs.DC"}

    first = client.get("/feeds", params=query)
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert first.status_code == 200 and etag.startswith('"') and modified == format_datetime(T0, usegmt=True)
    assert len(entry_ids(valid_feed(first.content)[0])) == 10
    for headers in (
        {"If-None-Match": etag},
        {"If-None-Match": f'"other", W/{etag}'},
        {"If-None-Match": "*"},
        {"If-Modified-Since": modified},
        {"If-Modified-Since": format_datetime(T0 + timedelta(hours=1), usegmt=True)},
    ):
        again = client.get("/feeds", params=query, headers=headers)
        assert again.status_code == 304 and again.content == b"", headers
        assert again.headers["etag"] == etag and again.headers["last-modified"] == modified
    for headers in (
        {"If-None-Match": '"other"'},
        {"If-Modified-Since": format_datetime(T0 - timedelta(seconds=1), usegmt=True)},
        {"If-Modified-Since": "yesterday"},
        # If-None-Match decides when both are sent (RFC 9110 section 13.2.2).
        {"If-None-Match": '"other"', "If-Modified-Since": modified},
    ):
        assert client.get("/feeds", params=query, headers=headers).status_code == 200, headers
    head = client.head("/feeds", params=query)
    assert head.status_code == 200 and head.headers["etag"] == etag and head.content == b""
    # The same query spelled differently is the same cached feed.
    assert client.get("/feeds", params={"q": "  CAT:cs.dc "}).headers["etag"] == etag

    later = T0 + timedelta(days=1, minutes=1)
    paper_records.save_versions(sqlite_store, papers[10:12], now=later)
    cached = client.get("/feeds", params=query, headers={"If-None-Match": etag})
    assert cached.status_code == 304  # built less than FEED_CACHE_SECONDS ago: the cached copy
    now[0] += timedelta(seconds=FEED_CACHE_SECONDS)
    fresh = client.get("/feeds", params=query, headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh.headers["etag"] != etag
    assert fresh.headers["last-modified"] == format_datetime(later, usegmt=True)
    ids = entry_ids(valid_feed(fresh.content)[0])
    assert len(ids) == 12 and ids[:2] == [abs_id(p.arxiv_id, 1) for p in reversed(papers[10:12])]


def test_the_feed_cache_expires_and_keeps_the_recently_used() -> None:
    cache = FeedCache(seconds=60, entries=2)
    feed = Rendered.of(b"<feed/>", T0)
    cache.put(("a", "en"), feed, T0)
    cache.put(("b", "en"), feed, T0)
    assert cache.get(("a", "en"), T0 + timedelta(seconds=59)) is feed  # a is now the most recent
    cache.put(("c", "en"), feed, T0)
    assert cache.get(("b", "en"), T0) is None and len(cache) == 2
    assert cache.get(("a", "en"), T0 + timedelta(seconds=60)) is None  # expired
    assert cache.get(("c", "zh"), T0) is None  # one copy per language


def test_hostile_titles_authors_and_guides_are_escaped(db: Database) -> None:
    items = hostile_items()
    # As stored: PostgreSQL text cannot hold NUL (the serializer's own test feeds it one).
    paper_records.save_versions(
        db,
        [
            PaperIn(i.arxiv_id, i.version, i.title.replace("\x00", ""), i.abstract, i.authors, i.categories)
            for i in items
        ],
        now=T0,
    )
    for item in items:
        version = paper_records.versions_of(db, item.arxiv_id)[-1]
        assert version.id is not None
        guide_records.save_guide(db, version.id, "en", HOSTILE_GUIDE, model="m", now=T0)
    response = app_client(db).get("/feeds", params={"q": "cat:cs.LG OR cat:cs.CL OR cat:cs.DC OR cat:cs.PL"})
    doc, parsed = valid_feed(response.content)
    assert len(parsed.entries) == len(items)
    body = response.content.decode()
    assert "<script" not in body and "<img" not in body and "<b>" not in body and "<iframe" not in body
    assert "\x1b" not in body and "\u202e" not in body and "\x00" not in body
    titles = {
        e.findtext("a:id", namespaces=NS): e.findtext("a:title", namespaces=NS)
        for e in doc.findall("a:entry", NS)
    }
    for item in items:
        stored = paper_records.versions_of(db, item.arxiv_id)[-1].title
        expected = " ".join(xml_text(stored).split())
        if item.version > 1:
            expected += f" (revision v{item.version})"
        assert titles[abs_id(item.arxiv_id, item.version)] == expected  # the text itself, escaped
    names = {n.text for n in doc.iterfind("a:entry/a:author/a:name", NS)}
    assert {"Ada <Lovelace>", "<!here>", "Zeng & Li"} <= names
    # The content is only the markup the serializer wrote: paragraphs, labels, lists and http(s) links.
    for element in doc.iterfind("a:entry/a:content//x:*", NS):
        assert etree.QName(element).localname in {"div", "p", "strong", "a", "ul", "li"}
        assert set(element.attrib) <= {"href", "lang", "{http://www.w3.org/XML/1998/namespace}lang"}
        assert urlsplit(element.get("href", "https://x")).scheme == "https"
    # The guide's text is there, as text.
    assert any('<script>alert("g")</script>' in "".join(p.itertext()) for p in doc.iterfind(".//x:p", NS))


def test_the_serializer_drops_what_xml_cannot_carry() -> None:
    hostile = "a\x00b\x1bc\ud800d\ufffee\uffff\u202ef <&> ]]>"
    feed = Feed(
        id="urn:x:1",
        title=hostile,
        updated=T0,
        links=(Link("https://example.org/?a=1&b=<2>", "self"),),
        author=hostile,
        author_uri="https://example.org/",
        entries=[],
    )
    doc = etree.fromstring(serialize(feed))
    assert doc.findtext("a:title", namespaces=NS) == "abcdef <&> ]]>"
    link = doc.find("a:link", NS)
    assert link is not None and link.get("href") == "https://example.org/?a=1&b=<2>"


# -- the private feed --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Ledger:
    """A subscriber with two sent digests and a planned one, and another subscriber's sent digest."""

    subscriber_id: int
    sent: list[list[str]]  # entry ids of each sent digest, oldest digest first
    unsent: list[str]


def sent_digest(
    db: Database, address: str, papers: list[PaperIn], now: datetime, *, send: bool = True
) -> list[str]:
    """Store ``papers`` as news at ``now``, match and plan them for ``address``, and mark the digest sent
    (unless not ``send``); the entry ids of what it holds."""
    paper_records.save_versions(db, papers, now=now)
    match_new(db, now=now)
    match_records.expand_matches(db, now=now)
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    digest = ledger_records.open_digest(
        db, subscriber.id, address.partition(":")[0], instant_only=False, now=now
    )
    assert digest is not None
    if send:
        ledger_records.finish_sent(db, digest, platform_id=None, parts=1, now=now + timedelta(minutes=5))
    return sorted(abs_id(item.arxiv_id, item.version) for item in ledger_records.digest_items(db, digest))


def ledger(db: Database) -> Ledger:
    papers = dc_papers()
    follow(db, ADDRESS, "cat:cs.DC")
    follow(db, "console:eve", "cat:cs.DC")
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=T0 - timedelta(days=1)))
    first = sent_digest(db, ADDRESS, papers[:6], T0)
    # The revision of a paper the first digest carried: an entry of its own.
    second = sent_digest(db, ADDRESS, [revision_of(papers[0]), *papers[6:9]], T0 + timedelta(days=1))
    sent_digest(db, "console:eve", [], T0 + timedelta(days=1))  # eve's digest: not ADDRESS's
    unsent = sent_digest(db, ADDRESS, papers[9:12], T0 + timedelta(days=2), send=False)
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    assert abs_id(papers[0].arxiv_id, 2) in second and len(first) == 6 and len(unsent) == 3
    return Ledger(subscriber.id, [first, second], unsent)


def test_private_feed_shows_exactly_what_sent_digests_carried(db: Database) -> None:
    book = ledger(db)
    with db.session() as session:
        session.execute(
            sa.update(Subscriber).where(col(Subscriber.id) == book.subscriber_id).values(language="zh")
        )
    papers = dc_papers()
    v2 = paper_records.versions_of(db, papers[0].arxiv_id)[-1]
    v1_of_7 = paper_records.versions_of(db, papers[7].arxiv_id)[0]
    assert v2.id is not None and v1_of_7.id is not None
    guide_records.save_guide(
        db, v2.id, "zh", Guide("中文导读", ("贡献一",), "改了标题"), model="m", now=T0 + timedelta(days=3)
    )
    guide_records.save_guide(db, v1_of_7.id, "en", Guide("English only"), model="m", now=T0)
    client = app_client(db)
    path = feed_path(db)
    assert feed_path(db) == path  # the nonce is drawn once

    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    assert response.headers["cache-control"] == "private, no-store"
    assert response.headers["referrer-policy"] == "no-referrer"
    doc, parsed = valid_feed(response.content)
    ids = entry_ids(doc)
    # Exactly the two sent digests' items, the newer digest first; not the planned one, not eve's.
    assert sorted(ids[: len(book.sent[1])]) == book.sent[1]
    assert sorted(ids[len(book.sent[1]) :]) == book.sent[0]
    assert not set(ids) & set(book.unsent)
    with db.session() as session:
        held = session.execute(
            sa.select(sa.func.count())
            .select_from(Match)
            .where(col(Match.subscriber_id) == book.subscriber_id)
        ).scalar_one()
    assert held == len(ids) + len(book.unsent)
    assert parsed.feed.title == "PaperTrail：你的摘要" and ADDRESS not in response.text
    by_id = {e.id: e for e in parsed.entries}
    revision = by_id[abs_id(papers[0].arxiv_id, 2)]
    assert revision.title.endswith("（修订版 v2）") and "中文导读" in revision.content[0].value
    assert "匹配原因" in revision.content[0].value and "cs.DC" in revision.content[0].value
    assert revision.updated == "2026-12-04T08:00:00Z"  # the guide came after the digest
    assert "English only" not in response.text  # a guide in another language than the reader's
    own = doc.find("a:link[@rel='self']", NS)
    assert own is not None and own.get("href") == "http://localhost:8080" + path

    # Bounded: the newest entries only.
    assert len(feed_records.sent_feed(db, book.subscriber_id, limit=2, language="en")) == 2
    assert [
        abs_id(e.item.arxiv_id, e.item.version)
        for e in feed_records.sent_feed(db, book.subscriber_id, limit=PRIVATE_FEED_ENTRIES, language="en")
    ] == ids


def test_revoking_the_feed_link_kills_the_old_one(db: Database) -> None:
    ledger(db)
    client = app_client(db)
    manage = f"/manage/{tokens.sign(KEY, tokens.MANAGE, ADDRESS)}"
    page = client.get(manage)
    old = re.findall(r'value="http://localhost:8080(/feeds/private/[^"]+)"', page.text)
    assert len(old) == 1 and client.get(html.unescape(old[0])).status_code == 200
    assert f'rel="alternate" type="application/atom+xml" href="http://localhost:8080{old[0]}"' in page.text
    assert re.findall(r'value="http://localhost:8080(/feeds/private/[^"]+)"', client.get(manage).text) == old

    done = client.post(manage, data={"action": "feed"})
    assert done.status_code == 303 and done.headers["location"] == f"{manage}?done=feed"
    page = client.get(done.headers["location"])
    assert "the old link no longer works" in page.text
    new = re.findall(r'value="http://localhost:8080(/feeds/private/[^"]+)"', page.text)
    assert new and new != old and client.get(html.unescape(new[0])).status_code == 200

    revoked = client.get(html.unescape(old[0]))
    forged = client.get(
        "/feeds/private/" + tokens.sign("another key", tokens.FEED, tokens.feed_subject(ADDRESS, "x"))
    )
    wrong_purpose = client.get("/feeds/private/" + tokens.sign(KEY, tokens.MANAGE, ADDRESS))
    no_nonce = client.get("/feeds/private/" + tokens.sign(KEY, tokens.FEED, ADDRESS))
    gone = client.get(
        "/feeds/private/" + tokens.sign(KEY, tokens.FEED, tokens.feed_subject("email:x@y.org", "n"))
    )
    assert revoked.status_code == 410 and gone.status_code == 410
    for response in (forged, wrong_purpose, no_nonce, client.get("/feeds/private/garbage")):
        assert response.status_code == 404
    # The same words whatever is wrong: nothing tells a guess from a revoked link but the status.
    assert len({r.text for r in (revoked, forged, wrong_purpose, gone)}) == 1
    for response in (revoked, forged):
        assert response.headers["cache-control"] == "private, no-store"
        assert response.headers["referrer-policy"] == "no-referrer"
    # A manage token does not open a feed, nor a feed token the manage page.
    assert client.get(f"/manage/{new[0].removeprefix('/feeds/private/')}").status_code == 400
    # A genuine token spelled any other way (padding, spare bits, junk) is no token at all.
    genuine = html.unescape(new[0]).removeprefix("/feeds/private/")
    for variant in variants(genuine):
        path = "/feeds/private/" + variant.replace(" ", "%20").replace("\n", "%0A")
        assert client.get(path).status_code == 404, variant
    for response in (revoked, forged, client.get(html.unescape(new[0]))):
        assert_secured(response)
    keyless = app_client(db, secret_key=None)
    assert keyless.get(html.unescape(new[0])).status_code == 404


def test_manage_and_papers_pages_link_the_feeds(sqlite_store: Database) -> None:
    paper_records.save_versions(sqlite_store, dc_papers()[:3], now=T0)
    follow(sqlite_store, ADDRESS, "cat:cs.DC")
    client = app_client(sqlite_store)
    papers = client.get("/papers", params={"q": "cat:cs.dc"}).text
    assert 'type="application/atom+xml" href="/feeds?q=cat%3Acs.DC"' in papers
    assert "Atom feed of <code>cat:cs.DC</code>" in papers
    manage = f"/manage/{tokens.sign(KEY, tokens.MANAGE, ADDRESS)}"
    assert "Your private feed" in client.get(manage).text
    assert "你的私人订阅源" in client.get(manage, params={"lang": "zh"}).text
    assert "cat:cs.DC</code> 的 Atom 订阅源" in client.get("/papers", params={"q": "cat:cs.dc"}).text
    # Plain words that are not a follow: no feed is offered.
    assert "application/atom+xml" not in client.get("/papers", params={"q": "C++ ("}).text
