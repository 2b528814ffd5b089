"""arXiv OAI-PMH: the authoritative gap filler, with every version and its date (``arXivRaw``).

``ListRecords`` for one set (default ``cs``) from a ``from=`` date, following resumption tokens. Each page
is handed to the caller, which stores it before the next is fetched. The cursor (the newest datestamp
seen) is only offered on the last page of a complete list, so an interrupted harvest starts again from
the old cursor and reads only duplicates. ``noRecordsMatch`` is a normal quiet day; ``badResumptionToken``
(tokens expire) restarts the listing once from the cursor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date, timedelta
from typing import ClassVar

from core.models import utcnow
from core.papers.sources import Page, SourceError
from ingest.arxiv_oai_parse import OaiError, OaiErrorCode, OaiFormatError, build_list_records_url, parse_oai
from ingest.http import HttpClient

# Without a stored cursor or --since, a first harvest looks this far back.
DEFAULT_LOOKBACK = timedelta(days=3)


class ArxivOaiSource:
    """Harvests one OAI-PMH set with ``metadataPrefix=arXivRaw``."""

    name: ClassVar[str] = "arxiv-oai"

    def __init__(self, http: HttpClient, base_url: str, set_spec: str = "cs") -> None:
        self.http = http
        self.base_url = base_url
        self.set_spec = set_spec

    async def pages(self, cursor: str | None) -> AsyncIterator[Page]:
        """Pages of versions from the ``cursor`` date (ISO ``YYYY-MM-DD``) on."""
        start = _start_date(cursor)
        token: str | None = None
        restarted = False
        newest = start
        while True:
            if token:
                url = build_list_records_url(self.base_url, resumption_token=token)
            else:
                url = build_list_records_url(
                    self.base_url, metadata_prefix="arXivRaw", set_spec=self.set_spec, from_date=start
                )
            fetched = await self.http.get(url)
            try:
                page = parse_oai(fetched.content)
            except OaiError as exc:
                if exc.code == OaiErrorCode.BAD_RESUMPTION_TOKEN and not restarted:
                    # Tokens expire; the records already stored make the restart cheap (duplicates).
                    restarted, token = True, None
                    continue
                raise SourceError(f"{url}: {exc}", retryable=False) from exc
            except OaiFormatError as exc:
                raise SourceError(f"{url}: {exc}") from exc
            if page.no_records_match:
                yield Page((), cursor=start.isoformat(), note=f"no records changed since {start.isoformat()}")
                return
            if page.max_datestamp is not None and page.max_datestamp > newest:
                newest = page.max_datestamp
            token = page.resumption_token
            notes = []
            if page.unversioned:
                notes.append(f"{len(page.unversioned)} record(s) without versions")
            yield Page(
                page.papers,
                page.skipped,
                cursor=None if token else newest.isoformat(),
                note="; ".join(notes) or None,
            )
            if not token:
                return


def _start_date(cursor: str | None) -> date:
    if cursor is None:
        return utcnow().date() - DEFAULT_LOOKBACK
    try:
        return date.fromisoformat(cursor[:10])
    except ValueError as exc:
        raise SourceError(
            f"cannot read the OAI cursor {cursor!r}; give --since YYYY-MM-DD", retryable=False
        ) from exc
