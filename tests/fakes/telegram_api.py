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

For the chat bot it also serves what a bot receives and manages: ``getUpdates`` long polling over an update
queue the test fills (:meth:`FakeTelegram.push_update`, with :class:`Updates` to build the JSON), offsets
confirming updates as on Telegram; ``setMyCommands`` / ``getMyCommands``; ``getChatMember`` and
``getChatAdministrators`` over scripted members (:meth:`FakeTelegram.set_member`); ``answerCallbackQuery``;
``editMessageReplyMarkup`` on messages it sent (keyboards within Telegram's 100 buttons and 64-byte
callback data, in both); ``setWebhook`` / ``deleteWebhook`` / ``getWebhookInfo``
(while a webhook is set, ``getUpdates`` answers 409 Conflict, as Telegram does). Every call is recorded.
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
# Inline keyboards: at most 100 buttons a message ("reply markup is too long"), callback data of 1 to 64
# bytes ("BUTTON_DATA_INVALID"), as Telegram answers.
MAX_BUTTONS = 100
MAX_CALLBACK_BYTES = 64

# Bot API parameters whose form values are JSON (objects, arrays) or booleans rather than plain strings.
_JSON_PARAMS = frozenset(
    {
        "link_preview_options",
        "reply_markup",
        "entities",
        "reply_parameters",
        "allowed_updates",
        "commands",
        "scope",
    }
)
_BOOL_PARAMS = frozenset(
    {
        "disable_notification",
        "protect_content",
        "disable_web_page_preview",
        "allow_sending_without_reply",
        "show_alert",
        "drop_pending_updates",
    }
)
# The longest getUpdates long poll the fake holds open (Telegram allows 50 s); tests never wait that long.
MAX_POLL_SECONDS = 50.0
# Chat member statuses that getChatAdministrators lists.
ADMIN_STATUSES = frozenset({"creator", "administrator"})


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
    # The bot's side of Telegram: updates waiting for getUpdates, members, commands, webhook, messages sent.
    commands: list[dict[str, Any]] = field(default_factory=list)
    webhook: dict[str, Any] = field(default_factory=dict)
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _next_update_id: int = 1
    _members: defaultdict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    _messages: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    _closed: bool = False
    _arrived: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        # getUpdates waits on this condition (releasing the lock) until an update arrives or it times out.
        self._arrived = threading.Condition(self._lock)

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

    def calls_of(self, method: str) -> list[Call]:
        """Every call of ``method`` (whatever the answer), in order."""
        with self._lock:
            return [c for c in self.calls if c.method.lower() == method.lower()]

    def message(self, chat_id: int | str, message_id: int) -> dict[str, Any]:
        """A message the fake sent, as it is now (buttons edited since included): a copy of the JSON."""
        with self._lock:
            copy: dict[str, Any] = json.loads(json.dumps(self._messages[(str(chat_id), message_id)]))
            return copy

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates (an ``update_id`` is assigned when missing); returns its id.

        A long poll waiting in getUpdates is answered at once.
        """
        with self._arrived:
            if "update_id" not in update:
                update = {"update_id": self._next_update_id, **update}
            self._next_update_id = max(self._next_update_id, int(update["update_id"])) + 1
            self._updates.append(update)
            self._arrived.notify_all()
            return int(update["update_id"])

    def pending_updates(self) -> list[dict[str, Any]]:
        """The updates not yet confirmed by a getUpdates offset."""
        with self._lock:
            return list(self._updates)

    def set_member(self, chat_id: int | str, user_id: int, status: str) -> None:
        """Script ``user_id``'s status in a chat: creator, administrator, member, restricted, left, kicked.

        Users never scripted are members.
        """
        with self._lock:
            self._members[str(chat_id)][user_id] = status

    def close(self) -> None:
        """Answer every waiting long poll now (with no updates) and refuse to wait from now on."""
        with self._arrived:
            self._closed = True
            self._arrived.notify_all()

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
        name = method.lower()
        if name == "getme":
            return 200, {"ok": True, "result": self._me()}
        if name == "sendmessage":
            return self._send_message(chat, params, now)
        if name == "getupdates":
            return self._get_updates(params)
        answer = self._bot_method(name, chat, params)
        if answer is not None:
            return answer
        return 404, Scripted(404, "Not Found").body()

    def _next_script(self, method: str, chat: str) -> Scripted | None:
        # Chat scripts are about messages to the chat; other methods naming the chat do not consume them.
        chat_queue = self._chat_scripts.get(chat) if chat and method.lower() == "sendmessage" else None
        for queue in (chat_queue, self._method_scripts.get(method.lower())):
            if queue:
                return queue.popleft()
        return None

    def _bot_method(self, name: str, chat: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The methods a bot uses besides sending: commands, members, callbacks, markup, webhooks."""
        if name == "setmycommands":
            self.commands = list(params.get("commands") or [])
            return _ok(True)
        if name == "getmycommands":
            return _ok(self.commands)
        if name == "getchatmember":
            return _ok(self._member(chat, int(params.get("user_id", 0))))
        if name == "getchatadministrators":
            admins = [uid for uid, status in self._members[chat].items() if status in ADMIN_STATUSES]
            return _ok([self._member(chat, uid) for uid in admins])
        if name == "answercallbackquery":
            if not params.get("callback_query_id"):
                return 400, Scripted(400, "Bad Request: query is too old and response timeout expired").body()
            return _ok(True)
        if name == "editmessagereplymarkup":
            return self._edit_markup(chat, params)
        if name == "setwebhook":
            self.webhook = {k: v for k, v in params.items() if k != "certificate"}
            return _ok(True)
        if name == "deletewebhook":
            self.webhook = {}
            if params.get("drop_pending_updates"):
                self._updates.clear()
            return _ok(True)
        if name == "getwebhookinfo":
            info = {
                "url": str(self.webhook.get("url", "")),
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            }
            return _ok(info)
        return None

    def _get_updates(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Long polling: confirm updates below ``offset``, then answer those left or wait ``timeout`` s."""
        if self.webhook.get("url"):
            return 409, Scripted(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
                "delete the webhook first",
            ).body()
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        wait = min(float(params.get("timeout") or 0), MAX_POLL_SECONDS)
        self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]
        deadline = time.monotonic() + wait
        while not self._updates and not self._closed and (left := deadline - time.monotonic()) > 0:
            self._arrived.wait(left)
        return _ok(self._updates[:limit])

    def _member(self, chat: str, user_id: int) -> dict[str, Any]:
        status = self._members[chat].get(user_id, "member")
        member: dict[str, Any] = {"status": status, "user": _user(user_id)}
        if status == "creator":
            member["is_anonymous"] = False
        elif status == "administrator":
            member.update(dict.fromkeys(_ADMIN_RIGHTS, True), can_be_edited=False, is_anonymous=False)
        elif status == "kicked":
            member["until_date"] = 0
        return member

    def _edit_markup(self, chat: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        key = (chat, int(params.get("message_id") or 0))
        message = self._messages.get(key)
        if message is None:
            return 400, Scripted(400, "Bad Request: message to edit not found").body()
        markup = params.get("reply_markup")
        refused = _markup_error(markup)
        if refused is not None:
            return 400, Scripted(400, refused).body()
        if markup == message.get("reply_markup") or (not markup and "reply_markup" not in message):
            return 400, Scripted(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup "
                "are exactly the same as a current content and reply markup of the message",
            ).body()
        if markup:
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)
        return _ok(message)

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
        refused = _markup_error(params.get("reply_markup"))
        if refused is not None:
            return 400, Scripted(400, refused).body()
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
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        self._messages[(chat, message["message_id"])] = message
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


def _markup_error(markup: Any) -> str | None:
    """Telegram's error for an inline keyboard it refuses (too many buttons, bad callback data), or None."""
    if not isinstance(markup, dict):
        return None
    buttons = [button for row in markup.get("inline_keyboard") or [] for button in row]
    if len(buttons) > MAX_BUTTONS:
        return "Bad Request: reply markup is too long"
    for button in buttons:
        data = button.get("callback_data")
        if data is not None and not 1 <= len(str(data).encode("utf-8")) <= MAX_CALLBACK_BYTES:
            return "Bad Request: BUTTON_DATA_INVALID"
    return None


def _ok(result: Any) -> tuple[int, dict[str, Any]]:
    return 200, {"ok": True, "result": result}


# The rights a ChatMemberAdministrator always carries (all granted in the fake).
_ADMIN_RIGHTS = (
    "can_manage_chat",
    "can_delete_messages",
    "can_manage_video_chats",
    "can_restrict_members",
    "can_promote_members",
    "can_change_info",
    "can_invite_users",
    "can_post_stories",
    "can_edit_stories",
    "can_delete_stories",
)


def _user(user_id: int) -> dict[str, Any]:
    """A User object for a scripted member (names are made up from the id)."""
    return {"id": user_id, "is_bot": False, "first_name": f"User {user_id}"}


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
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                # A client that stops polling drops its pending getUpdates: nobody is left to answer.
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        # A burst of concurrent connections must not overflow the listen backlog (the default is 5): a
        # dropped SYN is retried only after a second, which would look like server latency.
        request_queue_size = 128

    server = Server(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        try:
            yield state
        finally:
            state.close()  # long polls still waiting end now, so no handler thread outlives the test


# -- updates, as Telegram sends them to a bot ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Person:
    """A Telegram user who talks to the bot."""

    id: int
    first_name: str
    last_name: str = ""
    username: str = ""
    language_code: str = "en"

    def json(self) -> dict[str, Any]:
        """The User object."""
        user: dict[str, Any] = {"id": self.id, "is_bot": False, "first_name": self.first_name}
        if self.last_name:
            user["last_name"] = self.last_name
        if self.username:
            user["username"] = self.username
        if self.language_code:
            user["language_code"] = self.language_code
        return user


@dataclass(frozen=True, slots=True)
class Place:
    """A chat the bot is in: private (the id of the person), group or supergroup (negative ids)."""

    id: int
    type: str = "private"
    title: str = ""

    def json(self, person: Person | None = None) -> dict[str, Any]:
        """The Chat object (a private chat carries the person's names)."""
        chat: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.type == "private" and person is not None:
            chat["first_name"] = person.first_name
            if person.last_name:
                chat["last_name"] = person.last_name
        elif self.title:
            chat["title"] = self.title
        return chat


ADA = Person(4242, "Ada", "Lovelace", "ada")
ADA_CHAT = Place(ADA.id)
# Telegram's placeholder user for messages an anonymous group admin sends.
GROUP_ANONYMOUS_BOT = Person(1087968824, "Group", username="GroupAnonymousBot", language_code="")


@dataclass
class Updates:
    """Builds the Update JSON Telegram sends a bot, numbering updates and messages as Telegram does."""

    bot_id: int = 123456
    bot_username: str = "papertrail_test_bot"
    next_update: int = 1000
    next_message: int = 1
    date: int = 1732806000  # 28 Nov 2024 15:00 UTC

    def _ids(self) -> tuple[int, int]:
        self.next_update += 1
        self.next_message += 1
        return self.next_update - 1, self.next_message - 1

    def message_json(
        self, place: Place, person: Person, text: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """A Message object (no update around it); ``text`` None for a message without text."""
        _, message_id = self._ids()
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": self.date,
            "chat": place.json(person),
            "from": person.json(),
        }
        if text is not None:
            message["text"] = text
            if text.startswith("/"):
                word = text.split(maxsplit=1)[0] if text.strip() else "/"
                message["entities"] = [{"type": "bot_command", "offset": 0, "length": utf16_len(word)}]
        message.update(extra)
        return message

    def message(self, place: Place, person: Person, text: str | None = None, **extra: Any) -> dict[str, Any]:
        """An update with a new message; ``extra`` adds fields (``sticker``, ``sender_chat`` ...)."""
        update_id, _ = self._ids()
        return {"update_id": update_id, "message": self.message_json(place, person, text, **extra)}

    def edited(self, place: Place, person: Person, text: str) -> dict[str, Any]:
        """An update saying a message was edited to ``text``."""
        update_id, _ = self._ids()
        message = self.message_json(place, person, text, edit_date=self.date + 60)
        return {"update_id": update_id, "edited_message": message}

    def sticker(self, place: Place, person: Person) -> dict[str, Any]:
        """A message that is a sticker and nothing else."""
        sticker = {
            "file_id": "CAACAgIAAxkBAAIBY2",
            "file_unique_id": "AgADYQADr8ZRGg",
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": "📄",
        }
        return self.message(place, person, None, sticker=sticker)

    def callback(
        self, place: Place, person: Person, data: str, message: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A button press on ``message`` (a Message object the bot sent; a stand-in when None)."""
        update_id, _ = self._ids()
        if message is None:
            message = {
                "message_id": 1,
                "date": self.date,
                "chat": place.json(person),
                "from": {"id": self.bot_id, "is_bot": True, "first_name": "PaperTrail"},
                "text": "…",
            }
        query = {
            "id": f"cb{update_id}",
            "from": person.json(),
            "chat_instance": f"ci{place.id}",
            "message": message,
            "data": data,
        }
        return {"update_id": update_id, "callback_query": query}

    def my_chat_member(self, place: Place, person: Person, old: str, new: str) -> dict[str, Any]:
        """The bot's own membership changed from ``old`` to ``new`` (member, kicked, left, administrator)."""
        update_id, _ = self._ids()
        bot = {"id": self.bot_id, "is_bot": True, "first_name": "PaperTrail", "username": self.bot_username}
        change = {
            "chat": place.json(person),
            "from": person.json(),
            "date": self.date,
            "old_chat_member": _bot_member(bot, old),
            "new_chat_member": _bot_member(bot, new),
        }
        return {"update_id": update_id, "my_chat_member": change}


def _bot_member(bot: dict[str, Any], status: str) -> dict[str, Any]:
    member: dict[str, Any] = {"status": status, "user": bot}
    if status == "administrator":
        member.update(dict.fromkeys(_ADMIN_RIGHTS, False), can_be_edited=False, is_anonymous=False)
    elif status == "kicked":
        member["until_date"] = 0
    return member
