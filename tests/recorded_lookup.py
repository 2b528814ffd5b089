"""The arXiv API's answer for ids of a recorded day, for tests and the chaos suite.

The recorded RSS day has no arXiv API responses of its own, so a look-up answers with each paper's newest
version as the day's announcement carries it, labelled the way the API client labels what it parses
(``ingest.arxiv_api_parse``: source ``arxiv-api``, type ``new`` for a v1 and ``replace`` after). It stands
in for the network only: what is stored, and when it becomes news, is the production path's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from core.values import AnnounceType, PaperIn


class RecordedLookup:
    """A ``core.papers.pipeline.PaperLookup`` over the versions of a recorded day."""

    name: ClassVar[str] = "arxiv-api"

    def __init__(self, day: Sequence[PaperIn]) -> None:
        self._newest: dict[str, PaperIn] = {}
        for paper in day:
            known = self._newest.get(paper.arxiv_id)
            if known is None or paper.version > known.version:
                self._newest[paper.arxiv_id] = paper
        self.asked: list[str] = []

    async def lookup(self, ids: Sequence[str]) -> tuple[PaperIn, ...]:
        """The newest version of each id the day holds, as the arXiv API client would store it."""
        self.asked.extend(ids)
        return tuple(
            dataclasses.replace(
                paper,
                source="arxiv-api",
                announce_type=AnnounceType.NEW if paper.version == 1 else AnnounceType.REPLACE,
            )
            for paper in (self._newest.get(i) for i in ids)
            if paper is not None
        )


def bibtex_naming(papers: Sequence[PaperIn]) -> bytes:
    """A reader's BibTeX export naming ``papers`` by their arXiv ids (what Zotero writes for a preprint)."""
    entries = [
        f"@article{{k{n},\n  title = {{{p.title}}},\n  eprint = {{{p.arxiv_id}}},\n"
        f"  archivePrefix = {{arXiv}},\n  year = {{2024}}\n}}\n"
        for n, p in enumerate(papers)
    ]
    return "\n".join(entries).encode()
