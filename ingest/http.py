"""The one polite HTTP client every source in the process shares.

Politeness, per host: at most one request in flight, and a minimum interval between the end of one request
and the start of the next (arXiv asks robots for 3 s: ``PAPERTRAIL_ARXIV_MIN_INTERVAL``). A descriptive
User-Agent with a contact address, timeouts, conditional GET, and bounded retries: a 429 or 503 waits what
its Retry-After says (up to a cap), other 5xx replies and network errors back off exponentially.

Every failure that is left after the retries becomes a :class:`core.sources.SourceError` whose message names
the URL, what happened and what to do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlsplit

import httpx

from core.models import HttpValidator, utcnow
from core.retry_after import retry_after_seconds
from core.sources import SourceError
from ingest.retrying import Retry, with_retries

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Fetched:
    """A response body with the validators to remember, or ``not_modified`` for a 304."""

    url: str
    content: bytes
    not_modified: bool
    validator: HttpValidator | None
    status: int = 200


@dataclass(frozen=True, slots=True)
class Politeness:
    """How gently to treat servers.

    ``intervals`` maps a host suffix (``arxiv.org``) to its minimum interval in seconds; the longest matching
    suffix wins and other hosts get ``default_interval``. ``retries`` is the number of extra attempts after
    the first; ``max_retry_wait`` caps a Retry-After we are willing to sit out (a longer one fails the run
    with the server's hint, and the next scheduled run tries again).
    """

    intervals: dict[str, float] = field(default_factory=lambda: {"arxiv.org": 3.0})
    default_interval: float = 0.0
    retries: int = 3
    backoff: float = 2.0
    max_retry_wait: float = 300.0

    def interval_for(self, host: str) -> float:
        """The minimum interval between two requests to ``host``."""
        best: tuple[int, float] | None = None
        for suffix, seconds in self.intervals.items():
            if (host == suffix or host.endswith("." + suffix)) and (best is None or len(suffix) > best[0]):
                best = (len(suffix), seconds)
        return best[1] if best else self.default_interval


class _Host:
    """One host's turn-taking: a lock (one request in flight) and when the last request ended."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.last_end = float("-inf")


class HttpClient:
    """One async HTTP client per process, shared by every source."""

    def __init__(
        self,
        user_agent: str,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        politeness: Politeness | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = httpx.AsyncClient(
            headers={"User-Agent": user_agent},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=True,
            transport=transport,
        )
        self.politeness = politeness or Politeness()
        self._sleep = sleep
        self._clock = clock
        self._hosts: dict[str, _Host] = {}

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def get(
        self,
        url: str,
        previous: HttpValidator | None = None,
        params: dict[str, str] | None = None,
        *,
        read_errors: frozenset[int] = frozenset(),
    ) -> Fetched:
        """GET ``url`` politely, conditionally when ``previous`` holds an ETag or Last-Modified.

        ``read_errors`` lists 4xx statuses whose body the caller reads itself (the arXiv API explains a
        bad request in an Atom feed served with HTTP 400).
        """
        headers: dict[str, str] = {}
        if previous is not None:
            if previous.etag:
                headers["If-None-Match"] = previous.etag
            if previous.last_modified:
                headers["If-Modified-Since"] = previous.last_modified
        return await with_retries(
            lambda attempt: self._attempt(url, headers, params, previous, attempt, read_errors),
            attempts=self.politeness.retries + 1,
            sleep=self._sleep,
            log=log,
        )

    async def _attempt(
        self,
        url: str,
        headers: dict[str, str],
        params: dict[str, str] | None,
        previous: HttpValidator | None,
        attempt: int,
        read_errors: frozenset[int],
    ) -> Fetched:
        host = urlsplit(url).hostname or ""
        slot = self._hosts.setdefault(host, _Host())
        backoff = self.politeness.backoff * 2 ** (attempt - 1)
        async with slot.lock:
            wait = slot.last_end + self.politeness.interval_for(host) - self._clock()
            if wait > 0:
                await self._sleep(wait)
            try:
                response = await self._client.get(url, headers=headers, params=params)
            except httpx.TimeoutException as exc:
                raise Retry(
                    SourceError(f"{url} did not answer in time ({type(exc).__name__})"), backoff
                ) from exc
            except httpx.TransportError as exc:
                error = SourceError(
                    f"cannot connect to {url}: {exc or type(exc).__name__}; "
                    "check the network and the source URL"
                )
                raise Retry(error, backoff) from exc
            finally:
                slot.last_end = self._clock()
        return self._read(url, response, previous, backoff, read_errors)

    def _read(
        self,
        url: str,
        response: httpx.Response,
        previous: HttpValidator | None,
        backoff: float,
        read_errors: frozenset[int],
    ) -> Fetched:
        status = response.status_code
        if status in read_errors:
            return Fetched(url, response.content, False, None, status)
        if status == 304:
            return Fetched(url, b"", True, previous)
        if status in (429, 503):
            hinted = retry_after_seconds(response.headers.get("Retry-After"))
            hint = f"; server asks to wait {hinted:.0f} s" if hinted is not None else ""
            error = SourceError(
                f"{url} answered HTTP {status} (rate limited or busy){hint}; will retry later",
                retry_after=hinted,
            )
            if hinted is not None and hinted > self.politeness.max_retry_wait:
                raise error  # longer than we sit out in one run: the next scheduled run tries again
            raise Retry(error, hinted if hinted is not None else backoff)
        if status >= 500:
            raise Retry(
                SourceError(f"{url} answered HTTP {status} {response.reason_phrase}; will retry"), backoff
            )
        if status >= 400:
            raise SourceError(
                f"{url} answered HTTP {status} {response.reason_phrase}; "
                "check the URL and categories in the settings",
                retryable=False,
            )
        etag = response.headers.get("ETag")
        last_modified = response.headers.get("Last-Modified")
        validator = (
            HttpValidator(url=url, etag=etag, last_modified=last_modified, updated_at=utcnow())
            if etag or last_modified
            else None
        )
        return Fetched(url, response.content, False, validator)
