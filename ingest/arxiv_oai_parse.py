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

This module holds, in order: what ``parse_oai`` returns and raises (the page, record and metadata values,
the OAI-PMH error codes with what to do about each, the format error, and ``paper_of``, which turns a
record's metadata into the ``PaperIn`` of one version); the request URLs (``ListRecords`` and ``GetRecord``,
checked against the OAI-PMH 2.0 argument rules before any request is made); and reading the document and
its records. Loading the untrusted bytes safely is ``ingest.untrusted_xml``'s, shared with the arXiv API
parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote, urlencode

from lxml import etree

from core.tex_accents import decode_tex
from core.values import ARXIV_ID_PATTERN, AnnounceType, PaperIn
from ingest.arxiv_rss_parse import split_authors
from ingest.timestamps import iso_utc, rfc822_utc
from ingest.untrusted_xml import load_untrusted_xml, preview
from ingest.xml_text import collapse, element_text

__all__ = [
    "METADATA_PREFIXES",
    "SOURCE",
    "URL_HINT",
    "OaiError",
    "OaiErrorCode",
    "OaiFormatError",
    "OaiMetadata",
    "OaiPage",
    "OaiRecord",
    "build_get_record_url",
    "build_list_records_url",
    "paper_of",
    "parse_oai",
]


# -------------------------------------------------------------------------------------------------------
# What parse_oai returns and raises.

SOURCE = "arxiv-oai"

# The formats parse_oai reads (the metadataPrefix values of a request).
METADATA_PREFIXES = ("arXivRaw", "arXiv", "oai_dc")


class OaiFormatError(ValueError):
    """The bytes are not a usable OAI-PMH response: empty, HTML, truncated, ill-formed or a DOCTYPE."""


class OaiErrorCode(StrEnum):
    """The error codes of OAI-PMH 2.0 (section 3.6). ``OaiError.code`` compares equal to these."""

    BAD_ARGUMENT = "badArgument"
    BAD_RESUMPTION_TOKEN = "badResumptionToken"
    BAD_VERB = "badVerb"
    CANNOT_DISSEMINATE_FORMAT = "cannotDisseminateFormat"
    ID_DOES_NOT_EXIST = "idDoesNotExist"
    NO_RECORDS_MATCH = "noRecordsMatch"
    NO_METADATA_FORMATS = "noMetadataFormats"
    NO_SET_HIERARCHY = "noSetHierarchy"


_HINTS = {
    OaiErrorCode.BAD_ARGUMENT: (
        "check the request: from/until must be days (YYYY-MM-DD), set a known setSpec (cs, math, "
        "physics:hep-th, ...), and a resumptionToken request may carry nothing but verb and token"
    ),
    OaiErrorCode.BAD_RESUMPTION_TOKEN: (
        "the resumptionToken expired or was altered; do not retry it, restart the harvest with "
        "from=<the last datestamp stored> instead"
    ),
    OaiErrorCode.BAD_VERB: "the verb is not an OAI-PMH verb; use ListRecords or GetRecord",
    OaiErrorCode.CANNOT_DISSEMINATE_FORMAT: f"metadataPrefix must be one of {', '.join(METADATA_PREFIXES)}",
    OaiErrorCode.ID_DOES_NOT_EXIST: (
        "use oai:arXiv.org:<id> without a version suffix (OAI has no per-version access); if the form is "
        "right, the paper does not exist (or not yet: new papers appear after the evening announcement)"
    ),
    OaiErrorCode.NO_METADATA_FORMATS: "no metadata formats are available for that item",
    OaiErrorCode.NO_SET_HIERARCHY: "the repository does not support sets; drop the set parameter",
}


class OaiError(RuntimeError):
    """The OAI-PMH endpoint answered with ``<error code="...">`` (other than ``noRecordsMatch``).

    ``code`` is the OAI-PMH code (compare with ``OaiErrorCode``; unknown codes are kept as given),
    ``message`` arXiv's explanation, ``hint`` what to do about it, and ``errors`` every
    ``(code, message)`` pair of the response (OAI-PMH may report several at once).
    """

    def __init__(self, code: str, message: str, errors: tuple[tuple[str, str], ...] = ()) -> None:
        self.code = code
        self.message = message
        self.errors = errors or ((code, message),)
        try:
            self.hint = _HINTS.get(OaiErrorCode(code), "")
        except ValueError:
            self.hint = ""
        hint = self.hint or "see the OAI-PMH 2.0 specification, section 3.6, for this code"
        super().__init__(f"arXiv OAI-PMH error {code}: {message or '(no message)'} — {hint}")


@dataclass(frozen=True, slots=True)
class OaiMetadata:
    """A record's metadata as its format gives it: always the latest version's.

    ``created`` is the v1 date and ``updated`` the date of the latest revision when the format says so
    (``arXiv``: ``<created>``/``<updated>``; ``oai_dc``: first/second ``dc:date``; ``arXivRaw``: first and
    last ``<version>`` dates). ``categories`` lists the primary category first; ``oai_dc`` has no category
    codes, only human-readable ``subjects`` ("Mathematics - Number Theory"), so there it is empty.
    """

    title: str
    abstract: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    comment: str | None = None
    journal_ref: str | None = None
    doi: str | None = None
    license: str | None = None
    created: date | None = None
    updated: date | None = None
    subjects: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OaiRecord:
    """One OAI record: the arXiv id (no version), header facts, and the versions it lets us store.

    ``versions`` holds one ``PaperIn`` per version for ``arXivRaw`` records and is empty for ``arXiv`` and
    ``oai_dc`` records, which carry no version numbers (complete those with ``paper``). ``datestamp`` is the
    day the record last changed at arXiv, which is not the submission or announcement day. Deleted records
    have ``deleted=True``, no metadata and no versions.
    """

    arxiv_id: str
    datestamp: date
    set_specs: tuple[str, ...]
    metadata_prefix: str | None
    versions: tuple[PaperIn, ...] = ()
    metadata: OaiMetadata | None = None
    deleted: bool = False

    @property
    def latest(self) -> PaperIn | None:
        """The highest version, or None when the format has no version history."""
        return self.versions[-1] if self.versions else None

    def paper(self, version: int, announced_at: datetime | None = None) -> PaperIn:
        """Complete this record into the ``PaperIn`` of ``version``, once the caller knows that number.

        Meant for ``arXiv`` and ``oai_dc`` records, whose metadata is the latest version's: pass the latest
        version number (e.g. from the arXiv API). Raises ``ValueError`` for a deleted record or a version
        below 1.
        """
        if self.metadata is None:
            raise ValueError(f"OAI record {self.arxiv_id} was deleted at arXiv and has no metadata to store")
        if version < 1:
            raise ValueError(f"arXiv versions start at 1, got {version} for {self.arxiv_id}")
        return paper_of(self.arxiv_id, version, self.metadata, announced_at)


@dataclass(frozen=True, slots=True)
class OaiPage:
    """One parsed OAI-PMH response.

    ``resumption_token`` is None on the last (or only) page: OAI-PMH ends a list with an empty token
    element, which is read as None while its ``cursor`` and ``complete_list_size`` are still reported.
    ``skipped`` has one note per record that could not be used; ``deleted`` the records arXiv withdrew
    from OAI. ``no_records_match`` is True when the endpoint said ``noRecordsMatch`` (nothing changed in
    the requested window): a normal, empty page.
    """

    records: tuple[OaiRecord, ...]
    resumption_token: str | None
    complete_list_size: int | None
    cursor: int | None
    skipped: tuple[str, ...]
    response_date: datetime | None
    deleted: tuple[OaiRecord, ...] = ()
    verb: str | None = None
    metadata_prefix: str | None = None
    no_records_match: bool = False

    @property
    def papers(self) -> tuple[PaperIn, ...]:
        """Every storable version on the page, record by record, oldest version first."""
        return tuple(paper for record in self.records for paper in record.versions)

    @property
    def unversioned(self) -> tuple[OaiRecord, ...]:
        """Live records without version numbers (``arXiv``/``oai_dc`` formats), for a caller to complete."""
        return tuple(record for record in self.records if not record.versions)

    @property
    def max_datestamp(self) -> date | None:
        """The latest header datestamp on the page, deleted records included: where a harvest resumes."""
        stamps = [record.datestamp for record in (*self.records, *self.deleted)]
        return max(stamps) if stamps else None


def paper_of(arxiv_id: str, version: int, metadata: OaiMetadata, announced_at: datetime | None) -> PaperIn:
    """The ``PaperIn`` of ``version`` of a record whose metadata (the latest version's) is ``metadata``."""
    return PaperIn(
        arxiv_id=arxiv_id,
        version=version,
        title=metadata.title,
        abstract=metadata.abstract,
        authors=metadata.authors,
        categories=metadata.categories,
        announce_type=AnnounceType.NEW if version == 1 else AnnounceType.REPLACE,
        announced_at=announced_at,
        comment=metadata.comment,
        journal_ref=metadata.journal_ref,
        doi=metadata.doi,
        license=metadata.license,
        source=SOURCE,
    )


# -------------------------------------------------------------------------------------------------------
# The request URLs, checked against the OAI-PMH 2.0 argument rules before any request is made.

# What to check when the endpoint answers something unusable.
URL_HINT = "check the OAI-PMH base URL (https://oaipmh.arxiv.org/oai or http://export.arxiv.org/oai2)"

_ID_RE = re.compile(rf"\A{ARXIV_ID_PATTERN}\Z")
_VERSIONED_RE = re.compile(rf"\A(?P<id>{ARXIV_ID_PATTERN})v(?P<version>\d+)\Z")


def build_list_records_url(
    base: str,
    *,
    metadata_prefix: str | None = None,
    set_spec: str | None = None,
    from_date: date | None = None,
    until: date | None = None,
    resumption_token: str | None = None,
) -> str:
    """The URL of a ``ListRecords`` request, following the OAI-PMH 2.0 argument rules.

    A first request needs ``metadata_prefix`` and may add ``set_spec`` and a ``from_date``/``until`` window
    (days, inclusive; arXiv's granularity is ``YYYY-MM-DD``). A follow-up request carries only the verb and
    the ``resumption_token`` (OAI-PMH makes it an exclusive argument), so passing anything else with a token
    is a ``ValueError``, as is a ``datetime`` (it would draw ``badArgument``) or a window that ends before it
    starts.
    """
    _check_base(base)
    if resumption_token is not None:
        others = {
            "metadata_prefix": metadata_prefix,
            "set_spec": set_spec,
            "from_date": from_date,
            "until": until,
        }
        extra = [name for name, value in others.items() if value is not None]
        if extra:
            raise ValueError(
                f"a resumptionToken request carries only verb and token, but {', '.join(extra)} "
                "was also given; the token already encodes the original request's arguments"
            )
        if not resumption_token.strip():
            raise ValueError("the resumptionToken is empty: an empty token means the list is complete")
        return _url(base, {"verb": "ListRecords", "resumptionToken": resumption_token})
    if metadata_prefix is None:
        raise ValueError(
            f"a first ListRecords request needs metadata_prefix ({', '.join(METADATA_PREFIXES)})"
        )
    _check_prefix(metadata_prefix)
    params = {"verb": "ListRecords", "metadataPrefix": metadata_prefix}
    if from_date is not None:
        params["from"] = _day(from_date, "from_date")
    if until is not None:
        params["until"] = _day(until, "until")
    if from_date is not None and until is not None and until < from_date:
        raise ValueError(f"until ({until}) is before from_date ({from_date}); OAI-PMH answers badArgument")
    if set_spec is not None:
        if not set_spec.strip() or any(ch.isspace() for ch in set_spec):
            raise ValueError(f"set_spec {set_spec!r} is not a setSpec (e.g. cs, math, physics:hep-th)")
        params["set"] = set_spec
    return _url(base, params)


def build_get_record_url(base: str, *, arxiv_id: str, metadata_prefix: str = "arXivRaw") -> str:
    """The URL of a ``GetRecord`` request for one paper, ``arxiv_id`` without version suffix.

    arXiv answers ``idDoesNotExist`` to a versioned identifier (``oai:arXiv.org:1305.0014v1``), so a
    versioned id is refused here with a ``ValueError`` instead of costing a request.
    """
    _check_base(base)
    _check_prefix(metadata_prefix)
    bare = arxiv_id.strip()
    versioned = _VERSIONED_RE.match(bare)
    if versioned:
        raise ValueError(
            f"{arxiv_id!r} has a version suffix; OAI-PMH only knows whole papers: "
            f"use {versioned.group('id')!r}"
        )
    if not _ID_RE.match(bare):
        raise ValueError(f"{arxiv_id!r} is not an arXiv id (2411.17700 or hep-th/9901001)")
    return _url(
        base, {"verb": "GetRecord", "identifier": f"oai:arXiv.org:{bare}", "metadataPrefix": metadata_prefix}
    )


def _check_base(base: str) -> None:
    if "?" in base or not base.startswith(("http://", "https://")):
        raise ValueError(f"base {base!r} must be an http(s) URL without a query; {URL_HINT}")


def _check_prefix(prefix: str) -> None:
    if prefix not in METADATA_PREFIXES:
        raise ValueError(
            f"metadata_prefix {prefix!r} is not one parse_oai reads; "
            f"use one of {', '.join(METADATA_PREFIXES)}"
        )


def _day(value: date, name: str) -> str:
    if isinstance(value, datetime):
        raise ValueError(f"{name} must be a date: arXiv's OAI-PMH granularity is days (YYYY-MM-DD)")
    return value.isoformat()


def _url(base: str, params: dict[str, str]) -> str:
    # ':' stays readable in set specs and identifiers; everything else reserved is percent-encoded,
    # including the '|' of arXiv's tokens.
    return f"{base}?{urlencode(params, quote_via=quote, safe=':')}"


# -------------------------------------------------------------------------------------------------------
# Reading the document and its records.

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
