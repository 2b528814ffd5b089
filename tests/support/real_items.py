"""Digest items from the recorded feed."""

from __future__ import annotations

from core.reasons import CATEGORY, Reason
from core.values import DigestItem
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED


def real_items() -> list[DigestItem]:
    """Three new cs.DC papers and two revisions from the recorded feed, as a digest would list them."""
    papers = parse_feed(BIG_FEED.read_bytes()).items
    new = [p for p in papers if p.version == 1 and "cs.DC" in p.categories][:3]
    revised = [p for p in papers if p.version > 1 and "cs.DC" in p.categories][:2]
    return [
        DigestItem(
            p.arxiv_id, p.version, p.title, p.authors, p.categories, (Reason(CATEGORY, "cs.DC"),), p.abstract
        )
        for p in new + revised
    ]
