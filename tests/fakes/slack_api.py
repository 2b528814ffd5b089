"""A fake Slack on 127.0.0.1 for the real slack_sdk and Bolt clients: Web API, webhooks, Socket Mode.

``with fake_slack() as slack:`` starts a stdlib HTTP server in a thread. Point ``AsyncWebClient`` at
``slack.base_url`` (it ends in ``/api/``: slack_sdk joins it with the method name by ``urljoin``, so the
trailing slash matters) and ``AsyncWebhookClient`` at ``slack.webhook_url``. ``slack.response_url(name)``
is a slash command's ``response_url`` on the same server (recorded as method ``"response"``).

Web API methods answered (GET with a query string or POST with a form or JSON body, as slack_sdk sends
them): ``chat.postMessage``, ``chat.postEphemeral``, ``auth.test`` (the bot ``slack.bot_user_id`` of team
``slack.team_id``, which Bolt asks once), ``users.info`` (from ``slack.users``; ``locale`` only with
``include_locale=true``, as Slack does), ``conversations.info`` (from ``slack.channels``), ``views.publish``
(a home view of at most 100 valid blocks) and ``apps.connections.open`` (with the app-level token
``slack.app_token``, answering ``slack.socket_url``). Anything else is ``unknown_method``.

The server records every request in ``slack.calls`` (``slack.wait_for(method)`` waits for one that a
background task makes) and answers:

* with the replies scripted by ``slack.script(...)``, in order, one per request (the Web API and the
  webhook share one queue; scripted replies are for failure tests, which talk to one of them);
  ``NORMAL`` in the script lets that request through to the normal answer;
* otherwise the way Slack does: ``{"ok": true, "ts": ...}`` for ``chat.postMessage`` and ``ok`` (text)
  for the webhook and a response_url, after checking what Slack checks (the bot token, at most 50 blocks,
  header text at most 150 characters, section text at most 3,000, a message text at most 40,000, button
  labels at most 75 and values at most 2,000) and answering Slack's own error for a violation
  (``invalid_auth``, ``invalid_blocks``, ``msg_too_long``);
* with HTTP 429 when ``enforce_interval`` is set and a message to a channel (or to the webhook) comes
  sooner than that after the previous one; ``slack.rate_limited`` counts those.

``async with fake_socket_mode() as socket:`` is a Socket Mode WebSocket server (aiohttp, in the test's
event loop): set ``slack.socket_url = socket.url``, and ``await socket.send(kind, payload)`` delivers an
envelope to the connected app and returns the app's acknowledgement.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp import WSMsgType, web

from tests.servers import serving

WEBHOOK_PATH = "/services/T0001/B0001/fakeWebhookSecret"
RESPONSE_PREFIX = "/commands/T0001/"

# Slack's published Block Kit limits, as the fake enforces them.
MAX_BLOCKS = 50
MAX_HEADER = 150
MAX_SECTION = 3000
MAX_TEXT = 40_000
MAX_VIEW_BLOCKS = 100
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_ACTION_ELEMENTS = 25
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

    method: str  # the Web API method, "webhook", or "response" (a response_url)
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
    # The workspace as users.info, conversations.info and auth.test describe it; tests fill these in.
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    team_id: str = "T0001"
    bot_user_id: str = "U0BOT"
    # Socket Mode: the app-level token apps.connections.open wants, and the URL it answers.
    app_token: str | None = None
    socket_url: str = ""
    _script: list[Reply] = field(default_factory=list)
    _last: dict[str, float] = field(default_factory=dict)
    _ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _arrived: threading.Condition = field(init=False)
    root: str = ""

    def __post_init__(self) -> None:
        self._arrived = threading.Condition(self._lock)

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, one each; afterwards the fake answers normally again."""
        with self._lock:
            self._script.extend(replies)

    def messages(self) -> list[Call]:
        """The chat.postMessage and webhook calls, in arrival order."""
        return [call for call in self.calls if call.method in ("chat.postMessage", "webhook")]

    def calls_to(self, method: str) -> list[Call]:
        """The calls of one Web API method (or ``"response"``), in arrival order."""
        with self._lock:
            return [call for call in self.calls if call.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 5.0) -> list[Call]:
        """Wait until ``count`` calls of ``method`` arrived (a background task makes them); return them all.

        Raises AssertionError after ``timeout`` seconds, naming what did arrive.
        """
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                found = [call for call in self.calls if call.method == method]
                left = deadline - time.monotonic()
                if len(found) >= count or left <= 0:
                    break
                self._arrived.wait(left)
        if len(found) < count:
            seen = [call.method for call in self.calls]
            raise AssertionError(f"expected {count} {method} call(s), got {len(found)}; calls: {seen}")
        return found

    def response_url(self, name: str = "1") -> str:
        """A slash command's response_url on this server."""
        return f"{self.root}{RESPONSE_PREFIX}{name}"

    def answer(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> Reply:
        """Record a request and choose its reply."""
        now = time.monotonic()
        with self._lock:
            self.calls.append(Call(method, params, headers, now))
            self._arrived.notify_all()
            scripted = self._script.pop(0) if self._script else NORMAL
            if scripted is not NORMAL:
                return scripted
            if method in ("webhook", "response", "chat.postMessage"):
                throttled = self._throttle(str(params.get("channel", method)), now)
                if throttled is not None:
                    return throttled
            if method in ("webhook", "response"):
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
        if method == "apps.connections.open":
            return self._connections_open(headers)
        if self.token is not None and headers.get("Authorization") != f"Bearer {self.token}":
            return api_error("invalid_auth")
        answer = {
            "chat.postMessage": self._post_message,
            "chat.postEphemeral": self._post_ephemeral,
            "auth.test": self._auth_test,
            "users.info": self._users_info,
            "conversations.info": self._conversations_info,
            "views.publish": self._views_publish,
        }.get(method)
        return answer(params) if answer is not None else api_error("unknown_method")

    def _post_message(self, params: dict[str, Any]) -> Reply:
        problem = check_message(params)
        if problem is not None:
            return api_error(problem)
        self._ts += 1
        return Reply(200, {"ok": True, "channel": params.get("channel"), "ts": f"1700000000.{self._ts:06d}"})

    def _post_ephemeral(self, params: dict[str, Any]) -> Reply:
        if not params.get("user"):
            return api_error("user_not_in_channel")
        problem = check_message(params)
        if problem is not None:
            return api_error(problem)
        self._ts += 1
        return Reply(200, {"ok": True, "message_ts": f"1700000000.{self._ts:06d}"})

    def _auth_test(self, params: dict[str, Any]) -> Reply:
        return Reply(
            200,
            {
                "ok": True,
                "url": "https://fake.slack.invalid/",
                "team": "Fake Workspace",
                "user": "papertrail",
                "team_id": self.team_id,
                "user_id": self.bot_user_id,
                "bot_id": "B0BOT",
                "is_enterprise_install": False,
            },
        )

    def _users_info(self, params: dict[str, Any]) -> Reply:
        user = self.users.get(str(params.get("user", "")))
        if user is None:
            return api_error("user_not_found")
        shown = dict(user)
        if str(params.get("include_locale", "")).lower() not in ("1", "true"):
            shown.pop("locale", None)  # Slack sends the locale only when asked
        return Reply(200, {"ok": True, "user": shown})

    def _conversations_info(self, params: dict[str, Any]) -> Reply:
        channel = self.channels.get(str(params.get("channel", "")))
        if channel is None:
            return api_error("channel_not_found")
        return Reply(200, {"ok": True, "channel": channel})

    def _views_publish(self, params: dict[str, Any]) -> Reply:
        view = params.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not params.get("user_id") or not isinstance(view, dict) or view.get("type") != "home":
            return api_error("invalid_arguments")
        blocks = view.get("blocks")
        if not isinstance(blocks, list) or len(blocks) > MAX_VIEW_BLOCKS or not all(map(_block_ok, blocks)):
            return api_error("invalid_arguments")
        return Reply(200, {"ok": True, "view": {"id": "V0HOME", "type": "home", "blocks": blocks}})

    def _connections_open(self, headers: dict[str, str]) -> Reply:
        if self.app_token is not None and headers.get("Authorization") != f"Bearer {self.app_token}":
            return api_error("invalid_auth")
        if not self.socket_url:
            return api_error("internal_error")
        return Reply(200, {"ok": True, "url": self.socket_url})

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
        accessory = block.get("accessory")
        return (
            text.get("type") in ("mrkdwn", "plain_text")
            and 0 < len(text.get("text", "")) <= MAX_SECTION
            and (accessory is None or _button_ok(accessory))
        )
    if kind == "context":
        elements = block.get("elements", [])
        return 0 < len(elements) <= 10 and all(
            0 < len(element.get("text", "")) <= MAX_SECTION for element in elements
        )
    if kind == "actions":
        elements = block.get("elements", [])
        ids = [element.get("action_id") for element in elements]
        return (
            0 < len(elements) <= MAX_ACTION_ELEMENTS
            and len(set(ids)) == len(ids)
            and all(map(_button_ok, elements))
        )
    return False


def _button_ok(element: dict[str, Any]) -> bool:
    text = element.get("text", {})
    return (
        element.get("type") == "button"
        and text.get("type") == "plain_text"
        and 0 < len(text.get("text", "")) <= MAX_BUTTON_TEXT
        and 0 < len(element.get("action_id", "")) <= 255
        and len(element.get("value", "")) <= MAX_BUTTON_VALUE
    )


def _parse_body(raw: bytes, content_type: str) -> dict[str, Any]:
    if "json" in content_type:
        parsed = json.loads(raw or b"{}")
        return parsed if isinstance(parsed, dict) else {"_": parsed}
    return {key: values[-1] for key, values in parse_qs(raw.decode("utf-8")).items()}


@contextmanager
def fake_slack(
    *, token: str | None = None, enforce_interval: float | None = None, app_token: str | None = None
) -> Iterator[FakeSlack]:
    """Start a fake Slack on an ephemeral loopback port.

    ``token``: when set, Web API calls must carry ``Authorization: Bearer <token>`` (else ``invalid_auth``).
    ``enforce_interval``: the least seconds between two messages to one channel before answering 429.
    ``app_token``: when set, apps.connections.open must carry it (Socket Mode's app-level token).
    """
    state = FakeSlack(token=token, enforce_interval=enforce_interval, app_token=app_token)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as aiohttp expects from Slack

        def do_GET(self) -> None:
            # slack_sdk sends users.info and conversations.info as GET with a query string.
            query = {key: values[-1] for key, values in parse_qs(urlsplit(self.path).query).items()}
            self._handle(query)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            params = _parse_body(raw, self.headers.get("Content-Type", ""))
            query = {key: values[-1] for key, values in parse_qs(urlsplit(self.path).query).items()}
            self._handle({**query, **params})

        def _handle(self, params: dict[str, Any]) -> None:
            headers = dict(self.headers.items())
            path = urlsplit(self.path).path
            if path == WEBHOOK_PATH:
                method = "webhook"
            elif path.startswith(RESPONSE_PREFIX):
                method = "response"
            elif path.startswith("/api/"):
                method = path.removeprefix("/api/")
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
    state.root = root
    state.base_url = f"{root}/api/"
    state.webhook_url = f"{root}{WEBHOOK_PATH}"
    with serving(server, poll_interval=0.02):
        yield state


# ---------------------------------------------------------------------------------------------------------
# Socket Mode


@dataclass
class FakeSocketMode:
    """A Socket Mode server: one app connects over a WebSocket, envelopes go down, acknowledgements come up.

    ``connections`` counts the WebSocket connections opened; ``closed`` is set when the app hangs up.
    """

    url: str = ""
    connections: int = 0
    received: list[dict[str, Any]] = field(default_factory=list)
    _socket: web.WebSocketResponse | None = None
    _connected: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    _acks: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    async def send(self, kind: str, payload: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        """Deliver an envelope (``slash_commands``, ``events_api``, ``interactive``); return the app's ack."""
        await asyncio.wait_for(self._connected.wait(), timeout)
        assert self._socket is not None
        envelope_id = f"env-{next(self._ids)}"
        answered = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = answered
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
            "retry_reason": "",
        }
        await self._socket.send_str(json.dumps(envelope))
        return await asyncio.wait_for(answered, timeout)

    async def _serve(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self.connections += 1
        self._socket = socket
        await socket.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        self._connected.set()
        async for message in socket:
            if message.type != WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            self.received.append(data)
            waiting = self._acks.pop(str(data.get("envelope_id")), None)
            if waiting is not None and not waiting.done():
                waiting.set_result(data)
        self._connected.clear()
        self.closed.set()
        return socket


@asynccontextmanager
async def fake_socket_mode() -> AsyncIterator[FakeSocketMode]:
    """Start a Socket Mode WebSocket server on an ephemeral loopback port, in the running event loop."""
    state = FakeSocketMode()
    app = web.Application()
    app.router.add_get("/link", state._serve)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.url = f"ws://127.0.0.1:{port}/link"
    try:
        yield state
    finally:
        await runner.cleanup()
