"""Parse arXiv's OAI-PMH responses into ``OaiPage`` values. Pure: bytes in, values out, no network.

Both endpoints speak OAI-PMH 2.0 with the same record formats: ``export.arxiv.org/oai2`` and
``oaipmh.arxiv.org/oai``. ``parse_oai`` reads ``ListRecords`` and ``GetRecord`` responses in three metadata
formats (see ``shared/corpus/SOURCES.md``):

- ``arXivRaw`` has the version history: one ``<version version="vN"><date>`` per revision. Each version
  becomes one ``PaperIn`` (v1 ``NEW``, later ones ``REPLACE``, ``announced_at`` = that version's date). OAI
  exposes only the latest metadata, so every version carries the title, abstract, authors and categories of
  the latest version.
- ``arXiv`` and ``oai_dc`` have no version numbers. A version whose number is unknown cannot be stored (the
  version is the unit of news), so these records come back with ``versions=()`` and their ``metadata``;
  a caller that learns the version number elsewhere (e.g. from the arXiv API) completes them with
  ``OaiRecord.paper(version, announced_at)``. Nothing is guessed from ``<created>``/``<updated>``.

Outcomes a caller must tell apart:

- a page of records, maybe with ``skipped`` notes (a malformed record is reported and the rest kept) and
  ``deleted`` records (reported, never stored);
- an empty page with ``no_records_match=True``: OAI-PMH answers a harvest window in which nothing changed
  with the ``noRecordsMatch`` error, which is a normal quiet day, so it is a page and not an exception;
- ``OaiError`` for every other ``<error code=...>`` (``badResumptionToken``, ``badArgument``,
  ``cannotDisseminateFormat``, ``idDoesNotExist``, ...);
- ``OaiFormatError`` when the bytes are not a usable OAI-PMH document (HTML, truncated, a DOCTYPE, ...).

This module reads the document and its records. Beside it: ``arxiv_oai_parse_values`` (the page, record
and metadata values and the errors), ``arxiv_oai_parse_urls`` (the request URLs) and
``arxiv_oai_parse_xml`` (the safe XML loading it shares with the arXiv API parser).
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

from lxml import etree

from core.tex_accents import decode_tex
from core.values import ARXIV_ID_PATTERN
from ingest.arxiv_oai_parse_urls import URL_HINT
from ingest.arxiv_oai_parse_values import (
    METADATA_PREFIXES,
    OaiError,
    OaiErrorCode,
    OaiFormatError,
    OaiMetadata,
    OaiPage,
    OaiRecord,
    paper_of,
)
from ingest.arxiv_oai_parse_xml import load_untrusted_xml, preview
from ingest.arxiv_rss_parse import split_authors
from ingest.timestamps import iso_utc, rfc822_utc
from ingest.xml_text import collapse, element_text

__all__ = ["parse_oai"]

OAI_NS = "http://www.openarchives.org/OAI/2.0/"
ARXIV_NS = "http://arxiv.org/OAI/arXiv/"
ARXIV_RAW_NS = "http://arxiv.org/OAI/arXivRaw/"
OAI_DC_NS = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC_NS = "http://purl.org/dc/elements/1.1/"

_OAI = "{" + OAI_NS + "}"
_ARXIV = "{" + ARXIV_NS + "}"
_RAW = "{" + ARXIV_RAW_NS + "}"
_DC = "{" + DC_NS + "}"

# The formats parse_oai reads, by the tag of the element inside <metadata>.
_FORMAT_BY_TAG = {
    f"{_RAW}arXivRaw": "arXivRaw",
    f"{_ARXIV}arXiv": "arXiv",
    "{" + OAI_DC_NS + "}dc": "oai_dc",
}

_ID = ARXIV_ID_PATTERN
_OAI_IDENTIFIER_RE = re.compile(rf"\Aoai:arXiv\.org:(?P<id>{_ID})\Z")
_VERSION_ATTR_RE = re.compile(r"\Av(?P<n>[1-9]\d*)\Z")
_AND_RE = re.compile(r"\s+and\s+")
_DAY_RE = re.compile(r"\A\d{4}-\d{2}-\d{2}")


def parse_oai(data: bytes) -> OaiPage:
    """Parse the bytes of an arXiv OAI-PMH ``ListRecords`` or ``GetRecord`` response into an ``OaiPage``.

    Raises ``OaiFormatError`` if ``data`` is not a complete OAI-PMH document (see ``load_untrusted_xml``)
    or answers another verb, and ``OaiError`` for an OAI-PMH ``<error>`` other than ``noRecordsMatch``,
    which yields an empty page with ``no_records_match=True``. A record that cannot be used is skipped with
    a note in ``OaiPage.skipped``; the rest of the page is kept.
    """
    root = load_untrusted_xml(data, service="the arXiv OAI-PMH endpoint", hint=URL_HINT, error=OaiFormatError)
    if root.tag != f"{_OAI}OAI-PMH":
        raise OaiFormatError(
            f"expected an OAI-PMH 2.0 document (<OAI-PMH xmlns={OAI_NS!r}>) but got <{root.tag}> "
            f"(first bytes: {preview(data)}); {URL_HINT}"
        )
    response_date = iso_utc(element_text(root.find(f"{_OAI}responseDate")))
    request = root.find(f"{_OAI}request")
    verb = request.get("verb") if request is not None else None
    request_prefix = request.get("metadataPrefix") if request is not None else None

    errors = tuple(
        (err.get("code") or "", collapse(element_text(err))) for err in root.iterfind(f"{_OAI}error")
    )
    if errors:
        real = [(code, message) for code, message in errors if code != OaiErrorCode.NO_RECORDS_MATCH]
        if real:
            raise OaiError(real[0][0], real[0][1], errors)
        return OaiPage(
            records=(),
            resumption_token=None,
            complete_list_size=None,
            cursor=None,
            skipped=(),
            response_date=response_date,
            verb=verb,
            metadata_prefix=request_prefix,
            no_records_match=True,
        )

    container = root.find(f"{_OAI}ListRecords")
    if container is None:
        container = root.find(f"{_OAI}GetRecord")
    if container is None:
        found = [etree.QName(child).localname for child in root if isinstance(child.tag, str)]
        raise OaiFormatError(
            f"parse_oai reads ListRecords and GetRecord responses, but this one has no such element and no "
            f"<error> (children: {', '.join(found) or 'none'}); request verb=ListRecords or verb=GetRecord"
        )

    records: list[OaiRecord] = []
    deleted: list[OaiRecord] = []
    skipped: list[str] = []
    for position, element in enumerate(container.iterfind(f"{_OAI}record"), start=1):
        result = _parse_record(element, position)
        if isinstance(result, str):
            skipped.append(result)
        elif result.deleted:
            deleted.append(result)
        else:
            records.append(result)

    token, cursor, size = _resumption(container.find(f"{_OAI}resumptionToken"))
    return OaiPage(
        records=tuple(records),
        resumption_token=token,
        complete_list_size=size,
        cursor=cursor,
        skipped=tuple(skipped),
        response_date=response_date,
        deleted=tuple(deleted),
        verb=verb,
        metadata_prefix=request_prefix,
    )


def _resumption(element: Any) -> tuple[str | None, int | None, int | None]:
    """Token, cursor and completeListSize; an empty token element marks the last page of a list."""
    if element is None:
        return None, None, None
    token = element_text(element) or None
    return token, _count(element, "cursor"), _count(element, "completeListSize")


def _count(element: Any, name: str) -> int | None:
    raw = element.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OaiFormatError(
            f"<resumptionToken {name}={raw!r}> is not a non-negative integer; the paging information of "
            "this response cannot be trusted, so retry the request"
        )
    return value


def _parse_record(element: Any, position: int) -> OaiRecord | str:
    """One ``<record>`` as an ``OaiRecord``, or a note saying why it was skipped."""
    header = element.find(f"{_OAI}header")
    identifier = collapse(element_text(header.find(f"{_OAI}identifier"))) if header is not None else ""
    label = f"record {position} ({identifier or 'no identifier'})"
    if header is None:
        return f"{label}: no <header>; skipped"
    match = _OAI_IDENTIFIER_RE.match(identifier)
    if match is None:
        return f"{label}: header identifier is not oai:arXiv.org:<arXiv id>; skipped"
    arxiv_id = match.group("id")
    stamp_text = collapse(element_text(header.find(f"{_OAI}datestamp")))
    datestamp = _parse_day(stamp_text)
    if datestamp is None:
        return f"{label}: header datestamp {stamp_text!r} is not a YYYY-MM-DD date; skipped"
    set_specs = tuple(s for s in (collapse(element_text(e)) for e in header.iterfind(f"{_OAI}setSpec")) if s)

    if header.get("status") == "deleted":
        return OaiRecord(arxiv_id, datestamp, set_specs, None, deleted=True)

    metadata = element.find(f"{_OAI}metadata")
    # The first element child is the payload; comments and processing instructions are not elements.
    children = [] if metadata is None else [child for child in metadata if isinstance(child.tag, str)]
    payload = children[0] if children else None
    if payload is None:
        return f"{label}: no <metadata> although the record is not marked deleted; skipped"
    prefix = _FORMAT_BY_TAG.get(payload.tag)
    if prefix is None:
        return (
            f"{label}: metadata format <{payload.tag}> is not one parse_oai reads "
            f"({', '.join(METADATA_PREFIXES)}); skipped"
        )
    if prefix == "arXivRaw":
        return _raw_record(payload, arxiv_id, datestamp, set_specs, label)
    parsed = _arxiv_metadata(payload, arxiv_id, label) if prefix == "arXiv" else _dc_metadata(payload, label)
    if isinstance(parsed, str):
        return parsed
    return OaiRecord(arxiv_id, datestamp, set_specs, prefix, versions=(), metadata=parsed)


def _raw_record(
    payload: Any, arxiv_id: str, datestamp: date, set_specs: tuple[str, ...], label: str
) -> OaiRecord | str:
    """An ``arXivRaw`` record: one ``PaperIn`` per ``<version>``."""
    problem = _check_id(payload, _RAW, arxiv_id)
    if problem:
        return f"{label}: {problem}; skipped"
    title = _field(payload, _RAW, "title")
    if not title:
        return f"{label}: arXivRaw metadata has no <title>; skipped"

    dated: dict[int, datetime] = {}
    for element in payload.iterfind(f"{_RAW}version"):
        raw_number = element.get("version") or ""
        number = _VERSION_ATTR_RE.match(raw_number.strip())
        if number is None:
            return f"{label}: <version version={raw_number!r}> is not vN with N >= 1; skipped"
        raw_date = collapse(element_text(element.find(f"{_RAW}date")))
        moment = rfc822_utc(raw_date)
        if moment is None:
            return f"{label}: version {raw_number} has no usable <date> ({raw_date!r}); skipped"
        n = int(number.group("n"))
        if n in dated:
            return f"{label}: version v{n} appears twice; skipped"
        dated[n] = moment
    if not dated:
        return f"{label}: arXivRaw metadata has no <version> element; skipped"

    ordered = sorted(dated)
    metadata = OaiMetadata(
        title=decode_tex(title),
        abstract=decode_tex(_field(payload, _RAW, "abstract")),
        authors=_raw_authors(_field(payload, _RAW, "authors")),
        categories=_split_categories(_field(payload, _RAW, "categories")),
        comment=_optional_tex(_field(payload, _RAW, "comments")),
        journal_ref=_optional_tex(_field(payload, _RAW, "journal-ref")),
        doi=_field(payload, _RAW, "doi") or None,
        license=_field(payload, _RAW, "license") or None,
        created=dated[ordered[0]].date(),
        updated=dated[ordered[-1]].date() if len(ordered) > 1 else None,
    )
    # OAI serves only the latest metadata, so each version carries it; the version's own date is exact.
    versions = tuple(paper_of(arxiv_id, n, metadata, dated[n]) for n in ordered)
    return OaiRecord(arxiv_id, datestamp, set_specs, "arXivRaw", versions=versions, metadata=metadata)


def _arxiv_metadata(payload: Any, arxiv_id: str, label: str) -> OaiMetadata | str:
    """An ``arXiv``-format record's metadata: structured authors, no version history."""
    problem = _check_id(payload, _ARXIV, arxiv_id)
    if problem:
        return f"{label}: {problem}; skipped"
    title = _field(payload, _ARXIV, "title")
    if not title:
        return f"{label}: arXiv metadata has no <title>; skipped"
    authors: list[str] = []
    for author in payload.iterfind(f"{_ARXIV}authors/{_ARXIV}author"):
        # Display order is forenames, keyname, suffix; affiliations are dropped like everywhere else.
        parts = (_field(author, _ARXIV, name) for name in ("forenames", "keyname", "suffix"))
        name = decode_tex(" ".join(part for part in parts if part))
        if name:
            authors.append(name)
    return OaiMetadata(
        title=decode_tex(title),
        abstract=decode_tex(_field(payload, _ARXIV, "abstract")),
        authors=tuple(authors),
        categories=_split_categories(_field(payload, _ARXIV, "categories")),
        comment=_optional_tex(_field(payload, _ARXIV, "comments")),
        journal_ref=_optional_tex(_field(payload, _ARXIV, "journal-ref")),
        doi=_field(payload, _ARXIV, "doi") or None,
        license=_field(payload, _ARXIV, "license") or None,
        created=_parse_day(_field(payload, _ARXIV, "created")),
        updated=_parse_day(_field(payload, _ARXIV, "updated")),
    )


def _dc_metadata(payload: Any, label: str) -> OaiMetadata | str:
    """An ``oai_dc`` record's metadata. Dublin Core flattens arXiv's fields into repeated elements."""
    title = collapse(element_text(payload.find(f"{_DC}title")))
    if not title:
        return f"{label}: oai_dc metadata has no <dc:title>; skipped"
    abstract = ""
    comment = None
    for element in payload.iterfind(f"{_DC}description"):
        text = collapse(element_text(element))
        if text.startswith("Comment:"):
            comment = comment or text.removeprefix("Comment:").strip() or None
        elif not abstract:
            abstract = text
    journal_ref = doi = None
    for element in payload.iterfind(f"{_DC}identifier"):
        text = collapse(element_text(element))
        if text.startswith("doi:"):
            doi = doi or text.removeprefix("doi:").strip() or None
        elif text and not text.startswith(("http://", "https://")):
            journal_ref = journal_ref or text
    dates = [d for d in (_parse_day(collapse(element_text(e))) for e in payload.iterfind(f"{_DC}date")) if d]
    return OaiMetadata(
        title=decode_tex(title),
        abstract=decode_tex(abstract),
        authors=tuple(
            name for name in (_dc_creator(element_text(e)) for e in payload.iterfind(f"{_DC}creator")) if name
        ),
        categories=(),
        comment=decode_tex(comment) if comment else None,
        journal_ref=decode_tex(journal_ref) if journal_ref else None,
        doi=doi,
        license=collapse(element_text(payload.find(f"{_DC}rights"))) or None,
        created=dates[0] if dates else None,
        updated=dates[-1] if len(dates) > 1 else None,
        subjects=tuple(
            s for s in (collapse(element_text(e)) for e in payload.iterfind(f"{_DC}subject")) if s
        ),
    )


def _raw_authors(text: str) -> tuple[str, ...]:
    """arXivRaw's free-text author list as display names.

    ``split_authors`` (shared with the RSS parser) splits on commas outside brackets, drops affiliations and
    decodes TeX, but splits " and " only in the last name; arXivRaw also has "A and B (Univ), C", so every
    name is split on a standalone "and" again (affiliations are gone by then, so no "and" inside them).
    """
    return tuple(part for name in split_authors(text) for part in _AND_RE.split(name) if part)


def _dc_creator(text: str) -> str:
    """``Miller, Steven J.`` -> ``Steven J. Miller``; a name without a comma (a collaboration) as is."""
    last, comma, first = collapse(text).partition(",")
    name = f"{first.strip()} {last.strip()}" if comma and first.strip() else last.strip()
    return decode_tex(name)


def _check_id(payload: Any, ns: str, arxiv_id: str) -> str | None:
    """The metadata ``<id>`` must be present and agree with the header identifier."""
    own = _field(payload, ns, "id")
    if not own:
        return "metadata has no <id>"
    if own != arxiv_id:
        return f"metadata <id> {own!r} disagrees with the header identifier"
    return None


def _split_categories(text: str) -> tuple[str, ...]:
    """Space-separated categories, primary first, without repeats."""
    return tuple(dict.fromkeys(text.split()))


def _parse_day(text: str) -> date | None:
    """``2016-10-21`` (or the day of a full UTCdatetime) as a date."""
    if not _DAY_RE.match(text):
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def _field(parent: Any, ns: str, name: str) -> str:
    return collapse(element_text(parent.find(f"{ns}{name}")))


def _optional_tex(text: str) -> str | None:
    return decode_tex(text) if text else None
