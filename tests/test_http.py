"""The polite HTTP client over real loopback HTTP: spacing, one request in flight, retries, Retry-After."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from typing import BinaryIO

import pytest

from core.papers.sources import SourceError
from core.retry_after import retry_after_seconds
from ingest.http import HttpClient, Politeness
from tests.servers import Reply, closed_port, feed_server, stream_server

# Each test serves the feed from a local HTTP server (left out of `make test-quick`).
pytestmark = pytest.mark.net


class RecordingSleep:
    """Records every wait and really waits (scaled down), so ordering stays real."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(min(seconds, 0.05))


async def test_503_retry_after_is_honoured() -> None:
    sleep = RecordingSleep()
    with feed_server(Reply(503, b"busy", {"Retry-After": "7"}), Reply(200, b"ok")) as server:
        async with HttpClient("t", politeness=Politeness(retries=2), sleep=sleep) as http:
            fetched = await http.get(server.url)
    assert fetched.content == b"ok"
    assert len(server.requests) == 2
    assert 7 in sleep.waits  # the server's wait, not our own back-off


async def test_429_beyond_the_cap_fails_with_the_hint() -> None:
    sleep = RecordingSleep()
    with feed_server(Reply(429, b"", {"Retry-After": "3600"})) as server:
        async with HttpClient("t", politeness=Politeness(max_retry_wait=60), sleep=sleep) as http:
            with pytest.raises(SourceError, match="HTTP 429") as caught:
                await http.get(server.url)
    assert caught.value.retry_after == 3600
    assert len(server.requests) == 1 and sleep.waits == []


async def test_5xx_retries_are_bounded_with_backoff() -> None:
    sleep = RecordingSleep()
    with feed_server(Reply(500, b"oops")) as server:
        async with HttpClient("t", politeness=Politeness(retries=2, backoff=1.0), sleep=sleep) as http:
            with pytest.raises(SourceError, match="HTTP 500"):
                await http.get(server.url)
    assert len(server.requests) == 3
    assert sleep.waits == [1.0, 2.0]


async def test_404_is_not_retried() -> None:
    with feed_server(Reply(404, b"nope")) as server:
        async with HttpClient("t", politeness=Politeness(retries=3, backoff=0.01)) as http:
            with pytest.raises(SourceError, match="check the URL") as caught:
                await http.get(server.url)
    assert not caught.value.retryable and len(server.requests) == 1


async def test_refused_connection_is_retried_then_explained() -> None:
    sleep = RecordingSleep()
    async with HttpClient("t", politeness=Politeness(retries=1, backoff=0.5), sleep=sleep) as http:
        with pytest.raises(SourceError, match="cannot connect"):
            await http.get(f"http://127.0.0.1:{closed_port()}/")
    assert sleep.waits == [0.5]


async def test_requests_to_one_host_are_spaced_and_never_overlap() -> None:
    with feed_server(Reply(200, b"ok")) as server:
        polite = Politeness(intervals={"127.0.0.1": 0.3}, retries=0)
        async with HttpClient("t", politeness=polite) as http:
            await asyncio.gather(*(http.get(server.url) for _ in range(3)))
    arrivals = server.arrivals
    assert len(arrivals) == 3
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(gap >= 0.3 for gap in gaps), gaps  # behaviour (the spacing), not a speed target


def test_interval_lookup_prefers_the_longest_suffix() -> None:
    polite = Politeness(intervals={"arxiv.org": 3.0, "export.arxiv.org": 5.0}, default_interval=0.5)
    assert polite.interval_for("rss.arxiv.org") == 3.0
    assert polite.interval_for("export.arxiv.org") == 5.0
    assert polite.interval_for("arxiv.org") == 3.0
    assert polite.interval_for("notarxiv.org") == 0.5
    assert polite.interval_for("huggingface.co") == 0.5


def test_retry_after_forms() -> None:
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


async def test_user_agent_and_conditional_headers() -> None:
    from core.values import ResponseValidator

    with feed_server(Reply(200, b"ok")) as server:
        async with HttpClient("PaperTrail/0.1 (mailto:ops@example.org)") as http:
            await http.get(
                server.url, ResponseValidator(url=server.url, etag='"e1"', last_modified="Thu, 28 Nov")
            )
    headers = server.requests[0]
    assert headers["User-Agent"] == "PaperTrail/0.1 (mailto:ops@example.org)"
    assert headers["If-None-Match"] == '"e1"' and headers["If-Modified-Since"] == "Thu, 28 Nov"


async def test_a_trickling_server_is_cut_off_at_the_deadline() -> None:
    """One byte a second never trips the per-read timeout; the whole-request deadline does."""
    with stream_server(b"x", 600, interval=0.1, content_length=600) as server:
        async with HttpClient("t", timeout=5, deadline=1.0) as http:
            started = time.monotonic()
            with pytest.raises(SourceError, match=r"1 s deadline .*PAPERTRAIL_HTTP_DEADLINE"):
                await http.get(server.url)
            elapsed = time.monotonic() - started
    assert elapsed < 3
    assert server.requests == 1  # not retried: a retry would hold the host's turn for another deadline
    assert server.sent < 100


@pytest.mark.parametrize("method", ["get", "download"])
async def test_a_body_over_the_cap_is_refused_while_streaming(method: str) -> None:
    """The cap stops the download part-way; the rest of the body is never read into memory (or
    spooled to disk, for ``download``)."""
    chunk = b"<item>" + b"x" * 65530
    with stream_server(chunk, 1600) as server:  # 100 MiB, length unannounced
        async with HttpClient("t", max_bytes=1024 * 1024) as http:
            with pytest.raises(
                SourceError, match=r"1,048,576-byte cap .*PAPERTRAIL_HTTP_MAX_BYTES"
            ) as caught:
                await getattr(http, method)(server.url)
    assert not caught.value.retryable
    assert server.requests == 1
    assert server.sent < 20 * 1024 * 1024  # the cap plus what the socket buffers held


async def test_an_announced_length_over_the_cap_is_refused_before_reading() -> None:
    with feed_server(Reply(200, b"y" * 5000)) as server:
        async with HttpClient("t", max_bytes=4096) as http:
            with pytest.raises(SourceError, match="announces 5,000 bytes"):
                await http.get(server.url)
        async with HttpClient("t", max_bytes=5000) as http:
            assert (await http.get(server.url)).content == b"y" * 5000


# download(): the body goes to a temporary file as it streams in, under the same rules as get().


async def test_download_spools_the_body_with_its_validator() -> None:
    body = b"<rss>" + b"x" * 300_000 + b"</rss>"
    with feed_server(Reply(200, body), etag='"v1"') as server:
        async with HttpClient("t") as http:
            with await http.download(server.url) as first:
                assert (first.size, first.not_modified) == (len(body), False)
                assert first.body.read() == body
                assert first.validator is not None and first.validator.etag == '"v1"'
            assert first.body.closed
            with await http.download(server.url, first.validator) as second:
                assert second.not_modified and second.body.read() == b""
    assert server.requests[1].get("If-None-Match") == '"v1"'


async def test_failed_download_attempts_close_their_files(monkeypatch: pytest.MonkeyPatch) -> None:
    files: list[BinaryIO] = []
    real = tempfile.TemporaryFile

    def recording() -> BinaryIO:
        spooled: BinaryIO = real()
        files.append(spooled)
        return spooled

    monkeypatch.setattr(tempfile, "TemporaryFile", recording)
    replies = (Reply(500, b"oops"), Reply(503, b"busy"), Reply(200, b"<rss/>"))
    with feed_server(*replies) as server:
        async with HttpClient("t", politeness=Politeness(retries=2, backoff=0.01)) as http:
            download = await http.download(server.url)
    assert [f.closed for f in files] == [True, True, False]
    assert download.body.read() == b"<rss/>"
    download.close()
    assert files[2].closed
