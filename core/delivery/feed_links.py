"""The links to the Atom feeds, and the OPML file that hands a reader's feeds to a feed reader.

* The **private feed** of a subscriber: ``{PAPERTRAIL_PUBLIC_URL}/feeds/private/{token}``, the token signed
  (core.people.tokens, purpose ``FEED``) over the address and the subscriber's ``feed_nonce``. The nonce is
  drawn
  and replaced by core.delivery.feeds (``private_feed_url``, ``renew_private_feed``), which reads the store;
  here
  only the path is made.
* A **query feed** per follow: ``{PAPERTRAIL_PUBLIC_URL}/feeds?q={the follow's query}``.

:func:`opml` lists them as OPML 2.0, one ``outline`` per feed, titled in the reader's language.

Pure: settings, rows and URLs in, text out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime
from email.utils import format_datetime
from urllib.parse import quote, urlencode

from core.config import Settings
from core.languages import reader_language, translator
from core.models import Subscriber
from core.people import tokens

# Where private feeds are served; the signed token follows.
PRIVATE_FEED_PREFIX = "/feeds/private/"
# Where query feeds are served, with ``?q=QUERY``.
QUERY_FEED_PATH = "/feeds"
# What OPML 2.0 calls an outline that is a feed; feed readers read Atom behind it as well as RSS.
_FEED_TYPE = "rss"
# Characters XML 1.0 cannot carry at all (not even escaped): C0 controls but tab and newlines, lone
# surrogates, U+FFFE and U+FFFF. A title or query holding one would make the whole file unreadable.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def private_feed_path(key: str, address: str, nonce: str) -> str:
    """The path of the private feed of ``address`` signed with ``key`` for ``nonce``."""
    token = tokens.sign(key, tokens.FEED, tokens.feed_subject(address, nonce))
    return PRIVATE_FEED_PREFIX + quote(token, safe="")


def query_feed_path(query: str) -> str:
    """The path of the query feed of ``query`` (follow-language text, sent as written)."""
    return f"{QUERY_FEED_PATH}?{urlencode({'q': query})}"


def query_feed_url(public_url: str, query: str) -> str:
    """The absolute URL of the query feed of ``query`` under ``public_url`` (``PAPERTRAIL_PUBLIC_URL``)."""
    return public_url.rstrip("/") + query_feed_path(query)


def opml(
    settings: Settings,
    subscriber: Subscriber,
    queries: Sequence[str],
    *,
    private: str | None,
    now: datetime,
) -> str:
    """OPML 2.0 listing the subscriber's ``private`` feed URL (when there is one: core.delivery.feeds makes
    it) and
    one query feed per follow query, in the order given; titles in the subscriber's language (else the
    server's default)."""
    t = translator(reader_language(subscriber.language, default=settings.default_language))
    root = ET.Element("opml", version="2.0")
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = t.gettext("PaperTrail feeds")
    ET.SubElement(head, "dateCreated").text = format_datetime(now, usegmt=True)
    body = ET.SubElement(root, "body")
    site = settings.public_url.rstrip("/") + "/"
    if private is not None:
        _outline(body, t.gettext("PaperTrail: your digests"), private, site)
    for query in queries:
        title = t.gettext("PaperTrail: {query}", query=_clean(query))
        _outline(body, title, query_feed_url(settings.public_url, query), site)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _outline(body: ET.Element, title: str, url: str, site: str) -> None:
    ET.SubElement(body, "outline", type=_FEED_TYPE, text=title, title=title, xmlUrl=url, htmlUrl=site)


def _clean(text: str) -> str:
    return _NOT_XML.sub("", text)
