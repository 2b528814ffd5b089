"""The private Atom feeds: a web client, recorded papers and revisions, the check that a feed is valid."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import feedparser
from lxml import etree

from core.config import Settings
from core.db import Database
from core.delivery.feeds import private_feed_url
from core.follows import subscriber_records
from core.values import AnnounceType, PaperIn
from ingest.arxiv_rss_parse import parse_feed
from papertrail.web.app import build_app
from papertrail.web.atom import ATOM_NS, XHTML_NS
from tests.conftest import BIG_FEED
from tests.support.web import KEY, web_context

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


SCHEMA = etree.RelaxNG(etree.parse(str(Path(__file__).parent.parent / "atom.rng")))


NS = {"a": ATOM_NS, "x": XHTML_NS}


ADDRESS = "email:ada@example.org"


T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@functools.cache
def recorded() -> list[PaperIn]:
    """The recorded arXiv feed of 28 Nov 2024 (1,504 items), parsed once per test run."""
    return list(parse_feed(BIG_FEED.read_bytes()).items)


def dc_papers() -> list[PaperIn]:
    """The recorded feed's new cs.DC papers (primary or cross-list, v1)."""
    return [p for p in recorded() if "cs.DC" in p.categories and p.version == 1]


def revision_of(paper: PaperIn, number: int = 2) -> PaperIn:
    """A revision of ``paper`` with a new title and abstract."""
    return dataclasses.replace(
        paper,
        version=number,
        title=f"{paper.title} (revised)",
        abstract=f"{paper.abstract} We add experiments.",
        announce_type=AnnounceType.REPLACE,
    )


def app_client(db: Database, clock: Callable[[], datetime] | None = None, **settings: Any) -> TestClient:
    """A client of the web app; with ``clock``, "now" for every page (the feed cache's time)."""
    settings.setdefault("secret_key", KEY)
    context = web_context(db, **settings)
    app = build_app(context, clock=clock) if clock else build_app(context)
    return TestClient(app, follow_redirects=False)


def rfc4287_rules(doc: etree._Element) -> None:
    """The rules of RFC 4287 that the schema cannot say, and the self link the RFC recommends."""
    entries = doc.findall("a:entry", NS)
    assert doc.findall("a:link[@rel='self']", NS), "a feed should link itself (section 4.2.7.2)"
    if not doc.findall("a:author", NS):
        assert all(e.findall("a:author", NS) for e in entries), "section 4.1.1: an author for every entry"
    for element in [doc, *entries]:
        alternates = [
            (link.get("type"), link.get("hreflang"))
            for link in element.findall("a:link", NS)
            if link.get("rel", "alternate") == "alternate"
        ]
        assert len(alternates) == len(set(alternates)), "one alternate link per type and hreflang"
    for entry in entries:
        assert entry.find("a:content", NS) is not None or entry.findall("a:link[@rel='alternate']", NS)
    ids = [e.findtext("a:id", namespaces=NS) for e in entries]
    assert len(ids) == len(set(ids)), "entry ids are unique in a feed"


def valid_feed(body: bytes) -> tuple[etree._Element, Any]:
    """``body`` parsed strictly by lxml and by feedparser, after every check of a valid Atom feed."""
    doc = etree.fromstring(body)
    assert SCHEMA.validate(doc), SCHEMA.error_log
    rfc4287_rules(doc)
    parsed = feedparser.parse(body)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return doc, parsed


def entry_ids(doc: etree._Element) -> list[str]:
    """The entries' ids in document order."""
    return [e.findtext("a:id", namespaces=NS) or "" for e in doc.findall("a:entry", NS)]


def abs_id(paper: str, number: int) -> str:
    return f"https://arxiv.org/abs/{paper}v{number}"


def feed_path(db: Database, address: str = ADDRESS) -> str:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None
    settings = Settings(database_url=str(db.engine.url), secret_key=KEY)
    url = private_feed_url(db, settings, subscriber)
    assert url is not None and url.startswith("http://localhost:8080/feeds/private/")
    return url.removeprefix("http://localhost:8080")
