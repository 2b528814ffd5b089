"""The arXiv API (export.arxiv.org/api/query): look-ups by id and paged queries.

Look-ups complete papers first seen elsewhere (Hugging Face daily papers) with arXiv's own metadata;
queries page through results in slices of at most 2,000 (arXiv's limit), politely spaced by the shared
HTTP client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import ClassVar

from core.papers.sources import Page, SourceError
from core.values import PaperIn
from ingest.arxiv_api_parse import ApiFormatError, ApiPage, ArxivApiError, build_query_url, parse_api
from ingest.http import HttpClient

# Ids per look-up request: keeps the URL short; arXiv answers each id with its latest version.
LOOKUP_CHUNK = 100
MAX_SLICE = 2000


class ArxivApiSource:
    """Talks to the arXiv API through the shared polite client."""

    name: ClassVar[str] = "arxiv-api"

    def __init__(self, http: HttpClient, base_url: str) -> None:
        self.http = http
        self.base_url = base_url

    async def _page(self, url: str) -> ApiPage:
        fetched = await self.http.get(url, read_errors=frozenset({400}))
        try:
            return parse_api(fetched.content)
        except ArxivApiError as exc:
            raise SourceError(f"{url}: {exc}", retryable=False) from exc
        except ApiFormatError as exc:
            if fetched.status != 200:
                raise SourceError(f"{url} answered HTTP {fetched.status}: {exc}", retryable=False) from exc
            raise SourceError(f"{url}: {exc}") from exc

    async def lookup(self, ids: Sequence[str]) -> tuple[PaperIn, ...]:
        """The latest version of each id arXiv knows (unknown ids are simply absent)."""
        found: list[PaperIn] = []
        for start in range(0, len(ids), LOOKUP_CHUNK):
            chunk = ids[start : start + LOOKUP_CHUNK]
            page = await self._page(build_query_url(self.base_url, id_list=chunk, max_results=len(chunk)))
            found.extend(page.entries)
        return tuple(found)

    async def query(
        self, search_query: str, *, limit: int = 10_000, slice_size: int = MAX_SLICE
    ) -> AsyncIterator[Page]:
        """Pages of results for ``search_query`` (arXiv's own syntax), newest submissions first."""
        start = 0
        while start < limit:
            size = min(slice_size, limit - start)
            url = build_query_url(
                self.base_url,
                search_query=search_query,
                start=start,
                max_results=size,
                sort_by="submittedDate",
                sort_order="descending",
            )
            page = await self._page(url)
            yield Page(page.entries, page.skipped)
            following = page.next_start
            if following is None or following <= start:
                return
            start = following
