"""Atom 1.0 documents (RFC 4287) from plain values, written by lxml's serializer.

No markup is ever built from strings: every title, abstract, author name and guide is a text node or an
attribute value, escaped by the serializer. Before that, each text loses the control and bidi-override
characters the pages strip (core.escaping.strip_control) and any character XML 1.0 cannot carry
(U+FFFE, U+FFFF, lone surrogates), so no stored value can make the document ill-formed.

Entry content is XHTML (``type="xhtml"``, RFC 4287 section 3.1.1.3): a ``div`` of paragraphs, each
optionally led by a bold label, followed by a list or linked to a URL. Feed readers show it as rich text;
nothing in it is HTML written by anyone but this module.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lxml import etree

from core.escaping import strip_control

ATOM_NS = "http://www.w3.org/2005/Atom"
XHTML_NS = "http://www.w3.org/1999/xhtml"
XML_NS = "http://www.w3.org/XML/1998/namespace"
MEDIA_TYPE = "application/atom+xml; charset=utf-8"
# The scheme arXiv's own Atom API gives its categories.
ARXIV_CATEGORY_SCHEME = "http://arxiv.org/schemas/atom"

# Characters XML 1.0 allows (section 2.2) once strip_control has removed the C0 and C1 controls.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` as a feed may carry it: no control or bidi-override characters, nothing XML cannot hold."""
    return _NOT_XML.sub("", strip_control(text))


def rfc3339(moment: datetime) -> str:
    """An RFC 3339 date-time in UTC with a ``Z`` (``2026-12-02T05:30:10Z``), as Atom's dates are written."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Link:
    """An ``atom:link``."""

    href: str
    rel: str = "alternate"
    type: str = ""
    title: str = ""


@dataclass(frozen=True, slots=True)
class Paragraph:
    """One paragraph of an entry's XHTML content: ``label`` in bold, then ``text`` (a link to ``href`` when
    given), then ``items`` as a bulleted list. ``lang`` marks a paragraph in another language than the
    paper (a guide in the reader's language)."""

    text: str
    label: str = ""
    href: str = ""
    items: tuple[str, ...] = ()
    lang: str = ""


@dataclass(frozen=True, slots=True)
class Entry:
    """An ``atom:entry``."""

    id: str
    title: str
    updated: datetime
    published: datetime | None
    links: tuple[Link, ...]
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    summary: str
    content: tuple[Paragraph, ...] = ()


@dataclass(frozen=True, slots=True)
class Feed:
    """An ``atom:feed``. ``language`` is the language tag of the feed's own words (title, subtitle)."""

    id: str
    title: str
    updated: datetime
    links: tuple[Link, ...]
    author: str
    author_uri: str
    subtitle: str = ""
    language: str = ""
    generator: str = "PaperTrail"
    entries: Sequence[Entry] = field(default_factory=tuple)


def _sub(parent: etree._Element, name: str, text: str | None = None, **attributes: str) -> etree._Element:
    element = etree.SubElement(parent, f"{{{ATOM_NS}}}{name}")
    for key, value in attributes.items():
        if value:
            element.set(key, xml_text(value))
    if text is not None:
        element.text = xml_text(text)
    return element


def _link(parent: etree._Element, link: Link) -> None:
    _sub(parent, "link", href=link.href, rel=link.rel, type=link.type, title=link.title)


def _content(parent: etree._Element, paragraphs: Sequence[Paragraph]) -> None:
    content = _sub(parent, "content", type="xhtml")
    div = etree.SubElement(content, f"{{{XHTML_NS}}}div", nsmap={None: XHTML_NS})
    for paragraph in paragraphs:
        p = etree.SubElement(div, f"{{{XHTML_NS}}}p")
        if paragraph.lang:
            p.set(f"{{{XML_NS}}}lang", paragraph.lang)
            p.set("lang", paragraph.lang)
        tail_of: etree._Element | None = None
        if paragraph.label:
            strong = etree.SubElement(p, f"{{{XHTML_NS}}}strong")
            strong.text = xml_text(paragraph.label)
            tail_of = strong
        text = xml_text(paragraph.text)
        if paragraph.href:
            anchor = etree.SubElement(p, f"{{{XHTML_NS}}}a", href=xml_text(paragraph.href))
            anchor.text = text
            if tail_of is not None:
                tail_of.tail = " "
        elif tail_of is not None:
            tail_of.tail = f" {text}" if text else None
        else:
            p.text = text
        if paragraph.items:
            ul = etree.SubElement(div, f"{{{XHTML_NS}}}ul")
            if paragraph.lang:
                ul.set(f"{{{XML_NS}}}lang", paragraph.lang)
                ul.set("lang", paragraph.lang)
            for item in paragraph.items:
                li = etree.SubElement(ul, f"{{{XHTML_NS}}}li")
                li.text = xml_text(item)


def _entry(parent: etree._Element, entry: Entry) -> None:
    element = _sub(parent, "entry")
    _sub(element, "id", entry.id)
    _sub(element, "title", entry.title, type="text")
    _sub(element, "updated", rfc3339(entry.updated))
    if entry.published is not None:
        _sub(element, "published", rfc3339(entry.published))
    for link in entry.links:
        _link(element, link)
    for name in entry.authors:
        _sub(_sub(element, "author"), "name", name)
    for term in entry.categories:
        _sub(element, "category", term=term, scheme=ARXIV_CATEGORY_SCHEME)
    _sub(element, "summary", entry.summary, type="text")
    if entry.content:
        _content(element, entry.content)


def serialize(feed: Feed) -> bytes:
    """The feed as a UTF-8 Atom document with an XML declaration."""
    root = etree.Element(f"{{{ATOM_NS}}}feed", nsmap={None: ATOM_NS})
    _sub(root, "id", feed.id)
    title = _sub(root, "title", feed.title, type="text")
    if feed.language:
        title.set(f"{{{XML_NS}}}lang", feed.language)
    if feed.subtitle:
        subtitle = _sub(root, "subtitle", feed.subtitle, type="text")
        if feed.language:
            subtitle.set(f"{{{XML_NS}}}lang", feed.language)
    _sub(root, "updated", rfc3339(feed.updated))
    for link in feed.links:
        _link(root, link)
    author = _sub(root, "author")
    _sub(author, "name", feed.author)
    _sub(author, "uri", feed.author_uri)
    _sub(root, "generator", feed.generator, uri=feed.author_uri)
    for entry in feed.entries:
        _entry(root, entry)
    return bytes(etree.tostring(root, xml_declaration=True, encoding="utf-8"))
