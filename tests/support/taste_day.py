"""The recorded day's papers, for the taste and vote tests."""

from __future__ import annotations

from functools import cache

from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED


@cache
def day() -> tuple[PaperIn, ...]:
    """The recorded arXiv day, one version per paper."""
    seen: dict[str, PaperIn] = {}
    for paper in parse_feed(BIG_FEED.read_bytes()).items:
        seen.setdefault(paper.arxiv_id, paper)
    return tuple(seen.values())
