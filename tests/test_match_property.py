"""Property: the index gives exactly what evaluating every follow gives, through any adds and removes.

Follows are random queries built from the real categories, author names and title words of the recorded
rss.arxiv.org day, using every part of the follow language; they are checked against a sample of that
day's papers. Hypothesis runs derandomized, so CI sees the same examples on every run. `make test` runs
each property on FAST_EXAMPLES examples; the FULL_EXAMPLES runs are marked slow (`make test-slow`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from core.follows.match import Matcher
from core.follows.normalise import words
from core.follows.query import PaperText, Query, QueryError, parse
from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED

SAMPLE_EVERY = 30  # 51 of the 1,504 versions: enough variety, and each example stays in milliseconds
FULL_EXAMPLES = 120  # ~50 ms each: ~6-8 s per property, so the full runs are in `make test-slow`
FAST_EXAMPLES = 25  # `make test`: every operator and add/remove path still shows up in this many
PROPERTY_SETTINGS = settings(
    max_examples=FULL_EXAMPLES,
    derandomize=True,
    deadline=None,  # a shared CI machine is noisy; the property is about results, never about time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Corpus:
    """The sample papers and the vocabulary follows are built from."""

    papers: tuple[PaperIn, ...]
    texts: tuple[PaperText, ...]
    categories: tuple[str, ...]
    archives: tuple[str, ...]
    names: tuple[str, ...]
    title_words: tuple[str, ...]
    phrases: tuple[str, ...]
    ids: tuple[str, ...]


@cache
def corpus() -> Corpus:
    """Parse the recorded day once per test session."""
    papers = tuple(parse_feed(BIG_FEED.read_bytes()).items[::SAMPLE_EVERY])
    # Vocabulary of the sampled papers, so that follows match them often enough to mean something; titles
    # with TeX math are left out, as their words are not what a reader sees.
    titles = [words(p.title) for p in papers if "$" not in p.title and "\\" not in p.title]
    title_words = sorted({w for ws in titles for w in ws if not w.isdigit()})
    phrases = sorted({f"{a} {b}" for ws in titles for a, b in itertools.pairwise(ws)})
    names = sorted({a for p in papers for a in p.authors if not any(c in a for c in '"“”„\\()')})
    return Corpus(
        papers=papers,
        texts=tuple(PaperText.of(p) for p in papers),
        categories=tuple(sorted({c for p in papers for c in p.categories})),
        archives=tuple(sorted({c.split(".")[0] for p in papers for c in p.categories if "." in c})),
        names=tuple(names),
        title_words=tuple(title_words),
        phrases=tuple(phrases),
        ids=(*(p.arxiv_id for p in papers[:10]), "2411.00001"),
    )


def _author(name: str, form: int) -> str:
    parts = name.split()
    if len(parts) < 2 or form == 0:
        return f'au:"{name}"'
    if form == 1:
        return 'au:"' + " ".join(f"{p[0]}." for p in parts[:-1]) + f' {parts[-1]}"'
    if form == 2:
        return f"au:{parts[-1]}"
    return f'au:"{parts[-1]}, {" ".join(parts[:-1])}"'


@st.composite
def terms(draw: st.DrawFn) -> str:
    """One search term of any field, from the corpus vocabulary."""
    c = corpus()
    kind = draw(st.integers(0, 10))
    if kind == 0:
        return f"cat:{draw(st.sampled_from(c.categories))}"
    if kind == 1:
        return f"cat:{draw(st.sampled_from(c.archives))}.*"
    if kind in (2, 3):
        return _author(draw(st.sampled_from(c.names)), draw(st.integers(0, 3)))
    if kind == 4:
        return f"id:{draw(st.sampled_from(c.ids))}"
    if kind == 5:
        return f'"{draw(st.sampled_from(c.phrases))}"'
    if kind == 6:
        field = draw(st.sampled_from(["ti", "abs"]))
        return f'{field}:"{draw(st.sampled_from(c.phrases))}"'
    field = draw(st.sampled_from(["", "", "ti:", "abs:"]))
    return field + draw(st.sampled_from(c.title_words))


@st.composite
def paper_terms(draw: st.DrawFn, index: int) -> str:
    """A term from one sampled paper, so that the terms of a query hold together and overlap (``cat:cs.LG``
    and ``cat:cs.*`` give the same reason, and so do ``graph`` and ``ti:graph``)."""
    paper = corpus().papers[index]
    kind = draw(st.integers(0, 7))
    category = draw(st.sampled_from(paper.categories))
    if kind == 0:
        return f"cat:{category}"
    if kind == 1 and "." in category:
        return f"cat:{category.split('.')[0]}.*"
    if kind == 2 and paper.authors:
        return _author(draw(st.sampled_from(paper.authors)), draw(st.integers(0, 3)))
    if kind == 3:
        return f"id:{paper.arxiv_id}"
    title = [w for w in words(paper.title) if not w.isdigit()]
    if "$" in paper.title or "\\" in paper.title or not title:
        return draw(terms())
    word = draw(st.sampled_from(title))
    if kind == 4 and len(title) > 1:
        length = draw(st.integers(2, min(3, len(title))))
        start = draw(st.integers(0, len(title) - length))
        return '"' + " ".join(title[start : start + length]) + '"'
    if kind in (5, 6):
        # Two terms that give the same reason, ORed or ANDed: the index must not repeat it.
        operator = "OR" if kind == 5 else "AND"
        if "." in category:
            return f"cat:{category} {operator} cat:{category.split('.')[0]}.*"
        return f"{word} {operator} ti:{word}"
    return draw(st.sampled_from(["", "ti:", "abs:"])) + word


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: f"({p[0]}) AND ({p[1]})"),
        pair.map(lambda p: f"({p[0]}) ({p[1]})"),
        pair.map(lambda p: f"({p[0]}) OR ({p[1]})"),
        pair.map(lambda p: f"({p[0]}) ANDNOT ({p[1]})"),
        children.map(lambda q: f"NOT ({q})"),
        st.tuples(children, children, children).map(lambda p: f"{p[0]} OR {p[1]} OR {p[2]}"),
        st.tuples(children, children).map(lambda p: f"{p[0]} NOT {p[1]}"),
    )


def _parsed(text: str) -> Query | None:
    try:
        return parse(text)
    except QueryError:  # the vocabulary is real, but a rare term may still be refused (e.g. "x:y" words)
        return None


@st.composite
def query(draw: st.DrawFn) -> Query:
    """A parsed follow of up to five terms combined with every operator.

    Most terms come from one sampled paper, the rest from the whole vocabulary, so that queries hold for
    some papers, fail for others, and combine terms that hold together.
    """
    focus = draw(st.integers(0, len(corpus().papers) - 1))
    leaves = st.one_of(paper_terms(focus), paper_terms(focus), terms())
    parsed = _parsed(draw(st.recursive(leaves, _combine, max_leaves=5)))
    assume(parsed is not None)
    assert parsed is not None
    return parsed


queries = query()


def plain(follows: dict[int, Query], paper: PaperText) -> list[tuple[int, tuple[str, ...]]]:
    """The reference: evaluate every follow, in follow-id order."""
    return [(fid, r) for fid, q in sorted(follows.items()) if (r := q.evaluate(paper)) is not None]


def check(matcher: Matcher, follows: dict[int, Query]) -> None:
    """The matcher agrees with the plain evaluator on every sampled paper, as pairs and as groups."""
    assert matcher.size == len(follows)
    assert matcher.distinct_queries == len(set(follows.values()))
    matched = 0
    for paper in corpus().texts:
        expected = plain(follows, paper)
        matched += len(expected)
        assert matcher.match(paper) == expected, paper.arxiv_id
        groups = matcher.match_groups(paper)
        flat = sorted((fid, reasons) for ids, reasons in groups for fid in ids)
        assert flat == expected, paper.arxiv_id
        assert all(list(ids) == sorted(ids) for ids, _ in groups)
        assert len({follows[ids[0]] for ids, _ in groups}) == len(groups)  # one group per distinct query
    # Shown by --hypothesis-show-statistics: how often the comparison involved actual matches.
    event("matches: none" if not matched else "matches: 1-9" if matched < 10 else "matches: 10+")


def adds_and_removes(pool: list[Query], data: st.DataObject) -> None:
    """The index through random adds and removes agrees with the plain evaluator at every tenth step."""
    # A small pool of queries and follow ids drawn from a narrow range: identical queries, follows that come
    # and go, ids re-used after removal and ids added out of order all happen often.
    matcher = Matcher()
    follows: dict[int, Query] = {}
    steps = data.draw(
        st.lists(
            st.tuples(st.integers(0, 2), st.integers(1, 40), st.integers(0, len(pool) - 1)),
            min_size=8,
            max_size=40,
        )
    )
    for i, (action, fid, choice) in enumerate(steps):
        add = action > 0  # two adds for one remove, so that the index fills up
        if add and fid not in follows:
            matcher.add(fid, pool[choice])
            follows[fid] = pool[choice]
        elif add:
            with pytest.raises(ValueError, match="already indexed"):
                matcher.add(fid, pool[choice])
        elif fid in follows:
            matcher.remove(fid)
            del follows[fid]
        else:
            with pytest.raises(KeyError):
                matcher.remove(fid)
        if i % 10 == 9:
            check(matcher, follows)
    check(matcher, follows)
    # The incrementally maintained index answers like one built from scratch, and emptying it leaves nothing.
    rebuilt = Matcher(follows.items())
    for paper in corpus().texts:
        assert rebuilt.match(paper) == matcher.match(paper)
    for fid in list(follows):
        matcher.remove(fid)
    assert (matcher.size, matcher.distinct_queries, matcher.distinct_atoms, matcher.always_evaluated) == (
        0,
    ) * 4


pools = st.lists(queries, min_size=1, max_size=12)
follow_lists = st.lists(st.tuples(st.integers(0, 10**6), queries), max_size=25, unique_by=lambda f: f[0])


@settings(PROPERTY_SETTINGS, max_examples=FAST_EXAMPLES)
@given(pools, st.data())
def test_index_equals_plain_evaluation_through_adds_and_removes(
    pool: list[Query], data: st.DataObject
) -> None:
    adds_and_removes(pool, data)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(pools, st.data())
def test_index_equals_plain_evaluation_through_adds_and_removes_full(
    pool: list[Query], data: st.DataObject
) -> None:
    adds_and_removes(pool, data)


@settings(PROPERTY_SETTINGS, max_examples=FAST_EXAMPLES)
@given(follow_lists)
def test_index_built_at_once_equals_plain_evaluation(follows: list[tuple[int, Query]]) -> None:
    matcher = Matcher(follows)
    check(matcher, dict(follows))


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(follow_lists)
def test_index_built_at_once_equals_plain_evaluation_full(follows: list[tuple[int, Query]]) -> None:
    matcher = Matcher(follows)
    check(matcher, dict(follows))


def test_generated_follows_do_match_the_sample() -> None:
    """Guard against a vacuous property: the vocabulary yields follows that match the sampled papers."""
    c = corpus()
    matcher = Matcher(
        enumerate(
            [parse(f"cat:{cat}") for cat in c.categories[:5]]
            + [parse(_author(name, 1)) for name in c.names[:5]]
            + [parse(word) for word in c.title_words[:5]]
            + [parse(f'"{phrase}"') for phrase in c.phrases[:5]]
        )
    )
    hits = {fid for paper in c.texts for fid, _ in matcher.match(paper)}
    assert len(hits) == matcher.size
