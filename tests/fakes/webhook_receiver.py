"""A webhook receiver on 127.0.0.1: records every POST, checks its signature, answers as scripted.

Thread-safe: deliveries may arrive from several threads or worker processes at once, and tests read
them by ``X-PaperTrail-Delivery`` key (``by_key``, ``count``, ``wait_for``). Optionally speaks TLS
(``tls=(certfile, keyfile)``) for the tests of the pinned HTTPS connection.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from notifiers.webhook.notifier import DELIVERY_HEADER, SIGNATURE_HEADER
from notifiers.webhook.payload import verify_signature
from tests.servers import Answer, send_answer, serving


@dataclass(frozen=True)
class Delivery:
    """One POST as the receiver saw it, and what it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    # None when the receiver has no secret to check against.
    signature_valid: bool | None
    status: int

    @property
    def key(self) -> str:
        """The X-PaperTrail-Delivery header ("" when absent)."""
        return self.header(DELIVERY_HEADER) or ""

    def header(self, name: str) -> str | None:
        """A request header by case-insensitive name."""
        wanted = name.lower()
        return next((value for key, value in self.headers.items() if key.lower() == wanted), None)


class WebhookReceiver:
    """State shared between the server threads and the test; every access holds the lock."""

    def __init__(self, answers: tuple[Answer, ...], secret: str | None) -> None:
        self._lock = threading.Condition()
        self._answers: deque[Answer] = deque(answers)
        self._deliveries: list[Delivery] = []
        self._secret = secret
        self.base_url = ""

    @property
    def url(self) -> str:
        """The hook URL (path ``/hook``)."""
        return self.base_url + "/hook"

    @property
    def secret(self) -> str | None:
        """The secret signatures are checked against (settable once the URL, hence the secret, is known)."""
        with self._lock:
            return self._secret

    @secret.setter
    def secret(self, value: str | None) -> None:
        with self._lock:
            self._secret = value

    def script(self, *answers: Answer) -> None:
        """Queue answers for the next requests; when the queue is empty the receiver answers 200."""
        with self._lock:
            self._answers.extend(answers)

    @property
    def deliveries(self) -> list[Delivery]:
        """Every POST so far, in arrival order."""
        with self._lock:
            return list(self._deliveries)

    def by_key(self) -> dict[str, list[Delivery]]:
        """Deliveries grouped by X-PaperTrail-Delivery key."""
        grouped: dict[str, list[Delivery]] = {}
        for delivery in self.deliveries:
            grouped.setdefault(delivery.key, []).append(delivery)
        return grouped

    def count(self, key: str) -> int:
        """How many POSTs carried this delivery key."""
        return len(self.by_key().get(key, []))

    def wait_for(self, total: int, timeout: float = 10.0) -> bool:
        """Block until at least ``total`` POSTs arrived (True) or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._deliveries) < total:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
            return True

    def record(self, path: str, headers: dict[str, str], body: bytes) -> Answer:
        """Store one POST and pick its answer (called from the server threads)."""
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = None
        with self._lock:
            answer = self._answers.popleft() if self._answers else Answer()
            signature = next((v for k, v in headers.items() if k.lower() == SIGNATURE_HEADER.lower()), None)
            valid = None if self._secret is None else verify_signature(self._secret, signature, body)
            self._deliveries.append(Delivery(path, headers, body, parsed, valid, answer.status))
            self._lock.notify_all()
        return answer


@contextmanager
def webhook_receiver(
    *answers: Answer, secret: str | None = None, tls: tuple[str, str] | None = None
) -> Iterator[WebhookReceiver]:
    """Run a receiver on an ephemeral loopback port; ``receiver.url`` is its hook URL."""
    state = WebhookReceiver(answers, secret)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            send_answer(self, state.record(self.path, dict(self.headers.items()), body))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    state.base_url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield state
