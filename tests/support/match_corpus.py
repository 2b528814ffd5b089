"""Hypothesis strategies for follows and papers to match."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

from hypothesis import assume
from hypothesis import strategies as st

from core.follows.normalise import words
from core.follows.query import PaperText, Query, QueryError, parse
from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED

SAMPLE_EVERY = 30  # 51 of the 1,504 versions: enough variety, and each example stays in milliseconds


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
