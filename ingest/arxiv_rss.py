"""arXiv RSS source: the daily announcement from rss.arxiv.org (2024+ format).

The feed for ``PAPERTRAIL_ARXIV_CATEGORIES`` is fetched conditionally, its body spooled to a temporary file;
an unchanged feed is recorded as ``not_modified``, an empty one (weekends, holidays) as ``empty``, arXiv's
error channel and anything that is not an RSS feed as errors — never as "no new papers".
"""

from __future__ import annotations

from typing import ClassVar

from core.models import RunState
from core.papers.sources import FetchResult, SourceError, ValidatorLookup
from ingest.arxiv_rss_parse import ArxivFeedError, FeedFormatError, parse_feed
from ingest.http import HttpClient
from ingest.paper_spool import SPOOL_AFTER


class ArxivRssSource:
    """Fetches and parses one rss.arxiv.org channel."""

    name: ClassVar[str] = "arxiv-rss"

    def __init__(self, http: HttpClient, url: str) -> None:
        self.http = http
        self.url = url

    async def fetch(self, validators: ValidatorLookup) -> FetchResult:
        """One conditional GET of the feed, parsed into versions.

        The body is spooled to a temporary file and parsed from there chunk by chunk, and past
        ``SPOOL_AFTER`` versions the parsed versions go to a temporary file as well, so a large feed's
        ingest holds neither the body nor all its versions in memory (docs/benchmarks.md,
        "Feed memory").
        """
        with await self.http.download(self.url, validators(self.url)) as fetched:
            if fetched.not_modified:
                return FetchResult(
                    (), RunState.NOT_MODIFIED, note="feed unchanged since the last check (HTTP 304)"
                )
            try:
                page = parse_feed(fetched.body, spool_after=SPOOL_AFTER)
            except ArxivFeedError as exc:
                raise SourceError(
                    f"arXiv reports an error for {self.url}: {exc}; check PAPERTRAIL_ARXIV_CATEGORIES",
                    retryable=False,
                ) from exc
            except FeedFormatError as exc:
                raise SourceError(f"{self.url}: {exc}") from exc
        cursor = page.published.isoformat() if page.published else None
        # Repairs first: they say why some stored text holds U+FFFD.
        notes = [*page.notes, *page.skipped]
        if page.is_empty:
            notes.insert(0, "feed has no items: no announcement today (weekend or arXiv holiday)")
            state = RunState.EMPTY
        else:
            state = RunState.OK
        return FetchResult(
            page.items,
            state,
            note="; ".join(notes) or None,
            cursor=cursor,
            validator=fetched.validator,
        )
