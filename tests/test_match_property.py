"""Property: the index gives exactly what evaluating every follow gives, through any adds and removes.

Follows are random queries built from the real categories, author names and title words of the recorded
rss.arxiv.org day, using every part of the follow language; they are checked against a sample of that
day's papers. Hypothesis runs derandomized, so CI sees the same examples on every run. `make test` runs
each property on FAST_EXAMPLES examples; the FULL_EXAMPLES runs are marked slow (`make test-slow`).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.follows.match import Matcher
from core.follows.query import PaperText, Query, parse
from tests.support.match_corpus import _author, corpus, queries

FULL_EXAMPLES = 120  # ~50 ms each: ~6-8 s per property, so the full runs are in `make test-slow`
FAST_EXAMPLES = 25  # `make test`: every operator and add/remove path still shows up in this many
PROPERTY_SETTINGS = settings(
    max_examples=FULL_EXAMPLES,
    derandomize=True,
    deadline=None,  # a shared CI machine is noisy; the property is about results, never about time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


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
