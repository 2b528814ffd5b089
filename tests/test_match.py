"""The Matcher: indexed matching agrees with brute force, and its work does not grow with the follows."""

from __future__ import annotations

import re
import unicodedata
import xml.etree.ElementTree as ET

import pytest

from core.match import Matcher
from core.query import PaperText, Query, parse
from core.values import PaperIn
from tests.conftest import BIG_FEED as FEED


def paper(
    title: str = "Asynchronous rollouts for policy optimisation",
    abstract: str = "We bound the policy lag of distributed actors.",
    authors: tuple[str, ...] = ("Zeng Li", "Benjamin Rémy"),
    categories: tuple[str, ...] = ("cs.LG", "cs.DC"),
    arxiv_id: str = "2611.08864",
) -> PaperIn:
    return PaperIn(
        arxiv_id=arxiv_id, version=1, title=title, abstract=abstract, authors=authors, categories=categories
    )


def matcher(*queries: str) -> Matcher:
    return Matcher((i, parse(q)) for i, q in enumerate(queries, start=1))


def test_match_returns_follow_ids_in_order_with_reasons() -> None:
    m = Matcher(
        [(30, parse("cat:cs.DC")), (10, parse('au:"Z. Li"')), (20, parse("quantum")), (5, parse("rollouts"))]
    )
    assert m.size == 4
    assert m.match(paper()) == [
        (5, ("title: rollouts",)),
        (10, ("author Zeng Li",)),
        (30, ("category cs.DC",)),
    ]
    assert m.last_candidates == 3  # "quantum" is not a word of the paper, so it is never evaluated


def test_match_accepts_pretokenised_paper() -> None:
    m = matcher("au:Remy")
    assert m.match(PaperText.of(paper())) == m.match(paper()) == [(1, ("author Benjamin Rémy",))]


def test_identical_queries_are_evaluated_once() -> None:
    m = Matcher([(1, parse("cat:cs.DC")), (2, parse("cat:CS.dc")), (3, parse("cat:cs.DC"))])
    assert m.size == 3
    assert m.match(paper()) == [(1, ("category cs.DC",)), (2, ("category cs.DC",)), (3, ("category cs.DC",))]
    assert m.last_candidates == 1


def test_queries_without_a_positive_anchor_are_always_evaluated() -> None:
    m = matcher("NOT cat:cs.CV", "NOT cat:cs.DC", "quantum OR NOT ti:survey", "au:Nobody")
    assert m.always_evaluated == 3
    assert m.match(paper()) == [(1, ()), (3, ())]
    assert m.last_candidates == 3


def test_anchor_of_and_is_the_most_selective_child() -> None:
    m = matcher("cat:cs.DC au:Li", "cat:cs.DC au:Smith", "cat:cs.* ti:rollouts", "cat:cs.* ti:quantum")
    assert m.match(paper()) == [
        (1, ("category cs.DC", "author Zeng Li")),
        (3, ("category cs.LG", "title: rollouts")),
    ]
    # Filed under au:li, au:smith, w:rollouts and w:quantum, so only the first and third are looked at.
    assert m.last_candidates == 2


def test_duplicate_follow_ids_are_rejected() -> None:
    with pytest.raises(ValueError, match="follow id 7 appears twice"):
        Matcher([(7, parse("a")), (7, parse("b"))])


def test_empty_matcher() -> None:
    m = Matcher([])
    assert m.size == 0
    assert m.match(paper()) == []
    assert m.last_candidates == 0


# --- the recorded feed ----------

_DC = "{http://purl.org/dc/elements/1.1/}"
_COMBINING = {
    "'": "\u0301", '"': "\u0308", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304", ".": "\u0307",
    "u": "\u0306", "v": "\u030c", "c": "\u0327", "H": "\u030b", "k": "\u0328",
}  # fmt: skip
_TEX_LETTERS = {"l": "ł", "L": "Ł", "o": "ø", "O": "Ø", "i": "ı", "ss": "ß", "ae": "æ", "AE": "Æ", "oe": "œ"}
_TEX_ACCENT = re.compile(r"\\([uvcHk])\s*\{(\w)\}|\\([uvcHk])\s+(\w)|\\(['\"`^~=.])\{?(\w)\}?")


def _detex(s: str) -> str:
    """Just enough TeX accent decoding for author names, independent of the real feed parser."""
    s = re.sub(r"\\(ss|ae|AE|oe|[lLoOi])(?![A-Za-z])", lambda m: _TEX_LETTERS[m.group(1)], s)
    s = _TEX_ACCENT.sub(
        lambda m: (
            (m.group(2) or m.group(4) or m.group(6)) + _COMBINING[m.group(1) or m.group(3) or m.group(5)]
        ),
        s,
    )
    return unicodedata.normalize("NFC", s.replace("{", "").replace("}", ""))


def _authors(creator: str) -> tuple[str, ...]:
    previous = None
    while previous != creator:  # affiliations in parentheses, which may nest and contain commas
        previous, creator = creator, re.sub(r"\([^()]*\)", "", creator)
    return tuple(name.strip() for name in re.split(r",|\band\b", _detex(creator)) if name.strip())


def _feed_papers(limit: int) -> list[PaperIn]:
    papers = []
    for item in list(ET.parse(FEED).getroot().iter("item"))[:limit]:
        guid = re.search(r"(\d{4}\.\d{4,5}|[a-z-]+/\d{7})v(\d+)$", item.findtext("guid") or "")
        assert guid is not None
        description = item.findtext("description") or ""
        papers.append(
            PaperIn(
                arxiv_id=guid.group(1),
                version=int(guid.group(2)),
                title=item.findtext("title") or "",
                abstract=description.split("Abstract:", 1)[1].strip(),
                authors=_authors(item.findtext(f"{_DC}creator") or ""),
                categories=tuple(c.text or "" for c in item.findall("category")),
            )
        )
    return papers


FEED_QUERIES = [
    "learning",
    "ti:learning",
    'abs:"deep learning"',
    '"language models"',
    "multi-agent",
    "graph",
    "3d",
    'ti:"time series"',
    "generative AI",
    "eeg OR ecg",
    "ti:diffusion OR abs:diffusion",
    "cat:cs.LG",
    "cat:cs.*",
    "cat:astro-ph",
    "cat:quant-ph OR cat:hep-th",
    "au:Li",
    'au:"T. Li"',
    'au:"Stan Li"',
    "au:Wang cat:cs.CV",
    "au:Remy",
    'au:"van der Schee"',
    'au:"De Rosa"',
    'au:"J. C. Martinez"',
    "au:Kadioglu",
    "cat:eess.SP au:Liu",
    "id:2411.17700",
    "id:2411.17702 OR au:Zhang",
    "quantum ANDNOT cat:quant-ph",
    "NOT cat:cs.*",
    "(graph OR network) cat:cs.LG",
    '"neural network" NOT cat:cs.CV',
    'abs:"machine learning" AND NOT ti:learning',
    "galaxies OR cat:astro-ph.GA",
    "NOT (cat:cs.LG OR cat:cs.AI) learning",
]


def test_indexed_matching_equals_brute_force_on_the_recorded_feed() -> None:
    papers = _feed_papers(200)
    assert len(papers) == 200
    queries = [parse(q) for q in FEED_QUERIES]
    m = Matcher(enumerate(queries))
    evaluated = 0
    hits: dict[int, int] = {}
    for p in papers:
        expected = [(i, r) for i, q in enumerate(queries) if (r := q.evaluate(p)) is not None]
        assert m.match(p) == expected, p.arxiv_id
        evaluated += m.last_candidates
        for i, _ in expected:
            hits[i] = hits.get(i, 0) + 1
    # The comparison means something: every query matches some paper, and none matches them all...
    assert sorted(hits) == list(range(len(queries)))
    assert max(hits.values()) < len(papers)
    # ...and the index skipped most of the work brute force does.
    assert evaluated < len(papers) * len(queries) / 3


def test_names_and_reasons_on_the_recorded_feed() -> None:
    by_id = {p.arxiv_id: p for p in _feed_papers(200)}
    assert parse("au:Remy").evaluate(by_id["2411.17748"]) == ("author Benjamin Rémy",)
    assert parse('au:"van der Schee"').evaluate(by_id["2411.17806"]) == ("author Wilke van der Schee",)
    assert parse("au:Kadioglu").evaluate(by_id["2411.17796"]) == ("author Serdar Kadıoğlu",)
    assert parse("id:2411.17700 generative").evaluate(by_id["2411.17700"]) == (
        "paper 2411.17700",
        "title: generative",
    )


# --- scale ----------


def _tag(i: int) -> str:
    """A distinct lower-case letter string per integer (surnames and words without digits)."""
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters += chr(ord("a") + r)
        if i == 0:
            return letters


def test_twenty_thousand_follows_evaluate_only_a_few_candidates() -> None:
    follows: list[tuple[int, Query]] = []
    for i in range(20_000):
        t = _tag(i)
        kind = i % 5
        if kind == 0:
            text = f'au:"Q. Kov{t}"'
        elif kind == 1:
            text = f'ti:"topic{t} model"'
        elif kind == 2:
            text = f"cat:cs.LG au:Mar{t}"
        elif kind == 3:
            text = f"(abs:word{t} OR ti:term{t}) cat:cs.DC"
        else:
            text = f"cat:cs.* ti:zeta{t} NOT cat:cs.CV"
        follows.append((i, parse(text)))
    # Follows that should match the paper below, spread among the others, and two without anchors.
    follows += [
        (20_000, parse('au:"Z. Li" cat:cs.DC')),
        (20_001, parse('abs:"policy lag"')),
        (20_002, parse("id:2611.08864")),
        (20_003, parse("NOT cat:cs.CV")),
        (20_004, parse("NOT cat:cs.LG")),
        (20_005, parse("ti:topicb cat:cs.LG")),
    ]
    m = Matcher(follows)
    assert m.size == 20_006

    p = paper(title="Asynchronous rollouts for topicb model training", authors=("Zeng Li", "Anna Kovf"))
    assert m.match(p) == [
        (1, ('title: "topicb model"',)),
        (20_000, ("author Zeng Li", "category cs.DC")),
        (20_001, ('abstract: "policy lag"',)),
        (20_002, ("paper 2611.08864",)),
        (20_003, ()),
        (20_005, ("title: topicb", "category cs.LG")),
    ]
    # Candidates: the six matching follows, the unanchored NOT cat:cs.LG, and au:"Q. Kovf" (filed under the
    # surname "kovf", rejected on the given name). Nothing else of the 20,006 is evaluated.
    assert m.last_candidates == 8

    assert m.match(paper(title="Nothing here", abstract="Nothing at all.", authors=("Nobody Known",))) == [
        (20_002, ("paper 2611.08864",)),
        (20_003, ()),
    ]
    assert m.last_candidates == 3
