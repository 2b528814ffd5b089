"""Small real servers on 127.0.0.1 for the tests: a scripted HTTP feed server and an SMTP sink."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


@dataclass(frozen=True)
class Answer:
    """One scripted reply of a fake API (the LLM endpoint, a webhook receiver): a status, headers, a raw
    body, and a pause before answering."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


def send_answer(handler: BaseHTTPRequestHandler, answer: Answer, content_type: str | None = None) -> None:
    """Write ``answer`` (after its pause) to ``handler``'s client; a client that gave up is no error."""
    if answer.delay:
        time.sleep(answer.delay)
    try:
        handler.send_response(answer.status)
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        if content_type:
            handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(answer.body)))
        handler.end_headers()
        handler.wfile.write(answer.body)
    except OSError:
        pass  # the client stopped waiting (a time-out test): nothing to answer


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Seconds to wait before answering (a slow mirror; a fetch still in flight when a test acts).
    delay: float = 0.0


@dataclass
class FeedServer:
    """Serves scripted replies in order (the last one repeats); records every request's headers."""

    replies: list[Reply]
    etag: str | None = None
    requests: list[dict[str, str]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    url: str = ""

    def next_reply(self, headers: dict[str, str], path: str = "") -> Reply:
        self.requests.append(headers)
        self.paths.append(path)
        self.arrivals.append(time.monotonic())
        if self.etag and headers.get("If-None-Match") == self.etag:
            return Reply(304)
        reply = self.replies[0] if len(self.replies) == 1 else self.replies.pop(0)
        if self.etag and reply.status == 200:
            reply = Reply(reply.status, reply.body, {**reply.headers, "ETag": self.etag}, reply.delay)
        return reply


@contextmanager
def feed_server(*replies: Reply, etag: str | None = None, keep_alive: bool = False) -> Iterator[FeedServer]:
    """Start a FeedServer on an ephemeral loopback port; ``server.url`` is its base URL.

    ``keep_alive``: answer as HTTP/1.1 and keep the connection open after each reply, as arXiv's servers do
    (the client then holds a pooled connection until it is closed).
    """
    state = FeedServer(list(replies), etag=etag)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def do_GET(self) -> None:
            reply = state.next_reply(dict(self.headers.items()), self.path)
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except OSError:
                pass  # the client went away (killed, interrupted): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/rss/"
    with serving(server):
        yield state


@dataclass
class StreamServer:
    """What a ``stream_server`` sent: the body bytes written before the client went away, and requests."""

    url: str = ""
    sent: int = 0
    requests: int = 0


@contextmanager
def stream_server(
    chunk: bytes, count: int, *, interval: float = 0.0, content_length: int | None = None
) -> Iterator[StreamServer]:
    """A server whose 200 body is ``chunk`` written ``count`` times, ``interval`` seconds apart.

    For hostile-server tests: a trickle (one byte, a long pause) or a huge body. Without ``content_length``
    the body ends when the connection closes (HTTP/1.0). ``sent`` counts what reached the socket, so a test
    can tell that the client stopped reading early.
    """
    state = StreamServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/rss+xml")
            if content_length is not None:
                self.send_header("Content-Length", str(content_length))
            self.end_headers()
            try:
                for _ in range(count):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    state.sent += len(chunk)
                    if interval:
                        time.sleep(interval)
            except OSError:
                pass  # the client gave up (the point of the test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/rss/"
    with serving(server):
        yield state


@contextmanager
def serving(server: HTTPServer, poll_interval: float = 0.05) -> Iterator[HTTPServer]:
    """Run ``server`` in a daemon thread until the block ends, then shut it down and close its socket.

    A short poll interval: shutdown() waits up to one interval, and every test stops a server.
    """
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """An unused TCP port on 127.0.0.1, for a server in another process that must be told its port.

    The port is free when this returns, not reserved: a server in this process should bind port 0 itself,
    and an address that must refuse connections should come from :func:`closed_port`.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Sockets behind closed_port(): bound and never listening, held until the test process ends.
_held: list[socket.socket] = []


def closed_port() -> int:
    """A TCP port on 127.0.0.1 that refuses every connection for the rest of this test process.

    A port that was merely free (``free_port``) can be taken by a server of another test running at the
    same time (pytest-xdist) and then answer; this one stays bound without listening, so the kernel refuses
    connections to it and nothing else can bind it.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _held.append(sock)
    return int(sock.getsockname()[1])


class LoopbackController(Controller):
    """aiosmtpd's Controller on 127.0.0.1 and a port the kernel picks, read back once it listens."""

    def __init__(self, handler: Any, **kwargs: Any) -> None:
        super().__init__(handler, hostname="127.0.0.1", port=0, **kwargs)

    def _trigger_server(self) -> None:
        # aiosmtpd connects to its own port to finish starting; port 0 must become the real one first.
        assert isinstance(self.server, asyncio.Server)
        self.port = int(self.server.sockets[0].getsockname()[1])
        super()._trigger_server()  # type: ignore[no-untyped-call]


@dataclass
class Received:
    """One message the SMTP sink accepted."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage


class SinkHandler:
    """aiosmtpd handler that keeps every message and refuses the recipients it is told to."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.received: list[Received] = []
        self.refuse = refuse or set()

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        if address in self.refuse:
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted"


@contextmanager
def smtp_sink(refuse: set[str] | None = None) -> Iterator[tuple[SinkHandler, int]]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1; yields its handler and port."""
    handler = SinkHandler(refuse)
    controller = LoopbackController(handler)
    controller.start()
    try:
        yield handler, controller.port
    finally:
        controller.stop()
