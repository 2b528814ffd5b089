"""What ``ingest.arxiv_oai_parse.parse_oai`` returns and raises: the page, record and metadata values, the
OAI-PMH error codes with what to do about each, and the format error.

``paper_of`` turns a record's metadata into the ``PaperIn`` of one version, for the parser (``arXivRaw``
versions) and for ``OaiRecord.paper`` (a caller completing an ``arXiv`` or ``oai_dc`` record).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum

from core.values import AnnounceType, PaperIn

__all__ = [
    "METADATA_PREFIXES",
    "SOURCE",
    "OaiError",
    "OaiErrorCode",
    "OaiFormatError",
    "OaiMetadata",
    "OaiPage",
    "OaiRecord",
    "paper_of",
]

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
