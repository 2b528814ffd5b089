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

Every failure that is left after the retries becomes a :class:`core.papers.sources.SourceError` whose message
names
the URL, what happened and what to do.

``get`` returns the body in memory; ``download`` writes it to a temporary file as it streams in, for a
large body that its parser reads from a file (the arXiv RSS feed: a 200 MB feed once took 2.42 GB).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import BinaryIO
from urllib.parse import urlsplit

import httpx

from core.models import utcnow
from core.papers.sources import SourceError
from core.retry_after import retry_after_seconds
from core.values import ResponseValidator
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
    validator: ResponseValidator | None
    status: int = 200


@dataclass(frozen=True, slots=True)
class Download:
    """A response body spooled to a temporary file, or ``not_modified`` (an empty file) for a 304.

    ``body`` is positioned at its start; ``size`` is its length. Close the download (or use it as a
    context manager) to delete the file.
    """

    url: str
    body: BinaryIO
    size: int
    not_modified: bool
    validator: ResponseValidator | None

    def close(self) -> None:
        """Close and delete the temporary file."""
        self.body.close()

    def __enter__(self) -> Download:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


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
        # Set by stop_retrying(): back-offs before a retry end at once (the process is stopping).
        self._stopping = asyncio.Event()

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    def stop_retrying(self) -> None:
        """End every back-off before a retry now, and retry nothing more: each request in a back-off fails
        at once with the error that caused it. For a process that is stopping (``papertrail run``); a
        request already on the wire is left to finish."""
        self._stopping.set()

    async def get(
        self,
        url: str,
        previous: ResponseValidator | None = None,
        params: dict[str, str] | None = None,
        *,
        read_errors: frozenset[int] = frozenset(),
    ) -> Fetched:
        """GET ``url`` politely, conditionally when ``previous`` holds an ETag or Last-Modified.

        ``read_errors`` lists 4xx statuses whose body the caller reads itself (the arXiv API explains a
        bad request in an Atom feed served with HTTP 400).
        """
        headers = _conditional_headers(previous)

        async def attempt(number: int) -> Fetched:
            chunks: list[bytes] = []
            response = await self._attempt(url, headers, params, number, chunks.append)
            content = b"".join(chunks)
            return self._read(url, response, content, previous, self._backoff(number), read_errors)

        return await with_retries(
            attempt, attempts=self.politeness.retries + 1, sleep=self._sleep, log=log, stopping=self._stopping
        )

    async def download(self, url: str, previous: ResponseValidator | None = None) -> Download:
        """``get``, with the body written to a temporary file as it streams in instead of held in memory.

        Same politeness, retries, deadline and cap (``max_bytes`` bounds the file). Each attempt writes a
        file of its own, closed at once if the attempt fails; the caller closes the one returned.
        """
        headers = _conditional_headers(previous)

        async def attempt(number: int) -> Download:
            # Handed to the caller open, or closed here on every other way out.
            body = tempfile.TemporaryFile()  # noqa: SIM115
            try:
                response = await self._attempt(url, headers, None, number, body.write)
                fetched = self._read(url, response, b"", previous, self._backoff(number), frozenset())
                size = body.tell()
                body.seek(0)
            except BaseException:
                body.close()
                raise
            return Download(url, body, size, fetched.not_modified, fetched.validator)

        return await with_retries(
            attempt, attempts=self.politeness.retries + 1, sleep=self._sleep, log=log, stopping=self._stopping
        )

    def _backoff(self, attempt: int) -> float:
        """The back-off before retrying after ``attempt`` failed: doubling from ``Politeness.backoff``."""
        return float(self.politeness.backoff * 2 ** (attempt - 1))

    async def _attempt(
        self,
        url: str,
        headers: dict[str, str],
        params: dict[str, str] | None,
        attempt: int,
        write: Callable[[bytes], object],
    ) -> httpx.Response:
        """One request in this host's turn; the body goes to ``write``. The response, its body read."""
        host = urlsplit(url).hostname or ""
        slot = self._hosts.setdefault(host, _Host())
        backoff = self._backoff(attempt)
        async with slot.lock:
            wait = slot.last_end + self.politeness.interval_for(host) - self._clock()
            if wait > 0:
                await self._sleep(wait)
            try:
                # The deadline covers the body too: a server may answer at once, then trickle.
                async with asyncio.timeout(self.deadline):
                    async with self._client.stream("GET", url, headers=headers, params=params) as response:
                        await self._body(url, response, write)
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
        return response

    async def _body(self, url: str, response: httpx.Response, write: Callable[[bytes], object]) -> None:
        """Pass the body to ``write`` chunk by chunk, giving up as soon as it exceeds ``max_bytes``.

        Checking while streaming (not after ``response.content``) is what bounds memory: a 200 MB or
        endless body costs at most ``max_bytes`` plus one chunk (in memory for ``get``, in a temporary
        file for ``download``). The cap counts decoded bytes, so a small gzip body that inflates past it
        is refused as well.
        """
        declared = response.headers.get("Content-Length", "")
        identity = response.headers.get("Content-Encoding", "identity").lower() == "identity"
        if identity and declared.isdigit() and int(declared) > self.max_bytes:
            raise self._too_large(url, f"announces {int(declared):,} bytes")
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise self._too_large(url, f"sent more than {self.max_bytes:,} bytes")
            write(chunk)

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
        previous: ResponseValidator | None,
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
            ResponseValidator(url=url, etag=etag, last_modified=last_modified, updated_at=utcnow())
            if etag or last_modified
            else None
        )
        return Fetched(url, content, False, validator)


def _conditional_headers(previous: ResponseValidator | None) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from the validators of the previous response."""
    headers: dict[str, str] = {}
    if previous is not None:
        if previous.etag:
            headers["If-None-Match"] = previous.etag
        if previous.last_modified:
            headers["If-Modified-Since"] = previous.last_modified
    return headers
