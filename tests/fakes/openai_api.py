"""A fake OpenAI-compatible chat-completions server on 127.0.0.1: records every request, answers as scripted.

Scripted answers are served in order; when the script runs out, every request gets a valid guide. Helpers
build the usual scripted troubles: a 429 with Retry-After, a 500, a slow answer, a malformed body.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.servers import Answer, send_answer, serving

DEFAULT_GUIDE: dict[str, Any] = {
    "tldr": "The paper shows a faster way to train models.",
    "contributions": ["A new optimiser", "A proof of convergence"],
    "changes": "The revision adds experiments.",
}
# What the fake answers when the system message asks for Simplified Chinese and nothing is scripted.
DEFAULT_GUIDE_ZH: dict[str, Any] = {
    "tldr": "本文提出一种更快的模型训练方法。",
    "contributions": ["一种新的优化器", "收敛性证明"],
    "changes": "修订版增加了实验。",
}


def completion(content: str) -> Answer:
    """A well-formed chat completion whose first choice says ``content``."""
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }
    return Answer(body=json.dumps(body).encode())


def guide_answer(**fields: Any) -> Answer:
    """A completion whose content is a guide JSON object (the default one, with ``fields`` replaced)."""
    return completion(json.dumps({**DEFAULT_GUIDE, **fields}, ensure_ascii=False))


def rate_limited(retry_after: str = "0") -> Answer:
    """HTTP 429 with a Retry-After header."""
    return Answer(429, {"Retry-After": retry_after}, b'{"error": {"message": "rate limited"}}')


def server_error() -> Answer:
    """HTTP 500."""
    return Answer(500, body=b'{"error": {"message": "boom"}}')


def slow(delay: float) -> Answer:
    """A valid guide, but only after ``delay`` seconds."""
    return Answer(body=guide_answer().body, delay=delay)


def malformed() -> Answer:
    """HTTP 200 with a body that is not a chat completion."""
    return Answer(body=b'{"choices": "not a list"')


@dataclass(frozen=True)
class Request:
    """One POST as the server saw it."""

    path: str
    headers: dict[str, str]
    json: Any

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat messages sent (none when the body was not a JSON object)."""
        return list(self.json.get("messages", [])) if isinstance(self.json, dict) else []


class FakeOpenAI:
    """State shared between the server threads and the test; every access holds the lock."""

    def __init__(self, script: list[Answer]) -> None:
        self._lock = threading.Lock()
        self._script = list(script)
        self._requests: list[Request] = []
        self.url = ""

    def script(self, *answers: Answer) -> None:
        """Append answers to the script."""
        with self._lock:
            self._script.extend(answers)

    def take(self, request: Request) -> Answer:
        """Record ``request`` and return the next scripted answer.

        Once the script runs out, a valid guide in the language the prompt asks for (English or Chinese).
        """
        with self._lock:
            self._requests.append(request)
            if self._script:
                return self._script.pop(0)
        system = next((m.get("content", "") for m in request.messages if m.get("role") == "system"), "")
        return guide_answer(**DEFAULT_GUIDE_ZH) if "Simplified Chinese" in str(system) else guide_answer()

    @property
    def requests(self) -> list[Request]:
        """Every request so far, in arrival order."""
        with self._lock:
            return list(self._requests)


@contextmanager
def fake_openai(*script: Answer) -> Iterator[FakeOpenAI]:
    """Start the fake on an ephemeral loopback port; ``fake.url`` is the base URL (ending in ``/v1``)."""
    state = FakeOpenAI(list(script))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            send_answer(
                self, state.take(Request(self.path, dict(self.headers.items()), body)), "application/json"
            )

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with serving(server):
        yield state
