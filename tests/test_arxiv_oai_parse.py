"""parse_oai over the recorded OAI-PMH responses in tests/corpus/arxiv-oai and over broken copies of them.

Expected counts come from regular expressions over the raw bytes, not from the parser, so the tests check
the parser against the data. Broken inputs are real responses with one piece cut out or changed; only the
entity bombs and the HTML page are written here, because no recording of one exists.
"""

from __future__ import annotations

import re
import tracemalloc
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from core.values import AnnounceType, PaperIn
from ingest.arxiv_oai_parse import (
    OaiError,
    OaiErrorCode,
    OaiFormatError,
    OaiPage,
    OaiRecord,
    build_get_record_url,
    build_list_records_url,
    parse_oai,
)
from tests.conftest import CORPUS

OAI_DIR = CORPUS / "arxiv-oai"
RAW_LIST = OAI_DIR / "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml"
RAW_GET = OAI_DIR / "litpuvn_GetRecord_arXivRaw_0804.2273.xml"
DC_LIST = OAI_DIR / "scrapi_ListRecords_oai_dc_2014-12-24_2014-12-25.xml"
ARXIV_SINGLE = OAI_DIR / "hepcrawl_arxiv-single.xml"
ARXIV_REINDENTED = OAI_DIR / "inspire-next_GetRecord_1305.0014.xml"
VERSIONED_ID_ERROR = OAI_DIR / "inspire-next_GetRecord_1305.0014v1.xml"
UNKNOWN_ID_ERROR = OAI_DIR / "inspire-next_GetRecord_1305.9999.xml"
MALFORMED_ID_ERROR = OAI_DIR / "inspire-next_GetRecord_is-malformed.xml"

# The files that answer with an OAI-PMH error, and its code; every other file is a page of records.
ERROR_FILES = {
    VERSIONED_ID_ERROR.name: OaiErrorCode.ID_DOES_NOT_EXIST,
    UNKNOWN_ID_ERROR.name: OaiErrorCode.ID_DOES_NOT_EXIST,
    MALFORMED_ID_ERROR.name: OaiErrorCode.ID_DOES_NOT_EXIST,
}
ALL_FILES = sorted(OAI_DIR.glob("*.xml"))

_RECORD_RE = re.compile(rb"<record>.*?</record>", re.DOTALL)
_IDENTIFIER_RE = re.compile(rb"<identifier>oai:arXiv\.org:([^<]+)</identifier>")
_VERSION_RE = re.compile(rb'<version version="v(\d+)">\s*<date>([^<]+)</date>')


@pytest.fixture(scope="module")
def raw_bytes() -> bytes:
    return RAW_LIST.read_bytes()


@pytest.fixture(scope="module")
def raw_page(raw_bytes: bytes) -> OaiPage:
    return parse_oai(raw_bytes)


@pytest.fixture(scope="module")
def raw_by_id(raw_page: OaiPage) -> dict[str, OaiRecord]:
    return {record.arxiv_id: record for record in raw_page.records}


@pytest.fixture(scope="module")
def dc_bytes() -> bytes:
    return DC_LIST.read_bytes()


@pytest.fixture(scope="module")
def dc_page(dc_bytes: bytes) -> OaiPage:
    return parse_oai(dc_bytes)


def _records(data: bytes) -> list[bytes]:
    return _RECORD_RE.findall(data)


def _record_of(data: bytes, arxiv_id: str) -> bytes:
    """The raw bytes of the one <record> whose identifier is ``arxiv_id``."""
    (block,) = [r for r in _records(data) if f"oai:arXiv.org:{arxiv_id}<".encode() in r]
    return block


def _cut(data: bytes, arxiv_id: str, pattern: bytes) -> bytes:
    """``data`` with the first match of ``pattern`` removed from the record of ``arxiv_id`` only."""
    block = _record_of(data, arxiv_id)
    broken, n = re.subn(pattern, b"", block, count=1, flags=re.DOTALL)
    assert n == 1, f"{pattern!r} not found in the record of {arxiv_id}"
    assert data.count(block) == 1
    return data.replace(block, broken)


# ----------------------------------------------------------------------------------------------------------
# Every recorded file


def test_corpus_folder_is_there() -> None:
    # Guards the parametrised tests below against passing vacuously on a missing or moved corpus.
    assert len(ALL_FILES) == 11
    assert {RAW_LIST, RAW_GET, DC_LIST, ARXIV_SINGLE, *(OAI_DIR / n for n in ERROR_FILES)} <= set(ALL_FILES)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_every_file_parses_or_raises_its_documented_error(path: Path) -> None:
    data = path.read_bytes()
    if path.name in ERROR_FILES:
        with pytest.raises(OaiError) as caught:
            parse_oai(data)
        assert caught.value.code == ERROR_FILES[path.name]
        assert len(_records(data)) == 0
        return
    page = parse_oai(data)
    records = _records(data)
    deleted = len(re.findall(rb'<header status="deleted"', data))
    assert page.skipped == ()
    assert len(page.records) + len(page.deleted) == len(records) > 0
    assert len(page.deleted) == deleted
    # Record ids, in page order, as a regex reads them from the headers.
    assert [r.arxiv_id for r in page.records] == [m.decode() for m in _IDENTIFIER_RE.findall(data)]
    # arXivRaw: one PaperIn per <version>; the other formats carry no version numbers.
    assert len(page.papers) == len(re.findall(rb"<version ", data))
    if b"arXivRaw" in data:
        assert page.unversioned == ()
    else:
        assert len(page.unversioned) == len(page.records)
    assert page.response_date is not None and page.response_date.tzinfo is not None
    assert page.no_records_match is False


def test_the_corpus_holds_all_three_formats() -> None:
    prefixes = {
        record.metadata_prefix
        for path in ALL_FILES
        if path.name not in ERROR_FILES
        for record in parse_oai(path.read_bytes()).records
    }
    assert prefixes == {"arXivRaw", "arXiv", "oai_dc"}


# ----------------------------------------------------------------------------------------------------------
# arXivRaw: the version history


def test_raw_page_counts_and_resumption_token(raw_page: OaiPage, raw_bytes: bytes) -> None:
    assert len(raw_page.records) == 387
    assert len(raw_page.papers) == 970
    assert raw_page.resumption_token == "1403493|1001"
    assert raw_page.cursor == 0
    assert raw_page.complete_list_size == 1440
    assert raw_page.verb == "ListRecords"
    assert raw_page.metadata_prefix == "arXivRaw"
    assert raw_page.response_date == datetime(2016, 10, 21, 4, 36, 53, tzinfo=UTC)
    token = re.search(rb'<resumptionToken cursor="(\d+)" completeListSize="(\d+)">([^<]+)<', raw_bytes)
    assert token is not None
    assert (raw_page.cursor, raw_page.complete_list_size) == (int(token[1]), int(token[2]))
    assert raw_page.resumption_token == token[3].decode()
    assert raw_page.max_datestamp == date(2016, 10, 21)


def test_every_version_has_its_own_date_as_aware_utc(raw_page: OaiPage, raw_bytes: bytes) -> None:
    # Read the (number, date) pairs record by record with a regex and compare all 970 versions.
    for record, block in zip(raw_page.records, _records(raw_bytes), strict=True):
        expected = [
            (int(n), parsedate_to_datetime(d.decode()).astimezone(UTC)) for n, d in _VERSION_RE.findall(block)
        ]
        got = [(p.version, p.announced_at) for p in record.versions]
        assert got == sorted(expected)
        for paper in record.versions:
            assert paper.announced_at is not None and paper.announced_at.utcoffset() is not None
            assert paper.announced_at.tzinfo == UTC
            assert paper.announce_type == (AnnounceType.NEW if paper.version == 1 else AnnounceType.REPLACE)
            assert paper.source == "arxiv-oai"
            assert paper.arxiv_id == record.arxiv_id


def test_raw_record_with_six_versions(raw_by_id: dict[str, OaiRecord]) -> None:
    record = raw_by_id["0803.4354"]
    assert [p.versioned_id for p in record.versions] == [f"0803.4354v{n}" for n in range(1, 7)]
    assert record.versions[0].announced_at == datetime(2008, 3, 30, 23, 26, 50, tzinfo=UTC)
    assert record.versions[-1].announced_at == datetime(2016, 10, 20, 16, 58, 38, tzinfo=UTC)
    assert record.latest is record.versions[-1]
    assert record.datestamp == date(2016, 10, 21)
    assert record.set_specs == ("cs",)
    v1 = record.versions[0]
    # The re-indented title is collapsed back to one line.
    assert v1.title == "A O(n^8) X O(n^7) Linear Programming Model of the Traveling Salesman Problem"
    assert v1.authors == ("Moustapha Diaby",)
    assert v1.categories == ("cs.DM",)
    assert v1.license == "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"
    assert v1.comment is not None and v1.comment.startswith("Theorem 25 and Corollary 26 are incorrect.")
    # OAI only serves the latest metadata, so every version carries it.
    assert {(p.title, p.abstract, p.authors, p.comment) for p in record.versions} == {
        (v1.title, v1.abstract, v1.authors, v1.comment)
    }
    assert record.metadata is not None
    assert (record.metadata.created, record.metadata.updated) == (date(2008, 3, 30), date(2016, 10, 20))


def test_raw_record_with_journal_ref_doi_and_tex_authors(raw_by_id: dict[str, OaiRecord]) -> None:
    latest = raw_by_id["1210.2946"].latest
    assert latest is not None
    assert latest.versioned_id == "1210.2946v2"
    assert latest.announced_at == datetime(2016, 10, 18, 20, 39, 30, tzinfo=UTC)
    assert latest.title == "Ultra low density of CdTe quantum dots grown by MBE"
    assert latest.authors == (
        "J. Kobak",
        "J.-G. Rousset",
        "R. Rudniewski",
        "E. Janik",
        "Słupiński",  # S{\l}upi\'nski
        "P. Kossacki",
        "A. Golnik",
        "W. Pacuski",
    )
    assert latest.journal_ref == "J. Cryst. Growth 378, 274 (2013)"
    assert latest.doi == "10.1016/j.jcrysgro.2012.12.133"
    assert latest.comment == "4 pages, 7 figure"
    # Math is left alone by the TeX decoder.
    assert "from 10$^{10}$QD/cm$^2$ to 10$^7$-10$^8$QD/cm$^2$" in latest.abstract


@pytest.mark.parametrize(
    ("arxiv_id", "authors"),
    [
        ("1204.3980", ("Béla Bollobás", "Paul Smith", "Andrew Uzzell")),  # "A, B, and C"
        ("1502.07842", ("Charlotta Bengtson", "Michael Stenrup", "Erik Sjöqvist")),  # Sj\&quot;oqvist
        ("1401.8093", ("Jean Ruppenthal", "Håkan Samuelsson Kalm", "Elizabeth Wulcan")),  # H{\aa}kan
        ("1210.8059", ("Nir Lev", "Joaquim Ortega-Cerdà")),  # "A and B"
        # "and" inside a middle name group and affiliations in parentheses:
        (
            "1511.01883",
            (
                "A.L. Edelen",
                "S.G. Biedron",
                "S.V. Milton",
                "B.E. Chase",
                "D.J. Crawford",
                "N. Eddy",
                "D. Edstrom Jr.",
                "E.R. Harms",
                "J. Ruan",
                "J.K. Santucci",
                "P. Stabile",
            ),
        ),
    ],
)
def test_raw_free_text_authors_are_split_and_decoded(
    raw_by_id: dict[str, OaiRecord], arxiv_id: str, authors: tuple[str, ...]
) -> None:
    latest = raw_by_id[arxiv_id].latest
    assert latest is not None
    assert latest.authors == authors


def test_no_raw_author_keeps_tex_brackets_or_a_joining_and(raw_page: OaiPage) -> None:
    for paper in raw_page.papers:
        for name in paper.authors:
            assert not re.search(r"[\\{}()]|^and\b|\band$|\sand\s|,", name), (paper.versioned_id, name)


def test_raw_metadata_fields_against_the_bytes(raw_page: OaiPage, raw_bytes: bytes) -> None:
    blocks = _records(raw_bytes)
    with_doi = sum(b"<doi>" in block for block in blocks)
    with_jref = sum(b"<journal-ref>" in block for block in blocks)
    with_comments = sum(b"<comments>" in block for block in blocks)
    latest = [r.latest for r in raw_page.records]
    assert sum(p is not None and p.doi is not None for p in latest) == with_doi == 163
    assert sum(p is not None and p.journal_ref is not None for p in latest) == with_jref == 157
    assert sum(p is not None and p.comment is not None for p in latest) == with_comments == 291
    for record, block in zip(raw_page.records, blocks, strict=True):
        categories = re.search(rb"<categories>([^<]*)</categories>", block)
        assert categories is not None
        assert record.versions[0].categories == tuple(categories[1].decode().split())


def test_raw_get_record(raw_bytes: bytes) -> None:
    page = parse_oai(RAW_GET.read_bytes())
    assert page.verb == "GetRecord"
    assert page.resumption_token is None and page.cursor is None and page.complete_list_size is None
    (paper,) = page.papers
    assert paper.versioned_id == "0804.2273v1"
    assert paper.title == "Object Re-Use & Exchange: A Resource-Centric Approach"
    assert paper.authors == (
        "Carl Lagoze",
        "Herbert Van de Sompel",
        "Michael L. Nelson",
        "Simeon Warner",
        "Robert Sanderson",
        "Pete Johnston",
    )
    assert paper.categories == ("cs.DL", "cs.NI")
    assert paper.announced_at == datetime(2008, 4, 14, 21, 2, tzinfo=UTC)
    assert paper.license == "http://creativecommons.org/licenses/by/3.0/"
    assert paper.abstract.startswith("The OAI Object Reuse and Exchange (OAI-ORE) framework recasts the ")


# ----------------------------------------------------------------------------------------------------------
# arXiv and oai_dc: metadata without version numbers


def test_arxiv_format_record_has_metadata_but_no_versions() -> None:
    page = parse_oai(ARXIV_SINGLE.read_bytes())
    (record,) = page.records
    assert record.arxiv_id == "1401.2122"
    assert record.metadata_prefix == "arXiv"
    assert record.versions == () and record.latest is None
    assert page.papers == () and page.unversioned == (record,)
    assert record.set_specs == ("math", "physics:hep-th", "physics:math-ph", "physics:nlin")
    assert record.datestamp == date(2018, 1, 25)
    meta = record.metadata
    assert meta is not None
    assert meta.title == "New integrable (3+1)-dimensional systems and contact geometry"
    assert meta.authors == ("A. Sergyeyev",)
    assert meta.categories == ("math.AP", "hep-th", "math-ph", "math.DG", "math.MP", "nlin.SI")
    assert meta.journal_ref == "Lett. Math. Phys. 108 (2018), no. 2, 359-376"
    assert meta.doi == "10.1007/s11005-017-1013-4"
    assert (meta.created, meta.updated) == (date(2014, 1, 9), date(2017, 10, 23))
    assert meta.comment is not None and "in this version (v5) the typos were fixed" in meta.comment

    # A caller that learned the version number elsewhere completes the record.
    when = datetime(2017, 10, 23, 12, 0, tzinfo=UTC)
    paper = record.paper(5, announced_at=when)
    assert paper == PaperIn(
        arxiv_id="1401.2122",
        version=5,
        title=meta.title,
        abstract=meta.abstract,
        authors=meta.authors,
        categories=meta.categories,
        announce_type=AnnounceType.REPLACE,
        announced_at=when,
        comment=meta.comment,
        journal_ref=meta.journal_ref,
        doi=meta.doi,
        license="http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
        source="arxiv-oai",
    )
    assert record.paper(1).announce_type == AnnounceType.NEW
    with pytest.raises(ValueError, match="start at 1"):
        record.paper(0)


def test_arxiv_format_reindented_record_is_collapsed() -> None:
    (record,) = parse_oai(ARXIV_REINDENTED.read_bytes()).records
    meta = record.metadata
    assert meta is not None
    assert meta.title == (
        "Framework for maximum likelihood analysis of neutron beta decay observables to resolve the limits "
        "of the V-A law"
    )
    assert meta.license == "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"
    assert meta.authors == ("S. Gardner", "B. Plaster")
    assert meta.categories == ("hep-ph", "hep-lat", "nucl-ex", "nucl-th")
    assert meta.journal_ref == "Phys. Rev. C 87, 065504 (2013)"
    assert meta.doi == "10.1103/PhysRevC.87.065504"
    assert meta.updated == date(2013, 6, 28)


def test_arxiv_format_authors_match_the_author_elements() -> None:
    for name in ("hepcrawl_arxiv-physics-hep-ex.xml", "hepcrawl_arxiv-physics-hep-th.xml"):
        data = (OAI_DIR / name).read_bytes()
        page = parse_oai(data)
        for record, block in zip(page.records, _records(data), strict=True):
            assert record.metadata is not None
            assert len(record.metadata.authors) == block.count(b"<author>")


def test_oai_dc_records(dc_page: OaiPage, dc_bytes: bytes) -> None:
    assert len(dc_page.records) == 897
    assert dc_page.resumption_token is None
    blocks = _records(dc_bytes)
    metas = [r.metadata for r in dc_page.records]
    assert all(m is not None for m in metas)
    # SOURCES.md: a second dc:date on 351 records, a "Comment:" description on 712; regex agrees.
    two_dates = sum(block.count(b"<dc:date>") == 2 for block in blocks)
    comments = sum(b"<dc:description>Comment:" in block for block in blocks)
    dois = sum(b"<dc:identifier>doi:" in block for block in blocks)
    assert sum(m is not None and m.updated is not None for m in metas) == two_dates == 351
    assert sum(m is not None and m.comment is not None for m in metas) == comments == 712
    assert sum(m is not None and m.doi is not None for m in metas) == dois
    assert sum(len(m.authors) for m in metas if m is not None) == dc_bytes.count(b"<dc:creator>")
    assert all(m is not None and m.categories == () and m.subjects for m in metas)


def test_oai_dc_spot_checks(dc_page: OaiPage) -> None:
    by_id = {r.arxiv_id: r for r in dc_page.records}
    first = by_id["0709.2184"].metadata
    assert first is not None
    assert first.title == "Irrationality measure and lower bounds for pi(x)"
    assert first.authors == (
        "David Burt",
        "Sam Donow",
        "Steven J. Miller",
        "Matthew Schiffman",
        "Ben Wieland",
    )
    assert first.subjects == ("Mathematics - Number Theory", "11N05 (Primary), 11N56, 11J82 (Secondary)")
    assert (first.created, first.updated) == (date(2007, 9, 13), date(2014, 12, 22))
    assert first.comment is not None and first.comment.startswith("Version 4.0, 7 ps.")
    assert first.abstract.startswith("In this note we show how the irrationality measure of $\\zeta(s)")
    second = by_id["0804.0053"].metadata
    assert second is not None
    assert second.title == 'Comment on "General nonlocality in quantum fields"'
    assert second.journal_ref == "J.Math.Phys.51:054102,2010"
    assert second.doi == "10.1063/1.3374668"
    old_style = by_id["math/0208210"].metadata
    assert old_style is not None and old_style.doi == "10.4236/jamp.2014.213134"
    names = {name for r in dc_page.records if r.metadata for name in r.metadata.authors}
    assert {"D. Jukić", "Marin Soljačić", "Hervé Le Meur", "D0 Collaboration"} <= names


# ----------------------------------------------------------------------------------------------------------
# OAI-PMH errors


def test_versioned_identifier_is_id_does_not_exist() -> None:
    with pytest.raises(OaiError) as caught:
        parse_oai(VERSIONED_ID_ERROR.read_bytes())
    error = caught.value
    assert error.code == OaiErrorCode.ID_DOES_NOT_EXIST
    assert error.code == "idDoesNotExist"
    assert error.message.startswith("This OAI interface supports only the notion of an arXiv article")
    assert "You must not include the 'v1'" in error.message
    assert "without a version suffix" in error.hint
    assert error.errors == ((error.code, error.message),)
    assert error.message in str(error) and error.hint in str(error)


@pytest.mark.parametrize(
    ("path", "fragment"),
    [(UNKNOWN_ID_ERROR, "has correct form but does not correspond"), (MALFORMED_ID_ERROR, "Malformed")],
)
def test_other_id_does_not_exist_responses(path: Path, fragment: str) -> None:
    with pytest.raises(OaiError, match="idDoesNotExist") as caught:
        parse_oai(path.read_bytes())
    assert fragment in caught.value.message


def _with_code(code: str, message: bytes = b"") -> bytes:
    """A real error response (1305.9999) with its code (and optionally message) replaced."""
    data = UNKNOWN_ID_ERROR.read_bytes().replace(b'code="idDoesNotExist"', f'code="{code}"'.encode())
    if message:
        data = re.sub(
            rb"(<error [^>]*>).*?(</error>)", rb"\g<1>" + message + rb"\g<2>", data, flags=re.DOTALL
        )
    return data


def test_no_records_match_is_an_empty_page_not_an_error() -> None:
    page = parse_oai(_with_code("noRecordsMatch"))
    assert page.no_records_match is True
    assert page.records == () and page.papers == () and page.skipped == () and page.deleted == ()
    assert page.resumption_token is None
    assert page.response_date == datetime(2017, 8, 24, 11, 43, 16, tzinfo=UTC)
    assert page.max_datestamp is None


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        (OaiErrorCode.BAD_RESUMPTION_TOKEN, "restart the harvest"),
        (OaiErrorCode.BAD_ARGUMENT, "YYYY-MM-DD"),
        (OaiErrorCode.CANNOT_DISSEMINATE_FORMAT, "arXivRaw"),
        (OaiErrorCode.ID_DOES_NOT_EXIST, "version suffix"),
    ],
)
def test_error_codes_are_told_apart(code: OaiErrorCode, hint: str) -> None:
    with pytest.raises(OaiError) as caught:
        parse_oai(_with_code(code.value, b"the message from arXiv"))
    assert caught.value.code == code
    assert caught.value.message == "the message from arXiv"
    assert hint in caught.value.hint


def test_unknown_error_code_is_kept() -> None:
    with pytest.raises(OaiError) as caught:
        parse_oai(_with_code("somethingNew"))
    assert caught.value.code == "somethingNew" and caught.value.hint == ""
    assert "section 3.6" in str(caught.value)


# ----------------------------------------------------------------------------------------------------------
# Malformed and deleted records inside a real page


@pytest.mark.parametrize(
    ("arxiv_id", "pattern", "reason"),
    [
        ("0808.3386", rb"<title>.*?</title>", "no <title>"),
        ("1007.2706", rb"<id>1007\.2706</id>", "no <id>"),
        ("1008.4940", rb"<date>[^<]*</date>", "no usable <date>"),
        ("1102.2226", rb"<version version=.*</version>", "no <version>"),
        ("1104.4530", rb"<datestamp>[^<]*</datestamp>", "datestamp"),
        ("1104.5331", rb"<metadata>.*</metadata>", "no <metadata>"),
    ],
)
def test_malformed_record_is_skipped_counted_and_the_rest_kept(
    raw_bytes: bytes, raw_page: OaiPage, arxiv_id: str, pattern: bytes, reason: str
) -> None:
    broken = _cut(raw_bytes, arxiv_id, pattern)
    page = parse_oai(broken)
    assert len(page.skipped) == 1
    (note,) = page.skipped
    assert arxiv_id in note and reason in note and "skipped" in note
    assert len(page.records) == len(raw_page.records) - 1
    assert arxiv_id not in {r.arxiv_id for r in page.records}
    lost = len(_VERSION_RE.findall(_record_of(raw_bytes, arxiv_id)))
    assert len(page.papers) == len(raw_page.papers) - lost
    assert page.resumption_token == raw_page.resumption_token


def test_metadata_id_disagreeing_with_header_is_skipped(raw_bytes: bytes) -> None:
    block = _record_of(raw_bytes, "1109.1792")
    page = parse_oai(raw_bytes.replace(block, block.replace(b"<id>1109.1792</id>", b"<id>1109.1793</id>")))
    (note,) = page.skipped
    assert "1109.1792" in note and "disagrees" in note


def test_bad_version_attribute_is_skipped(raw_bytes: bytes) -> None:
    block = _record_of(raw_bytes, "1203.0193")
    page = parse_oai(raw_bytes.replace(block, block.replace(b'version="v2"', b'version="2"')))
    (note,) = page.skipped
    assert "1203.0193" in note and "'2'" in note


def test_deleted_record_is_reported_not_stored(raw_bytes: bytes, raw_page: OaiPage) -> None:
    block = _record_of(raw_bytes, "0910.4952")
    gone = re.sub(rb"<metadata>.*</metadata>", b"", block, flags=re.DOTALL)
    gone = gone.replace(b"<header>", b'<header status="deleted">')
    page = parse_oai(raw_bytes.replace(block, gone))
    assert page.skipped == ()
    (deleted,) = page.deleted
    assert deleted.arxiv_id == "0910.4952" and deleted.deleted
    assert deleted.metadata is None and deleted.versions == ()
    assert deleted.datestamp == date(2016, 10, 21)
    assert "0910.4952" not in {r.arxiv_id for r in page.records}
    assert len(page.papers) == len(raw_page.papers) - 2
    with pytest.raises(ValueError, match="deleted"):
        deleted.paper(1)


def test_empty_resumption_token_marks_the_last_page(raw_bytes: bytes) -> None:
    last = raw_bytes.replace(b">1403493|1001</resumptionToken>", b"></resumptionToken>")
    page = parse_oai(last)
    assert page.resumption_token is None
    assert (page.cursor, page.complete_list_size) == (0, 1440)


def test_garbled_cursor_is_a_format_error(raw_bytes: bytes) -> None:
    with pytest.raises(OaiFormatError, match="cursor"):
        parse_oai(raw_bytes.replace(b'cursor="0"', b'cursor="zero"'))


# ----------------------------------------------------------------------------------------------------------
# Documents that are not usable OAI-PMH


_LAUGHS = b"".join(
    b'  <!ENTITY lol%d "%s">\n' % (i, b"".join(b"&lol%d;" % (i - 1) for _ in range(10))) for i in range(1, 10)
)
BILLION_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE OAI-PMH [\n  <!ENTITY lol0 "lol">\n'
    + _LAUGHS
    + b']>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>&lol9;</responseDate></OAI-PMH>\n'
)


def test_entity_bomb_is_refused_fast_and_never_expanded() -> None:
    assert BILLION_LAUGHS.count(b"<!ENTITY") == 10  # 10**9 "lol"s if expanded
    tracemalloc.start()
    with pytest.raises(OaiFormatError, match="DOCTYPE") as caught:
        parse_oai(BILLION_LAUGHS)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # expanded, the laughs would take gigabytes
    assert "entity" in str(caught.value)


def test_entity_bomb_in_utf16_is_refused_too() -> None:
    # UTF-16 hides the declarations from the byte check; the locked-down parser must still not expand them.
    data = BILLION_LAUGHS.replace(b'<?xml version="1.0"?>', b'<?xml version="1.0" encoding="UTF-16"?>')
    tracemalloc.start()
    with pytest.raises(OaiFormatError):
        parse_oai(data.decode("ascii").encode("utf-16"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # expanded, the laughs would take gigabytes


def test_harmless_doctype_in_utf16_is_refused_after_parsing() -> None:
    # Past the byte check (UTF-16) and small enough for libxml2: the parsed document's DOCTYPE is caught.
    data = (
        '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE x [<!ENTITY a "b">]>'
        '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>&a;</responseDate></OAI-PMH>'
    ).encode("utf-16")
    with pytest.raises(OaiFormatError, match="with a DOCTYPE"):
        parse_oai(data)


def test_external_entity_is_refused() -> None:
    data = (
        b'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
        b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>&x;</responseDate></OAI-PMH>'
    )
    with pytest.raises(OaiFormatError, match="DOCTYPE"):
        parse_oai(data)


@pytest.mark.parametrize(
    "html",
    [
        b"<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head>\n"
        b"<body><h1>Service Unavailable</h1><p>Retry after 30 seconds</p></body></html>\n",
        b"<html><body><p>Rate limited</p></body></html>",
        b'<?xml version="1.0"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Error</p></body></html>',
        b'<?xml version="1.0"?>\n<html><body><p>Error<br></p></body></html>',  # not even well-formed
    ],
)
def test_html_instead_of_xml(html: bytes) -> None:
    with pytest.raises(OaiFormatError, match="HTML page instead of XML") as caught:
        parse_oai(html)
    assert "retry later" in str(caught.value)


@pytest.mark.parametrize("fraction", [0.5, 0.999, 0.1])
def test_truncated_xml_is_an_error_not_a_short_page(raw_bytes: bytes, fraction: float) -> None:
    cut = raw_bytes[: int(len(raw_bytes) * fraction)]
    with pytest.raises(OaiFormatError, match="cut short"):
        parse_oai(cut)


def test_truncated_right_after_a_record_is_an_error(raw_bytes: bytes) -> None:
    end = raw_bytes.index(b"</record>") + len(b"</record>\n")
    with pytest.raises(OaiFormatError, match="cut short"):
        parse_oai(raw_bytes[:end])


@pytest.mark.parametrize("data", [b"", b"  \n"])
def test_empty_body(data: bytes) -> None:
    with pytest.raises(OaiFormatError, match="instead of XML"):
        parse_oai(data)


def test_ill_formed_xml_is_not_called_truncated(raw_bytes: bytes) -> None:
    broken = raw_bytes.replace(b"</title>", b"</titel>", 1)
    with pytest.raises(OaiFormatError, match="not well-formed") as caught:
        parse_oai(broken)
    assert "cut short" not in str(caught.value)


def test_atom_feed_is_not_oai() -> None:
    atom = (CORPUS / "arxiv-api" / "arxivpy-2016" / "id_list_1111.2011v2.xml").read_bytes()
    with pytest.raises(OaiFormatError, match=r"expected an OAI-PMH 2\.0 document"):
        parse_oai(atom)


def test_other_verbs_are_refused(raw_bytes: bytes) -> None:
    identify = raw_bytes.replace(b"<ListRecords>", b"<ListIdentifiers>").replace(
        b"</ListRecords>", b"</ListIdentifiers>"
    )
    with pytest.raises(OaiFormatError, match="ListRecords and GetRecord"):
        parse_oai(identify)


# ----------------------------------------------------------------------------------------------------------
# Request URLs

BASE = "https://oaipmh.arxiv.org/oai"


def test_first_list_records_url() -> None:
    url = build_list_records_url(
        BASE, metadata_prefix="arXivRaw", set_spec="physics:hep-th", from_date=date(2024, 11, 1), until=None
    )
    assert url == f"{BASE}?verb=ListRecords&metadataPrefix=arXivRaw&from=2024-11-01&set=physics:hep-th"
    window = build_list_records_url(
        BASE, metadata_prefix="arXiv", from_date=date(2024, 11, 1), until=date(2024, 11, 2)
    )
    assert window == f"{BASE}?verb=ListRecords&metadataPrefix=arXiv&from=2024-11-01&until=2024-11-02"


def test_resumption_request_carries_only_verb_and_token() -> None:
    url = build_list_records_url(BASE, resumption_token="1403493|1001")
    assert url == f"{BASE}?verb=ListRecords&resumptionToken=1403493%7C1001"
    with pytest.raises(ValueError, match=r"only verb and token.*metadata_prefix, set_spec"):
        build_list_records_url(
            BASE, resumption_token="1403493|1001", metadata_prefix="arXivRaw", set_spec="cs"
        )
    with pytest.raises(ValueError, match="empty"):
        build_list_records_url(BASE, resumption_token="")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs metadata_prefix"),
        ({"metadata_prefix": "marc21"}, "not one parse_oai reads"),
        ({"metadata_prefix": "arXiv", "from_date": datetime(2024, 1, 1, tzinfo=UTC)}, "granularity is days"),
        (
            {"metadata_prefix": "arXiv", "from_date": date(2024, 1, 2), "until": date(2024, 1, 1)},
            "before from_date",
        ),
        ({"metadata_prefix": "arXiv", "set_spec": "cs math"}, "not a setSpec"),
    ],
)
def test_bad_list_records_requests(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_list_records_url(BASE, **kwargs)  # type: ignore[arg-type]


def test_base_url_must_not_carry_a_query() -> None:
    with pytest.raises(ValueError, match="without a query"):
        build_list_records_url(f"{BASE}?verb=Identify", metadata_prefix="arXiv")


def test_get_record_url_refuses_versioned_ids() -> None:
    assert build_get_record_url(BASE, arxiv_id="1305.0014") == (
        f"{BASE}?verb=GetRecord&identifier=oai:arXiv.org:1305.0014&metadataPrefix=arXivRaw"
    )
    assert build_get_record_url(BASE, arxiv_id="hep-th/9901001", metadata_prefix="arXiv") == (
        f"{BASE}?verb=GetRecord&identifier=oai:arXiv.org:hep-th%2F9901001&metadataPrefix=arXiv"
    )
    with pytest.raises(ValueError, match=r"version suffix.*'1305\.0014'"):
        build_get_record_url(BASE, arxiv_id="1305.0014v1")
    with pytest.raises(ValueError, match="not an arXiv id"):
        build_get_record_url(BASE, arxiv_id="is-malformed")
