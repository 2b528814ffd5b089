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
were repaired (one stray byte in a title had refused all 1,504 papers).

Three outcomes a caller must tell apart: a page of items (maybe with some ``skipped`` notes), an empty page
(a normal channel without items: arXiv publishes nothing on weekends and holidays), and an error —
``FeedFormatError`` when the bytes are not a usable RSS document, ``ArxivFeedError`` when arXiv answered with
its error channel.

There is one reading: the items come from the tree of one strict, incremental ``xml.etree``
parse, built chunk by chunk, each item dropped once read (memory bounded by the versions, not
the document). feedparser, which an earlier version used and then kept as a reference and fallback, is
not used: it needed the whole body, about four times the heap, a second strict parse to turn a truncated
download into an error, and five times the time (docs/benchmarks.md, "One RSS parser").
"""

from __future__ import annotations

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

from core.tex_accents import decode_tex
from core.values import ARXIV_ID_PATTERN, AnnounceType, PaperIn
from ingest.arxiv_rss_bytes import opening, read_chunks, repair_utf8
from ingest.paper_spool import PaperSpool
from ingest.xml_text import collapse

__all__ = [
    "ArxivFeedError",
    "FeedFormatError",
    "FeedPage",
    "parse_feed",
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
# The channel children read, by the key they fill.
_CHANNEL_KEYS = {"title": "title", "description": "description", "pubDate": "published"}
# The item children read (besides <category>), by the key of the entry they fill. Elements are told by
# namespace URI, not by prefix, so another prefix for arXiv's namespace reads the same.
_ITEM_KEYS = {
    "title": "title",
    "link": "link",
    "description": "description",
    "guid": "guid",
    "pubDate": "published",
    f"{_DC}creator": "creator",
    f"{_DC}rights": "rights",
    f"{_ARXIV}announce_type": "announce_type",
    f"{_ARXIV}DOI": "doi",
    f"{_ARXIV}journal_reference": "journal_ref",
}
# Collapses extra slashes after "scheme://" in a URL (a permalink guid, a link).
_URL_SLASHES_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+-.]*://)(/*)(.*?)")
_LINK_ENTITY_RE = re.compile(r"&([A-Za-z0-9_]+);")
# C1 control characters U+0080..U+009F read as the Windows-1252 characters at those bytes; the five bytes
# Windows-1252 leaves undefined stay as they are.
_CP1252 = {
    code: char for code in range(0x80, 0xA0) for char in (bytes([code]).decode("cp1252", "ignore"),) if char
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

    Memory: the document is read ``CHUNK`` bytes at a time by an incremental parser, and each
    ``<item>`` is dropped from the tree as soon as it is turned into a ``PaperIn``, so reading a file costs
    about what the ``PaperIn`` values themselves take. A document with invalid UTF-8 is repaired into a
    temporary file, chunk by chunk as well.

    With ``spool_after``, ``FeedPage.items`` is a ``PaperSpool`` that keeps that many versions in memory
    and the rest in a temporary file (close it, or let it go, to delete the file): then the versions of
    a large feed are not all in memory at once either.
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
            page = _FeedReader(spool_after).read(fixed).page()
        return replace(page, notes=(note,))
    return reader.page()


# ------------------------------------------------------------------------------------------------------------
# Reading the tree
#
# Every value is the element's text after these steps, the text rules parse_feed has always applied (they
# were feedparser's, with sanitizing and relative-URI resolution off, when it read the feed): surrounding
# whitespace stripped; for <guid> (unless isPermaLink is not "true") and <link> extra slashes after
# "scheme://" collapsed; the "UTF-8 read as Latin-1" repair; and the Windows-1252 mapping of
# U+0080..U+009F.


class _FeedReader:
    """One pass over a document, chunk by chunk: the checks that make it a usable RSS document, and its
    items read from the tree as each one ends.

    The parse is strict on purpose: a lenient one (feedparser) returns the items before the cut of a
    truncated download, or an empty page for an HTML error page, and the day would look complete. Within
    a well-formed ``<rss><channel>`` document the reading is tolerant: elements other than those read
    (``_CHANNEL_KEYS``, ``_ITEM_KEYS``, ``<category>``) and attributes other than ``<guid>``'s
    ``isPermaLink`` are ignored, and of an element given twice the first counts.

    Only "end" events are taken (start events cost a tenth of the parse). Each ``<item>`` is read when it
    ends and then emptied with ``clear()``; a cleared element keeps its tag and its place, so memory holds
    the channel's small children, one item at a time, and an empty shell per item read.
    """

    def __init__(self, spool_after: int | None) -> None:
        self._spooled = spool_after is not None
        self.items = PaperSpool(spool_after)
        self.skipped: list[str] = []
        self._read = 0  # <item> elements read so far (the position of the next one, less one)
        self._dates = _DateCache()
        # Items without a date of their own: they fall back on the channel's, known at the end (and they
        # stay in memory for that: the spool stops spooling at the first one).
        self._undated: list[int] = []
        self._last: ET.Element | None = None  # the last element ended: the root, once the parse is done
        self._fields: dict[str, str] = {}

    def read(self, stream: BinaryIO) -> _FeedReader:
        """Read the whole document from ``stream``; raises ``FeedFormatError`` for an unusable one."""
        first = opening(stream)
        if first is None:
            raise _blank_error(stream.seek(0, io.SEEK_END))
        if first.lower().startswith((b"<!doctype html", b"<html")):
            raise _html_error(_head(stream))
        # expat neither fetches external entities nor expands entity bombs (expat >= 2.4), so this is safe
        # on untrusted bytes.
        parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("end",))
        try:
            for chunk in read_chunks(stream):
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
        for child in channel:
            key = _CHANNEL_KEYS.get(child.tag)
            if key is not None and key not in self._fields:
                self._fields[key] = _element_text(child)
        return self

    def discard(self) -> None:
        """Drop everything read (after a failed pass)."""
        self.items.clear()
        self.skipped = []
        self._last = None

    def page(self) -> FeedPage:
        """The page of the items read; raises ``ArxivFeedError`` for arXiv's error channel."""
        channel_title = collapse(self._fields.get("title", ""))
        if channel_title.startswith(_ERROR_TITLE_PREFIX):
            message = collapse(self._fields.get("description", "")) or "(no message in the error channel)"
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

    def _ended(self, events: Iterator[Any]) -> None:
        """Take the "end" events parsed so far (each a pair: "end", the element)."""
        element = None
        for _, element in events:
            if element.tag == "item":
                self._item(element)
                element.clear()
        if element is not None:
            self._last = element

    def _item(self, item: ET.Element) -> None:
        self._read += 1
        result = _parse_entry(_item_entry(item), self._read, self._dates)
        if isinstance(result, PaperIn):
            if result.announced_at is None:
                self.items.stop_spooling()
                self._undated.append(len(self.items))
            self.items.append(result)
        else:
            self.skipped.append(result)


def _item_entry(item: ET.Element) -> dict[str, str | tuple[str, ...]]:
    """One ``<item>`` as the texts ``_parse_entry`` reads, by the keys of ``_ITEM_KEYS`` plus "categories"."""
    entry: dict[str, str | tuple[str, ...]] = {}
    terms: dict[str, None] = {}
    guid_is_link = False
    for child in item:
        tag = child.tag
        if tag == "category":
            term = _element_text(child)
            if term:
                terms[term] = None  # each term once, in order of first appearance (primary first)
            continue
        key = _ITEM_KEYS.get(tag)
        if key is None or key in entry:
            continue
        if tag == "guid":
            # RSS 2.0: a guid is a permalink unless it says otherwise, and then it is a URL.
            guid_is_link = child.get("isPermaLink", "true") == "true"
            entry[key] = _element_text(child, url=guid_is_link)
        elif tag == "link":
            # Entity references that were escaped once too often in query strings are undone.
            link = _element_text(child, url=True).replace("&amp;", "&")
            entry[key] = _LINK_ENTITY_RE.sub(r"&\g<1>", link)
        else:
            entry[key] = _element_text(child)
    if guid_is_link and "link" not in entry:
        # A permalink guid stands in for a missing <link>; a real <link> wins wherever it comes.
        entry["link"] = entry["guid"]
    entry["categories"] = tuple(terms)
    return entry


def _element_text(element: ET.Element, *, url: bool = False) -> str:
    """An element's text (markup inside it dropped) after the text rules above ``_FeedReader``."""
    text = element.text if not len(element) else "".join(element.itertext())
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
    """``_parse_date``, memoised: every item of a mailing carries the same ``<pubDate>``, so one page
    parses one or two distinct strings."""

    def __init__(self) -> None:
        self._seen: dict[str | None, datetime | None] = {}

    def __call__(self, value: str | None) -> datetime | None:
        try:
            return self._seen[value]
        except KeyError:
            pass
        moment = self._seen[value] = _parse_date(value)
        return moment


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


def _parse_entry(entry: dict[str, str | tuple[str, ...]], position: int, dates: _DateCache) -> PaperIn | str:
    """Turn one item's texts (``_item_entry``) into a ``PaperIn``, or return a note saying why it was skipped.

    An item without a date of its own gets ``announced_at`` None here; the reader gives it the channel's.
    """
    guid = _text(entry.get("guid"))
    description = _text_or_empty(entry.get("description"))
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

    raw_type = _text(entry.get("announce_type")) or (desc_match.group("type") if desc_match else "")
    try:
        announce_type = AnnounceType(raw_type.lower())
    except ValueError:
        known = ", ".join(t.value for t in AnnounceType)
        return f"{label}: unknown announce type {raw_type!r} (known: {known}); skipped"

    categories = entry.get("categories", ())
    return PaperIn(
        arxiv_id=arxiv_id,
        version=version,
        title=decode_tex(collapse(_text_or_empty(entry.get("title")))),
        abstract=_abstract(description, desc_match),
        authors=split_authors(_text_or_empty(entry.get("creator"))),
        categories=categories if isinstance(categories, tuple) else (),
        announce_type=announce_type,
        announced_at=dates(_text_or_empty(entry.get("published")) or None),
        comment=None,
        journal_ref=_optional(entry.get("journal_ref")),
        doi=_optional(entry.get("doi")),
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


def _parse_date(value: str | None) -> datetime | None:
    """An RFC 822 date as an aware datetime, keeping arXiv's own offset (-0500); else an ISO 8601 date
    in UTC (naive ones taken as UTC); else None."""
    if not value or not value.strip():
        return None
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        moment = None
    if moment is not None:
        # "-0000" means UTC with no local offset known; Python returns it naive.
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _text_or_empty(value: object) -> str:
    return value if isinstance(value, str) else ""


def _optional(value: object) -> str | None:
    text = collapse(value) if isinstance(value, str) else ""
    return text or None
