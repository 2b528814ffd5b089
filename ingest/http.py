"""The HTTP client the sources share: descriptive User-Agent, timeouts, conditional GET, clear errors.

Every httpx failure is translated here into a :class:`core.sources.SourceError` whose message names
the URL, what happened and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import TracebackType

import httpx

from core.models import HttpValidator, utcnow
from core.sources import SourceError


@dataclass(frozen=True, slots=True)
class Fetched:
    """A response body with the validators to remember, or ``not_modified`` for a 304."""

    url: str
    content: bytes
    not_modified: bool
    validator: HttpValidator | None


def retry_after_seconds(value: str | None) -> float | None:
    """Read a Retry-After header: seconds, or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - utcnow()).total_seconds())


class HttpClient:
    """One async HTTP client per process, shared by every source."""

    def __init__(
        self, user_agent: str, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
    ):
        self._client = httpx.AsyncClient(
            headers={"User-Agent": user_agent},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=True,
            transport=transport,
        )

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def get(self, url: str, previous: HttpValidator | None = None) -> Fetched:
        """GET ``url``, conditionally when ``previous`` holds an ETag or Last-Modified."""
        headers: dict[str, str] = {}
        if previous is not None:
            if previous.etag:
                headers["If-None-Match"] = previous.etag
            if previous.last_modified:
                headers["If-Modified-Since"] = previous.last_modified
        try:
            response = await self._client.get(url, headers=headers)
        except httpx.TimeoutException as exc:
            raise SourceError(f"{url} did not answer in time ({type(exc).__name__}); will retry") from exc
        except httpx.TransportError as exc:
            raise SourceError(
                f"cannot connect to {url}: {exc or type(exc).__name__}; check the network and the source URL"
            ) from exc
        if response.status_code == 304:
            return Fetched(url, b"", True, previous)
        if response.status_code in (429, 503):
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            hint = f"; server asks to wait {wait:.0f} s" if wait is not None else ""
            raise SourceError(
                f"{url} answered HTTP {response.status_code} (rate limited or busy){hint}; will retry later",
                retry_after=wait,
            )
        if response.status_code >= 400:
            raise SourceError(
                f"{url} answered HTTP {response.status_code} {response.reason_phrase}"
                + (
                    "; check the URL and categories in the settings"
                    if response.status_code < 500
                    else "; will retry"
                ),
                retryable=response.status_code >= 500,
            )
        etag = response.headers.get("ETag")
        last_modified = response.headers.get("Last-Modified")
        validator = (
            HttpValidator(url=url, etag=etag, last_modified=last_modified, updated_at=utcnow())
            if etag or last_modified
            else None
        )
        return Fetched(url, response.content, False, validator)
