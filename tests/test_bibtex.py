"""BibTeX entries and citation tags (core.papers.citations), read back with pybtex, a BibTeX-compatible
parser.

Every version of the recorded corpus (arXiv RSS, OAI-PMH arXivRaw, the API's old-style ids, the snapshot:
titles with TeX, accents, up to 434 authors) goes through an entry and back, and the fields pybtex reads
equal the stored values once the escapes are undone by :func:`detex`, written here independently of
core.papers.citations. Hostile text cannot leave its field, and TeX that could reach outside a LaTeX document
is
never kept. The web routes are tested in tests/test_bibtex_web.py.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pybtex.database.input.bibtex import Parser

from core.models import Version
from core.papers.citations import (
    MONTHS,
    UNSAFE_PREFIXES,
    UNSAFE_WORDS,
    bibtex_name,
    bibtex_path,
    bibtex_url,
    bibtex_value,
    cite_key,
    entry,
    file_name,
    first_doi,
    highwire_tags,
)
from core.values import PaperIn
from tests.hostile import hostile_items
from tests.support.bibtex_corpus import _MATH, corpus_versions, detex, parse_one, stored

# -- reading an entry back, independently of core.papers.citations
# --------------------------------------------------


# -- the recorded corpus ---------------------------------------------------------------------------------


def as_version(paper: PaperIn) -> Version:
    """``paper`` as the store's row for it (not saved: core.papers.citations needs no database)."""
    return Version(
        paper_id=paper.arxiv_id,
        number=paper.version,
        title=paper.title,
        abstract=paper.abstract,
        authors=list(paper.authors),
        categories=list(paper.categories),
        doi=paper.doi,
        announced_at=paper.announced_at,
        announce_type=paper.announce_type,
        source=paper.source,
    )


def test_the_corpus_has_what_the_round_trip_is_for() -> None:
    versions = corpus_versions()
    assert len(versions) > 2500
    assert sum("$" in v.title for v in versions) > 100  # TeX math
    assert sum(bool(re.search(r"[&%#_~^]", v.title)) for v in versions) > 50  # specials outside math
    assert any(re.search(r"[À-ž]", name) for v in versions for name in v.authors)  # accents
    assert max(len(v.authors) for v in versions) >= 400
    assert {"astro-ph/0601001", "hep-ph/0301050", "cs/0503050"} <= {v.arxiv_id for v in versions}
    assert any(v.doi and " " in v.doi for v in versions)  # arXiv's field sometimes lists two DOIs


def test_every_corpus_version_round_trips_through_pybtex() -> None:
    for version in corpus_versions():
        text = entry(as_version(version))
        key, fields, authors = parse_one(text)
        assert key == f"arXiv:{version.arxiv_id}"
        assert detex(fields["title"]) == stored(version.title), text
        assert [detex(a) for a in authors] == [stored(a) for a in version.authors if a.strip()], text
        assert fields["eprint"] == version.arxiv_id
        assert fields["archivePrefix"] == "arXiv"
        assert fields["primaryClass"] == version.categories[0]
        assert fields["url"] == f"https://arxiv.org/abs/{version.arxiv_id}"
        assert fields["version"] == str(version.version)
        assert fields["note"] == f"arXiv:{version.arxiv_id}v{version.version}"
        assert fields.get("doi") == (version.doi.split()[0] if version.doi else None)
        if version.announced_at is not None:
            moment = version.announced_at.astimezone(UTC)
            assert (fields["year"], fields["month"]) == (str(moment.year), moment.strftime("%B"))


def test_authors_are_people_to_bibtex() -> None:
    """pybtex's BibTeX name parser sees each stored author as one person, surname last."""
    for version in corpus_versions():
        if len(version.authors) < 100:
            continue
        data = Parser().parse_string(entry(as_version(version)))
        people = data.entries[f"arXiv:{version.arxiv_id}"].persons["author"]
        assert len(people) == len(version.authors)
        assert people[1].last_names[-1] == version.authors[1].split()[-1]


def test_an_old_style_id_is_a_stable_key_and_a_path() -> None:
    version = next(v for v in corpus_versions() if v.arxiv_id == "hep-ph/0301050")
    text = entry(as_version(version))
    assert text.startswith("@misc{arXiv:hep-ph/0301050,\n")
    assert "  doi = {10.1016/j.physletb.2003.08.045},\n" in text
    assert "  year = {2003},\n  month = jun,\n" in text
    assert cite_key("hep-ph/0301050") == "arXiv:hep-ph/0301050"
    assert bibtex_path("hep-ph/0301050") == "/papers/hep-ph/0301050.bib"
    assert bibtex_url("https://pt.example/", "2411.17700") == "https://pt.example/papers/2411.17700.bib"
    assert file_name("hep-ph/0301050") == "hep-ph_0301050.bib"
    with pytest.raises(ValueError, match="not an arXiv id"):
        cite_key('2411.17700"}')


def test_the_entry_layout() -> None:
    version = PaperIn(
        "2411.17700",
        3,
        "Policy lag & $\\alpha$-stable {BERT} rollouts at 50% of D_n",
        "An abstract.",
        ("Zeng Li", "Przemysław Olbratowski", "Smith and Wesson Collaboration"),
        ("cs.LG", "cs.DC"),
        announced_at=datetime(2026, 11, 30, 1, 0, tzinfo=UTC),
        doi="10.1000/a_b-1 10.1000/second",
    )
    assert entry(as_version(version)) == (
        "@misc{arXiv:2411.17700,\n"
        "  title = {Policy lag \\& $\\alpha$-stable {BERT} rollouts at 50\\% of D\\_n},\n"
        "  author = {Zeng Li and Przemysław Olbratowski and {Smith and Wesson Collaboration}},\n"
        "  year = {2026},\n"
        "  month = nov,\n"
        "  eprint = {2411.17700},\n"
        "  archivePrefix = {arXiv},\n"
        "  primaryClass = {cs.LG},\n"
        "  doi = {10.1000/a_b-1},\n"
        "  url = {https://arxiv.org/abs/2411.17700},\n"
        "  version = {3},\n"
        "  note = {arXiv:2411.17700v3},\n"
        "}\n"
    )
    # Without a stored date, the month in the id; every month has its BibTeX macro.
    undated = dataclasses.replace(version, announced_at=None)
    assert "  year = {2024},\n  month = nov,\n" in entry(as_version(undated))
    assert len(MONTHS) == 12 and parse_one(entry(as_version(undated)))[1]["month"] == "November"


# -- hostile text ------------------------------------------------------------------------------------------


def test_hostile_titles_stay_inside_their_field() -> None:
    for item in hostile_items():
        version = PaperIn(
            item.arxiv_id, item.version, item.title, item.abstract, item.authors, item.categories
        )
        key, fields, authors = parse_one(entry(as_version(version)))
        assert key == f"arXiv:{item.arxiv_id}"
        assert detex(fields["title"]) == stored(item.title)
        assert [detex(a) for a in authors] == [stored(a) for a in item.authors]
    breakout = PaperIn("2611.00009", 1, "x}, note = {pwned}, title = {", "", ("A } B",), ("cs.CR",))
    key, fields, authors = parse_one(entry(as_version(breakout)))
    assert fields["note"] == "arXiv:2611.00009v1"
    assert detex(fields["title"]) == "x}, note = {pwned}, title = {"
    assert [detex(a) for a in authors] == ["A } B"]


@pytest.mark.parametrize(
    ("title", "shown"),
    [
        (
            "$\\input{/etc/passwd}$",
            "\\$\\textbackslash{}input\\textbraceleft{}/etc/passwd\\textbraceright{}\\$",
        ),
        (
            "\\immediate\\write18{rm -rf ~}",
            "\\textbackslash{}immediate\\textbackslash{}write18{rm -rf \\textasciitilde{}}",
        ),
        ("$^^5cinput x$", "\\$\\textasciicircum{}\\textasciicircum{}5cinput x\\$"),
        ("\\csname input\\endcsname", "\\textbackslash{}csname input\\textbackslash{}endcsname"),
        ("\\def\\x{y}", "\\textbackslash{}def\\x{y}"),
        ("$50%$ off", "\\$50\\%\\$ off"),
        ("\\{literal\\}", "\\textbraceleft{}literal\\textbraceright{}"),
        ("\\[ unclosed", "\\textbackslash{}[ unclosed"),
        ("{\\Lambda}CDM and $\\mathbb{R}^3$", "{\\Lambda}CDM and $\\mathbb{R}^3$"),
    ],
)
def test_tex_that_reaches_outside_the_document_is_written_as_text(title: str, shown: str) -> None:
    assert bibtex_value(title) == shown


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"ab {}$\\^_%#&~\n\x1bé", "input", "def", "5c"]), max_size=30).map("".join))
def test_any_text_gives_a_balanced_field_without_unsafe_tex(text: str) -> None:
    value = bibtex_value(text)
    depth = 0
    for char in value:
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0, value
    assert depth == 0, value
    assert "^^" not in value and "\x1b" not in value and "\n" not in value
    # Read as TeX reads it: control words and symbols, math spans, single characters.
    tokens = re.findall(rf"\\(?:[A-Za-z]+|.)|{_MATH}|.", value, re.DOTALL)
    words = re.findall(r"\\(?:([A-Za-z]+)|.)", value, re.DOTALL)  # inside math too
    assert not [w for w in words if w in UNSAFE_WORDS or w.startswith(UNSAFE_PREFIXES)], value
    # Outside math, no TeX special is left bare.
    assert not {t for t in tokens if len(t) == 1} & set("%#&_$~^\\"), value
    key, fields, _ = parse_one("@misc{k,\n  title = {" + value + "},\n}\n")
    assert key == "k" and fields["title"] == value


def test_a_name_with_and_is_one_person() -> None:
    assert bibtex_name("Smith and Wesson Collaboration") == "{Smith and Wesson Collaboration}"
    assert bibtex_name("AND Others") == "{AND Others}"
    assert bibtex_name("Anderson Sandoval") == "Anderson Sandoval"


def test_first_doi_keeps_only_verbatim_safe_dois() -> None:
    assert first_doi("10.3847/1538-4357/ad8659 10.3847/x") == "10.3847/1538-4357/ad8659"
    assert first_doi("10.1000/xyz<123>") == "10.1000/xyz<123>"  # legal in a DOI; escaped in HTML
    assert first_doi("10.1000/a{b} 10.1000/c%d") is None
    assert first_doi("") is None and first_doi(None) is None


# -- citation tags -----------------------------------------------------------------------------------------


def _versions(arxiv_id: str) -> list[Version]:
    """The corpus's versions of one paper, oldest first, each once."""
    found = {v.version: v for v in corpus_versions() if v.arxiv_id == arxiv_id}
    return [as_version(found[n]) for n in sorted(found)]


def test_highwire_tags_of_a_revised_paper() -> None:
    versions = _versions("0803.4354")
    assert len(versions) == 6
    tags = highwire_tags(versions)
    newest, first = versions[-1], versions[0]
    assert first.announced_at is not None and newest.announced_at is not None
    names = [name for name, _ in tags]
    assert names.count("citation_author") == len(newest.authors)
    got = dict(tags)
    assert got["citation_title"] == stored(newest.title)
    published = first.announced_at.astimezone(UTC).strftime("%Y/%m/%d")
    assert got["citation_date"] == got["citation_publication_date"] == published
    assert got["citation_online_date"] == newest.announced_at.astimezone(UTC).strftime("%Y/%m/%d")
    assert got["citation_date"] != got["citation_online_date"]
    assert got["citation_arxiv_id"] == "0803.4354"
    assert got["citation_pdf_url"] == "https://arxiv.org/pdf/0803.4354"
    assert (
        got["citation_abstract_html_url"] == got["citation_public_url"] == "https://arxiv.org/abs/0803.4354"
    )
    assert got["citation_technical_report_institution"] == "arXiv"
    assert got["citation_technical_report_number"] == "arXiv:0803.4354"
    assert "citation_journal_title" not in got


def test_highwire_tags_without_v1_date_from_the_id() -> None:
    [only] = _versions("hep-ph/0301050")
    assert only.number == 2
    got = dict(highwire_tags([only]))
    assert got["citation_date"] == "2003/01"  # v1 is not stored: its month, from the id
    assert got["citation_online_date"] == "2003/06/30"
    assert got["citation_doi"] == "10.1016/j.physletb.2003.08.045"
    assert got["citation_pdf_url"] == "https://arxiv.org/pdf/hep-ph/0301050"
    assert highwire_tags([]) == []
