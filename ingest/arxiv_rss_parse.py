"""Parse rss.arxiv.org RSS 2.0 feeds into ``PaperIn`` values. Pure: bytes in, values out, no network.

The feed format (2024+) is described in ``shared/corpus/SOURCES.md``. Per item we read:

- the versioned id from ``<guid>oai:arXiv.org:2411.17700v1</guid>`` (the ``<link>`` has no version), falling
  back to the ``arXiv:2411.17700v1`` prefix of ``<description>``;
- the abstract: ``<description>`` minus its ``arXiv:... Announce Type: new`` / ``Abstract:`` prefix,
  TeX accents decoded outside math;
- the authors: one comma-joined ``<dc:creator>``, with parenthesised affiliations;
- ``<category>`` (primary first), ``<arxiv:announce_type>``, ``<pubDate>``, ``<dc:rights>``,
  ``<arxiv:DOI>`` and ``<arxiv:journal_reference>``.

Three outcomes a caller must tell apart: a page of items (maybe with some ``skipped`` notes), an empty page
(a normal channel without items: arXiv publishes nothing on weekends and holidays), and an error —
``FeedFormatError`` when the bytes are not a usable RSS document, ``ArxivFeedError`` when arXiv answered with
its error channel.
"""

from __future__ import annotations

import calendar
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from xml.parsers.expat import errors as expat_errors

import feedparser

from core.tex import decode_tex
from core.values import AnnounceType, PaperIn

__all__ = ["ArxivFeedError", "FeedFormatError", "FeedPage", "parse_feed", "split_authors"]

SOURCE = "arxiv-rss"

_URL_HINT = "check PAPERTRAIL_ARXIV_RSS_URL"
_ERROR_TITLE_PREFIX = "Feed error for query:"

# New-style ids (0704.0001, 2411.17700) and old-style ids (hep-th/9901001, math.GT/0309136).
_ID = r"(?P<id>\d{4}\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})"
_GUID_RE = re.compile(r"\A\s*oai:arXiv\.org:" + _ID + r"(?:v(?P<version>\d+))?\s*\Z")
_DESCRIPTION_RE = re.compile(
    r"\A\s*arXiv:" + _ID + r"v(?P<version>\d+)\s+Announce\s+Type:\s*(?P<type>\S+)\s*(?:Abstract:)?",
)
_ABSTRACT_LABEL_RE = re.compile(r"\A\s*Abstract:")
_TRAILING_AND_RE = re.compile(r"\s+and\s+")
_LEADING_AND_RE = re.compile(r"\Aand\s+")
_PAREN_GROUP_RE = re.compile(r"\([^()]*\)")
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
    """One parsed feed: its items, channel facts, and notes on items that could not be used."""

    items: tuple[PaperIn, ...]
    channel_title: str
    published: datetime | None
    skipped: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the channel carried no items at all (a weekend or holiday), not when all were skipped.

        A page whose items were all skipped is a parsing problem and must not be reported as "empty".
        """
        return not self.items and not self.skipped


def parse_feed(data: bytes) -> FeedPage:
    """Parse the bytes of an rss.arxiv.org RSS 2.0 response into a ``FeedPage``.

    Raises ``FeedFormatError`` if ``data`` is not a complete RSS document (empty, an HTML page, truncated or
    ill-formed XML) and ``ArxivFeedError`` if it is arXiv's error channel. Items that cannot be used are not
    dropped silently: each one leaves a note in ``FeedPage.skipped``.
    """
    channel = _check_document(data)
    # A BytesIO, not the bytes themselves: feedparser first tries to open() a bytes argument as a file name.
    parsed = feedparser.parse(io.BytesIO(data), sanitize_html=False, resolve_relative_uris=False)
    feed = parsed.get("feed", {})
    channel_title = _collapse(feed.get("title", ""))

    if channel_title.startswith(_ERROR_TITLE_PREFIX):
        message = _collapse(feed.get("subtitle", "")) or "(no message in the error channel)"
        raise ArxivFeedError(message, query=channel_title[len(_ERROR_TITLE_PREFIX) :].strip())

    entries = parsed.get("entries", [])
    expected = len(channel.findall("item"))
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


def _check_document(data: bytes) -> ET.Element:
    """Reject anything but a complete, well-formed RSS document and return its ``<channel>``.

    feedparser is lenient by design: on a truncated feed it returns the items before the cut with only a
    ``bozo`` flag. A strict XML parse first makes a cut download an error instead of a short page.
    """
    if not data.strip():
        what = "an empty body" if not data else f"a blank body ({len(data)} bytes of whitespace)"
        raise FeedFormatError(
            f"rss.arxiv.org returned {what} instead of RSS; retry later, and {_URL_HINT} if it persists"
        )
    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:14].lower().startswith((b"<!doctype html", b"<html")):
        raise _html_error(data)
    try:
        # expat neither fetches external entities nor expands entity bombs (expat >= 2.4), so this is safe
        # on untrusted bytes.
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        if any(marker in data[:4096].lower() for marker in _HTML_MARKERS):
            raise _html_error(data) from exc
        if exc.code in _TRUNCATION_CODES:
            raise FeedFormatError(
                f"the rss.arxiv.org response ends before the XML document does ({exc}; {len(data)} bytes, "
                f"last bytes: {_preview(data[-80:])}): the download was cut short; retry the fetch"
            ) from exc
        raise FeedFormatError(
            f"rss.arxiv.org returned bytes that are not well-formed XML ({exc}; first bytes: "
            f"{_preview(data)}); {_URL_HINT}, and keep the response for a bug report if the URL is right"
        ) from exc
    if root.tag.rpartition("}")[2].lower() == "html":
        raise _html_error(data)
    channel = root.find("channel")
    if root.tag != "rss" or channel is None:
        raise FeedFormatError(
            f"expected an RSS 2.0 document (<rss><channel>) but got <{root.tag}> "
            f"(first bytes: {_preview(data)}); {_URL_HINT}: it must point at rss.arxiv.org/rss/..."
        )
    return channel


def _html_error(data: bytes) -> FeedFormatError:
    return FeedFormatError(
        f"rss.arxiv.org returned an HTML page instead of RSS (first bytes: {_preview(data)}); "
        f"the service may be down (retry later) or the URL wrong ({_URL_HINT})"
    )


def _preview(data: bytes, limit: int = 80) -> str:
    """The first bytes of a response, shown in error messages so an operator can recognise them."""
    text = data[:limit].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(data) > limit else ""))


def _parse_entry(entry: Any, position: int, channel_published: datetime | None) -> PaperIn | str:
    """Turn one feedparser entry into a ``PaperIn``, or return a note saying why it was skipped."""
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
        title=decode_tex(_collapse(entry.get("title", ""))),
        abstract=_abstract(description, desc_match),
        authors=split_authors(entry.get("author", "")),
        categories=_categories(entry.get("tags") or []),
        announce_type=announce_type,
        announced_at=_parse_date(entry.get("published"), entry.get("published_parsed")) or channel_published,
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
    return decode_tex(_collapse(body))


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
    names = [_collapse(piece) for piece in pieces]
    names = [name for name in names if name]
    if names:
        # Some submitters end the list in prose style: "A, B and C" or "A, B, and C".
        last = _LEADING_AND_RE.sub("", names.pop())
        names.extend(_TRAILING_AND_RE.split(last))
    return tuple(decoded for decoded in (_collapse(decode_tex(name)) for name in names) if decoded)


def _split_top_level(text: str) -> list[str] | None:
    """Split on commas outside ``(...)`` and ``{...}``; None when the brackets do not balance."""
    pieces: list[str] = []
    depth = {"(": 0, "{": 0}
    closers = {")": "(", "}": "{"}
    start = 0
    for index, char in enumerate(text):
        if char in depth:
            depth[char] += 1
        elif char in closers:
            depth[closers[char]] -= 1
            if depth[closers[char]] < 0:
                return None
        elif char == "," and not any(depth.values()):
            pieces.append(text[start:index])
            start = index + 1
    if any(depth.values()):
        return None
    pieces.append(text[start:])
    return pieces


def _remove_parenthesised(text: str) -> str:
    """Drop every top-level ``(...)`` group (affiliations, nicknames) from a balanced string."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
            out.append(" ")  # keep the words on both sides apart
        elif char == ")":
            depth -= 1
        elif depth == 0:
            out.append(char)
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
    text = _collapse(value) if isinstance(value, str) else ""
    return text or None


def _collapse(text: str) -> str:
    """Collapse every run of whitespace (arXiv hard-wraps long fields) into one space and trim the ends."""
    return " ".join(text.split())
