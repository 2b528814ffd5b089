"""A fake Telegram Bot API server on 127.0.0.1 for the notifier and bot tests.

python-telegram-bot's ``Bot`` talks to it unchanged: point ``base_url`` at ``f"{api.base_url}/bot"`` (that is
``Settings.telegram_api_url = api.base_url``). PTB posts every method as an
``application/x-www-form-urlencoded`` body whose non-string values are JSON-encoded
(``telegram.request.RequestData.json_parameters`` handed to ``httpx`` as ``data=``); the server also takes
JSON bodies and query strings, as the real Bot API does.

It answers ``getMe`` and ``sendMessage`` with the Bot API's JSON shapes, parses ``parse_mode=HTML`` the way
Telegram does (only Telegram's tags, balanced, entities decoded, length counted in UTF-16 units after
parsing) and answers malformed markup with Telegram's "can't parse entities" error. Tests script failures
per method or per chat (flood control, a blocked bot, a migrated group ...) and may have it enforce
Telegram's rate limits, counting the 429s a client provokes in ``api.too_many``.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.servers import serving

MAX_MESSAGE_UTF16 = 4096

# Bot API parameters whose form values are JSON (objects, arrays) or booleans rather than plain strings.
_JSON_PARAMS = frozenset(
    {"link_preview_options", "reply_markup", "entities", "reply_parameters", "allowed_updates"}
)
_BOOL_PARAMS = frozenset(
    {"disable_notification", "protect_content", "disable_web_page_preview", "allow_sending_without_reply"}
)


@dataclass(frozen=True, slots=True)
class Call:
    """One request the fake received: the Bot API method, its decoded parameters, when, and the answer."""

    method: str
    params: dict[str, Any]
    at: float
    status: int

    @property
    def chat_id(self) -> str:
        """The ``chat_id`` parameter as a string ("" when absent)."""
        return str(self.params.get("chat_id", ""))


@dataclass(frozen=True, slots=True)
class Scripted:
    """A scripted error answer: HTTP status, Bot API ``description`` and optional ``parameters``.

    ``error_code`` defaults to the HTTP status; a 200 with ``ok: false`` is a broken server.
    """

    status: int
    description: str
    parameters: dict[str, int] | None = None
    error_code: int | None = None

    def body(self) -> dict[str, Any]:
        """The JSON the Bot API sends for this error."""
        body: dict[str, Any] = {
            "ok": False,
            "error_code": self.error_code or self.status,
            "description": self.description,
        }
        if self.parameters:
            body["parameters"] = self.parameters
        return body


# In a script queue, PASS lets one request through to the normal handling.
PASS: Scripted | None = None


def flood(retry_after: int) -> Scripted:
    """429 flood control with ``parameters.retry_after`` in whole seconds, as Telegram sends it."""
    return Scripted(429, f"Too Many Requests: retry after {retry_after}", {"retry_after": retry_after})


def blocked() -> Scripted:
    """403: the user blocked the bot."""
    return Scripted(403, "Forbidden: bot was blocked by the user")


def kicked() -> Scripted:
    """403: the bot was removed from the group."""
    return Scripted(403, "Forbidden: bot was kicked from the group chat")


def deactivated() -> Scripted:
    """403: the user deleted their account."""
    return Scripted(403, "Forbidden: user is deactivated")


def migrated(new_chat_id: int) -> Scripted:
    """400: the group was upgraded to a supergroup with a new chat id."""
    return Scripted(
        400,
        "Bad Request: group chat was upgraded to a supergroup chat",
        {"migrate_to_chat_id": new_chat_id},
    )


def cant_parse(tag: str = "div") -> Scripted:
    """400: Telegram's HTML parser rejected the text."""
    return Scripted(
        400, f'Bad Request: can\'t parse entities: Unsupported start tag "{tag}" at byte offset 0'
    )


def chat_not_found() -> Scripted:
    """400: no such chat (or the bot never talked to it)."""
    return Scripted(400, "Bad Request: chat not found")


def server_error() -> Scripted:
    """500 from the Bot API."""
    return Scripted(500, "Internal Server Error")


def not_ok() -> Scripted:
    """HTTP 200 with ``ok: false``: a broken proxy or server."""
    return Scripted(200, "Internal error", error_code=500)


class EntityParseError(ValueError):
    """Telegram's HTML parser would reject the text; the message is Telegram's description."""


# Telegram's HTML tags and the entity type each produces (span only with class="tg-spoiler").
_TAG_ENTITY = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
_SPECIAL = re.compile(r"[<&]")
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_ATTRIBUTE = re.compile(r"""([a-zA-Z_-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, Telegram's measure for message length and entity offsets."""
    return len(text.encode("utf-16-le")) // 2


def _decode_entities(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "&":
            decoded, i = _entity_at(text, i)
            out.append(decoded)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _entity_at(text: str, i: int) -> tuple[str, int]:
    """Decode the character reference at ``text[i] == "&"``; unknown ones stay literal text."""
    semi = text.find(";", i + 1, i + 12)
    if semi == -1:
        return "&", i + 1
    name = text[i + 1 : semi]
    if name in _NAMED_ENTITIES:
        return _NAMED_ENTITIES[name], semi + 1
    try:
        if name[:2].lower() == "#x":
            return chr(int(name[2:], 16)), semi + 1
        if name[:1] == "#":
            return chr(int(name[1:])), semi + 1
    except (ValueError, OverflowError):
        pass
    return "&", i + 1


@dataclass
class _Open:
    tag: str
    start: int
    attrs: dict[str, str]


def parse_html(source: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse Telegram HTML into (text, entities) as the Bot API does, or raise :class:`EntityParseError`.

    Entity offsets and lengths are in UTF-16 code units. Unsupported tags, unbalanced or crossed tags, a
    ``<`` that opens no tag and nested blockquotes are errors, with Telegram's wording.
    """
    text: list[str] = []
    offset = 0
    stack: list[_Open] = []
    entities: list[dict[str, Any]] = []
    i = 0
    while i < len(source):
        special = _SPECIAL.search(source, i)
        stop = special.start() if special else len(source)
        if stop > i:
            run = source[i:stop]
            text.append(run)
            offset += utf16_len(run)
            i = stop
        elif source[i] == "<":
            i, offset = _tag(source, i, offset, stack, entities)
        else:
            decoded, i = _entity_at(source, i)
            text.append(decoded)
            offset += utf16_len(decoded)
    if stack:
        raise EntityParseError(
            f"Bad Request: can't parse entities: Can't find end tag corresponding to start tag "
            f'"{stack[-1].tag}"'
        )
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(text), entities


def _byte_offset(source: str, i: int) -> int:
    return len(source[:i].encode("utf-8"))


def _tag(
    source: str, i: int, offset: int, stack: list[_Open], entities: list[dict[str, Any]]
) -> tuple[int, int]:
    """Handle the tag at ``source[i] == "<"``; returns the index after it and the unchanged text offset."""
    end = source.find(">", i)
    where = _byte_offset(source, i)
    if end == -1:
        raise EntityParseError(
            f"Bad Request: can't parse entities: Unclosed start tag at byte offset {where}"
        )
    inner = source[i + 1 : end]
    if inner.startswith("/"):
        name = inner[1:].strip().lower()
        if not stack:
            raise EntityParseError(
                f'Bad Request: can\'t parse entities: Unexpected end tag "{name}" at byte offset {where}'
            )
        opened = stack.pop()
        if name != opened.tag:
            raise EntityParseError(
                f"Bad Request: can't parse entities: Unmatched end tag at byte offset {where}, "
                f'expected "</{opened.tag}>", found "</{name}>"'
            )
        entity = _entity(opened, offset)
        if entity is not None:
            entities.append(entity)
        return end + 1, offset
    match = re.match(r"[a-zA-Z][a-zA-Z0-9-]*", inner)
    name = match.group(0).lower() if match else ""
    attrs = {
        m.group(1).lower(): _decode_entities(m.group(2) or m.group(3) or m.group(4) or "")
        for m in _ATTRIBUTE.finditer(inner[len(name) :])
    }
    if name not in _TAG_ENTITY or (name == "span" and attrs.get("class") != "tg-spoiler"):
        raise EntityParseError(
            f'Bad Request: can\'t parse entities: Unsupported start tag "{name}" at byte offset {where}'
        )
    if name == "blockquote" and any(o.tag == "blockquote" for o in stack):
        raise EntityParseError(
            f"Bad Request: can't parse entities: Blockquote can't be nested at byte offset {where}"
        )
    stack.append(_Open(name, offset, attrs))
    return end + 1, offset


def _entity(opened: _Open, offset: int) -> dict[str, Any] | None:
    length = offset - opened.start
    if length <= 0:
        return None
    kind = _TAG_ENTITY[opened.tag]
    if kind == "blockquote" and "expandable" in opened.attrs:
        kind = "expandable_blockquote"
    entity: dict[str, Any] = {"type": kind, "offset": opened.start, "length": length}
    if kind == "text_link":
        entity["url"] = opened.attrs.get("href", "")
    if kind == "custom_emoji":
        entity["custom_emoji_id"] = opened.attrs.get("emoji-id", "")
    return entity


def decode_params(raw: dict[str, Any]) -> dict[str, Any]:
    """Decode form values the way the Bot API types them: JSON objects for structured parameters."""
    params: dict[str, Any] = {}
    for name, value in raw.items():
        if isinstance(value, str) and name in _JSON_PARAMS:
            value = json.loads(value)
        elif isinstance(value, str) and name in _BOOL_PARAMS:
            value = value.lower() == "true"
        params[name] = value
    return params


@dataclass
class FakeTelegram:
    """The fake's state: calls received, scripts, rate limits. Shared with the server thread under a lock.

    ``max_per_second``: at most this many messages in any one-second window (all chats together);
    ``chat_interval``: least seconds between two messages to one chat; ``group_per_minute``: at most this
    many messages to one group (negative chat id) per minute. Each is enforced only when set, answering
    429 with ``retry_after``. ``tolerance`` forgives that much network jitter (seconds) in each rule.
    """

    token: str
    max_per_second: int | None = None
    chat_interval: float | None = None
    group_per_minute: int | None = None
    tolerance: float = 0.05
    base_url: str = ""
    calls: list[Call] = field(default_factory=list)
    too_many: int = 0
    _method_scripts: defaultdict[str, deque[Scripted | None]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    _chat_scripts: defaultdict[str, deque[Scripted | None]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    _accepted: deque[float] = field(default_factory=deque)
    _last_to_chat: dict[str, float] = field(default_factory=dict)
    _group_recent: defaultdict[str, deque[float]] = field(default_factory=lambda: defaultdict(deque))
    _message_ids: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def bot_id(self) -> int:
        """The bot's user id: the number before the colon of the token, as on Telegram."""
        head = self.token.partition(":")[0]
        return int(head) if head.isdigit() else 424242

    def script(self, *replies: Scripted | None, method: str = "sendMessage") -> None:
        """Queue answers for the next calls of ``method`` (``PASS`` lets one call through)."""
        with self._lock:
            self._method_scripts[method.lower()].extend(replies)

    def script_chat(self, chat_id: int | str, *replies: Scripted | None) -> None:
        """Queue answers for the next messages to ``chat_id``; these win over per-method scripts."""
        with self._lock:
            self._chat_scripts[str(chat_id)].extend(replies)

    def sent(self, chat_id: int | str | None = None) -> list[Call]:
        """The sendMessage calls the fake accepted (HTTP 200), optionally only those to one chat."""
        with self._lock:
            return [
                c
                for c in self.calls
                if c.method == "sendMessage"
                and c.status == 200
                and (chat_id is None or c.chat_id == str(chat_id))
            ]

    def methods(self) -> list[str]:
        """The method names received, in order."""
        with self._lock:
            return [c.method for c in self.calls]

    # The server thread calls handle(); everything below runs under the lock.

    def handle(self, path: str, raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer one request: (HTTP status, JSON body)."""
        now = time.monotonic()
        params = decode_params(raw)
        prefix, _, method = path.strip("/").partition("/")
        with self._lock:
            status, body = self._answer(prefix, method, params, now)
            if status == 429:
                self.too_many += 1
            self.calls.append(Call(method, params, now, status))
            return status, body

    def _answer(
        self, prefix: str, method: str, params: dict[str, Any], now: float
    ) -> tuple[int, dict[str, Any]]:
        if prefix != f"bot{self.token}":
            return 401, Scripted(401, "Unauthorized").body()
        chat = str(params.get("chat_id", ""))
        scripted = self._next_script(method, chat)
        if scripted is not None:
            return scripted.status, scripted.body()
        if method.lower() == "getme":
            return 200, {"ok": True, "result": self._me()}
        if method.lower() == "sendmessage":
            return self._send_message(chat, params, now)
        return 404, Scripted(404, "Not Found").body()

    def _next_script(self, method: str, chat: str) -> Scripted | None:
        for queue in (
            self._chat_scripts.get(chat) if chat else None,
            self._method_scripts.get(method.lower()),
        ):
            if queue:
                return queue.popleft()
        return None

    def _me(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "PaperTrail",
            "username": "papertrail_test_bot",
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _send_message(self, chat: str, params: dict[str, Any], now: float) -> tuple[int, dict[str, Any]]:
        if not chat:
            return 400, Scripted(400, "Bad Request: chat_id is empty").body()
        wait = self._rate_wait(chat, now)
        if wait > 0:
            return 429, flood(max(1, math.ceil(wait))).body()
        source = str(params.get("text", ""))
        if str(params.get("parse_mode", "")).lower() == "html":
            try:
                text, entities = parse_html(source)
            except EntityParseError as exc:
                return 400, Scripted(400, str(exc)).body()
        else:
            text, entities = source, []
        if not text.strip():
            return 400, Scripted(400, "Bad Request: message text is empty").body()
        if utf16_len(text) > MAX_MESSAGE_UTF16:
            return 400, Scripted(400, "Bad Request: message is too long").body()
        self._accept(chat, now)
        self._message_ids[chat] += 1
        message: dict[str, Any] = {
            "message_id": self._message_ids[chat],
            "from": {k: v for k, v in self._me().items() if k in ("id", "is_bot", "first_name", "username")},
            "chat": _chat(chat),
            "date": int(time.time()),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if "link_preview_options" in params:
            message["link_preview_options"] = params["link_preview_options"]
        return 200, {"ok": True, "result": message}

    def _rate_wait(self, chat: str, now: float) -> float:
        """Seconds until a message to ``chat`` would respect every enforced limit (0: send now)."""
        waits = [0.0]
        if self.chat_interval and chat in self._last_to_chat:
            waits.append(self._last_to_chat[chat] + self.chat_interval - self.tolerance - now)
        if self.max_per_second:
            window = 1.0 - self.tolerance
            while self._accepted and self._accepted[0] <= now - window:
                self._accepted.popleft()
            if len(self._accepted) >= self.max_per_second:
                waits.append(self._accepted[0] + window - now)
        if self.group_per_minute and chat.startswith("-"):
            recent = self._group_recent[chat]
            while recent and recent[0] <= now - (60.0 - self.tolerance):
                recent.popleft()
            if len(recent) >= self.group_per_minute:
                waits.append(recent[0] + 60.0 - self.tolerance - now)
        return max(waits)

    def _accept(self, chat: str, now: float) -> None:
        self._last_to_chat[chat] = now
        self._accepted.append(now)
        if chat.startswith("-"):
            self._group_recent[chat].append(now)


def _chat(chat: str) -> dict[str, Any]:
    """A Chat object: private for positive ids, supergroup for -100…, group otherwise."""
    chat_id = int(chat) if chat.lstrip("-").isdigit() else 0
    if chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": "Ada", "username": "ada"}
    if chat.startswith("-100"):
        return {"id": chat_id, "type": "supergroup", "title": "PaperTrail readers"}
    return {"id": chat_id, "type": "group", "title": "PaperTrail readers"}


def _read_params(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
    """Parameters from the query string and the body (form-urlencoded as PTB sends, or JSON)."""
    raw: dict[str, Any] = dict(parse_qsl(urlsplit(handler.path).query, keep_blank_values=True))
    length = int(handler.headers.get("Content-Length") or 0)
    body = handler.rfile.read(length) if length else b""
    content_type = handler.headers.get("Content-Type", "")
    if body and content_type.startswith("application/json"):
        decoded = json.loads(body)
        raw.update({k: v for k, v in decoded.items() if v is not None})
    elif body:
        raw.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    return raw


@contextmanager
def fake_telegram(
    token: str = "123456:TEST-token",
    *,
    max_per_second: int | None = None,
    chat_interval: float | None = None,
    group_per_minute: int | None = None,
    tolerance: float = 0.05,
) -> Iterator[FakeTelegram]:
    """Run a fake Bot API on an ephemeral loopback port; ``api.base_url`` is the server root."""
    state = FakeTelegram(
        token,
        max_per_second=max_per_second,
        chat_interval=chat_interval,
        group_per_minute=group_per_minute,
        tolerance=tolerance,
    )

    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as api.telegram.org does: PTB's httpx pool reuses connections.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle plus the client's delayed ACK
        # adds ~40 ms to every answer.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            try:
                raw = _read_params(self)
            except (ValueError, UnicodeDecodeError):
                self._reply(400, Scripted(400, "Bad Request: invalid request body").body())
                return
            self._reply(*state.handle(urlsplit(self.path).path, raw))

        do_GET = do_POST

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        # A burst of concurrent connections must not overflow the listen backlog (the default is 5): a
        # dropped SYN is retried only after a second, which would look like server latency.
        request_queue_size = 128

    server = Server(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield state
