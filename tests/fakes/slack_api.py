"""A fake Slack Web API and incoming-webhook endpoint on 127.0.0.1, for the real slack_sdk clients.

``with fake_slack() as slack:`` starts a stdlib HTTP server in a thread. Point ``AsyncWebClient`` at
``slack.base_url`` (it ends in ``/api/``: slack_sdk joins it with the method name by ``urljoin``, so the
trailing slash matters) and ``AsyncWebhookClient`` at ``slack.webhook_url``.

The server records every request in ``slack.calls`` and answers:

* with the replies scripted by ``slack.script(...)``, in order, one per request (the Web API and the
  webhook share one queue; scripted replies are for failure tests, which talk to one of them);
  ``NORMAL`` in the script lets that request through to the normal answer;
* otherwise the way Slack does: ``{"ok": true, "ts": ...}`` for ``chat.postMessage`` and ``ok`` (text)
  for the webhook, after checking what Slack checks (the bot token, at most 50 blocks, header text at most
  150 characters, section text at most 3,000, a message text at most 40,000) and answering Slack's own
  error for a violation (``invalid_auth``, ``invalid_blocks``, ``msg_too_long``);
* with HTTP 429 when ``enforce_interval`` is set and a message to a channel (or to the webhook) comes
  sooner than that after the previous one; ``slack.rate_limited`` counts those.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from tests.servers import serving

WEBHOOK_PATH = "/services/T0001/B0001/fakeWebhookSecret"

# Slack's published Block Kit limits, as the fake enforces them.
MAX_BLOCKS = 50
MAX_HEADER = 150
MAX_SECTION = 3000
MAX_TEXT = 40_000
# Arrival jitter on loopback: two messages a client spaced exactly 1 s apart may arrive a little closer.
INTERVAL_TOLERANCE = 0.05


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer: a JSON object (Web API) or a text body (webhook)."""

    status: int = 200
    json_body: dict[str, Any] | None = None
    text_body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Seconds to sleep before answering (to make a client time out).
    delay: float = 0.0


# A scripted entry that lets the request through to the normal answer (to fail the second part, say).
NORMAL = Reply(status=0)


def api_error(error: str, status: int = 200) -> Reply:
    """A Web API error the way Slack sends most of them: HTTP 200 and ``ok: false``."""
    return Reply(status, {"ok": False, "error": error})


def rate_limited(retry_after: int) -> Reply:
    """Slack's 429 for the Web API, with its Retry-After header."""
    return Reply(429, {"ok": False, "error": "ratelimited"}, headers={"Retry-After": str(retry_after)})


def http_error(status: int, body: str = "<html><body>Internal Server Error</body></html>") -> Reply:
    """A bare HTTP error from a proxy or load balancer in front of Slack: HTML, not JSON."""
    return Reply(status, text_body=body, headers={"Content-Type": "text/html"})


def hook_error(status: int, body: str, retry_after: int | None = None) -> Reply:
    """An incoming-webhook error: a status code and a short text body such as ``no_service``."""
    headers = {"Content-Type": "text/plain"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return Reply(status, text_body=body, headers=headers)


@dataclass(frozen=True)
class Call:
    """One request the fake received."""

    method: str  # the Web API method, or "webhook"
    params: dict[str, Any]
    headers: dict[str, str]
    time: float  # time.monotonic() on arrival


@dataclass
class FakeSlack:
    """The fake's state, shared with the handler thread. Use :func:`fake_slack` to start one."""

    token: str | None = None
    enforce_interval: float | None = None
    base_url: str = ""
    webhook_url: str = ""
    calls: list[Call] = field(default_factory=list)
    rate_limited: int = 0
    _script: list[Reply] = field(default_factory=list)
    _last: dict[str, float] = field(default_factory=dict)
    _ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, one each; afterwards the fake answers normally again."""
        with self._lock:
            self._script.extend(replies)

    def messages(self) -> list[Call]:
        """The chat.postMessage and webhook calls, in arrival order."""
        return [call for call in self.calls if call.method in ("chat.postMessage", "webhook")]

    def answer(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> Reply:
        """Record a request and choose its reply."""
        now = time.monotonic()
        with self._lock:
            self.calls.append(Call(method, params, headers, now))
            scripted = self._script.pop(0) if self._script else NORMAL
            if scripted is not NORMAL:
                return scripted
            throttled = self._throttle(str(params.get("channel", method)), now)
            if throttled is not None:
                return throttled
            if method == "webhook":
                return self._webhook(params)
            return self._api(method, params, headers)

    def _throttle(self, channel: str, now: float) -> Reply | None:
        if self.enforce_interval is None:
            return None
        last = self._last.get(channel)
        if last is not None and now - last < self.enforce_interval - INTERVAL_TOLERANCE:
            self.rate_limited += 1
            return rate_limited(1)
        self._last[channel] = now
        return None

    def _api(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> Reply:
        if self.token is not None and headers.get("Authorization") != f"Bearer {self.token}":
            return api_error("invalid_auth")
        if method != "chat.postMessage":
            return api_error("unknown_method")
        problem = check_message(params)
        if problem is not None:
            return api_error(problem)
        self._ts += 1
        return Reply(200, {"ok": True, "channel": params.get("channel"), "ts": f"1700000000.{self._ts:06d}"})

    def _webhook(self, params: dict[str, Any]) -> Reply:
        problem = check_message(params)
        if problem is not None:
            return hook_error(400, problem)
        return Reply(200, text_body="ok", headers={"Content-Type": "text/html"})


def check_message(params: dict[str, Any]) -> str | None:
    """Slack's error code for a message that breaks a Block Kit limit, or None."""
    text = params.get("text")
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if not text and not blocks:
        return "no_text"
    if text and len(text) > MAX_TEXT:
        return "msg_too_long"
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        return "invalid_blocks"
    for block in blocks:
        if not _block_ok(block):
            return "invalid_blocks"
    return None


def _block_ok(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "divider":
        return True
    if kind == "header":
        text = block.get("text", {})
        return text.get("type") == "plain_text" and 0 < len(text.get("text", "")) <= MAX_HEADER
    if kind == "section":
        text = block.get("text", {})
        return text.get("type") in ("mrkdwn", "plain_text") and 0 < len(text.get("text", "")) <= MAX_SECTION
    if kind == "context":
        elements = block.get("elements", [])
        return 0 < len(elements) <= 10 and all(
            0 < len(element.get("text", "")) <= MAX_SECTION for element in elements
        )
    return False


def _parse_body(raw: bytes, content_type: str) -> dict[str, Any]:
    if "json" in content_type:
        parsed = json.loads(raw or b"{}")
        return parsed if isinstance(parsed, dict) else {"_": parsed}
    return {key: values[-1] for key, values in parse_qs(raw.decode("utf-8")).items()}


@contextmanager
def fake_slack(*, token: str | None = None, enforce_interval: float | None = None) -> Iterator[FakeSlack]:
    """Start a fake Slack on an ephemeral loopback port.

    ``token``: when set, Web API calls must carry ``Authorization: Bearer <token>`` (else ``invalid_auth``).
    ``enforce_interval``: the least seconds between two messages to one channel before answering 429.
    """
    state = FakeSlack(token=token, enforce_interval=enforce_interval)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as aiohttp expects from Slack

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            params = _parse_body(raw, self.headers.get("Content-Type", ""))
            headers = dict(self.headers.items())
            if self.path == WEBHOOK_PATH:
                method = "webhook"
            elif self.path.startswith("/api/"):
                method = self.path.removeprefix("/api/").split("?")[0]
            else:
                self._write(Reply(404, text_body="not found", headers={"Content-Type": "text/plain"}))
                return
            reply = state.answer(method, params, headers)
            if reply.delay:
                time.sleep(reply.delay)
            self._write(reply)

        def _write(self, reply: Reply) -> None:
            if reply.json_body is not None:
                body = json.dumps(reply.json_body).encode()
                content_type = "application/json; charset=utf-8"
            else:
                body = (reply.text_body or "").encode()
                content_type = "text/plain; charset=utf-8"
            try:
                self.send_response(reply.status)
                headers = {"Content-Type": content_type, **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    root = f"http://127.0.0.1:{server.server_address[1]}"
    state.base_url = f"{root}/api/"
    state.webhook_url = f"{root}{WEBHOOK_PATH}"
    with serving(server, poll_interval=0.02):
        yield state
