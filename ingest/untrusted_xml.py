"""Safe loading of untrusted XML response bytes with lxml, shared by the OAI-PMH and arXiv API parsers:
every way a body can be unusable (empty, HTML, a DOCTYPE or entity declaration, truncated, ill-formed)
becomes the caller's error with a message saying what was wrong and what to do."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from lxml import etree

__all__ = ["load_untrusted_xml", "preview"]

_HTML_START = (b"<!doctype html", b"<html")
# Whole tag names only: OAI's own <header> must not count as HTML's <head>.
_HTML_MARKER_RE = re.compile(rb"<!doctype\s+html|<(?:html|head|body)[\s>/]", re.IGNORECASE)
# libxml2 codes that can look like "the input stopped early" but mean a broken document even at the end.
_NOT_TRUNCATION = frozenset({5, 76})  # XML_ERR_DOCUMENT_END (extra content), XML_ERR_TAG_NAME_MISMATCH
_TAG_NOT_FINISHED = 77  # "Premature end of data in tag": only ever raised at the end of the input


def load_untrusted_xml(data: bytes, *, service: str, hint: str, error: Callable[[str], Exception]) -> Any:
    """Parse untrusted response bytes with lxml and return the root element, or raise ``error(message)``.

    Refused, each with a message saying what was wrong and what to do: an empty body, an HTML page, any
    DOCTYPE or entity declaration (no arXiv response has one; refusing them up front means an entity bomb
    or an external entity is never expanded or fetched), truncated XML and ill-formed XML. The parser
    itself is also locked down (no entity resolution, no network, no DTD loading, libxml2's size limits).
    """
    if not data.strip():
        what = "an empty body" if not data else f"a blank body ({len(data)} bytes of whitespace)"
        raise error(f"{service} returned {what} instead of XML; retry later, and {hint} if it persists")
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:64].lower()
    if head.startswith(_HTML_START):
        raise error(_html_message(data, service, hint))
    # A literal "<!DOCTYPE" or "<!ENTITY" can only be markup: in text it would be escaped as "&lt;!".
    # Checking the bytes first rejects a billion-laughs document before libxml2 sees a single declaration.
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise error(
            f"{service} returned XML with a DOCTYPE or entity declaration (first bytes: {preview(data)}); "
            "arXiv never sends one, so it was refused unparsed (it could be an entity-expansion or "
            f"external-entity attack); {hint}"
        )
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        if _HTML_MARKER_RE.search(data[:4096]):
            raise error(_html_message(data, service, hint)) from exc
        if _is_truncation(data, exc):
            raise error(
                f"the {service} response ends before the XML document does ({exc.msg}; {len(data)} bytes, "
                f"last bytes: {preview(data[-80:])}): the download was cut short; retry the fetch"
            ) from exc
        raise error(
            f"{service} returned bytes that are not well-formed XML ({exc.msg}; first bytes: "
            f"{preview(data)}); {hint}, and keep the response for a bug report if the URL is right"
        ) from exc
    docinfo = root.getroottree().docinfo
    # Reached only by encodings the byte check cannot read (UTF-16): lxml kept entities unexpanded.
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise error(
            f"{service} returned XML with a DOCTYPE ({docinfo.doctype!r}); arXiv never sends one, so it "
            f"was refused; {hint}"
        )
    if not isinstance(root.tag, str):
        raise error(f"{service} returned XML whose root is not an element; {hint}")
    if etree.QName(root).localname.lower() == "html":
        raise error(_html_message(data, service, hint))
    return root


def _is_truncation(data: bytes, exc: Any) -> bool:
    """True when libxml2 stopped because the input ended, not because of bad markup in the middle."""
    if exc.code == _TAG_NOT_FINISHED:
        return True
    if exc.code in _NOT_TRUNCATION:
        return False
    line = exc.position[0] if exc.position else 0
    # Errors caused by a cut are reported on the last line of what arrived.
    return bool(line >= data.count(b"\n") + 1)


def _html_message(data: bytes, service: str, hint: str) -> str:
    return (
        f"{service} returned an HTML page instead of XML (first bytes: {preview(data)}); the service may "
        f"be down or rate-limiting (retry later, honouring Retry-After) or the URL wrong ({hint})"
    )


def preview(data: bytes, limit: int = 80) -> str:
    """The first bytes of a response, shown in error messages so an operator can recognise them."""
    text = data[:limit].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(data) > limit else ""))
