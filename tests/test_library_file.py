"""read_library: the reference-library exports of tests/corpus/library (Zotero, JabRef, Mendeley, EndNote,
Google Scholar), every place an arXiv id or a DOI is read from, broken entries, files that are no library,
encodings, the limits, duplicates and TeX in titles."""

from __future__ import annotations

import codecs
import json
import logging
from functools import cache
from pathlib import Path

import pytest

from core.follows.normalise import strip_tex, words
from core.languages import translator
from core.taste.library_file import (
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    EntryProblem,
    LibraryEntry,
    LibraryFileError,
    LibraryRead,
    read_library,
)
from core.taste.library_ids import bare_arxiv_id
from core.values import PaperIn
from ingest.arxiv_api_parse import parse_api
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED, CORPUS

LIBRARY = Path(__file__).resolve().parent / "corpus" / "library"
OLD_STYLE = ("id_astro-ph_0601001_s0_m100_3150dca9dc76.xml", "id_quant-ph_0201082v1_s0_m100_86989fe779ef.xml")


def read(name: str) -> LibraryRead:
    return read_library((LIBRARY / name).read_bytes(), name)


def ids(result: LibraryRead) -> list[tuple[str, str | None, str | None, int | None]]:
    return [(e.key, e.arxiv_id, e.doi, e.line) for e in result.entries]


def problems(result: LibraryRead) -> list[tuple[str | None, int | None, str]]:
    return [(p.key, p.line, p.reason.template) for p in result.problems]


@cache
def recorded() -> dict[str, PaperIn]:
    """The papers of the recordings the library files were made from: the 28 Nov 2024 feed, two old ids."""
    papers = {paper.arxiv_id: paper for paper in parse_feed(BIG_FEED.read_bytes()).items}
    for name in OLD_STYLE:
        body = (CORPUS / "arxiv-api" / "arxivpy-2026-golden-bodies" / name).read_bytes()
        papers.update((paper.arxiv_id, paper) for paper in parse_api(body).entries)
    return papers


def bib(fields: str, *, key: str = "k", kind: str = "misc") -> LibraryEntry:
    """The one entry of a one-entry BibTeX file."""
    result = read_library(f"@{kind}{{{key},\n{fields}\n}}\n".encode())
    assert result.problems == (), result.problems
    (entry,) = result.entries
    return entry


def ris(*lines: str) -> LibraryEntry:
    """The one entry of a one-record RIS file."""
    result = read_library(("\r\n".join(("TY  - JOUR", *lines, "ER  - ")) + "\r\n").encode())
    assert result.problems == (), result.problems
    (entry,) = result.entries
    return entry


def csl(**item: object) -> LibraryEntry:
    """The one entry of a one-item CSL-JSON file."""
    result = read_library(json.dumps([{"type": "article", **item}]).encode())
    assert result.problems == (), result.problems
    (entry,) = result.entries
    return entry


def refusal(data: bytes, filename: str | None = None) -> str:
    with pytest.raises(LibraryFileError) as caught:
        read_library(data, filename)
    return str(caught.value)


# --- the exports ------------------------------------------------------------------------------------------


def test_zotero_bibtex() -> None:
    result = read("zotero.bib")
    assert (result.format, result.encoding, result.problems) == ("bibtex", "utf-8", ())
    assert ids(result) == [
        ("ginzel_theory_2023", "2306.03564", "10.48550/arxiv.2306.03564", 1),
        ("tekin_h3fusion_2024", "2411.17792", "10.48550/arxiv.2411.17792", 15),
        ("nova_collaboration_search_2024", None, "10.1103/physrevlett.133.201802", 31),
        ("blaha_quantum_2002", "quant-ph/0201082", "10.48550/arxiv.quant-ph/0201082", 42),
        ("li_streamlining_2024", None, None, 57),
    ]
    ginzel, tekin = result.entries[:2]
    assert ginzel.title == "Theory of the Simultaneous Transient Dispersive Readout of Multiple Spin Qubits"
    assert ginzel.abstract == recorded()["2306.03564"].abstract
    # Zotero escapes every TeX special ($, ^, \, %) and protects capitals; undone, the title and abstract
    # reduce to what the recorded paper's reduce to.
    assert tekin.title == "H3Fusion: Helpful, Harmless, Honest Fusion of Aligned LLMs"
    assert tekin.abstract == " ".join(strip_tex(recorded()["2411.17792"].abstract).split())
    assert "11.37%" in tekin.abstract
    assert result.entries[4].abstract == ""


def test_jabref_bibtex() -> None:
    result = read("jabref.bib")
    assert (result.format, result.problems) == ("bibtex", ())
    assert ids(result) == [
        ("Iwata2024", "2411.18292", "10.48550/arxiv.2411.18292", 3),  # eprint; JabRef's DOI in capitals
        ("Tang2024", "2411.18612", None, 19),  # journal = {arXiv preprint arXiv:...}, from Google Scholar
        ("Gould2006", "astro-ph/0601001", None, 26),  # an old-style eprint
        ("Cheng2024", "2411.18064", "10.1109/ijcnn60899.2024.10651446", 38),  # url with a version
        ("HuertasTato2024", "2411.18472", None, 47),  # howpublished = {\url{...pdf}}
    ]
    assert result.entries[0].title == "A Faster Deterministic Algorithm for Mader's S-Path Packing"
    assert result.entries[0].abstract.startswith(
        "Given an undirected graph G = (V,E) with a set of terminals"
    )


def test_mendeley_bibtex() -> None:
    result = read("mendeley.bib")
    assert (result.format, result.problems) == ("bibtex", ())
    assert ids(result) == [
        ("Ginzel2023", "2306.03564", "10.1103/physrevb.108.125437", 6),
        ("DeSouza2024", "2411.17833", "10.1016/j.adhoc.2024.103462", 20),  # arxivId alone, no eprint
        ("Linse2023", None, "10.1109/ijcnn54540.2023.10191449", 29),
    ]
    assert result.entries[2].title == "Convolutional Neural Networks Do Work with Pre-Defined Filters"


def test_zotero_ris() -> None:
    result = read("zotero.ris")
    assert (result.format, result.problems) == ("ris", ())
    assert ids(result) == [
        ("#1", "2306.03564", "10.48550/arxiv.2306.03564", 1),
        ("#2", "2411.17792", None, 17),
        ("#3", None, "10.1103/physrevlett.133.201802", 37),
        ("#4", "quant-ph/0201082", "10.48550/arxiv.quant-ph/0201082", 55),
    ]
    assert result.entries[0].abstract == recorded()["2306.03564"].abstract
    assert result.entries[1].title == "H3Fusion: Helpful, Harmless, Honest Fusion of Aligned LLMs"


def test_endnote_ris_with_a_byte_order_mark() -> None:
    result = read("endnote.ris")
    assert (result.format, result.encoding, result.problems) == ("ris", "utf-8", ())
    # T2 "arXiv preprint arXiv:...", L1 (the PDF link), N1 "arXiv:... [cs.LG]"; EndNote's ID is the key.
    assert ids(result) == [
        ("1", "2411.18292", None, 1),
        ("2", "2411.18612", None, 12),
        ("3", "2411.18425", None, 25),
    ]


def test_google_scholar_ris() -> None:
    result = read("scholar.ris")
    assert ids(result) == [("#1", "2411.18472", None, 1)]  # JO "arXiv preprint arXiv:..."
    assert result.entries[0].title == recorded()["2411.18472"].title  # from T1


def test_zotero_csl_json() -> None:
    result = read("zotero.json")
    assert (result.format, result.problems) == ("csl-json", ())
    zotero = "http://zotero.org/users/local/kQ2nYq3P/items/"
    assert ids(result) == [
        (zotero + "8XWZ3KXN", "2306.03564", "10.48550/arxiv.2306.03564", 2),  # URL, DOI, number
        (zotero + "QX7T2M4B", "2411.17792", None, 42),  # number "arXiv:..." alone
        (zotero + "3JH8ZP2C", None, "10.1103/physrevlett.133.201802", 96),
        (zotero + "W9D6RE5K", "2411.18292", None, 141),  # note "arXiv: ..."
        (zotero + "B2NQ7VLS", "astro-ph/0601001", None, 164),  # archive arXiv, archive_location
    ]
    assert result.entries[1].title == "H3Fusion: Helpful, Harmless, Honest Fusion of Aligned LLMs"


@pytest.mark.parametrize("name", sorted(p.name for p in LIBRARY.iterdir() if p.suffix != ".md"))
def test_every_paper_in_the_library_files_is_a_recorded_one(name: str) -> None:
    papers = recorded()
    by_doi = {paper.doi.lower(): paper for paper in papers.values() if paper.doi}
    by_title = {tuple(words(strip_tex(paper.title))): paper for paper in papers.values()}
    result = read(name)
    assert result.entries
    for entry in result.entries:
        title = tuple(words(entry.title))
        if entry.arxiv_id:
            paper = papers[entry.arxiv_id]
        elif entry.doi:
            paper = by_doi[entry.doi]
        else:
            paper = by_title[title]
        assert title == tuple(words(strip_tex(paper.title))), entry.key
        if entry.doi and not entry.doi.startswith("10.48550/"):
            assert entry.doi == (paper.doi or "").lower(), entry.key


# --- where ids and DOIs are read from ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "arxiv_id"),
    [
        ("eprint = {2306.03564}, archivePrefix = {arXiv}", "2306.03564"),
        ("eprint = {arXiv:2306.03564v2}, eprinttype = {arxiv}", "2306.03564"),
        ("eprint = {hep-th/9901001}", "hep-th/9901001"),  # no prefix field: an id is an id
        ("eprint = {math.GT/0309136v1}, archiveprefix = {arXiv}", "math/0309136"),  # arXiv drops the class
        ("eprint = {0704.0001 [hep-ph]}, archiveprefix = {arXiv}", "0704.0001"),
        ("arxivId = {2306.03564}", "2306.03564"),  # Mendeley
        ("url = {http://arxiv.org/abs/2306.03564v3}", "2306.03564"),
        ("url = {https://arxiv.org/pdf/2306.03564v1.pdf}", "2306.03564"),
        ("url = {https://export.arxiv.org/abs/hep-th/9901001}", "hep-th/9901001"),
        ("howpublished = {\\url{https://arxiv.org/abs/2411.17792}}", "2411.17792"),
        ("journal = {arXiv preprint arXiv:2306.03564}", "2306.03564"),
        ("journal = {{arXiv} e-prints}, eprint = {2306.03564}", "2306.03564"),
        ("note = {arXiv:2306.03564 [cs]}", "2306.03564"),
        ("note = {arXiv: hep-th/9901001}", "hep-th/9901001"),
        ("doi = {10.48550/arXiv.2306.03564}", "2306.03564"),
        ("number = {arXiv:2306.03564}, publisher = {arXiv}", "2306.03564"),  # Better BibTeX
        # The dedicated field comes before a mention elsewhere.
        ("note = {see arXiv:2411.17792}, eprint = {2306.03564}, archiveprefix = {arXiv}", "2306.03564"),
        # Not arXiv ids.
        ("eprint = {12345678}, eprinttype = {pubmed}", None),
        ("eprint = {2306.03564}, eprinttype = {hal}", None),
        ("note = {2306.03564}", None),  # a bare number in free text may be anything
        ("url = {https://notarxiv.org/abs/2306.03564}", None),
        ("journal = {arXiv preprint arXiv:1234.56789}", None),  # month 56 has no ids
        ("journal = {arXiv preprint arXiv:2306.0356}", None),  # four digits after 2014
        ("journal = {arXiv preprint arXiv:0612.01234}", None),  # new-style ids began in 0704
        ("pages = {2306.03564}", None),
    ],
)
def test_bibtex_arxiv_id(fields: str, arxiv_id: str | None) -> None:
    assert bib(f"title = {{T}}, {fields}").arxiv_id == arxiv_id


@pytest.mark.parametrize(
    ("line", "arxiv_id"),
    [
        ("UR  - http://arxiv.org/abs/2306.03564", "2306.03564"),
        (
            "UR  - https://doi.org/10.1103/X; http://arxiv.org/abs/2306.03564v2",
            "2306.03564",
        ),  # UR splits at ;
        ("L1  - https://arxiv.org/pdf/2306.03564v1.pdf", "2306.03564"),
        ("L2  - https://arxiv.org/abs/2306.03564", "2306.03564"),
        ("DO  - 10.48550/arXiv.2306.03564", "2306.03564"),
        ("N1  - arXiv: 2306.03564", "2306.03564"),
        ("JO  - arXiv preprint arXiv:2306.03564", "2306.03564"),
        ("T2  - arXiv:2306.03564 [cs]", "2306.03564"),
        ("M1  - arXiv:hep-th/9901001", "hep-th/9901001"),
        ("ID  - arXiv:2010.03525 [cs.SE]", "2010.03525"),
        ("N1  - 2306.03564", None),
        ("UR  - https://www.nature.com/articles/s41586-023-06735-9", None),
    ],
)
def test_ris_arxiv_id(line: str, arxiv_id: str | None) -> None:
    assert ris("TI  - T", line).arxiv_id == arxiv_id


@pytest.mark.parametrize(
    ("item", "arxiv_id"),
    [
        ({"URL": "http://arxiv.org/abs/2306.03564"}, "2306.03564"),
        ({"DOI": "10.48550/arXiv.2306.03564"}, "2306.03564"),
        ({"number": "arXiv:2306.03564"}, "2306.03564"),
        ({"number": "2306.03564", "publisher": "arXiv"}, "2306.03564"),
        ({"number": "2306.03564"}, None),  # a report number, unless the publisher is arXiv
        ({"archive": "arXiv", "archive_location": "astro-ph/0601001"}, "astro-ph/0601001"),
        ({"archive_location": "arXiv:2306.03564"}, "2306.03564"),
        ({"note": "arXiv:2306.03564 [cs]"}, "2306.03564"),
        ({"container-title": "arXiv preprint arXiv:2306.03564"}, "2306.03564"),
        ({"id": "http://arxiv.org/abs/2306.03564v1"}, "2306.03564"),
        ({"id": 7, "note": "Accepted at NeurIPS"}, None),
    ],
)
def test_csl_arxiv_id(item: dict[str, object], arxiv_id: str | None) -> None:
    assert csl(title="T", **item).arxiv_id == arxiv_id


@pytest.mark.parametrize(
    ("fields", "doi"),
    [
        ("doi = {10.1103/PhysRevB.108.125437}", "10.1103/physrevb.108.125437"),
        ("doi = {https://doi.org/10.1103/PhysRevB.108.125437}", "10.1103/physrevb.108.125437"),
        ("doi = {doi:10.1016/j.adhoc.2024.103462}", "10.1016/j.adhoc.2024.103462"),
        ("doi = {10.1000/a\\_b}", "10.1000/a_b"),  # escaped for TeX
        ("doi = {n/a}", None),
        ("url = {https://doi.org/10.1109/IJCNN54540.2023.10191449}", "10.1109/ijcnn54540.2023.10191449"),
        ("url = {https://dx.doi.org/10.1002/%28SICI%291097}", "10.1002/(sici)1097"),
        ("url = {https://example.org/10.1000/abc}", None),
    ],
)
def test_bibtex_doi(fields: str, doi: str | None) -> None:
    assert bib(f"title = {{T}}, {fields}").doi == doi


def test_ris_and_csl_doi() -> None:
    assert (
        ris("TI  - T", "DO  - https://dx.doi.org/10.1103/PhysRevB.108.125437").doi
        == "10.1103/physrevb.108.125437"
    )
    assert (
        ris("TI  - T", "UR  - https://doi.org/10.1103/PhysRevB.108.125437").doi
        == "10.1103/physrevb.108.125437"
    )
    assert csl(title="T", DOI="10.1103/PhysRevLett.133.201802").doi == "10.1103/physrevlett.133.201802"
    assert (
        csl(title="T", URL="https://doi.org/10.1103/PhysRevLett.133.201802").doi
        == "10.1103/physrevlett.133.201802"
    )


def test_a_bibtex_string_macro_is_resolved() -> None:
    result = read_library(
        b"@string{pre = {arXiv preprint arXiv:2411.17792}}\n\n@article{k, title = {T}, journal = pre}\n"
    )
    assert ids(result) == [("k", "2411.17792", None, 3)]


# --- titles and abstracts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        # Zotero's escaping of arXiv's "$H^3$Fusion: ..." with its capital protection.
        ("\\${H}{\\textasciicircum}3\\${Fusion}: {Helpful}", "H3Fusion: Helpful"),
        (
            'The spectral $\\zeta$-function for the {Schr\\"odinger} operator with {P{\\"o}schl}--{Teller}',
            "The spectral -function for the Schrödinger operator with Pöschl--Teller",
        ),
        ("On an {Erd\\H{o}s}-{Szekeres} Game", "On an Erdős-Szekeres Game"),
        ("{MnBi$_2$Te$_4$} and \\emph{multi}-agent \\textit{RL}", "MnBi2Te4 and multi-agent RL"),
        ("Line\n  broken~title", "Line broken title"),
        ("Pre-defined {Filter} {CNNs} \\& {ViT}", "Pre-defined Filter CNNs & ViT"),
    ],
)
def test_tex_in_bibtex_titles(title: str, expected: str) -> None:
    assert bib(f"title = {{{title}}}, eprint = {{2411.17792}}").title == expected


def test_zotero_rich_text_and_tex_in_csl_titles() -> None:
    entry = csl(
        title='<i>In vivo</i> imaging of <span class="nocase">mRNA</span> in $d$-dimensions',
        URL="http://arxiv.org/abs/2411.17792",
    )
    assert entry.title == "In vivo imaging of mRNA in d-dimensions"


def test_ris_continuation_lines_and_one_space_tags() -> None:
    # A long abstract on several lines, a repeated tag (rispy 0.10 fails on a continuation of one), and
    # tags with one space before the dash, as some tools write them.
    data = (
        "TY - JOUR\nTI - Streamlining Prediction\n  in Bayesian Deep Learning\n"
        "AB - The rising interest\nin Bayesian deep learning\nAB - second abstract\n  continued\n"
        "UR - http://arxiv.org/abs/2411.18425\nER -\n"
    )
    (entry,) = read_library(data.encode()).entries
    assert entry.title == "Streamlining Prediction in Bayesian Deep Learning"
    assert entry.abstract == "The rising interest in Bayesian deep learning"
    assert entry.arxiv_id == "2411.18425"


# --- broken files -----------------------------------------------------------------------------------------


def test_broken_bibtex(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        result = read("broken.bib")
    assert ids(result) == [("Tekin2024", "2411.17792", None, 3), ("Cheng2024", "2411.18064", None, 39)]
    assert problems(result) == [
        ("Tang2024", 12, "not valid BibTeX: a brace or a quote is not closed"),
        ("Tekin2024a", 20, "duplicate of entry {key} (line {line})"),
        ("Li2024", 28, "no arXiv id, DOI or title"),
        (None, 33, "not valid BibTeX: the brace after @type is missing"),
    ]
    assert [str(p) for p in result.problems] == [
        "entry Tang2024 (line 12): not valid BibTeX: a brace or a quote is not closed",
        "entry Tekin2024a (line 20): duplicate of entry Tekin2024 (line 3)",
        "entry Li2024 (line 28): no arXiv id, DOI or title",
        "line 33: not valid BibTeX: the brace after @type is missing",
    ]
    assert result.problems[1].title == "H3Fusion: Helpful, Harmless, Honest Fusion of Aligned LLMs"
    # bibtexparser's own warnings would repeat the problems in the log; they are kept out of it.
    assert not [r for r in caplog.records if r.name.startswith("bibtexparser")]


def test_broken_bibtex_field_syntax() -> None:
    result = read_library(
        b"@misc{a, title = {A} eprint = {2411.17792}}\n\n@misc{b, title = {B}, eprint = {2411.18064}}\n"
    )
    assert ids(result) == [("b", "2411.18064", None, 3)]
    assert problems(result) == [
        ("a", 1, "not valid BibTeX: a field is not written as name = value, followed by a comma")
    ]


def test_values_without_braces_are_not_taken_for_a_missing_comma() -> None:
    fields = 'title = "A = B", month = jun, year = 2024, pages = "1" # "--" # "9", note = {x = y}'
    entry = bib(fields + ", eprint = {2411.17792}")
    assert (entry.title, entry.arxiv_id) == ("A = B", "2411.17792")


def test_repeated_bibtex_keys_and_fields_are_read() -> None:
    data = (
        b"@misc{same, title = {A}, eprint = {2411.17792}}\n"
        b'@misc{same, title = "B", eprint = "2411.18064"}\n'
        b"@misc{urls, title = {C}, url = {https://example.org/c}, url = {https://arxiv.org/abs/2411.18472}}\n"
    )
    result = read_library(data)
    assert ids(result) == [
        ("same", "2411.17792", None, 1),
        ("same", "2411.18064", None, 2),
        ("urls", "2411.18472", None, 3),
    ]
    assert result.problems == ()


def test_broken_bibtex_strings_and_comments_are_not_entries() -> None:
    data = b"@comment{jabref-meta: databaseType:bibtex;}\n@string{broken = {unclosed\n@misc{a, title = {A}}\n"
    result = read_library(data)
    assert ids(result) == [("a", None, None, 3)]
    assert result.problems == ()


def test_broken_ris() -> None:
    result = read("broken.ris")
    assert ids(result) == [
        ("#1", "2306.03564", "10.48550/arxiv.2306.03564", 1),
        ("#3", None, "10.1103/physrevlett.133.201802", 17),
    ]
    no_er = "the record does not end with an ER line (the file may be cut short)"
    assert problems(result) == [
        ("#2", 10, no_er),  # the next TY came first
        (None, 25, "lines outside a record: a RIS record starts with a TY line"),
        ("#4", 31, no_er),  # the file ends inside it
    ]
    assert result.problems[0].title == "H3Fusion: Helpful, Harmless, Honest Fusion of Aligned LLMs"


def test_broken_csl_json() -> None:
    result = read("broken.json")
    zotero = "http://zotero.org/users/local/kQ2nYq3P/items/"
    assert ids(result) == [
        (zotero + "8XWZ3KXN", "2306.03564", "10.48550/arxiv.2306.03564", 2),
        (zotero + "B2NQ7VLS", "astro-ph/0601001", None, 88),
    ]
    not_object = "not a CSL item: an item is an object with a type and a title"
    assert problems(result) == [
        ("#2", 30, not_object),  # a string
        (zotero + "ZZ4M2KQA", 31, "no arXiv id, DOI or title"),
        (
            zotero + "P3K8C1VD",
            60,
            "duplicate of entry {key} (line {line})",
        ),  # same arXiv id, the journal's DOI
        ("#5", 87, not_object),  # null
    ]


def test_every_entry_is_used_or_has_a_problem() -> None:
    for name, records in [("broken.bib", 6), ("broken.ris", 4), ("broken.json", 6)]:
        result = read(name)
        entries = {e.line for e in result.entries}
        reported = {p.line for p in result.problems}
        assert not entries & reported
        # broken.ris has one problem that is not a record: the lines outside any record.
        assert len(result.entries) + len(result.problems) == records + (name == "broken.ris"), name


# --- duplicates -------------------------------------------------------------------------------------------


def test_duplicates() -> None:
    data = b"""
@misc{a, title = {First}, eprint = {2411.17792}}
@misc{b, title = {Again, with a version}, eprint = {2411.17792v3}}
@misc{d, title = {Preprint}, doi = {10.1103/physrevb.108.125437}, eprint = {2306.03564}}
@misc{e, title = {Other preprint, same DOI}, doi = {10.1103/physrevb.108.125437}, eprint = {2411.18064}}
@article{c, title = {Journal version}, doi = {10.1103/PhysRevB.108.125437}}
@misc{f, title = {Streamlining {Prediction} in Bayesian Deep Learning}}
@misc{g, title = {Streamlining prediction in Bayesian deep-learning.}}
@misc{h, title = {Streamlining Prediction in Bayesian Deep Learning}, eprint = {2411.18425}}
"""
    result = read_library(data)
    # Two arXiv ids with one DOI are two papers (one of them carries a wrong DOI).
    assert [e.key for e in result.entries] == ["a", "d", "e", "f", "h"]
    assert [str(p) for p in result.problems] == [
        "entry b (line 3): duplicate of entry a (line 2)",
        # The journal version has no arXiv id, so its DOI names the paper: the first one with that DOI.
        "entry c (line 6): duplicate of entry d (line 4)",
        # Neither has an id: the same words make the same title.
        "entry g (line 8): duplicate of entry f (line 7)",
    ]


# --- files that are not a library -------------------------------------------------------------------------


EXPORT_HINT = "export it as BibTeX, RIS or CSL-JSON, e.g. from Zotero: File → Export Library…"


@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (b"", None, "the file is empty"),
        (b" \r\n\t\n", "library.bib", "the file is empty"),
        (codecs.BOM_UTF8, None, "the file is empty"),
        (
            b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<</Type /Catalog>>\nendobj\x00",
            "paper.pdf",
            "this is not a text file",
        ),
        (
            b"<!DOCTYPE html><html><body>Zotero</body></html>",
            "library.html",
            "this is not a BibTeX, RIS or CSL-JSON file",
        ),
        (b"Some notes about papers I like.\n", "notes.txt", "this is not a BibTeX, RIS or CSL-JSON file"),
        (b"% Exported by hand\n% no entries yet\n", "library.bib", "the file has no entries"),
        (b"Provider: nobody\n", "library.ris", "the file has no entries"),
        (b"[]", None, "the file has no entries"),
        (
            b'{"address": "email:ada@example.org", "query": "cat:cs.DC"}',
            "follows.jsonl",
            "the file is JSON but not CSL-JSON (a list of items with a type and a title)",
        ),
        (b"[1, 2, 3]", None, "the file is JSON but not CSL-JSON (a list of items with a type and a title)"),
        (b'[{"title": "A"},\n {"title": "B",]', None, "the file is not valid JSON (line 2, column 16)"),
        (
            b"[" * 100_000,
            None,
            "the file is nested too deeply (more than 64 arrays or objects inside each other)",
        ),
        (
            b'[{"type": "article", "title": "A", "note": ' + b"[" * 65 + b"]" * 65 + b"}]",
            None,
            "the file is nested too deeply (more than 64 arrays or objects inside each other)",
        ),
    ],
)
def test_not_a_library(data: bytes, filename: str | None, message: str) -> None:
    said = refusal(data, filename)
    assert said.startswith(message + "; ")
    assert said.endswith(EXPORT_HINT)


def test_refusals_are_worded_for_readers() -> None:
    with pytest.raises(LibraryFileError) as caught:
        read_library(b"Some notes about papers I like.\n")
    assert isinstance(caught.value, ValueError)
    assert caught.value.said(translator("zh")) == (
        "这不是 BibTeX、RIS 或 CSL-JSON 文件；"
        "请导出为 BibTeX、RIS 或 CSL-JSON，例如在 Zotero 中：文件 → 导出文献库…"
    )
    problem = read("broken.bib").problems[0]
    assert (
        problem.said(translator("zh")) == "条目 Tang2024（第 12 行）：不是有效的 BibTeX：有花括号或引号未闭合"
    )
    assert isinstance(problem, EntryProblem)


@pytest.mark.parametrize(
    ("data", "filename", "library_format"),
    [
        # The content decides, whatever the name says.
        (b"@misc{a, title = {A}}", "library.txt", "bibtex"),
        (b"TY  - JOUR\nTI  - A\nER  - \n", "library.bib", "ris"),
        (b'[{"type": "article", "title": "A"}]', "library.ris", "csl-json"),
        # Headers before the first entry: JabRef's encoding line, a RIS provider's lines.
        (b"% Encoding: UTF-8\n\n@Article{a, title = {A}}", None, "bibtex"),
        (b"Provider: Elsevier\nContent: text/plain\n\nTY  - JOUR\nTI  - A\nER  - \n", None, "ris"),
        # A RIS record that mentions @article in its abstract is RIS, and the other way round.
        (b"TY  - JOUR\nTI  - A\nAB  - see\n@article{x,\nER  - \n", None, "ris"),
        (b"@misc{a, title = {A},\nabstract = {x\nTY  - JOUR\n}}", None, "bibtex"),
    ],
)
def test_format_detection(data: bytes, filename: str | None, library_format: str) -> None:
    assert read_library(data, filename).format == library_format


# --- encodings --------------------------------------------------------------------------------------------


def test_windows_1252_bibtex_and_ris() -> None:
    title = recorded()["2411.17860"].title  # "... the Schrödinger operator with Pöschl--Teller potential"
    result = read_library(f"@misc{{a, title = {{{title}}}, eprint = {{2411.17860}}}}\n".encode("cp1252"))
    assert result.encoding == "windows-1252"
    assert "Schrödinger operator with Pöschl--Teller" in result.entries[0].title
    result = read_library(f"TY  - JOUR\r\nTI  - {title}\r\nER  - \r\n".encode("cp1252"))
    assert (result.encoding, result.entries[0].title.endswith("Pöschl--Teller potential")) == (
        "windows-1252",
        True,
    )


def test_jabref_encoding_header() -> None:
    title = recorded()[
        "2411.17875"
    ].title  # "On an Erdős-Szekeres Game": ő is in ISO 8859-2, not in Windows-1252
    data = f"% Encoding: ISO8859_2\n\n@Article{{a, title = {{{title}}}}}\n".encode("iso8859_2")
    result = read_library(data)
    assert (result.encoding, result.entries[0].title) == ("iso8859-2", title)


def test_utf16_with_a_byte_order_mark() -> None:
    title = recorded()["2411.18468"].title  # "Parole de présidents (1958-2022)"
    result = read_library(f"@misc{{a, title = {{{title}}}, eprint = {{2411.18468}}}}\n".encode("utf-16"))
    assert (result.encoding, result.entries[0].title) == ("utf-16", title)


def test_csl_json_must_be_utf8() -> None:
    said = refusal('[{"type": "article", "title": "Schrödinger"}]'.encode("cp1252"))
    assert said == "the file is not UTF-8 (byte 36); export it again with the UTF-8 encoding"


# --- limits -----------------------------------------------------------------------------------------------


def test_file_size_limit() -> None:
    padding = b"% " + b"x" * 78 + b"\n"
    entry = b"@misc{a, title = {A}, eprint = {2411.17792}}\n"
    at_limit = entry + padding * ((MAX_FILE_BYTES - len(entry)) // len(padding))
    at_limit += b" " * (MAX_FILE_BYTES - len(at_limit))
    assert len(at_limit) == MAX_FILE_BYTES
    assert [e.key for e in read_library(at_limit).entries] == ["a"]
    said = refusal(at_limit + b" ")
    assert said == "the file is 5.1 MB; at most 5 MB are read; export one collection at a time"


@pytest.mark.parametrize("library_format", ["bibtex", "bibtex-one-line", "ris", "csl-json"])
def test_entry_limit(library_format: str) -> None:
    def file(count: int) -> bytes:
        if library_format == "bibtex":
            return b"".join(b"@misc{k%d, title = {Paper %d}}\n" % (i, i) for i in range(count))
        if library_format == "bibtex-one-line":  # entries not at line starts are counted once read
            return b"".join(b"@misc{k%d, title = {Paper %d}}" % (i, i) for i in range(count))
        if library_format == "ris":
            return b"".join(b"TY  - JOUR\nTI  - Paper %d\nER  - \n" % i for i in range(count))
        return json.dumps([{"type": "article", "title": f"Paper {i}"} for i in range(count)]).encode()

    assert len(read_library(file(MAX_ENTRIES)).entries) == MAX_ENTRIES
    said = refusal(file(MAX_ENTRIES + 1))
    assert said == "the file has 5,001 entries; at most 5,000 are read; export one collection at a time"


# --- the id forms (core.taste.library_ids)
# ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "arxiv_id"),
    [
        ("2306.03564", "2306.03564"),
        ("arXiv:2306.03564v12", "2306.03564"),
        ("0704.0001", "0704.0001"),  # the first new-style id
        ("1412.9999", "1412.9999"),  # four digits until December 2014
        ("1501.00001", "1501.00001"),  # five from January 2015
        ("1501.0001", None),
        ("1412.00001", None),
        ("2313.03564", None),  # month 13
        ("HEP-TH/9108001", "hep-th/9108001"),  # the first month of old-style ids
        ("hep-th/9107001", None),
        ("math/0703001", "math/0703001"),  # the last one
        ("math/0704001", None),
        ("math.GT/0309136", "math/0309136"),
        ("cond-mat.mes-hall/0309136", None),  # subject classes of old ids were two capital letters
        ("2306.03564 and more", None),
    ],
)
def test_arxiv_id_forms(value: str, arxiv_id: str | None) -> None:
    assert bare_arxiv_id(value) == arxiv_id
