"""The Matcher: indexed matching agrees with brute force, and its work does not grow with the follows.

tests/test_match_property.py checks the same agreement on random follows, adds and removes.
"""

from __future__ import annotations

import re
import unicodedata
import xml.etree.ElementTree as ET

import pytest

from core.follows.match import Matcher
from core.follows.normalise import given_compatible, given_letters, name_key
from core.follows.query import PaperText, Query, parse
from core.tex_accents import decode_tex
from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED as FEED
from tests.support.name_pairs import NAME_PAIRS


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


# Parsing 20,000 follows takes ~4 s; `make test` files 2,000 among the six (the candidate count does not
# depend on how many others there are), `make test-slow` the full 20,000.
@pytest.mark.parametrize("others", [2_000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_many_follows_evaluate_only_a_few_candidates(others: int) -> None:
    follows: list[tuple[int, Query]] = []
    for i in range(others):
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
    assert m.size == others + 6

    p = paper(title="Asynchronous rollouts for topicb model training", authors=("Zeng Li", "Anna Kovf"))
    assert m.match(p) == [
        (1, ('title: "topicb model"',)),
        (20_000, ("author Zeng Li", "category cs.DC")),
        (20_001, ('abstract: "policy lag"',)),
        (20_002, ("paper 2611.08864",)),
        (20_003, ()),
        (20_005, ("title: topicb", "category cs.LG")),
    ]
    # Candidates: the six matching follows and the unanchored NOT cat:cs.LG. au:"Q. Kovf" is filed under the
    # surname "kovf" and evaluated, but it fails on the given name, so no query built on it is looked at.
    # Nothing else of the others is looked at.
    assert m.last_candidates == 7

    assert m.match(paper(title="Nothing here", abstract="Nothing at all.", authors=("Nobody Known",))) == [
        (20_002, ("paper 2611.08864",)),
        (20_003, ()),
    ]
    assert m.last_candidates == 3


# --- incremental updates ----------


def test_add_and_remove_update_the_index_in_place() -> None:
    m = Matcher()
    assert m.size == m.distinct_queries == 0
    m.add(3, parse("cat:cs.DC"))
    m.add(1, parse("rollouts"))
    m.add(2, parse("cat:CS.dc"))  # the same query as follow 3: one slot
    assert (m.size, m.distinct_queries) == (3, 2)
    assert 2 in m and 4 not in m
    assert m.match(paper()) == [(1, ("title: rollouts",)), (2, ("category cs.DC",)), (3, ("category cs.DC",))]

    m.remove(3)
    assert (m.size, m.distinct_queries) == (2, 2)
    assert m.match(paper()) == [(1, ("title: rollouts",)), (2, ("category cs.DC",))]
    m.remove(2)  # the last follow of cat:cs.DC: the query and its atom leave the index
    assert (m.size, m.distinct_queries, m.distinct_atoms) == (1, 1, 1)
    assert m.match(paper()) == [(1, ("title: rollouts",))]
    m.add(2, parse("au:Remy"))  # a freed slot number is reused
    assert m.match(paper()) == [(1, ("title: rollouts",)), (2, ("author Benjamin Rémy",))]
    m.remove(1)
    m.remove(2)
    assert m.size == m.distinct_queries == m.distinct_atoms == 0
    assert m.match(paper()) == []


def test_add_rejects_a_known_id_and_remove_an_unknown_one() -> None:
    m = Matcher([(1, parse("a"))])
    with pytest.raises(ValueError, match="follow id 1 is already indexed"):
        m.add(1, parse("b"))
    with pytest.raises(KeyError):
        m.remove(2)
    assert m.match(paper(title="a b")) == [(1, ("title: a",))]


def test_follow_ids_added_out_of_order_still_come_back_in_order() -> None:
    m = Matcher()
    for follow_id in (50, 10, 40, 20, 30):
        m.add(follow_id, parse("cat:cs.LG"))
    m.add(25, parse("rollouts"))
    assert [fid for fid, _ in m.match(paper())] == [10, 20, 25, 30, 40, 50]
    m.remove(30)
    assert [fid for fid, _ in m.match(paper())] == [10, 20, 25, 40, 50]


def test_match_groups_give_one_entry_per_distinct_query() -> None:
    m = Matcher(
        [(4, parse("cat:cs.LG")), (1, parse("cat:cs.lg")), (2, parse("rollouts")), (3, parse("quantum"))]
    )
    groups = m.match_groups(paper())
    assert sorted(groups) == [((1, 4), ("category cs.LG",)), ((2,), ("title: rollouts",))]
    assert m.last_candidates == 2


def test_groups_already_returned_do_not_change_with_the_index() -> None:
    m = Matcher([(1, parse("cat:cs.LG"))])
    before = m.match_groups(paper())
    m.add(2, parse("cat:cs.LG"))
    m.remove(1)
    assert before == [((1,), ("category cs.LG",))]
    assert m.match_groups(paper()) == [((2,), ("category cs.LG",))]


# --- the shapes the index evaluates without the query tree ----------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # a word: found in the title, else in the abstract; ti: and abs: look at their field only
        ("rollouts", ("title: rollouts",)),
        ("distributed", ("abstract: distributed",)),
        ("ti:distributed", None),
        ("abs:distributed", ("abstract: distributed",)),
        ("abs:rollouts", None),
        # a phrase of two words (looked up among consecutive terms) or three (evaluated)
        ('"policy lag"', ('abstract: "policy lag"',)),
        ('ti:"policy lag"', None),
        ('"lag policy"', None),
        ('"rollouts for policy"', ('title: "rollouts for policy"',)),
        ('"lag of distributed"', ('abstract: "lag of distributed"',)),
        ('"lag distributed of"', None),
        # atom AND NOT atom
        ("rollouts ANDNOT cat:cs.CV", ("title: rollouts",)),
        ("rollouts ANDNOT cat:cs.DC", None),
        # an OR of two atoms, either or both holding, with and without a NOT; repeated reasons once
        ("cat:cs.DC OR quantum", ("category cs.DC",)),
        ("quantum OR cat:cs.DC", ("category cs.DC",)),
        ("cat:cs.DC OR rollouts", ("category cs.DC", "title: rollouts")),
        ("rollouts OR cat:cs.DC", ("title: rollouts", "category cs.DC")),
        ("cat:cs.LG OR cat:cs.*", ("category cs.LG",)),
        ("(cat:cs.DC OR rollouts) NOT cat:cs.CV", ("category cs.DC", "title: rollouts")),
        ("(cat:cs.DC OR rollouts) NOT cat:cs.LG", None),
        # atom AND atom, in both orders; repeated reasons once
        ("cat:cs.DC rollouts", ("category cs.DC", "title: rollouts")),
        ("rollouts cat:cs.DC", ("title: rollouts", "category cs.DC")),
        ("cat:cs.LG cat:cs.*", ("category cs.LG",)),
        ("rollouts ti:rollouts", ("title: rollouts",)),
        ("cat:cs.DC quantum", None),
        # atom AND atom AND NOT atom
        ("cat:cs.DC rollouts NOT au:Smith", ("category cs.DC", "title: rollouts")),
        ("rollouts NOT au:Smith cat:cs.DC", ("title: rollouts", "category cs.DC")),
        ("rollouts NOT au:Li cat:cs.DC", None),
        # other clauses: three ANDed atoms, ORs of three, an OR inside an AND
        ("cat:cs.DC rollouts au:Li", ("category cs.DC", "title: rollouts", "author Zeng Li")),
        ("cat:cs.DC rollouts NOT au:Li", None),
        ("quantum OR au:Remy OR rollouts", ("author Benjamin Rémy", "title: rollouts")),
        ("(quantum OR lag) cat:cs.LG", ("abstract: lag", "category cs.LG")),
        ("(quantum OR survey) cat:cs.LG", None),
        # any other shape: the query tree, compiled
        ("(rollouts cat:cs.DC) OR au:Nobody", ("title: rollouts", "category cs.DC")),
        ("NOT (cat:cs.CV OR cat:cs.AI) rollouts", ("title: rollouts",)),
        ("rollouts NOT (cat:cs.LG OR cat:cs.AI)", None),
        ("quantum OR NOT ti:survey", ()),
    ],
)
def test_every_query_shape_gives_what_evaluate_gives(query: str, expected: tuple[str, ...] | None) -> None:
    parsed = parse(query)
    assert parsed.evaluate(paper()) == expected
    m = Matcher([(7, parsed), (8, parse("quantum"))])
    assert m.match(paper()) == ([] if expected is None else [(7, expected)])


def test_author_queries_are_evaluated_only_for_a_shared_initial() -> None:
    lee = paper(authors=("A. Lee Swindlehurst", "Anna Kovf", "Zeng Li"))
    m = matcher('au:"Q. Kovf"', 'au:"Bob Swindlehurst"')
    assert m.match(lee) == []
    assert m.last_atoms == 0  # no Kovf of the paper has a given name starting with q, no Swindlehurst a b
    # Every other one is evaluated by the name rules, which pair given names in more ways than the first
    # one: "Lee" is "A. Lee", who goes by Lee.
    m = matcher(
        'au:"Lee Swindlehurst"', 'au:"A. Kovf"', "au:Kovf", 'au:"Anna B. Kovf"', 'au:"K. Swindlehurst"'
    )
    assert m.match(lee) == [
        (1, ("author A. Lee Swindlehurst",)),
        (2, ("author Anna Kovf",)),
        (3, ("author Anna Kovf",)),
    ]
    assert (m.last_atoms, m.last_candidates) == (4, 3)  # "K. Swindlehurst" skipped; three hold
    assert matcher('au:"A. Lee Swindlehurst"').match(paper(authors=("Lee Swindlehurst",))) == [
        (1, ("author Lee Swindlehurst",))
    ]


@pytest.mark.parametrize(
    ("query", "stored", "expected"),
    [pytest.param(q, s, e, id=f"{q} ~ {s}") for q, s, e, _ in NAME_PAIRS],
)
def test_the_index_agrees_with_the_name_rules_on_every_pair(query: str, stored: str, expected: bool) -> None:
    """The shortcut for author queries (a shared initial) against the full table of tests/test_names.py."""
    p = paper(authors=("Someone Else", decode_tex(stored)))
    parsed = parse(f'au:"{query}"')
    found = parsed.evaluate(p)
    assert (found is not None) is expected
    assert Matcher([(1, parsed), (2, parse("au:Nobody"))]).match(p) == ([(1, found)] if found else [])


def test_given_letters_meet_whenever_the_name_rules_pair_given_names() -> None:
    """The filing of author queries by letter (``core.follows.normalise.given_letters``) on every given-name
    pairing of
    the names table and of the recorded day's authors with one another's initials and names."""
    day = [name_key(author)[1] for p in parse_feed(FEED.read_bytes()).items for author in p.authors]
    table = [(name_key(q)[1], name_key(decode_tex(s))[1]) for q, s, _, _ in NAME_PAIRS]
    variants = [
        pair
        for author in dict.fromkeys(day)
        for given in (author, tuple(name[:1] for name in author), author[1:], ("-".join(author),))
        for pair in ((given, author), (author, given))
    ]
    for query, author in table + variants:
        if given_compatible(query, author):
            query_letters, author_letters = given_letters(query), given_letters(author)
            assert query_letters is None or author_letters is None or query_letters & author_letters, (
                query,
                author,
            )
