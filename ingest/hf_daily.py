"""Hugging Face daily papers: the community's picks of the day, attached to their arXiv papers.

One request per day: ``<PAPERTRAIL_HF_API_URL>daily_papers?date=YYYY-MM-DD``. The requested date is the
daily key (the timestamps inside the response changed meaning over the years).
"""

from __future__ import annotations

from datetime import date
from typing import ClassVar

from core.papers.sources import SourceError
from ingest.hf_daily_parse import DailyPage, HfFormatError, parse_daily
from ingest.http import HttpClient


class HfDailySource:
    """Fetches and parses the daily_papers list of one day."""

    name: ClassVar[str] = "hf-daily"

    def __init__(self, http: HttpClient, api_url: str) -> None:
        self.http = http
        self.api_url = api_url if api_url.endswith("/") else api_url + "/"

    def url_for(self, day: date) -> str:
        """The request URL for ``day``."""
        return f"{self.api_url}daily_papers?date={day.isoformat()}"

    async def fetch_day(self, day: date) -> DailyPage:
        """The picks of ``day``; raises SourceError with what went wrong and what to do."""
        url = self.url_for(day)
        fetched = await self.http.get(url)
        try:
            return parse_daily(fetched.content, day)
        except HfFormatError as exc:
            raise SourceError(f"{url}: {exc}") from exc
