"""The long-lived follow index: incremental sync with the stored follows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.follows import index as follow_index
from core.follows.index import FollowIndex
from core.follows.query import Query, parse
from core.follows.subscriber_records import StoredFollow
from core.values import PaperIn

T0 = datetime(2024, 11, 28, tzinfo=UTC)
PAPER = PaperIn(
    "2411.17741", 1, "Adaptive caching for LLM inference", "We cache adapters.", ("Tianyin Xu",), ("cs.DC",)
)


def stored(fid: int, query: str, *, instant: bool = False) -> StoredFollow:
    return StoredFollow(fid, 100 + fid, query, T0, True, instant)


def test_sync_adds_removes_and_updates_options() -> None:
    index = FollowIndex()
    assert index.sync([stored(1, "cat:cs.DC"), stored(2, "au:Xu"), stored(3, "cat:math.CO")]) == (3, 0)
    assert [fid for fid, _ in index.matcher.match(PAPER)] == [1, 2]
    # Unchanged follows are not parsed again; a removed one disappears; a new one joins.
    assert index.sync(
        [stored(1, "cat:cs.DC", instant=True), stored(3, "cat:math.CO"), stored(4, "caching")]
    ) == (
        1,
        1,
    )
    assert [fid for fid, _ in index.matcher.match(PAPER)] == [1, 4]
    assert index.follows[1].instant is True
    assert index.matcher.size == 3


def test_a_stored_query_that_no_longer_parses_is_skipped_once() -> None:
    index = FollowIndex()
    assert index.sync([stored(1, "cat:cs.DC"), stored(2, "ti:(")]) == (1, 0)
    assert index.sync([stored(1, "cat:cs.DC"), stored(2, "ti:(")]) == (0, 0)
    assert [fid for fid, _ in index.matcher.match(PAPER)] == [1]


def test_each_distinct_text_is_parsed_once_per_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []

    def counting_parse(text: str) -> Query:
        parsed.append(text)
        return parse(text)

    monkeypatch.setattr(follow_index, "parse", counting_parse)
    index = FollowIndex()
    follows = [stored(1, "cat:cs.DC"), stored(2, "au:Xu"), stored(3, "cat:cs.DC"), stored(4, "ti:(")]
    assert index.sync([*follows, stored(5, "ti:(")]) == (3, 0)
    assert sorted(parsed) == ["au:Xu", "cat:cs.DC", "ti:("]
    assert [fid for fid, _ in index.matcher.match(PAPER)] == [1, 2, 3]
    assert index.matcher.distinct_queries == 2
