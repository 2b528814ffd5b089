"""PaperSpool: versions in memory up to a limit, the rest in a temporary file, read back as they were."""

from __future__ import annotations

import gc
from dataclasses import replace
from functools import cache

import pytest

from core.values import PaperIn
from ingest import paper_spool
from ingest.arxiv_rss_parse import parse_feed
from ingest.paper_spool import PaperSpool
from tests.conftest import BIG_FEED


@cache
def day() -> tuple[PaperIn, ...]:
    return tuple(parse_feed(BIG_FEED.read_bytes()).items)


def spool_of(papers: tuple[PaperIn, ...], keep: int | None) -> PaperSpool:
    spool = PaperSpool(keep)
    for paper in papers:
        spool.append(paper)
    return spool


def test_a_spool_reads_back_what_was_appended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paper_spool, "BATCH", 7)
    papers = day()[:100]
    spool = spool_of(papers, keep=10)
    assert not spool.in_memory()  # 10 in memory, 84 in 12 batches of the file, 6 waiting
    assert len(spool) == 100
    assert list(spool) == list(papers)
    assert list(spool) == list(papers)  # a second pass reads the file again
    assert [spool[i] for i in (0, 9, 10, 16, 17, 93, 94, 99, -1, -100)] == [
        papers[i] for i in (0, 9, 10, 16, 17, 93, 94, 99, -1, -100)
    ]
    assert spool[5:30:6] == list(papers[5:30:6])
    assert papers[50] in spool
    with pytest.raises(IndexError):
        spool[100]
    # Two iterations at once each keep their own place in the file.
    first, second = iter(spool), iter(spool)
    pairs = [(next(first), next(second)) for _ in range(60)]
    assert all(a == b for a, b in pairs)


def test_without_a_limit_nothing_goes_to_a_file() -> None:
    spool = spool_of(day(), keep=None)
    assert spool.in_memory()
    assert tuple(spool) == day()


def test_only_versions_in_memory_can_be_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paper_spool, "BATCH", 4)
    papers = day()[:20]
    spool = spool_of(papers[:10], keep=3)  # 3 in memory, 4 + 4 in the file, 2 waiting
    spool.stop_spooling()
    for paper in papers[10:]:
        spool.append(paper)  # kept in memory from now on
    changed = replace(papers[0], title="changed")
    spool[0] = changed
    spool[15] = changed
    assert spool[0] == spool[15] == changed
    with pytest.raises(IndexError, match="cannot be replaced"):
        spool[5] = changed
    expected = list(papers)
    expected[0] = expected[15] = changed
    assert list(spool) == expected


def test_the_file_goes_with_the_spool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paper_spool, "BATCH", 10)
    spool = spool_of(day()[:50], keep=5)
    first = spool._file
    assert first is not None and not first.closed
    spool.clear()
    assert first.closed and len(spool) == 0 and list(spool) == []
    spool = spool_of(day()[:50], keep=5)
    second = spool._file
    assert second is not None and not second.closed
    del spool
    gc.collect()
    assert second.closed
