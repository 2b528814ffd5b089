"""The citation routes and links, on SQLite and PostgreSQL: paper pages' meta tags, ``/papers/{id}.bib``,
a subscriber's ``/manage/{token}/papers.bib``, and the BibTeX link of every digest item on every channel.

The papers are real ones from the recorded corpus (stored through ``save_versions``), digests really go
out through the console notifier, and every .bib is read back with pybtex (see tests/test_bibtex.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from collections.abc import Mapping
from datetime import UTC, date, datetime
from functools import cache
from html.parser import HTMLParser

import pytest
import sqlalchemy as sa
from pybtex.database.input.bibtex import Parser

from core.channel import Notifier
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.history import sent_papers
from core.delivery.render import Renderer
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import utcnow
from core.papers import paper_records
from core.people import tokens
from core.values import AnnounceType, CommunityPick, DigestItem, PaperIn
from ingest.arxiv_rss_parse import parse_feed
from notifiers.console.notifier import ConsoleNotifier
from notifiers.slack.blocks import build_payloads
from notifiers.webhook.payload import digest_payload
from papertrail.web import bibtex as web_bibtex
from tests.conftest import BIG_FEED
from tests.hostile import hostile_items
from tests.support.bibtex_corpus import corpus_versions, detex, parse_one, stored
from tests.support.web import KEY, client_for

PUBLIC = "https://papertrail.example"


class MetaTags(HTMLParser):
    """The ``<meta name content>`` pairs and ``<link>`` attributes of a page's head, unescaped."""

    def __init__(self) -> None:
        super().__init__()
        self.meta: list[tuple[str, str]] = []
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "meta" and values.get("name"):
            self.meta.append((values["name"] or "", values.get("content") or ""))
        elif tag == "link":
            self.links.append(values)


def head_of(html: str) -> MetaTags:
    parser = MetaTags()
    parser.feed(html.split("</head>")[0])
    return parser


@cache
def picked_papers() -> tuple[PaperIn, ...]:
    """Corpus papers with what an entry has to survive: TeX, specials, accents, 207 and 434 authors,
    old-style ids, a DOI, and a paper with six versions."""
    wanted = {
        "2411.18390",  # $\mathcal{U}(\mathfrak{h})$, an accented author
        "2411.18380",  # & in the title
        "2411.00071",  # % in the title
        "2411.17813",  # {\Lambda}CDM
        "2411.17709",  # Przemysław
        "2403.07266",  # 207 authors, v2 only
        "1605.03256",  # 434 authors
        "1606.06820",  # #BlackLivesMatter
        "0803.4354",  # six versions
        "hep-ph/0301050",  # old-style id with a DOI, v2 only
        "astro-ph/0601001",
    }
    found = {(v.arxiv_id, v.version): v for v in corpus_versions() if v.arxiv_id in wanted}
    assert {arxiv_id for arxiv_id, _ in found} == wanted
    return tuple(found[key] for key in sorted(found))


def test_paper_bib_is_the_newest_version_read_back_by_pybtex(db: Database) -> None:
    paper_records.save_versions(db, picked_papers())
    client = client_for(db)
    for arxiv_id in sorted({p.arxiv_id for p in picked_papers()}):
        newest = paper_records.versions_of(db, arxiv_id)[-1]
        response = client.get(f"/papers/{arxiv_id}.bib")
        assert response.status_code == 200, arxiv_id
        assert response.headers["content-type"] == "application/x-bibtex; charset=utf-8"
        name = arxiv_id.replace("/", "_")
        assert response.headers["content-disposition"] == f'attachment; filename="{name}.bib"'
        assert response.headers["x-content-type-options"] == "nosniff"
        key, fields, authors = parse_one(response.content.decode("utf-8"))
        assert key == f"arXiv:{arxiv_id}"
        assert detex(fields["title"]) == stored(newest.title)
        assert [detex(a) for a in authors] == [stored(a) for a in newest.authors]
        assert (fields["version"], fields["eprint"]) == (str(newest.number), arxiv_id)
        assert fields["primaryClass"] == newest.categories[0]
    assert parse_one(client.get("/papers/0803.4354.bib").text)[1]["version"] == "6"
    # Non-ASCII stays UTF-8 (not TeX accents): the download says so in its Content-Type.
    assert "Przemysław" in client.get("/papers/2411.17709.bib").text
    # The id is read as the paper page reads it: arXiv: prefix and version dropped, old-style slash kept.
    plain = client.get("/papers/hep-ph/0301050.bib").text
    assert client.get("/papers/arXiv:hep-ph/0301050v1.bib").text == plain
    assert "  doi = {10.1016/j.physletb.2003.08.045},\n" in plain


def test_unknown_and_pick_only_papers_are_404(db: Database) -> None:
    client = client_for(db)
    missing = client.get("/papers/2611.99999.bib")
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
    assert "PaperTrail has not seen 2611.99999." in missing.text
    paper_records.save_picks(
        db, [CommunityPick("2611.00777", date(2026, 8, 21), "A pick", "Summary.", ("Ada",))]
    )
    pick_only = client.get("/papers/2611.00777.bib")
    assert pick_only.status_code == 404 and "only from a community pick" in pick_only.text
    assert client.get("/papers/2611.00777").status_code == 200  # its page still shows
    assert client.get("/papers/.bib").status_code == 404
    assert "尚未收录" in client.get("/papers/2611.99999.bib?lang=zh").text


def test_paper_page_carries_escaped_citation_tags_for_a_hostile_title(db: Database) -> None:
    hostile = hostile_items()[0]  # <script> title, "Ada <Lovelace>", 'Bob "Tables" O'Brien'
    paper_records.save_versions(
        db,
        [
            PaperIn(
                hostile.arxiv_id, 1, hostile.title, hostile.abstract, hostile.authors, hostile.categories
            ),
            *picked_papers(),
        ],
    )
    client = client_for(db)
    html = client.get(f"/papers/{hostile.arxiv_id}").text
    head = html.split("</head>")[0]
    assert "<script>" not in head and "<b>" not in head and "Ada <Lovelace>" not in head
    tags = head_of(html)
    got = dict(tags.meta)
    assert got["citation_title"] == hostile.title
    assert [c for n, c in tags.meta if n == "citation_author"] == list(hostile.authors)
    assert got["citation_abstract"] == hostile.abstract
    assert got["citation_arxiv_id"] == hostile.arxiv_id
    assert {"rel": "alternate", "type": "application/x-bibtex", "href": f"/papers/{hostile.arxiv_id}.bib",
            "title": "BibTeX"} in tags.links  # fmt: skip
    assert f'<a href="/papers/{hostile.arxiv_id}.bib" download>BibTeX</a>' in html
    # A revised paper: v1's date is the publication date, the newest version's the online date.
    revised = dict(head_of(client.get("/papers/0803.4354").text).meta)
    assert revised["citation_date"] == revised["citation_publication_date"] == "2008/03/30"
    assert revised["citation_online_date"] != revised["citation_date"]
    assert revised["citation_technical_report_institution"] == "arXiv"
    old_style = dict(head_of(client.get("/papers/hep-ph/0301050").text).meta)
    assert old_style["citation_pdf_url"] == "https://arxiv.org/pdf/hep-ph/0301050"
    assert old_style["citation_doi"] == "10.1016/j.physletb.2003.08.045"
    assert "citation_journal_title" not in old_style
    # A paper known from a community pick only has no tags (nothing to cite yet) and no BibTeX link.
    paper_records.save_picks(
        db, [CommunityPick("2611.00777", date(2026, 8, 21), "A pick", "Summary.", ("Ada",))]
    )
    pick_page = client.get("/papers/2611.00777").text
    assert not [name for name, _ in head_of(pick_page).meta if name.startswith("citation_")]
    assert ".bib" not in pick_page


# -- the subscriber's history ----------------------------------------------------------------------------


@cache
def feed() -> tuple[PaperIn, ...]:
    """The recorded arXiv RSS feed's items."""
    return tuple(parse_feed(BIG_FEED.read_bytes()).items)


def _news(category: str, count: int) -> list[PaperIn]:
    news = [p for p in feed() if p.categories[0] == category and p.version == 1]
    assert len(news) >= count
    return news[:count]


def _sent_papers_sql(db: Database, subscriber_id: int) -> list[str]:
    """The ledger's sent papers of one subscriber, most recently sent first (by the digest's sending, then
    the digest, then the match), each once, in plain SQL."""
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT v.paper_id FROM match m JOIN digest d ON d.id = m.digest_id "
                "JOIN version v ON v.id = m.version_id WHERE m.subscriber_id = :s AND d.state = 'sent' "
                "ORDER BY d.sent_at DESC, d.id DESC, m.id DESC"
            ),
            {"s": subscriber_id},
        )
        return list(dict.fromkeys(row[0] for row in rows))


def _keys(text: str) -> list[str]:
    """The cite keys of a .bib file, in order."""
    return list(Parser(person_fields=()).parse_string(text).entries)


@pytest.fixture
def history(db: Database) -> tuple[Database, int, list[str]]:
    """Ada follows cs.DC and was sent two digests (capped at 2 items each, 3 and 4 matches); a third
    batch is matched and planned into a digest that is still pending. Bob follows something else and was
    sent his own."""
    ada = follow(db, "console:ada", "cat:cs.DC", schedule="instant").subscriber
    follow(db, "console:bob", "cat:cs.LG", schedule="instant")
    papers = _news("cs.DC", 8)
    out = io.StringIO()
    notifiers = {"console": ConsoleNotifier(out)}
    renderer = Renderer(max_items=2)

    def send() -> None:
        asyncio.run(_send(db, notifiers, renderer))

    paper_records.save_versions(db, [*papers[:3], *_news("cs.LG", 3)])
    match_new(db)
    send()
    revised = dataclasses.replace(papers[0], version=2, title="Revised: " + papers[0].title,
                                  announce_type=AnnounceType.REPLACE)  # fmt: skip
    paper_records.save_versions(db, [*papers[3:6], revised])
    match_new(db)
    send()
    paper_records.save_versions(
        db, [*papers[6:], dataclasses.replace(papers[3], version=2, announce_type=AnnounceType.REPLACE)]
    )
    match_new(db)
    assert ada.id is not None
    # Planned into a digest that is not sent (yet): in the ledger, not in the history.
    match_records.expand_matches(db, now=utcnow())
    assert ledger_records.open_digest(db, ada.id, "console", instant_only=False, now=utcnow()) is not None
    assert "…and 1 more not shown" in out.getvalue()
    return db, ada.id, [p.arxiv_id for p in papers]


async def _send(db: Database, notifiers: Mapping[str, Notifier], renderer: Renderer) -> None:
    reports = await send_due_digests(db, notifiers, renderer)
    assert reports and all(r.sent for r in reports)


def _history_url(address: str) -> str:
    return f"/manage/{tokens.sign(KEY, tokens.MANAGE, address)}/papers.bib"


def test_history_lists_exactly_the_sent_papers_newest_version_each(
    history: tuple[Database, int, list[str]],
) -> None:
    db, ada, papers = history
    expected = _sent_papers_sql(db, ada)
    # Both digests, the matches past their cap too; not the pending third batch; each paper once.
    assert sorted(expected) == sorted(papers[:6])
    assert expected[0] in (papers[0], *papers[3:6]) and expected[-1] in papers[:3]
    client = client_for(db)
    response = client.get(_history_url("console:ada"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-bibtex; charset=utf-8"
    assert response.headers["content-disposition"] == 'attachment; filename="papertrail.bib"'
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "no-referrer"
    text = response.text
    assert text.startswith("@comment{PaperTrail: the papers of the digests sent to you")
    assert _keys(text) == [f"arXiv:{arxiv_id}" for arxiv_id in expected]
    versions = {
        parse_one(chunk)[0]: parse_one(chunk)[1]["version"]
        for chunk in text.split("\n\n")
        if "@misc" in chunk
    }
    # v2 of the first paper was sent; v2 of the fourth is stored but pending: both entries are v2.
    assert versions[f"arXiv:{papers[0]}"] == versions[f"arXiv:{papers[3]}"] == "2"
    assert versions[f"arXiv:{papers[1]}"] == "1"
    # The walk stops at its limit, a chunk of papers at a time.
    assert [v.paper_id for v in sent_papers(db, ada, limit=100, chunk=2)] == expected
    assert [v.paper_id for v in sent_papers(db, ada, limit=3, chunk=2)] == expected[:3]
    # Bob's file holds Bob's papers only.
    bob = client.get(_history_url("console:bob")).text
    assert _keys(bob) and not set(_keys(bob)) & set(_keys(text))


def test_history_stops_at_its_limit_and_says_so(
    history: tuple[Database, int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, ada, _ = history
    monkeypatch.setattr(web_bibtex, "MAX_HISTORY_PAPERS", 4)
    text = client_for(db).get(_history_url("console:ada")).text
    assert _keys(text) == [f"arXiv:{arxiv_id}" for arxiv_id in _sent_papers_sql(db, ada)[:4]]
    assert text.rstrip().endswith(
        "@comment{PaperTrail stopped at 4 papers, the most one download holds: older papers are not in "
        "this file.}"
    )


def test_history_speaks_the_subscribers_language_and_checks_the_token(
    history: tuple[Database, int, list[str]],
) -> None:
    db, ada, _ = history
    subscriber_records.update_subscriber(db, ada, language="zh")
    client = client_for(db)
    text = client.get(_history_url("console:ada")).text
    assert text.startswith("@comment{PaperTrail：发给你的摘要中的论文") and len(_keys(text)) == 6
    follow(db, "console:carol", "cat:cs.RO")
    empty = client.get(_history_url("console:carol")).text
    assert _keys(empty) == [] and "PaperTrail has sent you no digest yet." in empty
    forged = client.get("/manage/not-a-token/papers.bib")
    assert forged.status_code == 400 and "text/html" in forged.headers["content-type"]
    unsubscribe_token = tokens.sign(KEY, tokens.UNSUBSCRIBE, "console:ada")
    assert client.get(f"/manage/{unsubscribe_token}/papers.bib").status_code == 400
    assert client_for(db, secret_key=None).get(_history_url("console:ada")).status_code == 404
    # The manage page links the download.
    manage = client.get(_history_url("console:ada").removesuffix("/papers.bib")).text
    assert f'href="{_history_url("console:ada")}" download' in manage


# -- the digest link on every channel ------------------------------------------------------------------------


def test_every_channel_links_each_items_bibtex() -> None:
    items = [*hostile_items(), DigestItem("hep-th/9901001", 1, "Old style", ("A B",), ("hep-th",), ())]
    urls = {f"{PUBLIC}/papers/{item.arxiv_id}.bib" for item in items}
    assert f"{PUBLIC}/papers/hep-th/9901001.bib" in urls
    renderer = Renderer(public_url=PUBLIC + "/")
    bare = Renderer()
    for channel in ("email", "console", "telegram", "slack"):
        message = renderer.render(channel, items, "x")
        slack = json.dumps([p.blocks for p in build_payloads(message)]) if channel == "slack" else None
        shown: dict[str, list[str | None]] = {
            "email": [message.html, message.text],
            "console": [message.text],
            "telegram": [message.html],
            "slack": [slack],
        }
        for text in shown[channel]:
            assert text is not None
            for url in urls:
                assert text.count(url) == 1, (channel, url)
        unlinked = bare.render(channel, items, "x")
        assert ".bib" not in (unlinked.text + (unlinked.html or "") + (unlinked.mrkdwn or ""))
    assert f'<a href="{PUBLIC}/papers/2611.00001.bib">BibTeX</a>' in (
        renderer.render("email", items, "x").html or ""
    )
    assert f"<{PUBLIC}/papers/2611.00001.bib|BibTeX>" in (renderer.render("slack", items, "x").mrkdwn or "")
    assert (
        f"  BibTeX：{PUBLIC}/papers/2611.00001.bib\n"
        in renderer.render("console", items, "x", language="zh").text
    )
    now = datetime.now(UTC)
    linked = digest_payload(renderer.render("webhook", items, "x"), now)["items"]
    assert {item["bibtex_url"] for item in linked} == urls
    assert {
        item["bibtex_url"] for item in digest_payload(bare.render("webhook", items, "x"), now)["items"]
    } == {None}


def test_the_liked_papers_download_cites_each_liked_version_newest_vote_first(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.models import DISLIKE, LIKE
    from core.taste.votes import cast_vote

    papers = parse_feed(BIG_FEED.read_bytes()).items[:40]
    paper_records.save_versions(db, papers)
    subscriber, _ = subscriber_records.ensure_subscriber(
        db, "console:ada", timezone="UTC", schedule="daily 08:00"
    )
    assert subscriber.id is not None
    client = client_for(db)
    url = _history_url("console:ada").replace("/papers.bib", "/likes.bib")
    assert (
        client.get(url).text.rstrip()
        == "@comment{PaperTrail: the papers you liked, most recent first; one entry per version.}\n\n"
        "@comment{You have liked no paper yet.}"
    )
    liked = [papers[0], papers[5], papers[9]]
    for at, paper in enumerate(liked):
        cast_vote(db, subscriber.id, paper.arxiv_id, LIKE, now=datetime(2026, 12, 1, 8, at, tzinfo=UTC))
    cast_vote(db, subscriber.id, papers[2].arxiv_id, DISLIKE)
    response = client.get(url)
    assert response.status_code == 200
    assert response.headers["content-disposition"] == 'attachment; filename="papertrail-likes.bib"'
    assert response.headers["cache-control"] == "no-store"
    assert _keys(response.text) == [f"arXiv:{p.arxiv_id}" for p in reversed(liked)]
    for chunk in response.text.split("\n\n"):
        if "@misc" in chunk:
            parse_one(chunk)  # pybtex reads every entry
    # The manage page links it once there is a like; a forged link gets nothing.
    manage = client.get(url.removesuffix("/likes.bib")).text
    assert 'likes.bib" download data-likes-bib' in manage
    assert client.get("/manage/not-a-token/likes.bib").status_code == 400
    monkeypatch.setattr(web_bibtex, "MAX_HISTORY_PAPERS", 2)
    text = client.get(url).text
    assert len(_keys(text)) == 2 and "PaperTrail stopped at 2 papers" in text
