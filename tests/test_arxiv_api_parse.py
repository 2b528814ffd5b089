"""parse_api over the recorded export.arxiv.org/api/query responses in tests/corpus/arxiv-api.

Both layouts are covered: 2016 (arxivpy-2016/) and 2026 (arxivpy-2026-golden-bodies/, the exact HTTP bodies
extracted from the arxiv.py golden JSON wrappers in arxivpy-2026-golden/, whose ``body`` is parsed too).
Expected counts come from regular expressions over the raw bytes, not from the parser.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.values import AnnounceType, PaperIn
from ingest.arxiv_api_parse import (
    MAX_RESULTS_PER_REQUEST,
    ApiFormatError,
    ApiPage,
    ArxivApiError,
    build_query_url,
    parse_api,
)
from tests.conftest import CORPUS

API_DIR = CORPUS / "arxiv-api"
OLD_DIR = API_DIR / "arxivpy-2016"
GOLDEN_DIR = API_DIR / "arxivpy-2026-golden"
BODIES_DIR = API_DIR / "arxivpy-2026-golden-bodies"

XML_FILES = sorted([*OLD_DIR.glob("*.xml"), *BODIES_DIR.glob("*.xml")])
JSON_FILES = sorted(GOLDEN_DIR.glob("*.json"))
ERROR_BODY = BODIES_DIR / "id_abc_s0_m100_b79c8dcf6bc3.xml"
BIGGEST = BODIES_DIR / "q_testing_s0_m100_cfe7536492ca.xml"
DEL_MAESTRO = OLD_DIR / "search_au_del_maestro.xml"

_ENTRY_ID_RE = re.compile(rb"<id>http://arxiv\.org/abs/([^<]+)</id>")


def _opensearch(data: bytes, name: str) -> int:
    match = re.search(rb"<opensearch:" + name.encode() + rb"[^>]*>\s*(\d+)\s*<", data)
    assert match is not None
    return int(match[1])


def _by_id(page: ApiPage) -> dict[str, PaperIn]:
    return {paper.versioned_id: paper for paper in page.entries}


# ----------------------------------------------------------------------------------------------------------
# Every recorded file


def test_corpus_folder_is_there() -> None:
    # Guards the parametrised tests below against passing vacuously on a missing or moved corpus.
    assert len(XML_FILES) == 25 and len(JSON_FILES) == 20
    assert {ERROR_BODY, BIGGEST} <= set(XML_FILES)


@pytest.mark.parametrize("path", XML_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_body_parses_or_raises_the_error_feed_error(path: Path) -> None:
    data = path.read_bytes()
    if path == ERROR_BODY:
        with pytest.raises(ArxivApiError):
            parse_api(data)
        return
    page = parse_api(data)
    assert page.skipped == ()
    assert len(page.entries) == data.count(b"<entry>")
    assert [p.versioned_id for p in page.entries] == [m.decode() for m in _ENTRY_ID_RE.findall(data)]
    assert page.total_results == _opensearch(data, "totalResults")
    assert page.start_index == _opensearch(data, "startIndex")
    assert page.items_per_page == _opensearch(data, "itemsPerPage")
    # Field counts against the raw bytes: every author, category, comment, journal ref and DOI is read.
    assert sum(len(p.authors) for p in page.entries) == data.count(b"<author>")
    assert sum(len(p.categories) for p in page.entries) == data.count(b"<category ")
    assert sum(p.comment is not None for p in page.entries) == data.count(b"<arxiv:comment")
    assert sum(p.journal_ref is not None for p in page.entries) == data.count(b"<arxiv:journal_ref")
    assert sum(p.doi is not None for p in page.entries) == data.count(b"<arxiv:doi")
    for paper in page.entries:
        assert paper.source == "arxiv-api"
        assert paper.announce_type == (AnnounceType.NEW if paper.version == 1 else AnnounceType.REPLACE)
        assert paper.announced_at is not None and paper.announced_at.tzinfo == UTC
        assert paper.title == " ".join(paper.title.split()) and paper.abstract == paper.abstract.strip()
        assert paper.categories and paper.license is None


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.name)
def test_golden_json_body_parses_like_the_extracted_body(path: Path) -> None:
    wrapper = json.loads(path.read_text(encoding="utf-8"))
    # The recorder decoded the HTTP body as latin-1; encoding it back gives the exact bytes arXiv sent.
    body = wrapper["body"].encode("latin-1")
    extracted = BODIES_DIR / f"{path.stem}.xml"
    assert body == extracted.read_bytes()
    if wrapper["status_code"] == 400:
        with pytest.raises(ArxivApiError) as from_json:
            parse_api(body)
        with pytest.raises(ArxivApiError) as from_xml:
            parse_api(extracted.read_bytes())
        assert str(from_json.value) == str(from_xml.value)
    else:
        assert wrapper["status_code"] == 200
        assert parse_api(body) == parse_api(extracted.read_bytes())


def test_both_layouts_and_all_version_kinds_are_covered() -> None:
    pages = [parse_api(path.read_bytes()) for path in XML_FILES if path != ERROR_BODY]
    versions = {paper.version for page in pages for paper in page.entries}
    assert {1, 2, 3, 9} <= versions
    # SOURCES.md counts 24 entries in the 2016 files and 222 in the 2026 bodies, one of them the error entry.
    assert sum(len(page.entries) for page in pages) == 24 + 222 - 1


# ----------------------------------------------------------------------------------------------------------
# Spot checks


def test_2016_versioned_id_list() -> None:
    page = parse_api((OLD_DIR / "id_list_1111.2011v2.xml").read_bytes())
    (paper,) = page.entries
    assert paper == PaperIn(
        arxiv_id="1111.2011",
        version=2,
        title="Quantum Criticality for Extended Nodes on a Bethe Lattice in the Large Connectivity Limit",
        abstract=paper.abstract,
        authors=("James M. Murray", "Adrian Del Maestro", "Zlatko Tesanovic"),
        categories=("cond-mat.str-el", "cond-mat.stat-mech"),
        announce_type=AnnounceType.REPLACE,
        # v2: the entry's <updated>, not <published> (2011-11-08T18:48:36Z, the v1 date).
        announced_at=datetime(2012, 4, 2, 12, 38, 54, tzinfo=UTC),
        comment="8 pages, 3 figures. Published version",
        journal_ref="Phys. Rev. B 85, 115117 (2012)",
        doi="10.1103/PhysRevB.85.115117",
        license=None,
        source="arxiv-api",
    )
    # The 2016 summary starts with two spaces and is hard-wrapped near 80 columns.
    assert paper.abstract.startswith("Theoretical description of anisotropic systems, such as layered superc")
    assert "\n" not in paper.abstract
    assert page.updated == datetime(2016, 10, 9, 4, 0, tzinfo=UTC)  # 2016-10-09T00:00:00-04:00


def test_2016_summary_tex_accent_is_decoded() -> None:
    paper = _by_id(parse_api(DEL_MAESTRO.read_bytes()))["1412.6529v2"]
    assert paper.title == "Particle partition entanglement of bosonic Luttinger liquids"
    assert paper.abstract.startswith(
        "We consider the Rényi entanglement entropy of bosonic Luttinger liquids"
    )
    assert paper.announced_at == datetime(2015, 2, 25, 23, 4, 37, tzinfo=UTC)


def test_2026_old_style_id() -> None:
    page = parse_api((BODIES_DIR / "id_quant-ph_0201082v1_s0_m100_86989fe779ef.xml").read_bytes())
    (paper,) = page.entries
    assert (paper.arxiv_id, paper.version) == ("quant-ph/0201082", 1)
    assert paper.announce_type == AnnounceType.NEW
    assert paper.announced_at == datetime(2002, 1, 18, 15, 8, 5, tzinfo=UTC)
    assert paper.categories == ("quant-ph", "cs.PL")
    assert paper.authors == ("Stephen Blaha",)
    assert paper.comment == "32 pages"
    assert (page.total_results, page.start_index, page.items_per_page) == (1, 0, 100)


def test_2026_affiliations_are_dropped_and_entities_decoded() -> None:
    (paper,) = parse_api((BODIES_DIR / "id_astro-ph_0601001_s0_m100_3150dca9dc76.xml").read_bytes()).entries
    assert paper.versioned_id == "astro-ph/0601001v1"
    assert paper.authors == ("Andrew Gould", "Susan Dorsher", "B. Scott Gaudi", "Andrzej Udalski")
    assert paper.journal_ref == "ActaAstron.56:1-50,2006"
    assert "Gould & Morgan (2003)" in paper.abstract and "V_max<17.5" in paper.abstract
    assert paper.categories == ("astro-ph",)


def test_2026_non_ascii_author() -> None:
    (paper,) = parse_api((BODIES_DIR / "id_1707.08567_s0_m100_6a1afebfc6a3.xml").read_bytes()).entries
    assert len(paper.authors) == 34
    assert paper.authors[0] == "Kees A. Schouhamer Immink"
    assert "Dirk Wübben" in paper.authors
    assert paper.title == "Proceedings of Workshop AEW10: Concepts in Information Theory and Communications"


def test_mixed_id_list_returns_only_the_ids_that_resolve() -> None:
    page = parse_api((BODIES_DIR / "id_0808.05394_1707.08567_s0_m100_42e5aa0ec3af.xml").read_bytes())
    assert [p.versioned_id for p in page.entries] == ["1707.08567v1"]


@pytest.mark.parametrize(
    "name", ["id_0000.0000_s0_m100_8b51d9633a68.xml", "id_0808.05394_s0_m100_7b0c7d0a7cdd.xml"]
)
def test_unknown_ids_are_an_empty_page(name: str) -> None:
    page = parse_api((BODIES_DIR / name).read_bytes())
    assert page.entries == () and page.skipped == ()
    assert page.total_results == 0 and page.next_start is None


def test_paging_numbers() -> None:
    page = parse_api((BODIES_DIR / "q_testing_s20_m10_348a237fecab.xml").read_bytes())
    assert (page.total_results, page.start_index, page.items_per_page) == (214881, 20, 10)
    assert page.next_start == 30
    # Overlapping slices agree: entries 5..14 of the s5_m10 page are entries 5..14 of the s0_m15 page.
    s0 = parse_api((BODIES_DIR / "q_testing_s0_m15_80c242b59d59.xml").read_bytes())
    s5 = parse_api((BODIES_DIR / "q_testing_s5_m10_c0e94a259d4a.xml").read_bytes())
    assert [p.versioned_id for p in s5.entries] == [p.versioned_id for p in s0.entries[5:15]]


def test_primary_category_is_moved_first() -> None:
    data = (OLD_DIR / "id_list_1111.2011v2.xml").read_bytes()
    (paper,) = parse_api(data).entries
    assert paper.categories == ("cond-mat.str-el", "cond-mat.stat-mech")
    # Real bytes with the two <category> elements in the other order: the primary still comes first.
    reordered = data.replace(
        b'    <category term="cond-mat.str-el" scheme="http://arxiv.org/schemas/atom"/>\n'
        b'    <category term="cond-mat.stat-mech" scheme="http://arxiv.org/schemas/atom"/>\n',
        b'    <category term="cond-mat.stat-mech" scheme="http://arxiv.org/schemas/atom"/>\n'
        b'    <category term="cond-mat.str-el" scheme="http://arxiv.org/schemas/atom"/>\n',
    )
    assert reordered != data
    (again,) = parse_api(reordered).entries
    assert again.categories == ("cond-mat.str-el", "cond-mat.stat-mech")


# ----------------------------------------------------------------------------------------------------------
# Errors


def test_error_feed_raises_with_arxivs_message_and_a_hint() -> None:
    with pytest.raises(ArxivApiError) as caught:
        parse_api(ERROR_BODY.read_bytes())
    error = caught.value
    assert error.message == "incorrect id format for abc"
    assert error.code == "incorrect_id_format_for_abc"
    assert "2104.12255v1" in error.hint
    assert error.message in str(error) and error.hint in str(error)


def test_malformed_entry_is_skipped_and_counted() -> None:
    data = DEL_MAESTRO.read_bytes()
    whole = parse_api(data)
    # Cut the <title> out of the third entry and break the id of the fifth, in real bytes.
    entries = re.findall(rb"<entry>.*?</entry>", data, re.DOTALL)
    third = re.sub(rb"<title>.*?</title>", b"", entries[2], count=1, flags=re.DOTALL)
    fifth = re.sub(rb"<id>http://arxiv\.org/abs/([^<]+)</id>", rb"<id>\1</id>", entries[4], count=1)
    broken = data.replace(entries[2], third).replace(entries[4], fifth)
    page = parse_api(broken)
    assert len(page.entries) == len(whole.entries) - 2
    assert len(page.skipped) == 2
    assert "entry 3" in page.skipped[0] and "no <title>" in page.skipped[0]
    assert "entry 5" in page.skipped[1] and "not http://arxiv.org/abs/" in page.skipped[1]
    assert page.next_start == whole.next_start == 10  # skipped entries still count as received


def test_missing_total_results_is_a_format_error() -> None:
    data = re.sub(
        rb"<opensearch:totalResults[^>]*>\d+</opensearch:totalResults>", b"", DEL_MAESTRO.read_bytes()
    )
    with pytest.raises(ApiFormatError, match="totalResults"):
        parse_api(data)


def test_entity_bomb_is_refused_fast() -> None:
    laughs = b"".join(
        b'<!ENTITY l%d "%s">' % (i, b"".join(b"&l%d;" % (i - 1) for _ in range(10))) for i in range(1, 10)
    )
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE feed [<!ENTITY l0 "lol">' + laughs + b"]>"
        b'<feed xmlns="http://www.w3.org/2005/Atom"><title>&l9;</title></feed>'
    )
    tracemalloc.start()
    with pytest.raises(ApiFormatError, match="DOCTYPE"):
        parse_api(bomb)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # expanded, the laughs would take gigabytes


def test_html_instead_of_xml() -> None:
    html = (
        b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>Bad Gateway</body></html>"
    )
    with pytest.raises(ApiFormatError, match="HTML page instead of XML"):
        parse_api(html)


@pytest.mark.parametrize("fraction", [0.3, 0.9, 0.9999])
def test_truncated_xml(fraction: float) -> None:
    data = BIGGEST.read_bytes()
    with pytest.raises(ApiFormatError, match="cut short"):
        parse_api(data[: int(len(data) * fraction)])


def test_oai_document_is_not_an_atom_feed() -> None:
    oai = (CORPUS / "arxiv-oai" / "hepcrawl_arxiv-single.xml").read_bytes()
    with pytest.raises(ApiFormatError, match="expected an Atom feed"):
        parse_api(oai)


# ----------------------------------------------------------------------------------------------------------
# Request URLs

BASE = "https://export.arxiv.org/api/query"


def test_query_url() -> None:
    assert build_query_url(BASE, search_query="au:del_maestro AND ti:checkerboard", max_results=10) == (
        f"{BASE}?search_query=au:del_maestro+AND+ti:checkerboard&start=0&max_results=10"
    )
    assert build_query_url(
        BASE,
        id_list=["quant-ph/0201082v1", "2104.12255"],
        start=20,
        max_results=MAX_RESULTS_PER_REQUEST,
        sort_by="submittedDate",
        sort_order="descending",
    ) == (
        f"{BASE}?id_list=quant-ph/0201082v1,2104.12255&sortBy=submittedDate&sortOrder=descending"
        "&start=20&max_results=2000"
    )
    assert "search_query=ti:%22policy+lag%22" in build_query_url(BASE, search_query='ti:"policy lag"')


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"search_query": "testing", "max_results": 2001}, "exceeds arXiv's limit of 2000"),
        ({"search_query": "testing", "max_results": -1}, "max_results must be"),
        ({"search_query": "testing", "start": -5}, "start must be"),
        ({}, "give search_query or id_list"),
        ({"search_query": "  "}, "give search_query or id_list"),
        ({"id_list": ["abc"]}, "not arXiv ids"),
        ({"id_list": ["2104.12255,2104.12256"]}, "not arXiv ids"),
        ({"search_query": "x", "sort_by": "date"}, "sort_by"),
        ({"search_query": "x", "sort_order": "up"}, "sort_order"),
    ],
)
def test_bad_queries(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_query_url(BASE, **kwargs)  # type: ignore[arg-type]
