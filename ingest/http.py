"""The one polite HTTP client every source in the process shares.

Politeness, per host: at most one request in flight, and a minimum interval between the end of one request
and the start of the next (arXiv asks robots for 3 s: ``PAPERTRAIL_ARXIV_MIN_INTERVAL``). A descriptive
User-Agent with a contact address, timeouts, conditional GET, and bounded retries: a 429 or 503 waits what
its Retry-After says (up to a cap), other 5xx replies and network errors back off exponentially.

Two bounds per request keep one hostile or broken server from holding the run (and the host's turn) or the
process's memory: a whole-request deadline (``PAPERTRAIL_HTTP_DEADLINE``: the per-read timeout alone lets a
server that trickles one byte a second go on for ever) and a cap on the body, enforced while it streams in
(``PAPERTRAIL_HTTP_MAX_BYTES``). Either one fails the attempt at once, without retrying in this run: a
server that was that slow or that large a moment ago would be again.

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

# arXiv's largest daily feed (all of cs) is about 2.8 MB and takes seconds: both defaults leave wide room.
DEFAULT_DEADLINE = 300.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


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
        deadline: float = DEFAULT_DEADLINE,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        """``timeout`` bounds each network step (connect, each read); ``deadline`` bounds one whole
        request, body included; ``max_bytes`` bounds the (decoded) body."""
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
        self.deadline = deadline
        self.max_bytes = max_bytes

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
                # The deadline covers the body too: a server may answer at once, then trickle.
                async with asyncio.timeout(self.deadline):
                    async with self._client.stream("GET", url, headers=headers, params=params) as response:
                        content = await self._body(url, response)
            except TimeoutError as exc:
                # Not retried: a retry would hold this host's turn for another whole deadline.
                raise SourceError(
                    f"{url} did not finish within the {self.deadline:g} s deadline for a whole request "
                    "(PAPERTRAIL_HTTP_DEADLINE); the server is too slow or stalled, the next run tries again"
                ) from exc
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
        return self._read(url, response, content, previous, backoff, read_errors)

    async def _body(self, url: str, response: httpx.Response) -> bytes:
        """The body, read chunk by chunk and given up as soon as it exceeds ``max_bytes``.

        Checking while streaming (not after ``response.content``) is what bounds memory: a 200 MB or
        endless body costs at most ``max_bytes`` plus one chunk. The cap counts decoded bytes, so a small
        gzip body that inflates past it is refused as well.
        """
        declared = response.headers.get("Content-Length", "")
        identity = response.headers.get("Content-Encoding", "identity").lower() == "identity"
        if identity and declared.isdigit() and int(declared) > self.max_bytes:
            raise self._too_large(url, f"announces {int(declared):,} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise self._too_large(url, f"sent more than {self.max_bytes:,} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, url: str, what: str) -> SourceError:
        # Not retryable: the same body comes back until the cap or the URL changes.
        return SourceError(
            f"{url} {what}, over the {self.max_bytes:,}-byte cap on a response (PAPERTRAIL_HTTP_MAX_BYTES); "
            "the download was stopped. Raise the setting if the source really is that large, "
            "or check the URL",
            retryable=False,
        )

    def _read(
        self,
        url: str,
        response: httpx.Response,
        content: bytes,
        previous: HttpValidator | None,
        backoff: float,
        read_errors: frozenset[int],
    ) -> Fetched:
        status = response.status_code
        if status in read_errors:
            return Fetched(url, content, False, None, status)
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
        return Fetched(url, content, False, validator)
