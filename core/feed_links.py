"""The Atom feed links of a subscriber, and the OPML file that hands them to a feed reader.

* The **private feed** of a subscriber: ``{PAPERTRAIL_PUBLIC_URL}/feeds/private/{token}``, the token signed
  (core.tokens) for the purpose ``feed`` over the address and the subscriber's ``feed_nonce``, NUL-separated.
  A subscriber without a nonce has no private feed link yet (the nonce is drawn when the reader asks for
  one; drawing a new one revokes the old link), and a server without ``PAPERTRAIL_SECRET_KEY`` can sign no
  link: in both cases there is no URL.
* A **public feed** per follow: ``{PAPERTRAIL_PUBLIC_URL}/feeds?q={the follow's query, URL-encoded}``.

:func:`opml` lists them as OPML 2.0, one ``outline`` per feed, titled in the reader's language.

Pure: settings and rows in, text out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime
from email.utils import format_datetime
from urllib.parse import quote

from core import tokens
from core.config import Settings
from core.i18n import reader_language, translator
from core.models import Subscriber

# The purpose the private feed's token is signed for: the feed route verifies it with the same one.
FEED_PURPOSE = "feed"
# What OPML 2.0 calls an outline that is a feed; feed readers read Atom behind it as well as RSS.
_FEED_TYPE = "rss"
# Characters XML 1.0 cannot carry at all (not even escaped): C0 controls but tab and newlines, lone
# surrogates, U+FFFE and U+FFFF. A title or query holding one would make the whole file unreadable.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def private_feed_url(settings: Settings, subscriber: Subscriber) -> str | None:
    """The subscriber's private Atom feed URL, or None when it has no ``feed_nonce`` yet or the server has
    no ``PAPERTRAIL_SECRET_KEY`` to sign it with."""
    key = settings.secret_key.get_secret_value() if settings.secret_key else ""
    if not key or not subscriber.feed_nonce:
        return None
    token = tokens.sign(key, FEED_PURPOSE, f"{subscriber.address}\0{subscriber.feed_nonce}")
    return f"{_base(settings)}/feeds/private/{token}"


def public_feed_url(settings: Settings, query: str) -> str:
    """The public Atom feed URL of a follow query (as written; the feed parses it)."""
    return f"{_base(settings)}/feeds?q={quote(query, safe='')}"


def opml(settings: Settings, subscriber: Subscriber, queries: Sequence[str], *, now: datetime) -> str:
    """OPML 2.0 listing the subscriber's private feed (when it has a URL) and one public feed per follow
    query, in the order given; titles in the subscriber's language (else the server's default)."""
    t = translator(reader_language(subscriber.language, default=settings.default_language))
    root = ET.Element("opml", version="2.0")
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = t.gettext("PaperTrail feeds")
    ET.SubElement(head, "dateCreated").text = format_datetime(now, usegmt=True)
    body = ET.SubElement(root, "body")
    site = f"{_base(settings)}/"
    private = private_feed_url(settings, subscriber)
    if private is not None:
        title = t.gettext("PaperTrail: everything your follows match (private)")
        _outline(body, title, private, site)
    for query in queries:
        _outline(
            body,
            t.gettext("PaperTrail: {query}", query=_clean(query)),
            public_feed_url(settings, query),
            site,
        )
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _outline(body: ET.Element, title: str, url: str, site: str) -> None:
    ET.SubElement(body, "outline", type=_FEED_TYPE, text=title, title=title, xmlUrl=url, htmlUrl=site)


def _clean(text: str) -> str:
    return _NOT_XML.sub("", text)


def _base(settings: Settings) -> str:
    return settings.public_url.rstrip("/")
