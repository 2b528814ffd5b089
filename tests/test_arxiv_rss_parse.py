"""parse_feed over the recorded rss.arxiv.org feeds in tests/corpus/arxiv-rss and over broken copies.

Expected values are computed independently of the parser (regex over the raw bytes, ElementTree over the
XML) wherever possible, so the tests check the parser against the data rather than against itself.
"""

from __future__ import annotations

import io
import re
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.tex_accents import decode_tex
from core.values import AnnounceType, PaperIn
from ingest import arxiv_rss_bytes, arxiv_rss_parse, paper_spool
from ingest.arxiv_rss_parse import (
    ArxivFeedError,
    FeedFormatError,
    FeedPage,
    parse_feed,
    split_authors,
)
from ingest.paper_spool import PaperSpool
from tests.conftest import CORPUS

RSS_DIR = CORPUS / "arxiv-rss"
BIG_FEED = RSS_DIR / "aioarxiv_rss_mock_feed.xml"
EMPTY_FEED = RSS_DIR / "aioarxiv_empty_rss_mock_feed.xml"
ERROR_FEED = RSS_DIR / "aioarxiv_error_rss_mock_feed.xml"

DC = "{http://purl.org/dc/elements/1.1/}"
ARXIV = "{http://arxiv.org/schemas/atom}"
EST = timezone(timedelta(hours=-5))
MAILING = datetime(2024, 11, 28, 0, 0, tzinfo=EST)


@pytest.fixture(scope="module")
def big_bytes() -> bytes:
    return BIG_FEED.read_bytes()


@pytest.fixture(scope="module")
def big_page(big_bytes: bytes) -> FeedPage:
    return parse_feed(big_bytes)


@pytest.fixture(scope="module")
def by_id(big_page: FeedPage) -> dict[str, PaperIn]:
    return {paper.versioned_id: paper for paper in big_page.items}


def _collapse(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------------------------------------
# Every recorded file


def test_corpus_folder_is_there() -> None:
    # Guards the parametrised test below against passing vacuously on a missing or moved corpus.
    assert {BIG_FEED, EMPTY_FEED, ERROR_FEED} <= set(RSS_DIR.glob("*.xml"))


@pytest.mark.parametrize("path", sorted(RSS_DIR.glob("*.xml")), ids=lambda p: p.name)
def test_every_recorded_file_parses_or_reports_arxivs_error(path: Path) -> None:
    data = path.read_bytes()
    if b"<title>Feed error for query:" in data:
        with pytest.raises(ArxivFeedError):
            parse_feed(data)
        return
    page = parse_feed(data)
    assert page.skipped == ()
    assert len(page.items) == len(re.findall(rb"<item>", data))
    assert page.published == MAILING


# ----------------------------------------------------------------------------------------------------------
# The big feed: 20 archives, 2024-11-28 mailing


def test_big_feed_counts_per_announce_type(big_bytes: bytes, big_page: FeedPage) -> None:
    raw = Counter(
        m.decode() for m in re.findall(rb"<arxiv:announce_type>([^<]*)</arxiv:announce_type>", big_bytes)
    )
    assert raw == {"new": 926, "cross": 9, "replace": 569}
    assert len(re.findall(rb"<item>", big_bytes)) == 1504

    parsed = Counter(paper.announce_type.value for paper in big_page.items)
    assert parsed == raw
    assert len(big_page.items) == 1504
    assert big_page.skipped == ()
    assert not big_page.is_empty


def test_big_feed_channel(big_page: FeedPage) -> None:
    assert big_page.channel_title.startswith("astro-ph, cond-mat, physics, quant-ph, math, cs,")
    assert big_page.channel_title.endswith("stat updates on arXiv.org")
    assert big_page.published == MAILING
    assert big_page.published is not None and big_page.published.utcoffset() == timedelta(hours=-5)


def test_big_feed_matches_an_independent_elementtree_reading(big_bytes: bytes, big_page: FeedPage) -> None:
    items = ET.fromstring(big_bytes).findall("channel/item")
    assert len(items) == len(big_page.items)
    for item, paper in zip(items, big_page.items, strict=True):
        guid = item.findtext("guid") or ""
        assert guid == f"oai:arXiv.org:{paper.versioned_id}"
        assert item.findtext("link") == f"https://arxiv.org/abs/{paper.arxiv_id}"
        assert paper.categories == tuple(c.text for c in item.findall("category"))
        assert paper.announce_type.value == item.findtext(f"{ARXIV}announce_type")
        description = item.findtext("description") or ""
        assert description.startswith(
            f"arXiv:{paper.versioned_id} Announce Type: {paper.announce_type.value}"
        )
        assert paper.abstract == decode_tex(_collapse(description.split("Abstract:", 1)[1]))
        title = item.findtext("title") or ""
        if "\\" not in title:
            assert paper.title == _collapse(title)
        assert paper.license == item.findtext(f"{DC}rights")
        assert paper.doi == item.findtext(f"{ARXIV}DOI")
        assert paper.journal_ref == item.findtext(f"{ARXIV}journal_reference")
        assert paper.announced_at == MAILING
        assert paper.comment is None
        assert paper.source == "arxiv-rss"
        creator = item.findtext(f"{DC}creator") or ""
        if "(" not in creator:
            assert len(paper.authors) == len([a for a in creator.split(",") if a.strip()])


def test_big_feed_invariants(big_page: FeedPage) -> None:
    for paper in big_page.items:
        assert re.fullmatch(r"\d{4}\.\d{4,5}", paper.arxiv_id), paper.arxiv_id
        assert paper.version >= 1
        assert (paper.version > 1) == paper.is_revision
        if paper.announce_type is AnnounceType.NEW:
            assert paper.version == 1, paper.versioned_id
        if paper.announce_type is AnnounceType.REPLACE:
            assert paper.version > 1, paper.versioned_id
        assert paper.title and paper.title == paper.title.strip()
        assert paper.abstract, paper.versioned_id
        assert not paper.abstract.startswith("arXiv:")
        assert not paper.abstract.startswith("Abstract")
        assert "  " not in paper.abstract and "\n" not in paper.abstract
        assert paper.categories
        assert paper.authors, paper.versioned_id
        assert paper.announced_at is not None and paper.announced_at.tzinfo is not None
        for author in paper.authors:
            assert author and author == author.strip()
            assert "\\" not in author and "(" not in author and ")" not in author, author
            assert "{" not in author and "}" not in author, author
            assert "," not in author, author


def test_big_feed_versioned_ids_are_unique(big_page: FeedPage) -> None:
    ids = [paper.versioned_id for paper in big_page.items]
    assert len(ids) == len(set(ids))


def test_first_item(by_id: dict[str, PaperIn]) -> None:
    paper = by_id["2411.17700v1"]
    assert paper.arxiv_id == "2411.17700"
    assert paper.version == 1
    assert paper.title == (
        "Exploring the Impact of Generative AI on Cross-Border E-Commerce Brand Building "
        "in Chinese Tianjin's Manufacturing Sector"
    )
    assert paper.abstract.startswith(
        "This study investigates the influence of generative artificial intelligence"
    )
    assert paper.abstract.endswith("regression and structural equations (PLS-SEM).")
    assert paper.authors == ("Jun Cui",)
    assert paper.categories == ("cs.CY",)
    assert paper.announce_type is AnnounceType.NEW
    assert paper.license == "http://creativecommons.org/licenses/by/4.0/"
    assert paper.doi is None and paper.journal_ref is None


def test_replacement_with_doi_and_journal_ref(by_id: dict[str, PaperIn]) -> None:
    paper = by_id["1712.07645v2"]
    assert paper.title == "Medium effects on freeze-out of light clusters at NICA energies"
    assert paper.announce_type is AnnounceType.REPLACE
    assert paper.is_revision
    assert paper.doi == "10.1134/S1547477118030159"
    assert paper.journal_ref == "Phys. Part. Nucl. Lett. 15(3), 225-229 (2018)"
    assert paper.categories == ("nucl-th", "hep-ph")
    assert paper.authors == (
        "G. Roepke",
        "D. Blaschke",
        "Yu. B. Ivanov",
        "Iu. Karpenko",
        "O. V. Rogachevsky",
        "H. H. Wolter",
    )
    assert paper.license == "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"


def test_cross_list_keeps_its_version(by_id: dict[str, PaperIn]) -> None:
    paper = by_id["2202.06515v3"]
    assert paper.announce_type is AnnounceType.CROSS
    assert paper.categories == ("astro-ph.CO", "astro-ph.GA", "physics.flu-dyn")


def test_affiliations_are_removed(by_id: dict[str, PaperIn]) -> None:
    assert by_id["2411.17748v1"].authors == (
        "Mohammed Riadh Berramdane",
        "Alexandre Battiston",
        "Michele Bardi",
        "Nicolas Blet",
        "Benjamin Rémy",
        "Matthieu Urbain",
    )
    assert by_id["2411.17793v1"].authors == ("Jiahuei Lin", "Dayi Lin", "Sky Zhang", "Ahmed E. Hassan")
    # An affiliation with a comma inside its parentheses does not split the author.
    assert by_id["2411.17753v1"].authors == (
        "Aleteia Araujo",
        "Breno Costa",
        "Joao Bachiega Jr",
        "Leonardo R. Carvalho",
        "Rajkumar Buyya",
    )


def test_tex_in_author_names_is_decoded(by_id: dict[str, PaperIn]) -> None:
    assert "Przemysław Olbratowski" in by_id["2411.17709v1"].authors
    assert by_id["2411.17709v1"].authors[-1] == "Jarosław Żygierewicz"
    assert by_id["2411.17768v1"].authors == ("Fabio Marco Monetti", "Adam Lundström", "Antonio Maffei")
    assert by_id["2411.17775v1"].authors == ("Václav Vavryčuk",)
    assert "Serdar Kadıoğlu" in by_id["2411.17796v1"].authors
    assert by_id["2411.17818v1"].authors == ("Sofie Castro Holbæk", "Mark H. Fischer")
    assert "Rasmus Maråk" in by_id["2411.17831v1"].authors
    assert "Maciej Zięba" in by_id["2411.18311v1"].authors
    assert "Weronika Smolak-Dyżewska" in by_id["2411.18311v1"].authors
    assert "Guðmundur K. Stefánsson" in by_id["2411.18567v1"].authors
    assert by_id["2411.18574v1"].authors[0] == "Radu I. Boţ"
    assert "Marta Łuksza" in by_id["2403.12684v3"].authors
    assert "Jeppe Liborius Sjørup" in by_id["2410.08641v2"].authors


def test_tex_in_titles_is_decoded_and_math_kept(big_page: FeedPage, by_id: dict[str, PaperIn]) -> None:
    assert by_id["2411.17875v1"].title == "On an Erdős-Szekeres Game"
    assert by_id["2411.18574v1"].title == "Generalized Fast Krasnosel'kiĭ-Mann Method with Preconditioners"
    assert "Planetary Nebulæ and Related Objects" in by_id["2411.18035v1"].title
    assert "Personal Attributes & Preferences" in by_id["2411.18380v1"].title
    assert by_id["2411.17985v1"].title == "$d$-Degree Erdős-Ko-Rado theorem for finite vector spaces"
    titles = [paper.title for paper in big_page.items]
    assert any("$\\mathbb{R}^3$" in title for title in titles)
    assert not any(re.search(r"\\[\"'`^~]", re.sub(r"\$[^$]*\$", "", title)) for title in titles)


# ----------------------------------------------------------------------------------------------------------
# Empty and error channels


def test_empty_feed_is_empty() -> None:
    page = parse_feed(EMPTY_FEED.read_bytes())
    assert page.items == ()
    assert page.skipped == ()
    assert page.is_empty
    assert page.channel_title == "test updates on arXiv.org"
    assert page.published == MAILING


def test_error_feed_raises_with_arxivs_message() -> None:
    with pytest.raises(ArxivFeedError) as caught:
        parse_feed(ERROR_FEED.read_bytes())
    error = caught.value
    assert error.message.startswith("Bad archive 'astroph'. Valid archive names are: astro-ph, cond-mat, cs")
    assert error.query == "http://rss.arxiv.org/rss/astroph"
    assert "Bad archive 'astroph'" in str(error)
    assert "PAPERTRAIL_ARXIV_RSS_URL" in str(error)
    assert isinstance(error, RuntimeError)


# ----------------------------------------------------------------------------------------------------------
# Bytes that are not a usable feed


def test_truncated_at_half_raises(big_bytes: bytes) -> None:
    with pytest.raises(FeedFormatError, match="cut short"):
        parse_feed(big_bytes[: len(big_bytes) // 2])


@pytest.mark.parametrize(
    "end",
    [
        lambda data: data.rindex(b"</item>") + len(b"</item>"),  # whole items, but no </channel></rss>
        lambda data: len(data) - 10,
        lambda data: data.index(b"<item>") + 300,
    ],
    ids=["after_last_item", "last_10_bytes", "inside_first_item"],
)
def test_other_truncations_raise(big_bytes: bytes, end: Callable[[bytes], int]) -> None:
    with pytest.raises(FeedFormatError, match="cut short"):
        parse_feed(big_bytes[: end(big_bytes)])


def test_html_page_raises() -> None:
    html = b"<!DOCTYPE html><html><body>503 Service Unavailable</body></html>"
    with pytest.raises(FeedFormatError, match="HTML page instead of RSS") as caught:
        parse_feed(html)
    assert "503 Service Unavailable" in str(caught.value)
    assert "PAPERTRAIL_ARXIV_RSS_URL" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_html_page_that_is_not_xml_raises() -> None:
    with pytest.raises(FeedFormatError, match="HTML page instead of RSS"):
        parse_feed(b"\n<head><title>502 Bad Gateway</title></head><body><hr><center>nginx</center></body>")


@pytest.mark.parametrize("data", [b"", b" \r\n\t"], ids=["empty", "blank"])
def test_empty_bytes_raise(data: bytes) -> None:
    with pytest.raises(FeedFormatError, match=r"(empty|blank) body .*instead of RSS"):
        parse_feed(data)


@pytest.mark.parametrize(
    "data",
    [b'{"error": "rate limited"}', b"\x00\x01\x02binary", b"/etc/passwd"],
    ids=["json", "binary", "looks-like-a-path"],
)
def test_non_xml_raises(data: bytes) -> None:
    with pytest.raises(FeedFormatError, match="not well-formed XML"):
        parse_feed(data)


def test_atom_document_raises() -> None:
    atom = (CORPUS / "arxiv-api" / "arxivpy-2016" / "id_list_1111.2011v2.xml").read_bytes()
    with pytest.raises(FeedFormatError, match=r"expected an RSS 2\.0 document"):
        parse_feed(atom)


# ----------------------------------------------------------------------------------------------------------
# Unusable items are skipped with a note, never dropped silently (built from the real bytes)


def _first_item_only(big_bytes: bytes) -> bytes:
    """The real feed cut down to its first item, closed properly."""
    end = big_bytes.index(b"</item>") + len(b"</item>")
    return big_bytes[:end] + b"\n  </channel>\n</rss>\n"


def _first_items(big_bytes: bytes, count: int) -> bytes:
    """The real feed cut down to its first ``count`` items, closed properly."""
    end = 0
    for _ in range(count):
        end = big_bytes.index(b"</item>", end) + len(b"</item>")
    return big_bytes[:end] + b"\n  </channel>\n</rss>\n"


def test_first_items_copy_parses(big_bytes: bytes, big_page: FeedPage) -> None:
    page = parse_feed(_first_items(big_bytes, 20))
    assert page.items == big_page.items[:20]
    assert page.published == big_page.published and page.skipped == ()


def test_first_item_only_copy_parses(big_bytes: bytes) -> None:
    page = parse_feed(_first_item_only(big_bytes))
    assert [paper.versioned_id for paper in page.items] == ["2411.17700v1"]


def test_guid_without_version_falls_back_to_description(big_bytes: bytes) -> None:
    data = _first_item_only(big_bytes).replace(b"oai:arXiv.org:2411.17700v1", b"oai:arXiv.org:2411.17700")
    page = parse_feed(data)
    assert [paper.versioned_id for paper in page.items] == ["2411.17700v1"]


def test_no_version_anywhere_is_skipped_with_a_note(big_bytes: bytes) -> None:
    data = (
        _first_item_only(big_bytes)
        .replace(b"oai:arXiv.org:2411.17700v1", b"oai:arXiv.org:2411.17700")
        .replace(b"arXiv:2411.17700v1 Announce", b"arXiv:2411.17700 Announce")
    )
    page = parse_feed(data)
    assert page.items == ()
    assert len(page.skipped) == 1
    assert "oai:arXiv.org:2411.17700" in page.skipped[0]
    assert "no versioned arXiv id" in page.skipped[0]
    assert not page.is_empty  # all items skipped is a problem, not an empty mailing


def test_guid_and_description_disagreeing_is_skipped(big_bytes: bytes) -> None:
    data = (
        _first_item_only(big_bytes)
        .replace(b"oai:arXiv.org:2411.17700v1", b"oai:arXiv.org:2411.17700")
        .replace(b"arXiv:2411.17700v1 Announce", b"arXiv:2411.17799v1 Announce")
    )
    page = parse_feed(data)
    assert page.items == ()
    assert "2411.17799v1" in page.skipped[0]


def test_unknown_announce_type_is_skipped_with_a_note(big_bytes: bytes) -> None:
    first = big_bytes.index(b"<arxiv:announce_type>new<")
    data = big_bytes[:first] + big_bytes[first:].replace(b">new<", b">withdrawn<", 1)
    page = parse_feed(data)
    assert len(page.items) == 1503
    assert len(page.skipped) == 1
    assert "2411.17700v1" in page.skipped[0]
    assert "'withdrawn'" in page.skipped[0]


def test_replace_cross_is_recognised(big_bytes: bytes) -> None:
    data = _first_item_only(big_bytes).replace(
        b"<arxiv:announce_type>new<", b"<arxiv:announce_type>replace-cross<"
    )
    page = parse_feed(data)
    assert page.items[0].announce_type is AnnounceType.REPLACE_CROSS


def test_missing_item_pubdate_falls_back_to_channel(big_bytes: bytes) -> None:
    data = _first_item_only(big_bytes)
    item_start = data.index(b"<item>")
    head, tail = data[:item_start], data[item_start:]
    tail = re.sub(rb"\s*<pubDate>[^<]*</pubDate>", b"", tail, count=1)
    page = parse_feed(head + tail)
    assert page.items[0].announced_at == MAILING


def test_utc_item_date_is_kept_aware(big_bytes: bytes) -> None:
    data = _first_item_only(big_bytes)
    item_start = data.index(b"<item>")
    tail = data[item_start:].replace(b"Thu, 28 Nov 2024 00:00:00 -0500", b"Thu, 28 Nov 2024 05:00:00 GMT")
    paper = parse_feed(data[:item_start] + tail).items[0]
    assert paper.announced_at == datetime(2024, 11, 28, 5, 0, tzinfo=UTC)
    assert paper.announced_at is not None and paper.announced_at.tzinfo is not None


# ----------------------------------------------------------------------------------------------------------
# Author splitting on its own


@pytest.mark.parametrize(
    ("creator", "expected"),
    [
        ("Jun Cui", ("Jun Cui",)),
        (" CMS Collaboration", ("CMS Collaboration",)),
        ("A. One, B. Two and C. Three", ("A. One", "B. Two", "C. Three")),
        ("A. One, B. Two, and C. Three", ("A. One", "B. Two", "C. Three")),
        ("A. One and B. Two", ("A. One", "B. Two")),
        ("Gergely Zar\\'and, Ann Anderson", ("Gergely Zaránd", "Ann Anderson")),
        ("A (Univ X, Dept (Y), Z), B (Q)", ("A", "B")),
        ("A\n   Long, B", ("A Long", "B")),
        ("A,, B, ", ("A", "B")),
        ("Jiahuei Lin (Justina), Dayi Lin", ("Jiahuei Lin", "Dayi Lin")),
        ('\\"Ozen\\c{c} G\\"ung\\"or (COMPACT Collaboration)', ("Özenç Güngör",)),
        ("{Smith, Jr.}, B", ("{Smith, Jr.}", "B")),
        # Unbalanced parentheses: every comma splits, bracketed text is dropped, names survive.
        ("A (Univ X, B, C", ("A", "B", "C")),
        # A stray ")" ends an affiliation that started in an earlier piece, so the text before it goes.
        ("A (Univ), B) C, D", ("A", "C", "D")),
        ("", ()),
    ],
)
def test_split_authors(creator: str, expected: tuple[str, ...]) -> None:
    assert split_authors(creator) == expected


# ----------------------------------------------------------------------------------------------------------
# Every recorded file, broken input and variants of the feed. (These once compared parse_feed with
# parse_feed_feedparser, a second reading through feedparser; it is gone, and the independent readings
# above pin the corpus fields.)


def _outcome(parse: Callable[[bytes], FeedPage], data: bytes) -> FeedPage | tuple[type[Exception], str]:
    try:
        return parse(data)
    except (FeedFormatError, ArxivFeedError) as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.parent.name != "arxiv-rss"),
    ids=lambda p: str(p.relative_to(CORPUS)),
)
def test_every_other_recorded_file_is_refused(path: Path) -> None:
    # OAI, Atom and JSON recordings are not RSS: refused with an error, never read as an (empty) page.
    with pytest.raises(FeedFormatError):
        parse_feed(path.read_bytes())


_BAD_INPUTS: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("half", lambda d: d[: len(d) // 2]),
    ("after_last_item", lambda d: d[: d.rindex(b"</item>") + len(b"</item>")]),
    ("last_10_bytes", lambda d: d[:-10]),
    ("inside_first_item", lambda d: d[: d.index(b"<item>") + 300]),
    ("html", lambda d: b"<!DOCTYPE html><html><body>503 Service Unavailable</body></html>"),
    ("html_not_xml", lambda d: b"\n<head><title>502 Bad Gateway</title></head><body><hr></body>"),
    ("empty", lambda d: b""),
    ("blank", lambda d: b" \r\n\t"),
    ("json", lambda d: b'{"error": "rate limited"}'),
    ("binary", lambda d: b"\x00\x01\x02binary"),
    ("path", lambda d: b"/etc/passwd"),
    ("not_rss_root", lambda d: d.replace(b"<rss ", b"<rdf ", 1).replace(b"</rss>", b"</rdf>")),
    ("no_channel", lambda d: b"<rss version='2.0'><item/></rss>"),
    ("undefined_entity", lambda d: d.replace(b"Jun Cui", b"Jun &nbsp; Cui", 1)),
    ("unbound_prefix", lambda d: d.replace(b"<dc:creator>Jun Cui</dc:creator>", b"<x:c>Jun Cui</x:c>", 1)),
]


@pytest.mark.parametrize("mutate", [m for _, m in _BAD_INPUTS], ids=[name for name, _ in _BAD_INPUTS])
def test_bad_input_raises(big_bytes: bytes, mutate: Callable[[bytes], bytes]) -> None:
    with pytest.raises(FeedFormatError):
        parse_feed(mutate(big_bytes))


def test_entity_declarations_are_not_expanded_into_a_bomb() -> None:
    data = b'<!DOCTYPE r [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><rss><channel/></rss>'
    page = parse_feed(data)
    assert page.is_empty and page.channel_title == ""


def _in_first_item(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    """A mutation of the one-item copy of the real feed: replace ``old`` once, inside the item."""

    def mutate(data: bytes) -> bytes:
        one = _first_item_only(data)
        start = one.index(b"<item>")
        assert old in one[start:], old
        return one[:start] + one[start:].replace(old, new, 1)

    return mutate


def _channel_title_last(data: bytes) -> bytes:
    """The one-item copy with the channel's <title> moved after the item (read once the channel ended)."""
    one = _first_item_only(data)
    start = one.index(b"<title>")
    end = one.index(b"</title>", start) + len(b"</title>")
    return (one[:start] + one[end:]).replace(b"</channel>", one[start:end] + b"</channel>")


_GUID = b'<guid isPermaLink="false">oai:arXiv.org:2411.17700v1</guid>'
_DESCRIPTION_ID = b"arXiv:2411.17700v1 Announce"
_TITLE = b"<title>Exploring the Impact"
_WHOLE_TITLE = (
    b"<title>Exploring the Impact of Generative AI on Cross-Border E-Commerce Brand Building in Chinese "
    b"Tianjin's Manufacturing Sector</title>"
)
_CREATOR = b"<dc:creator>Jun Cui</dc:creator>"
_CATEGORY = b"<category>cs.CY</category>"
_PUBDATE = b"<pubDate>Thu, 28 Nov 2024 00:00:00 -0500</pubDate>"

_Check = Callable[[FeedPage | tuple[type[Exception], str], PaperIn], bool]


def _first(**fields: Callable[[PaperIn], Any]) -> _Check:
    """The first item is the copy's first item (``reference``) with ``fields`` computed from it."""

    def check(outcome: FeedPage | tuple[type[Exception], str], reference: PaperIn) -> bool:
        expected = replace(reference, **{name: value(reference) for name, value in fields.items()})
        return isinstance(outcome, FeedPage) and outcome.items[0] == expected

    return check


def _skipped(start: str) -> _Check:
    """A skip note holds ``start``."""

    def check(outcome: FeedPage | tuple[type[Exception], str], _reference: PaperIn) -> bool:
        return isinstance(outcome, FeedPage) and any(start in note for note in outcome.skipped)

    return check


def _raises(error: type[Exception]) -> _Check:
    def check(outcome: FeedPage | tuple[type[Exception], str], _reference: PaperIn) -> bool:
        return isinstance(outcome, tuple) and outcome[0] is error

    return check


_SAME = _first()

# (name, mutation, what the page must be, given the first item of the unchanged copy)
_VARIANTS: list[tuple[str, Callable[[bytes], bytes], _Check]] = [
    ("unchanged", lambda d: d, _SAME),
    ("one_item", _first_item_only, _SAME),
    ("permalink_guid", _in_first_item(_GUID, _GUID.replace(b' isPermaLink="false"', b"")), _SAME),
    ("permalink_guid_true", _in_first_item(b'"false"', b'"true"'), _SAME),
    ("other_permalink_value", _in_first_item(b'"false"', b'"False"'), _SAME),
    (
        "guid_url_slashes_label",
        lambda d: _in_first_item(_GUID, b"<guid>https:////x.org/a</guid>")(
            d.replace(_DESCRIPTION_ID, b"arXiv:2411.17700 Announce", 1)
        ),
        _skipped("item 1 (https://x.org/a): no versioned arXiv id"),
    ),
    (
        "no_guid_label_from_link",
        lambda d: _in_first_item(_GUID, b"")(d.replace(_DESCRIPTION_ID, b"arXiv:2411.17700 Announce", 1)),
        _skipped("item 1 (https://arxiv.org/abs/2411.17700): no versioned arXiv id"),
    ),
    (
        "empty_guid_link_entities",
        lambda d: _in_first_item(_GUID, b"<guid></guid>")(
            d.replace(b"https://arxiv.org/abs/2411.17700<", b"http:///a?b=1&amp;amp;c=2&amp;d;<", 1).replace(
                _DESCRIPTION_ID, b"arXiv:2411.17700 Announce", 1
            )
        ),
        _skipped("item 1 (http://a?b=1&c=2&d): no versioned arXiv id"),
    ),
    (
        "no_link_no_version",
        lambda d: _in_first_item(b"<link>https://arxiv.org/abs/2411.17700</link>", b"")(
            d.replace(_DESCRIPTION_ID, b"arXiv:2411.17700 Announce", 1).replace(_GUID, b"<guid> </guid>")
        ),
        _skipped("item 1 (no guid): no versioned arXiv id"),
    ),
    ("link_before_guid", _in_first_item(b"<link>", b"<guid>x</guid><link>"), _SAME),
    (
        "mojibake_title",
        _in_first_item(_TITLE, "<title>CafÃ© Exploring the Impact".encode()),
        _first(title=lambda r: r.title.replace("Exploring", "Café Exploring", 1)),
    ),
    (
        "c1_controls",
        _in_first_item(b"brand construction", b"brand &#x96; construction &#x80;&#x81;"),
        _first(
            abstract=lambda r: r.abstract.replace(
                "brand construction", "brand \u2013 construction \u20ac\x81"
            )
        ),
    ),
    (
        "latin1_looking_utf8_creator",
        _in_first_item(b"Jun Cui", "Jun Cui Ã¼ber Â".encode()),
        _first(authors=lambda r: ("Jun Cui Ã¼ber Â",)),
    ),
    ("nbsp_around_creator", _in_first_item(b">Jun Cui<", b">&#xa0;Jun Cui&#x85;<"), _SAME),
    (
        "cdata_and_comment",
        _in_first_item(_TITLE, b"<title><![CDATA[<b>x</b> & y]]><!-- c --> Exploring"),
        _first(title=lambda r: r.title.replace("Exploring the Impact", "<b>x</b> & y Exploring", 1)),
    ),
    (
        "entities_in_title",
        _in_first_item(_TITLE, b"<title>&lt;i&gt;A&amp;B&lt;/i&gt; &#233; Exploring"),
        _first(title=lambda r: r.title.replace("Exploring the Impact", "<i>A&B</i> é Exploring", 1)),
    ),
    (
        "email_in_creator",
        _in_first_item(b"Jun Cui", b"Jun Cui (jun@example.org), A. B"),
        _first(authors=lambda r: ("Jun Cui", "A. B")),
    ),
    ("empty_creator", _in_first_item(_CREATOR, b"<dc:creator/>"), _first(authors=lambda r: ())),
    ("no_creator", _in_first_item(_CREATOR, b""), _first(authors=lambda r: ())),
    ("empty_title", _in_first_item(_WHOLE_TITLE, b"<title/>"), _first(title=lambda r: "")),
    ("blank_title", _in_first_item(_WHOLE_TITLE, b"<title>  </title>"), _first(title=lambda r: "")),
    (
        "repeated_categories",
        _in_first_item(
            _CATEGORY,
            _CATEGORY
            + b"<category> cs.AI </category><category/>"
            + _CATEGORY
            + b"<category>cs.AI</category>",
        ),
        _first(categories=lambda r: ("cs.CY", "cs.AI")),
    ),
    ("category_with_domain", _in_first_item(_CATEGORY, b'<category domain="x">cs.CY</category>'), _SAME),
    ("iso_pubdate", _in_first_item(_PUBDATE, b"<pubDate>2024-11-28T05:00:00Z</pubDate>"), _SAME),
    ("unparseable_pubdate", _in_first_item(_PUBDATE, b"<pubDate>yesterday</pubDate>"), _SAME),
    ("empty_pubdate", _in_first_item(_PUBDATE, b"<pubDate></pubDate>"), _SAME),
    (
        "gmt_pubdate",
        _in_first_item(b"-0500</pubDate>\n      <arxiv", b"GMT</pubDate>\n      <arxiv"),
        _first(announced_at=lambda r: datetime(2024, 11, 28, tzinfo=UTC)),
    ),
    (
        "no_channel_pubdate",
        lambda d: d.replace(b"<pubDate>Thu, 28 Nov 2024 00:00:00 -0500</pubDate>\n    <skip", b"<skip", 1),
        _SAME,
    ),
    (
        "unknown_announce_type",
        _in_first_item(b">new<", b">withdrawn<"),
        _skipped("item 1 (oai:arXiv.org:2411.17700v1): unknown announce type 'withdrawn'"),
    ),
    ("announce_type_case", _in_first_item(b">new<", b"> NEW <"), _SAME),
    ("no_announce_type", _in_first_item(b"<arxiv:announce_type>new</arxiv:announce_type>", b""), _SAME),
    (
        "doi_and_journal_ref",
        _in_first_item(
            _CREATOR,
            _CREATOR + b"<arxiv:DOI> 10.1/x </arxiv:DOI>"
            b"<arxiv:journal_reference>J. 1 (2024)</arxiv:journal_reference>",
        ),
        _first(journal_ref=lambda r: "J. 1 (2024)", doi=lambda r: "10.1/x"),
    ),
    ("utf8_bom", lambda d: b"\xef\xbb\xbf" + d, _SAME),
    ("no_xml_declaration", lambda d: d[d.index(b"<rss") :], _SAME),
    ("double_quoted_declaration", lambda d: d.replace(b"encoding='UTF-8'", b'encoding="utf-8"', 1), _SAME),
    ("channel_title_after_items", _channel_title_last, _SAME),
    # Not laid out like arXiv's feed: what is not read is ignored, of an element given twice the first counts.
    (
        "other_arxiv_prefix",
        lambda d: (
            d.replace(b"xmlns:arxiv=", b"xmlns:ax=", 1)
            .replace(b"<arxiv:", b"<ax:")
            .replace(b"</arxiv:", b"</ax:")
        ),
        _SAME,
    ),
    (
        "xmlns_in_text",
        _in_first_item(b"brand construction", b'brand xmlns:x="y" construction'),
        _first(abstract=lambda r: r.abstract.replace("brand construction", 'brand xmlns:x="y" construction')),
    ),
    (
        "latin1_document",
        lambda d: (
            _first_item_only(d)
            .replace(b"encoding='UTF-8'", b"encoding='ISO-8859-1'")
            .replace(b"Jun Cui", b"J\xfcn Cui")
        ),
        _first(authors=lambda r: ("Jün Cui",)),
    ),
    (
        "doctype_entity",
        lambda d: (
            _first_item_only(d)
            .replace(b"<rss ", b'<!DOCTYPE rss [<!ENTITY who "Jun">]><rss ', 1)
            .replace(b">Jun Cui<", b">&who; Cui<")
        ),
        _SAME,
    ),
    ("comment_before_root", lambda d: d.replace(b"<rss ", b"<!-- hi --><rss ", 1), _SAME),
    ("unknown_item_element", _in_first_item(_CREATOR, _CREATOR + b"<comments>c</comments>"), _SAME),
    (
        "unknown_arxiv_element",
        _in_first_item(_CREATOR, _CREATOR + b"<arxiv:comment>c</arxiv:comment>"),
        _SAME,
    ),
    ("two_descriptions", _in_first_item(_CREATOR, _CREATOR + b"<description>second</description>"), _SAME),
    ("two_titles", _in_first_item(_CREATOR, _CREATOR + b"<title>second</title>"), _SAME),
    (
        "nested_element",
        _in_first_item(_TITLE, b"<title><b>bold</b> Exploring"),
        _first(title=lambda r: r.title.replace("Exploring the Impact", "bold Exploring", 1)),
    ),
    (
        "item_attribute",
        _in_first_item(
            b"<item>", b'<item rdf:about="x" xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        ),
        _SAME,
    ),
    ("xml_base", _in_first_item(b"<link>", b'<link xml:base="http://a.org/">'), _SAME),
    ("content_encoded", _in_first_item(_CREATOR, _CREATOR + b"<content:encoded>x</content:encoded>"), _SAME),
    ("dc_subject", _in_first_item(_CREATOR, _CREATOR + b"<dc:subject>cs.AI</dc:subject>"), _SAME),
    (
        "item_outside_channel",
        lambda d: d.replace(b"</channel>", b"</channel><item><title>x</title></item>"),
        _skipped("(no guid): no versioned arXiv id"),
    ),
    ("channel_image", lambda d: d.replace(b"<docs>", b"<image><title>i</title></image><docs>", 1), _SAME),
    (
        "error_channel_with_item",
        lambda d: _first_item_only(d).replace(
            b"<title>astro-ph", b"<title>Feed error for query: x astro-ph", 1
        ),
        _raises(ArxivFeedError),
    ),
]


# `make test` applies each variant to the first VARIANT_ITEMS items (channel, first item and neighbours all
# there); `make test-slow` to the whole feed. Every variant but the error channel still gives one item or
# one skip note per <item>.
VARIANT_ITEMS = 20


@pytest.mark.parametrize("feed", ["first_items", pytest.param("whole_feed", marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    ("mutate", "check"), [(m, c) for _, m, c in _VARIANTS], ids=[name for name, _, _ in _VARIANTS]
)
def test_variants(big_bytes: bytes, mutate: Callable[[bytes], bytes], check: _Check, feed: str) -> None:
    copy = big_bytes if feed == "whole_feed" else _first_items(big_bytes, VARIANT_ITEMS)
    data = mutate(copy)
    outcome = _outcome(parse_feed, data)
    assert check(outcome, parse_feed(copy).items[0])
    if isinstance(outcome, FeedPage):
        assert len(outcome.items) + len(outcome.skipped) == len(re.findall(rb"<item[ >]", data))


def test_windows_1252_table() -> None:
    # The C1 controls read as the Windows-1252 characters at those bytes; the five bytes it leaves
    # undefined are not in the table.
    table = arxiv_rss_parse._CP1252
    assert len(table) == 27 and table[0x96] == "\u2013" and table[0x80] == "\u20ac"
    assert not {0x81, 0x8D, 0x8F, 0x90, 0x9D} & table.keys()


# Characters XML 1.0 allows, so that any generated text can be written into the feed.
_XML_TEXT = st.text(
    st.characters(
        codec="utf-8",  # which also leaves out lone surrogates
        exclude_characters="".join(chr(c) for c in range(32) if chr(c) not in "\t\n\r") + "\ufffe\uffff",
    ),
    max_size=40,
)


def _escape(text: str) -> bytes:
    # Character references, so that a carriage return survives and nothing can close the element early.
    return "".join(c if c.isalnum() or c == " " else f"&#{ord(c)};" for c in text).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=_XML_TEXT, creator=_XML_TEXT, category=_XML_TEXT, pub_date=_XML_TEXT)
def test_any_text_gives_one_item_or_one_note(
    big_bytes: bytes, title: str, creator: str, category: str, pub_date: str
) -> None:
    data = (
        _first_item_only(big_bytes)
        .replace(_TITLE, b"<title>" + _escape(title), 1)
        .replace(_CREATOR, b"<dc:creator>" + _escape(creator) + b"</dc:creator>", 1)
        .replace(_CATEGORY, _CATEGORY + b"<category>" + _escape(category) + b"</category>", 1)
        .replace(_PUBDATE, b"<pubDate>" + _escape(pub_date) + b"</pubDate>", 1)
    )
    page = parse_feed(data)
    assert len(page.items) + len(page.skipped) == 1
    if page.items:
        assert page.items[0].categories[0] == "cs.CY"


# The bracket walk of split_authors as it was before it skipped to the brackets with a regex: the reference
# for the faster version, which must split every string the same way.


def _split_top_level_reference(text: str) -> list[str] | None:
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


def _remove_parenthesised_reference(text: str) -> str:
    out: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
            out.append(" ")
        elif char == ")":
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="ab (){},\\'\" and\n", max_size=24))
def test_bracket_walk_matches_reference(text: str) -> None:
    assert arxiv_rss_parse._split_top_level(text) == _split_top_level_reference(text)
    assert arxiv_rss_parse._remove_parenthesised(text) == _remove_parenthesised_reference(text)


def test_one_invalid_utf8_byte_costs_no_item(big_bytes: bytes, big_page: FeedPage) -> None:
    """A stray byte in one title replaced, every item kept, and the page says what happened."""
    title = b"<title>Equivalent of Non-Trivial Riemann Zeros"
    assert big_bytes.count(title) == 1
    broken = big_bytes.replace(title, b"<title>Equivalent of Non-\xffTrivial Riemann Zeros")
    with pytest.raises(ET.ParseError):
        ET.fromstring(broken)  # the strict parse the old code stopped at
    for page in (parse_feed(broken),):
        assert len(page.items) == len(big_page.items) == 1504
        assert len(page.notes) == 1
        assert page.notes[0].startswith("1 item had invalid UTF-8 (item 2 (oai:arXiv.org:")
        assert "1 bad byte sequence replaced by U+FFFD" in page.notes[0]
        hit = [item for item in page.items if "\ufffd" in item.title]
        assert len(hit) == 1 and hit[0].title.startswith("Equivalent of Non-\ufffdTrivial")
    assert not big_page.notes


def test_invalid_utf8_does_not_rescue_a_cut_or_foreign_document(big_bytes: bytes) -> None:
    cut = big_bytes[: len(big_bytes) // 2] + b"\xff"
    with pytest.raises(FeedFormatError, match="ends before the XML document does"):
        parse_feed(cut)
    latin = big_bytes.replace(b"encoding='UTF-8'", b"encoding='ISO-8859-1'", 1) + b"\xff"
    with pytest.raises(FeedFormatError):
        parse_feed(latin)  # not UTF-8 by its own word: the repair is not ours to make


# ----------------------------------------------------------------------------------------------------------
# Read chunk by chunk from a file: the same outcome whatever the chunk boundaries, and with the
# versions spooled to a file, as a read of the whole bytes in the default chunks gives.


def _bad_bytes(data: bytes, items: tuple[int, ...], header: bool = False) -> bytes:
    """A stray 0xff in the title of each of ``items`` (1-based), and in the channel title if ``header``."""
    starts = [match.start() for match in re.finditer(rb"<item>", data)]
    out = bytearray(data)
    for position in sorted(items, reverse=True):
        title = out.index(b"<title>", starts[position - 1]) + len(b"<title>")
        out[title + 3 : title + 3] = b"\xff"
    if header:
        title = out.index(b"<title>") + len(b"<title>")
        out[title + 1 : title + 1] = b"\xc3"
    return bytes(out)


def _cut_inside_a_character(data: bytes) -> bytes:
    """An "é" put in the middle of the feed (it has none: accents are TeX), cut after its first byte."""
    middle = data.index(b"<title>", len(data) // 2) + len(b"<title>")
    return data[:middle] + "é".encode()[:1]


def _undated_late_items(data: bytes) -> bytes:
    """Items 1,000 and 1,200 without a <pubDate>, the channel's own <pubDate> moved after the items."""
    starts = [match.start() for match in re.finditer(rb"<item>", data)]
    out = data
    for position in (1200, 1000):
        start = starts[position - 1]
        end = out.index(b"</item>", start)
        out = out[:start] + re.sub(rb"<pubDate>[^<]*</pubDate>", b"", out[start:end], count=1) + out[end:]
    channel_date = re.search(rb"\s*<pubDate>[^<]*</pubDate>", out)
    assert channel_date is not None and channel_date.start() < out.index(b"<item>")
    out = out[: channel_date.start()] + out[channel_date.end() :]
    return out.replace(b"</channel>", channel_date.group() + b"</channel>")


_CHUNKED: list[tuple[str, Callable[[bytes], bytes], int]] = [
    ("unchanged", lambda d: d, 4093),
    (
        "bad_bytes_in_seven_items_and_the_header",
        lambda d: _bad_bytes(d, (2, 3, 700, 701, 900, 1200, 1504), True),
        4093,
    ),
    ("bad_byte_read_byte_by_byte", lambda d: _bad_bytes(_first_item_only(d), (1,), True), 1),
    ("utf8_bom", lambda d: b"\xef\xbb\xbf" + _first_item_only(d), 1),
    ("xmlns_in_text", _in_first_item(b"brand construction", b'brand xmlns:dc = "x" construction'), 3),
    ("known_xmlns_split", lambda d: _first_item_only(d), 7),
    ("cut_after_last_item", lambda d: d[: d.rindex(b"</item>") + len(b"</item>")], 4093),
    ("cut_inside_a_character", _cut_inside_a_character, 4093),
    (
        "not_well_formed_late",
        lambda d: d.replace(b"<category>cs.LG</category>", b"<category>cs.LG</categ>", 1),
        65521,
    ),
    ("undated_late_items", _undated_late_items, 4093),
    ("doctype", lambda d: b"<!DOCTYPE rss>" + _first_item_only(d)[d.index(b"<rss") :], 5),
]


@pytest.mark.parametrize(
    ("mutate", "chunk"), [(m, c) for _, m, c in _CHUNKED], ids=[name for name, _, _ in _CHUNKED]
)
def test_chunked_and_spooled_reads_are_the_same(
    big_bytes: bytes, mutate: Callable[[bytes], bytes], chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = mutate(big_bytes)
    reference = _outcome(parse_feed, data)
    monkeypatch.setattr(arxiv_rss_bytes, "CHUNK", chunk)
    monkeypatch.setattr(paper_spool, "BATCH", 64)
    with tempfile.TemporaryFile() as body:
        body.write(data)
        assert _outcome(lambda _: parse_feed(body), data) == reference
        spooled = _outcome(lambda _: parse_feed(body, spool_after=50), data)
    if isinstance(reference, FeedPage):
        assert isinstance(spooled, FeedPage)
        assert tuple(spooled.items) == reference.items
        assert replace(spooled, items=()) == replace(reference, items=())
    else:
        assert spooled == reference


def test_spooled_items_are_in_a_file(big_bytes: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paper_spool, "BATCH", 100)
    page = parse_feed(io.BytesIO(big_bytes), spool_after=200)
    assert isinstance(page.items, PaperSpool) and not page.items.in_memory()
    assert len(page.items) == 1504 and not page.is_empty
    assert page.items[1503] == parse_feed(big_bytes).items[1503]
