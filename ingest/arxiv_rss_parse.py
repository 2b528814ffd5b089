"""Parse rss.arxiv.org RSS 2.0 feeds into ``PaperIn`` values. Pure: bytes (or a file) in, values out.

The feed format (2024+) is described in ``shared/corpus/SOURCES.md``. Per item we read:

- the versioned id from ``<guid>oai:arXiv.org:2411.17700v1</guid>`` (the ``<link>`` has no version), falling
  back to the ``arXiv:2411.17700v1`` prefix of ``<description>``;
- the abstract: ``<description>`` minus its ``arXiv:... Announce Type: new`` / ``Abstract:`` prefix,
  TeX accents decoded outside math;
- the authors: one comma-joined ``<dc:creator>``, with parenthesised affiliations;
- ``<category>`` (primary first), ``<arxiv:announce_type>``, ``<pubDate>``, ``<dc:rights>``,
  ``<arxiv:DOI>`` and ``<arxiv:journal_reference>``.

One bad byte does not cost the day: a document that is not well-formed only because some bytes are not
UTF-8 is read again with each bad sequence replaced by U+FFFD, and ``FeedPage.notes`` says which items
were repaired (issue 14: one stray byte in a title had refused all 1,504 papers).

Three outcomes a caller must tell apart: a page of items (maybe with some ``skipped`` notes), an empty page
(a normal channel without items: arXiv publishes nothing on weekends and holidays), and an error —
``FeedFormatError`` when the bytes are not a usable RSS document, ``ArxivFeedError`` when arXiv answered with
its error channel.

``parse_feed`` reads the items from the tree of its well-formedness check, built chunk by chunk by an
incremental parser that drops each item once read (issue 14: memory bounded by the versions, not the
document); ``parse_feed_feedparser`` reads them with feedparser, as ``parse_feed`` did before, from the
whole body. Both give the same result for the same bytes (``tests/test_arxiv_rss_parse.py`` compares them);
the first falls back on the second for any document not laid out like arXiv's feed.
"""

from __future__ import annotations

import bisect
import calendar
import codecs
import contextlib
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, BinaryIO
from xml.parsers.expat import errors as expat_errors

import feedparser
from feedparser.datetimes import _parse_date as _feedparser_parse_date

from core.papers.tex_accents import decode_tex
from core.values import ARXIV_ID_PATTERN, AnnounceType, PaperIn
from ingest.arxiv_rss_bytes import (
    ITEM_GUID_RE,
    ITEM_START_RE,
    REPAIRED_SHOWN,
    UTF8_BOM,
    XML_DECLARATION_RE,
    LayoutScan,
    format_repair_note,
    opening,
    read_chunks,
    repair_utf8,
)
from ingest.paper_spool import PaperSpool
from ingest.xml_text import collapse

__all__ = [
    "ArxivFeedError",
    "FeedFormatError",
    "FeedPage",
    "parse_feed",
    "parse_feed_feedparser",
    "split_authors",
]

SOURCE = "arxiv-rss"

_URL_HINT = "check PAPERTRAIL_ARXIV_RSS_URL"
_ERROR_TITLE_PREFIX = "Feed error for query:"

_ID = rf"(?P<id>{ARXIV_ID_PATTERN})"
_GUID_RE = re.compile(r"\A\s*oai:arXiv\.org:" + _ID + r"(?:v(?P<version>\d+))?\s*\Z")
_DESCRIPTION_RE = re.compile(
    r"\A\s*arXiv:" + _ID + r"v(?P<version>\d+)\s+Announce\s+Type:\s*(?P<type>\S+)\s*(?:Abstract:)?",
)
_ABSTRACT_LABEL_RE = re.compile(r"\A\s*Abstract:")
_TRAILING_AND_RE = re.compile(r"\s+and\s+")
_LEADING_AND_RE = re.compile(r"\Aand\s+")
_PAREN_GROUP_RE = re.compile(r"\([^()]*\)")
_BRACKET_CHARS_RE = re.compile(r"[(){}]")
_SPLIT_CHARS_RE = re.compile(r"[(){},]")
_PAREN_CHARS_RE = re.compile(r"[()]")
_HTML_MARKERS = (b"<html", b"<body", b"<head", b"<!doctype html")
# expat errors that mean "the input stopped early" rather than "the input is not XML".
_TRUNCATION_CODES = frozenset(
    expat_errors.codes[message]
    for message in (
        expat_errors.XML_ERROR_NO_ELEMENTS,
        expat_errors.XML_ERROR_UNCLOSED_TOKEN,
        expat_errors.XML_ERROR_PARTIAL_CHAR,
        expat_errors.XML_ERROR_UNCLOSED_CDATA_SECTION,
    )
)


_DC = "{http://purl.org/dc/elements/1.1/}"
_ARXIV = "{http://arxiv.org/schemas/atom}"
_ATOM_LINK = "{http://www.w3.org/2005/Atom}link"
# Channel children of arXiv's feed, each with a name of its own; title, description and pubDate are read.
_CHANNEL_TAGS = {
    "title": "title",
    "description": "subtitle",
    "pubDate": "published",
    "link": "link",
    _ATOM_LINK: "atom_link",
    "docs": "docs",
    "language": "language",
    "lastBuildDate": "updated",
    "managingEditor": "author",
    "skipDays": "skipdays",
}
_CHANNEL_READ = frozenset({"title", "subtitle", "published"})
# Item children of arXiv's feed (besides <category>), with the feedparser entry key each one fills.
_ITEM_KEYS = {
    "title": "title",
    "link": "link",
    "description": "summary",
    "guid": "id",
    "pubDate": "published",
    f"{_DC}creator": "author",
    f"{_DC}rights": "rights",
    f"{_ARXIV}announce_type": "arxiv_announce_type",
    f"{_ARXIV}DOI": "arxiv_doi",
    f"{_ARXIV}journal_reference": "arxiv_journal_reference",
}
# Tags of the elements the layout checks read once their parent ended (see _FeedReader): others are
# emptied as soon as they end.
_KEPT = frozenset({"rss", "channel", "category", "day", *_CHANNEL_TAGS, *_ITEM_KEYS})
# feedparser.urls._urifixer: collapses extra slashes after "scheme://".
_URL_SLASHES_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+-.]*://)(/*)(.*?)")
_LINK_ENTITY_RE = re.compile(r"&([A-Za-z0-9_]+);")
# feedparser.html._cp1252: C1 control characters read as the Windows-1252 characters at those bytes.
_CP1252 = {
    128: "\u20ac",
    130: "\u201a",
    131: "\u0192",
    132: "\u201e",
    133: "\u2026",
    134: "\u2020",
    135: "\u2021",
    136: "\u02c6",
    137: "\u2030",
    138: "\u0160",
    139: "\u2039",
    140: "\u0152",
    142: "\u017d",
    145: "\u2018",
    146: "\u2019",
    147: "\u201c",
    148: "\u201d",
    149: "\u2022",
    150: "\u2013",
    151: "\u2014",
    152: "\u02dc",
    153: "\u2122",
    154: "\u0161",
    155: "\u203a",
    156: "\u0153",
    158: "\u017e",
    159: "\u0178",
}


class FeedFormatError(ValueError):
    """The bytes are not a usable RSS 2.0 document: HTML, empty, truncated or otherwise ill-formed."""


class ArxivFeedError(RuntimeError):
    """rss.arxiv.org answered with its error channel (``<title>Feed error for query: ...``)."""

    def __init__(self, message: str, query: str = "") -> None:
        self.message = message
        self.query = query
        where = f" for {query}" if query else ""
        super().__init__(
            f"rss.arxiv.org reported a feed error{where}: {message} "
            f"Fix the archive or category names in the feed URL ({_URL_HINT})."
        )


@dataclass(frozen=True, slots=True)
class FeedPage:
    """One parsed feed: its items, channel facts, and notes on items that could not be used.

    ``items`` is a tuple, or a ``PaperSpool`` when ``parse_feed`` was asked to spool them.
    """

    items: Sequence[PaperIn]
    channel_title: str
    published: datetime | None
    skipped: tuple[str, ...] = ()
    # What was repaired to read the page (invalid UTF-8 replaced), for the run's note; items are kept.
    notes: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the channel carried no items at all (a weekend or holiday), not when all were skipped.

        A page whose items were all skipped is a parsing problem and must not be reported as "empty".
        """
        return not self.items and not self.skipped


def parse_feed(data: bytes | BinaryIO, *, spool_after: int | None = None) -> FeedPage:
    """Parse an rss.arxiv.org RSS 2.0 response, as bytes or as a seekable binary file, into a ``FeedPage``.

    Raises ``FeedFormatError`` if ``data`` is not a complete RSS document (empty, an HTML page, truncated or
    ill-formed XML) and ``ArxivFeedError`` if it is arXiv's error channel. Items that cannot be used are not
    dropped silently: each one leaves a note in ``FeedPage.skipped``.

    The result is exactly what ``parse_feed_feedparser`` returns for the same bytes, several times faster
    (docs/benchmarks.md): the items are read from the tree that the well-formedness check builds anyway,
    with feedparser's text rules (see ``_feedparser_text``). That shortcut is taken only for documents laid
    out like arXiv's feed (``_FeedReader`` and ``LayoutScan`` list the conditions); anything else (a
    DOCTYPE, an unknown element or namespace, an attribute feedparser would act on) goes through
    feedparser, so the two never differ.

    Memory (issue 14): the document is read ``CHUNK`` bytes at a time by an incremental parser, and each
    ``<item>`` is dropped from the tree as soon as it is turned into a ``PaperIn``, so reading a file costs
    about what the ``PaperIn`` values themselves take. A document with invalid UTF-8 is repaired into a
    temporary file, chunk by chunk as well. The one path that reads the whole body into memory is the
    feedparser one, for documents not laid out like arXiv's feed.

    With ``spool_after``, ``FeedPage.items`` is a ``PaperSpool`` that keeps that many versions in memory
    and the rest in a temporary file (close it, or let it go, to delete the file): then the versions of
    a large feed are not all in memory at once either. The feedparser path still returns a tuple.
    """
    stream: BinaryIO = io.BytesIO(data) if isinstance(data, bytes) else data
    reader = _FeedReader(spool_after)
    try:
        reader.read(stream)
    except FeedFormatError:
        # The items of the failed pass go before the repaired pass makes them again.
        reader.discard()
        repaired = repair_utf8(stream)
        if repaired is None:
            raise
        fixed, note = repaired
        # Still not usable once the bytes are UTF-8: that error (e.g. a download cut short) is the one
        # that says what is wrong.
        with fixed:
            page = _FeedReader(spool_after).read(fixed).page(fixed)
        return replace(page, notes=(note,))
    return reader.page(stream)


def parse_feed_feedparser(data: bytes) -> FeedPage:
    """``parse_feed`` as it was before it read the tree itself: every item through feedparser.

    Kept as the reference that ``parse_feed`` is tested against, the fallback for documents not laid out
    like arXiv's feed, and the baseline of ``bench/ingest.py``. Same contract as ``parse_feed``.
    """
    data, _, channel, notes = _check_repairing(data)
    page = _feedparser_page(data, len(channel.findall("item")))
    return replace(page, notes=notes) if notes else page


def _feedparser_page(data: bytes, expected: int) -> FeedPage:
    """The page feedparser reads from ``data``, whose ``<channel>`` has ``expected`` ``<item>`` children."""
    # A BytesIO, not the bytes themselves: feedparser first tries to open() a bytes argument as a file name.
    parsed = feedparser.parse(io.BytesIO(data), sanitize_html=False, resolve_relative_uris=False)
    feed = parsed.get("feed", {})
    channel_title = collapse(feed.get("title", ""))

    if channel_title.startswith(_ERROR_TITLE_PREFIX):
        message = collapse(feed.get("subtitle", "")) or "(no message in the error channel)"
        raise ArxivFeedError(message, query=channel_title[len(_ERROR_TITLE_PREFIX) :].strip())

    entries = parsed.get("entries", [])
    if len(entries) != expected:
        # Both parsers read the same well-formed bytes; a difference would mean items vanish unseen.
        raise FeedFormatError(
            f"rss.arxiv.org feed has {expected} <item> elements but feedparser read {len(entries)}; "
            "the feed layout may have changed — compare a fresh response with shared/corpus/arxiv-rss"
        )

    published = _parse_date(feed.get("published"), feed.get("published_parsed"))
    items: list[PaperIn] = []
    skipped: list[str] = []
    for position, entry in enumerate(entries, start=1):
        result = _parse_entry(entry, position, published)
        if isinstance(result, PaperIn):
            items.append(result)
        else:
            skipped.append(result)
    return FeedPage(
        items=tuple(items), channel_title=channel_title, published=published, skipped=tuple(skipped)
    )


# ------------------------------------------------------------------------------------------------------------
# Reading the tree the way feedparser reads the same bytes
#
# Every value feedparser reports for an element is the element's text after these steps (feedparser
# ``mixin.py``, ``_FeedParserMixin.pop``, with sanitizing and relative-URI resolution switched off as
# ``_feedparser_page`` does): surrounding whitespace stripped; for <guid> (unless isPermaLink is not
# "true") and <link> the URL clean-up of ``feedparser.urls._urljoin`` against an empty base; the
# "UTF-8 read as Latin-1" repair; and the Windows-1252 mapping of U+0080..U+009F. The conditions below (and
# the byte-level ones of ``arxiv_rss_bytes.LayoutScan``) make sure those are the only steps feedparser
# takes, so that the tree gives the same entry it would.


class _FeedReader:
    """One pass over a document, chunk by chunk: ``_check_document``'s checks and, while the document may
    be laid out like arXiv's feed, its items read from the tree as each one ends.

    The layout, checked in full before a page is returned: an ``<rss>`` root with at most a ``version``
    attribute and the ``<channel>`` as its only child; channel children among arXiv's (``_CHANNEL_TAGS``,
    each at most once, no attributes but ``atom:link``'s href/rel/type, no children but
    ``<skipDays><day>``); items as ``_tree_entry`` describes; and the bytes as ``LayoutScan`` describes.
    Under those conditions feedparser sees the same channel title, description and date, and one entry
    per ``<item>``, and every ``<item>`` element is one of the channel's. So each ``<item>`` is read when it
    ends, wherever it is; when the layout turns out otherwise, the items read are dropped and ``page``
    hands the document to feedparser.

    Only "end" events are taken (start events cost a tenth of the parse). An element is emptied with
    ``clear()`` once it ended, unless its tag is one the layout checks read (``_KEPT``): an ``<item>``
    right after it is read. A cleared element keeps its tag and its place, so ``len()`` of its parent,
    ``channel.findall("item")`` and every check by tag see the document as it was; memory holds the
    channel's small children, one item at a time, and an empty shell per item read.
    """

    def __init__(self, spool_after: int | None) -> None:
        self._spooled = spool_after is not None
        self.items = PaperSpool(spool_after)
        self.skipped: list[str] = []
        # <item> children of the first <channel>: what channel.findall("item") counts.
        self.item_count = 0
        self.tree = True
        self._read = 0  # <item> elements read so far (the position of the next one, less one)
        self._dates = _DateCache()
        # Items without a date of their own: they fall back on the channel's, known at the end (and they
        # stay in memory for that: the spool stops spooling at the first one).
        self._undated: list[int] = []
        self._last: ET.Element | None = None  # the last element ended: the root, once the parse is done
        self._fields: dict[str, str] = {}

    def read(self, stream: BinaryIO) -> _FeedReader:
        """Read the whole document from ``stream``; raises ``FeedFormatError`` as ``_check_document``."""
        first = opening(stream)
        if first is None:
            raise _blank_error(stream.seek(0, io.SEEK_END))
        if first.lower().startswith((b"<!doctype html", b"<html")):
            raise _html_error(_head(stream))
        # expat neither fetches external entities nor expands entity bombs (expat >= 2.4), so this is safe
        # on untrusted bytes.
        parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("end",))
        layout = LayoutScan()
        try:
            for chunk in read_chunks(stream):
                layout.feed(chunk)
                parser.feed(chunk)
                self._ended(parser.read_events())
            parser.close()
            self._ended(parser.read_events())
        except ET.ParseError as exc:
            size = stream.seek(0, io.SEEK_END)
            stream.seek(max(0, size - 80))
            tail = stream.read(80)
            raise _parse_error(exc, _head(stream, 4096), size, tail) from exc
        root = self._last
        assert root is not None  # a well-formed document has a root
        if root.tag.rpartition("}")[2].lower() == "html":
            raise _html_error(_head(stream))
        channel = root.find("channel")
        if root.tag != "rss" or channel is None:
            raise _not_rss_error(root.tag, _head(stream))
        self.item_count = len(channel.findall("item"))
        if (
            not layout.close()
            or len(root) != 1
            or not root.attrib.keys() <= {"version"}
            or channel.attrib
            or not self._channel_fields(channel)
        ):
            self._leave_tree()
        return self

    def discard(self) -> None:
        """Drop everything read (after a failed pass)."""
        self._leave_tree()
        self._last = None

    def page(self, stream: BinaryIO) -> FeedPage:
        """The page, from the items read or (for a document not laid out like arXiv's) from feedparser."""
        if not self.tree:
            stream.seek(0)
            return _feedparser_page(stream.read(), self.item_count)
        channel_title = collapse(self._fields.get("title", ""))
        if channel_title.startswith(_ERROR_TITLE_PREFIX):
            message = collapse(self._fields.get("subtitle", "")) or "(no message in the error channel)"
            raise ArxivFeedError(message, query=channel_title[len(_ERROR_TITLE_PREFIX) :].strip())
        published = self._dates(self._fields.get("published"))
        items = self.items
        if published is not None:
            for index in self._undated:
                items[index] = replace(items[index], announced_at=published)
        return FeedPage(
            items=items if self._spooled else tuple(items),
            channel_title=channel_title,
            published=published,
            skipped=tuple(self.skipped),
        )

    def _leave_tree(self) -> None:
        self.tree = False
        self.items.clear()
        self.skipped = []

    def _ended(self, events: Iterator[Any]) -> None:
        """Take the "end" events parsed so far (each a pair: "end", the element)."""
        element = None
        for _, element in events:
            tag = element.tag
            if tag == "item":
                if self.tree:
                    self._item(element)
                element.clear()
            elif tag not in _KEPT:
                element.clear()
        if element is not None:
            self._last = element

    def _item(self, item: ET.Element) -> None:
        self._read += 1
        entry = _tree_entry(item)
        if entry is None:
            self._leave_tree()
            return
        result = _parse_entry(entry, self._read, None, self._dates)
        if isinstance(result, PaperIn):
            if result.announced_at is None:
                self.items.stop_spooling()
                self._undated.append(len(self.items))
            self.items.append(result)
        else:
            self.skipped.append(result)

    def _channel_fields(self, channel: ET.Element) -> bool:
        """Read the channel's children other than items into ``_fields``; False unless laid out as arXiv's."""
        for child in channel:
            tag = child.tag
            if tag == "item":
                continue  # read when it ended
            key = _CHANNEL_TAGS.get(tag, "")
            if not key or key in self._fields:
                return False
            self._fields[key] = _feedparser_text(child.text) if key in _CHANNEL_READ else ""
            if tag == _ATOM_LINK:
                if len(child) or not child.attrib.keys() <= {"href", "rel", "type"}:
                    return False
            elif child.attrib:
                return False
            elif tag == "skipDays":
                if any(day.tag != "day" or day.attrib or len(day) for day in child):
                    return False
            elif len(child):
                return False
        return True


def _tree_entry(item: ET.Element) -> dict[str, Any] | None:
    """One ``<item>`` as the entry feedparser would build (the keys ``_parse_entry`` reads), or None.

    None when the item is not like arXiv's: attributes on the item, an element other than those in
    ``_ITEM_KEYS`` (or one of them twice; ``<category>`` may repeat), an element with children, or
    attributes other than ``isPermaLink`` on ``<guid>``. Those are the cases where feedparser's many
    special rules (first title wins, a second description becomes content, rdf:about, xml:base, ...)
    could make its entry differ.
    """
    if item.attrib:
        return None
    entry: dict[str, Any] = {}
    terms: dict[str, None] = {}
    guid_is_link = False
    for child in item:
        if len(child):
            return None
        tag = child.tag
        attrib = child.attrib
        if tag == "category":
            if attrib:
                return None
            term = _feedparser_text(child.text)
            if term:
                # feedparser keeps each term once, in order of first appearance.
                terms[term] = None
            continue
        key = _ITEM_KEYS.get(tag, "")
        if not key or key in entry:
            return None
        if tag == "guid":
            if attrib.keys() - {"isPermaLink"}:
                return None
            # RSS 2.0: a guid is a permalink unless it says otherwise; feedparser then treats it as a URL.
            guid_is_link = attrib.get("isPermaLink", "true") == "true"
            entry[key] = _feedparser_text(child.text, url=guid_is_link)
        elif attrib:
            return None
        elif tag == "link":
            # feedparser undoes what it takes for unhandled entity references in query strings.
            link = _feedparser_text(child.text, url=True).replace("&amp;", "&")
            entry[key] = _LINK_ENTITY_RE.sub(r"&\g<1>", link)
        else:
            entry[key] = _feedparser_text(child.text)
    if guid_is_link and "link" not in entry:
        # A permalink guid stands in for a missing <link>; a real <link> wins wherever it comes.
        entry["link"] = entry["id"]
    if terms:
        entry["tags"] = [{"term": term} for term in terms]
    return entry


def _feedparser_text(text: str | None, *, url: bool = False) -> str:
    """An element's text as feedparser reports it (see the notes above ``_FeedReader``)."""
    if not text:
        return ""
    text = text.strip()
    if url and text:
        text = _URL_SLASHES_RE.sub(r"\1\3", text)
    if not text.isascii():  # both repairs below leave ASCII unchanged
        # Text that is not such a mix-up (most non-ASCII text) fails to round-trip and is kept as it is.
        with contextlib.suppress(UnicodeEncodeError, UnicodeDecodeError):
            text = text.encode("iso-8859-1").decode("utf-8")
        text = text.translate(_CP1252)
    return text


class _DateCache:
    """``_parse_date`` of a date string with the fallback feedparser would have computed, memoised.

    Every item of a mailing carries the same ``<pubDate>``, so one page parses one or two distinct strings.
    """

    def __init__(self) -> None:
        self._seen: dict[str | None, datetime | None] = {}

    def __call__(self, value: str | None) -> datetime | None:
        try:
            return self._seen[value]
        except KeyError:
            pass
        # feedparser stores its own parse of every date element next to the text.
        parsed = None if value is None else _feedparser_parse_date(value)
        moment = self._seen[value] = _parse_date(value, parsed)
        return moment


def _check_repairing(data: bytes) -> tuple[bytes, ET.Element, ET.Element, tuple[str, ...]]:
    """``_check_document``, retried once on a UTF-8 document whose only fault is invalid UTF-8.

    Returns the bytes to read (repaired or not), the root, the ``<channel>`` and the notes on what was
    repaired. The repair is tried only after the strict parse failed, so a good feed pays nothing for it;
    repaired bytes that still do not parse raise their own error (a truncated or HTML body stays an
    error, never a page).
    """
    try:
        root, channel = _check_document(data)
    except FeedFormatError:
        repaired = _repair_utf8(data)
        if repaired is None:
            raise
        fixed, note = repaired
        # Still not usable once the bytes are UTF-8: that error (e.g. a download cut short) is the one
        # that says what is wrong.
        root, channel = _check_document(fixed)
        return fixed, root, channel, (note,)
    return data, root, channel, ()


def _repair_utf8(data: bytes) -> tuple[bytes, str] | None:
    """``data`` with each invalid UTF-8 sequence replaced by U+FFFD, and a note naming the items hit.

    None when there is nothing to repair this way: the document declares another encoding (or starts with
    a UTF-16/32 byte-order mark) or is valid UTF-8. Decoding resumes after each bad sequence from a
    memoryview, so a body full of bad bytes costs linear time, not a copy per error.
    """
    body = data[len(UTF8_BOM) :] if data.startswith(UTF8_BOM) else data
    if body.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00")):
        return None
    # The declaration opens the document: look at its first bytes only, never copy the whole body.
    declaration = XML_DECLARATION_RE.match(body[:1024].lstrip())
    encoding = (declaration.group("encoding") or b"utf-8") if declaration else b"utf-8"
    if encoding.lower() not in (b"utf-8", b"utf8"):
        return None
    view = memoryview(body)
    pieces: list[str] = []
    bad: list[int] = []
    position = 0
    while True:
        try:
            pieces.append(codecs.utf_8_decode(view[position:], "strict", True)[0])
            break
        except UnicodeDecodeError as exc:
            start = position + exc.start
            pieces.append(codecs.utf_8_decode(view[position:start], "strict", True)[0])
            pieces.append("\ufffd")
            bad.append(start)
            position += exc.end
    if not bad:
        return None
    return "".join(pieces).encode("utf-8"), _repair_note(body, bad)


def _repair_note(body: bytes, bad: list[int]) -> str:
    """ "1 item had invalid UTF-8 ...": which items (by position and guid) held the offsets in ``bad``."""
    starts = [match.start() for match in ITEM_START_RE.finditer(body)]
    items: dict[int, None] = {}
    outside = 0
    for offset in bad:
        index = bisect.bisect_right(starts, offset)
        if index:
            items[index] = None  # 1-based item position, as in the "skipped" notes
        else:
            outside += 1
    named = []
    for position in list(items)[:REPAIRED_SHOWN]:
        end = starts[position] if position < len(starts) else len(body)
        guid = ITEM_GUID_RE.search(body, starts[position - 1], end)
        named.append((position, guid.group(1).decode("utf-8", "replace").strip() if guid else ""))
    return format_repair_note(len(items), named, bool(outside), len(bad))


def _check_document(data: bytes) -> tuple[ET.Element, ET.Element]:
    """Reject anything but a complete, well-formed RSS document; return its root and ``<channel>``.

    feedparser is lenient by design: on a truncated feed it returns the items before the cut with only a
    ``bozo`` flag. A strict XML parse first makes a cut download an error instead of a short page.
    (``_FeedReader.read`` makes the same checks chunk by chunk, with the same errors.)
    """
    if not data.strip():
        raise _blank_error(len(data))
    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:14].lower().startswith((b"<!doctype html", b"<html")):
        raise _html_error(data)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise _parse_error(exc, data[:4096], len(data), data[-80:]) from exc
    if root.tag.rpartition("}")[2].lower() == "html":
        raise _html_error(data)
    channel = root.find("channel")
    if root.tag != "rss" or channel is None:
        raise _not_rss_error(root.tag, data)
    return root, channel


def _head(stream: BinaryIO, size: int = 81) -> bytes:
    """The first ``size`` bytes of the body, enough for ``_preview`` to know whether it cut the body."""
    stream.seek(0)
    return stream.read(size)


def _blank_error(size: int) -> FeedFormatError:
    what = "an empty body" if not size else f"a blank body ({size} bytes of whitespace)"
    return FeedFormatError(
        f"rss.arxiv.org returned {what} instead of RSS; retry later, and {_URL_HINT} if it persists"
    )


def _parse_error(exc: ET.ParseError, head: bytes, size: int, tail: bytes) -> FeedFormatError:
    """The error for a body the XML parser refused (``head``: its first 4,096 bytes, ``tail``: last 80)."""
    if any(marker in head.lower() for marker in _HTML_MARKERS):
        return _html_error(head)
    if exc.code in _TRUNCATION_CODES:
        return FeedFormatError(
            f"the rss.arxiv.org response ends before the XML document does ({exc}; {size} bytes, "
            f"last bytes: {_preview(tail)}): the download was cut short; retry the fetch"
        )
    return FeedFormatError(
        f"rss.arxiv.org returned bytes that are not well-formed XML ({exc}; first bytes: "
        f"{_preview(head)}); {_URL_HINT}, and keep the response for a bug report if the URL is right"
    )


def _not_rss_error(tag: str, head: bytes) -> FeedFormatError:
    return FeedFormatError(
        f"expected an RSS 2.0 document (<rss><channel>) but got <{tag}> "
        f"(first bytes: {_preview(head)}); {_URL_HINT}: it must point at rss.arxiv.org/rss/..."
    )


def _html_error(data: bytes) -> FeedFormatError:
    return FeedFormatError(
        f"rss.arxiv.org returned an HTML page instead of RSS (first bytes: {_preview(data)}); "
        f"the service may be down (retry later) or the URL wrong ({_URL_HINT})"
    )


def _preview(data: bytes, limit: int = 80) -> str:
    """The first bytes of a response, shown in error messages so an operator can recognise them."""
    text = data[:limit].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(data) > limit else ""))


def _parse_entry(
    entry: Any, position: int, channel_published: datetime | None, dates: _DateCache | None = None
) -> PaperIn | str:
    """Turn one entry into a ``PaperIn``, or return a note saying why it was skipped.

    ``entry`` is a feedparser entry or the equivalent dict from ``_tree_entry``; ``dates`` (tree entries
    only, which carry no ``published_parsed``) parses the item date.
    """
    guid = _text(entry.get("id"))
    description = entry.get("summary") or ""
    label = f"item {position} ({guid or _text(entry.get('link')) or 'no guid'})"

    desc_match = _DESCRIPTION_RE.match(description)
    guid_match = _GUID_RE.match(guid)
    if guid_match and guid_match.group("version"):
        arxiv_id, version = guid_match.group("id"), int(guid_match.group("version"))
    elif desc_match and (guid_match is None or guid_match.group("id") == desc_match.group("id")):
        # The guid is missing or lacks the version; the description prefix still says which version this is.
        arxiv_id, version = desc_match.group("id"), int(desc_match.group("version"))
    elif guid_match and desc_match:
        return (
            f"{label}: guid says {guid_match.group('id')} but the description says "
            f"{desc_match.group('id')}v{desc_match.group('version')}; skipped"
        )
    else:
        return f"{label}: no versioned arXiv id in the guid or the description prefix; skipped"
    if version < 1:
        return f"{label}: version v{version} is not a valid arXiv version; skipped"

    raw_type = _text(entry.get("arxiv_announce_type")) or (desc_match.group("type") if desc_match else "")
    try:
        announce_type = AnnounceType(raw_type.lower())
    except ValueError:
        known = ", ".join(t.value for t in AnnounceType)
        return f"{label}: unknown announce type {raw_type!r} (known: {known}); skipped"

    return PaperIn(
        arxiv_id=arxiv_id,
        version=version,
        title=decode_tex(collapse(entry.get("title", ""))),
        abstract=_abstract(description, desc_match),
        authors=split_authors(entry.get("author", "")),
        categories=_categories(entry.get("tags") or []),
        announce_type=announce_type,
        announced_at=(
            dates(entry.get("published"))
            if dates is not None
            else _parse_date(entry.get("published"), entry.get("published_parsed"))
        )
        or channel_published,
        comment=None,
        journal_ref=_optional(entry.get("arxiv_journal_reference")),
        doi=_optional(entry.get("arxiv_doi")),
        license=_optional(entry.get("rights")),
        source=SOURCE,
    )


def _abstract(description: str, desc_match: re.Match[str] | None) -> str:
    """The abstract text: the description after its ``arXiv:... Announce Type: x`` / ``Abstract:`` prefix."""
    if desc_match is not None:
        body = description[desc_match.end() :]
    else:
        label = _ABSTRACT_LABEL_RE.match(description)
        body = description[label.end() :] if label else description
    # Accents are decoded so that abs:Schrödinger finds Schr\"odinger; math ($...$) is left alone.
    return decode_tex(collapse(body))


def split_authors(creator: str) -> tuple[str, ...]:
    """Split arXiv's comma-joined ``dc:creator`` into display names.

    Commas inside parentheses (affiliations) or braces (TeX groups) do not separate authors; parenthesised
    affiliations are removed; TeX accents are decoded; a final ``A and B`` or ``, and B`` is split. With
    unbalanced parentheses every comma separates, and each name loses the text from a stray bracket on.
    """
    pieces = _split_top_level(creator)
    if pieces is None:
        pieces = [_strip_unbalanced(piece) for piece in creator.split(",")]
    else:
        pieces = [_remove_parenthesised(piece) for piece in pieces]
    names = [collapse(piece) for piece in pieces]
    names = [name for name in names if name]
    if names:
        # Some submitters end the list in prose style: "A, B and C" or "A, B, and C".
        last = _LEADING_AND_RE.sub("", names.pop())
        names.extend(_TRAILING_AND_RE.split(last))
    return tuple(decoded for decoded in (collapse(decode_tex(name)) for name in names) if decoded)


def _split_top_level(text: str) -> list[str] | None:
    """Split on commas outside ``(...)`` and ``{...}``; None when the brackets do not balance."""
    if not _BRACKET_CHARS_RE.search(text):
        return text.split(",")  # the common case, and the same answer as the walk below
    pieces: list[str] = []
    parens = braces = 0
    start = 0
    # Only brackets and commas decide anything, so the regex skips the letters between them.
    for found in _SPLIT_CHARS_RE.finditer(text):
        char = found.group()
        if char == "(":
            parens += 1
        elif char == "{":
            braces += 1
        elif char == ")":
            parens -= 1
            if parens < 0:
                return None
        elif char == "}":
            braces -= 1
            if braces < 0:
                return None
        elif not parens and not braces:
            pieces.append(text[start : found.start()])
            start = found.end()
    if parens or braces:
        return None
    pieces.append(text[start:])
    return pieces


def _remove_parenthesised(text: str) -> str:
    """Drop every top-level ``(...)`` group (affiliations, nicknames) from a balanced string.

    Each ``(`` becomes a space (keeping the words on both sides apart); text inside the groups and the
    ``)`` go. Text between two brackets keeps or loses its place by the depth it is at.
    """
    if "(" not in text and ")" not in text:
        return text
    out: list[str] = []
    depth = 0
    last = 0
    for found in _PAREN_CHARS_RE.finditer(text):
        index = found.start()
        if depth == 0:
            out.append(text[last:index])
        if found.group() == "(":
            depth += 1
            out.append(" ")
        else:
            depth -= 1
        last = index + 1
    if depth == 0:
        out.append(text[last:])
    return "".join(out)


def _strip_unbalanced(piece: str) -> str:
    """Best effort for one comma piece of an unbalanced creator string: keep the text outside brackets."""
    previous = None
    while previous != piece:  # innermost groups first, so nested groups go too
        previous, piece = piece, _PAREN_GROUP_RE.sub(" ", piece)
    piece = piece.rpartition(")")[2]  # tail of an affiliation opened in an earlier piece
    return piece.partition("(")[0]  # start of an affiliation closed in a later piece (or never)


def _categories(tags: list[Any]) -> tuple[str, ...]:
    """Category terms in feed order (primary first), without blanks or repeats."""
    seen: dict[str, None] = {}
    for tag in tags:
        term = _text(tag.get("term"))
        if term:
            seen.setdefault(term, None)
    return tuple(seen)


def _parse_date(value: object, parsed: Any) -> datetime | None:
    """An RFC 822 date as an aware datetime, keeping arXiv's own offset (-0500)."""
    if isinstance(value, str) and value.strip():
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            moment = None
        if moment is not None:
            # "-0000" means UTC with no local offset known; Python returns it naive.
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if parsed is not None:
        try:
            # feedparser's own lenient parse, already converted to UTC.
            return datetime.fromtimestamp(calendar.timegm(parsed), tz=UTC)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _optional(value: object) -> str | None:
    text = collapse(value) if isinstance(value, str) else ""
    return text or None
