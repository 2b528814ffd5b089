"""Telegram notifier: digests as Telegram HTML messages through python-telegram-bot's ``Bot``.

Format: Telegram HTML (``parse_mode=HTML``, templates/telegram.html.j2), link previews off. Limit: 4096
UTF-16 code units per message. Telegram counts the text *after* parsing the markup, so measuring the HTML
(which is never shorter) keeps every part under the limit. A long digest is split between items with
:func:`core.delivery.contract.pack_blocks` and sent as several messages to the same chat.

Rate limits: ``PAPERTRAIL_TELEGRAM_MAX_PER_SECOND`` overall, one message per
``PAPERTRAIL_TELEGRAM_CHAT_INTERVAL`` seconds per chat, ``PAPERTRAIL_TELEGRAM_GROUP_PER_MINUTE`` per group;
shared by every worker on a PostgreSQL database, per process on SQLite (notifiers/ratelimit.py).
Every python-telegram-bot error is translated here into one :class:`core.delivery.contract.DeliveryError`.
"""

from __future__ import annotations

import asyncio
import html
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from html.parser import HTMLParser
from typing import ClassVar

import telegram
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from core.config import Settings
from core.delivery.chat_buttons import DISLIKE_LABEL, LIKE_LABEL, Action, callback_data, vote_data
from core.delivery.contract import DeliveryError, pack_blocks, part_delivered
from core.delivery.rate_limit import RateLimit
from core.i18n.languages import translator
from core.values import DigestItem, Message, SendResult
from notifiers.ratelimit import RateLimiter, Window

MAX_LENGTH = 4096
# A flood-control wait up to this long is sat out inline; a longer one goes back to the ledger's back-off.
MAX_INLINE_WAIT = 30.0
# How often one part is re-sent after "retry after" or a chat migration before giving up for this attempt.
MAX_PART_RETRIES = 3
ELLIPSIS = "…"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: how Telegram measures messages (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


class _TextOnly(HTMLParser):
    """Collects the text of an HTML fragment, character references decoded, tags dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_to_text(fragment: str) -> str:
    """The plain text a Telegram HTML fragment shows: tags removed, entities decoded."""
    parser = _TextOnly()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.parts)


def _cut(text: str, limit: int, *, encode: bool) -> str:
    """The longest prefix of ``text`` (plus an ellipsis) within ``limit`` UTF-16 units once encoded.

    ``encode`` HTML-escapes the prefix (escaping lengthens text, so the cut is searched, not computed).
    """

    def rendered(n: int) -> str:
        head = text[:n].rstrip() + ELLIPSIS
        return html.escape(head, quote=False) if encode else head

    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if utf16_len(rendered(middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    return rendered(low)


def shorten_html(block: str, limit: int) -> str:
    """A well-formed stand-in for one Telegram HTML block longer than ``limit``.

    Cutting through markup could leave a tag open, so the block loses its tags: its text, escaped and cut
    to fit. Only a block with a pathological title or author list ever gets here.
    """
    text = html_to_text(block).strip()
    whole = html.escape(text, quote=False) + "\n\n"
    return whole if utf16_len(whole) <= limit else _cut(text, limit - 2, encode=True) + "\n\n"


def shorten_text(block: str, limit: int) -> str:
    """One plain-text block cut to ``limit`` UTF-16 units."""
    return _cut(block.strip(), limit - 2, encode=False) + "\n\n"


@dataclass(frozen=True, slots=True)
class Part:
    """One Telegram message of a digest: its text, whether that text is Telegram HTML, the items it shows,
    and the digest's language (its buttons are worded in it)."""

    text: str
    is_html: bool
    items: tuple[DigestItem, ...] = ()
    language: str = "en"


# Telegram allows 100 buttons per message (more is refused: "reply markup is too long"). An item's row has
# up to four: unfollow, watch, 👍, 👎; so a message holds at most 25 items (split_message), which only
# items without an abstract ever reach: a real one takes a few hundred of the 4,096 characters.
MAX_BUTTONS = 100
BUTTONS_PER_ITEM = 4
MAX_BUTTON_ROWS = MAX_BUTTONS // BUTTONS_PER_ITEM


def item_buttons(
    items: Sequence[DigestItem], language: str | None = None
) -> telegram.InlineKeyboardMarkup | None:
    """One row per item: unfollow the follow that matched it (the first by id), watch the paper, 👍, 👎.

    ``unfollow:<follow id>`` and ``watch:<arXiv id>`` are answered by the Telegram bot (bots role), which
    runs ``unfollow N`` / ``follow id:ARXIV_ID`` for whoever presses, with the group-admin check;
    ``vote:+:<arXiv id>v<N>`` and ``vote:-:…`` record (or, pressed again, take back) the chat's vote on that
    version, with the same check. The labels are worded in ``language`` (English for None); the query and
    the id in them are shown as they are. At most :data:`MAX_BUTTON_ROWS` items get a row.
    """
    t = translator(language)
    rows: list[list[telegram.InlineKeyboardButton]] = []
    for item in items[:MAX_BUTTON_ROWS]:
        row = []
        if item.follows:
            follow_id, query = item.follows[0]
            unfollow = callback_data(Action.UNFOLLOW, str(follow_id))
            row.append(_button(t.gettext("✕ Unfollow {query}", query=query), unfollow))
        watch = callback_data(Action.WATCH, item.arxiv_id)
        row.append(_button(t.gettext("Watch {arxiv_id}", arxiv_id=item.arxiv_id), watch))
        row.append(_button(LIKE_LABEL, vote_data(item.arxiv_id, item.version, 1)))
        row.append(_button(DISLIKE_LABEL, vote_data(item.arxiv_id, item.version, -1)))
        rows.append([button for button in row if button is not None])
    rows = [row for row in rows if row]
    return telegram.InlineKeyboardMarkup(rows) if rows else None


def _button(label: str, data: str | None) -> telegram.InlineKeyboardButton | None:
    if data is None:  # over Telegram's 64 bytes (core.delivery.chat_buttons.callback_data)
        return None
    shown = label if len(label) <= 40 else label[:39].rstrip() + ELLIPSIS
    return telegram.InlineKeyboardButton(shown, callback_data=data)


def _items_in(text: str, items: Sequence[DigestItem]) -> tuple[DigestItem, ...]:
    """The items whose block landed in one packed part (each block shows <code>ID vN</code> once)."""
    return tuple(item for item in items if f"{item.arxiv_id}v{item.version}</code>" in text)


def split_message(message: Message, limit: int = MAX_LENGTH) -> list[Part]:
    """The messages a digest takes: HTML blocks packed to ``limit`` (text blocks when there is no HTML).

    Deterministic, so a retry that skips ``message.skip_parts`` skips exactly what was delivered.
    """
    if message.html_blocks:
        # At most MAX_BUTTON_ROWS items a message, so that every item gets its row of buttons.
        packed = pack_blocks(
            message.html_blocks,
            limit,
            shorten=shorten_html,
            measure=utf16_len,
            count=lambda block: len(_items_in(block, message.items)),
            max_count=MAX_BUTTON_ROWS,
        )
        is_html = True
    else:
        # The shared plain-text template has no cuts: split its blocks at blank lines (between items).
        blocks = message.text_blocks or (message.text,)
        paragraphs = [piece for block in blocks for piece in _paragraphs(block)]
        packed = pack_blocks(paragraphs, limit, shorten=shorten_text, measure=utf16_len)
        is_html = False
    # Blank lines at the seams of blocks lie outside every tag: stripping them keeps the markup whole.
    return [
        Part(part.strip(), is_html, _items_in(part, message.items) if is_html else (), message.language)
        for part in packed
        if part.strip()
    ]


def _paragraphs(block: str) -> list[str]:
    """``block`` cut after each blank line; the pieces joined give ``block`` back."""
    pieces = block.split("\n\n")
    return [piece + "\n\n" for piece in pieces[:-1]] + [pieces[-1]]


def _retry_seconds(exc: RetryAfter) -> float:
    # PTB 22 warns that retry_after becomes a timedelta; accept either without the warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class TelegramNotifier:
    """Sends digests to Telegram chats (``telegram:<chat id>``) through the Bot API."""

    channel: ClassVar[str] = "telegram"
    max_length: ClassVar[int | None] = MAX_LENGTH

    def __init__(
        self,
        settings: Settings,
        *,
        bot: telegram.Bot | None = None,
        limiter: RateLimiter | None = None,
        slots: RateLimit | None = None,
    ) -> None:
        """``bot``: a Bot the shell shares (never shut down here); ``limiter``: a ready RateLimiter;
        ``slots``: where the limiter keeps its slots (the shell passes the database-backed one, so that
        every worker shares Telegram's limits; in memory when None)."""
        self.settings = settings
        self._bot = bot
        self._owns_bot = bot is None
        self._bot_ready = bot is not None
        self._init_lock = asyncio.Lock()
        self.limiter = limiter or RateLimiter(
            per_second=settings.telegram_max_per_second,
            interval=settings.telegram_chat_interval,
            window_for=self.window_for,
            slots=slots,
            scope="telegram",
        )

    def window_for(self, chat: str) -> Window | None:
        """Telegram's per-group limit: groups, supergroups and channels (negative ids, @channelname)."""
        per_minute = self.settings.telegram_group_per_minute
        return Window(per_minute, 60.0) if chat.startswith(("-", "@")) and per_minute > 0 else None

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver a digest as one or more messages; raises DeliveryError with the parts delivered so far."""
        chat = _chat_id(address, message.skip_parts)
        parts = split_message(message)
        if message.skip_parts >= len(parts):
            # Everything was delivered by an earlier attempt (or the digest is empty): nothing to call.
            return SendResult(platform_id=None, parts=len(parts))
        bot = await self._ready(message.skip_parts)
        first_id: str | None = None
        moved_to: str | None = None
        for index in range(message.skip_parts, len(parts)):
            sent, new_chat = await self._send_part(bot, chat, parts[index], index)
            first_id = first_id or str(sent.message_id)
            if new_chat != chat:
                chat, moved_to = new_chat, f"telegram:{new_chat}"
            if index + 1 < len(parts):
                # Renews the digest's lease (the ledger records the last part itself); LeaseLost stops here.
                await part_delivered(index + 1)
        return SendResult(platform_id=first_id, parts=len(parts), moved_to=moved_to)

    async def aclose(self) -> None:
        """Shut down the Bot's HTTP connections if this notifier built the Bot; a shared one is left open."""
        if self._owns_bot and self._bot is not None:
            await self._bot.shutdown()
            self._bot = None
            self._bot_ready = False

    async def _ready(self, delivered: int) -> telegram.Bot:
        """The Bot, built from the settings and checked with getMe (once) when none was injected.

        ``delivered`` is what a failure here reports as delivered: the parts an earlier attempt sent.
        """
        async with self._init_lock:
            if self._bot is None:
                self._bot = self._build_bot(delivered)
            if not self._bot_ready:
                try:
                    await self._bot.initialize()
                except TelegramError as exc:
                    raise self._translate(exc, "", delivered) from None
                self._bot_ready = True
            return self._bot

    def _build_bot(self, delivered: int) -> telegram.Bot:
        token = self.settings.telegram_token.get_secret_value() if self.settings.telegram_token else ""
        if not token:
            raise DeliveryError(
                "Telegram is not configured: set PAPERTRAIL_TELEGRAM_TOKEN to the bot token from @BotFather; "
                "digests stay pending",
                retryable=True,
                delivered_parts=delivered,
            )
        # This Bot only sends, it never polls getUpdates: one connection pool serves both of PTB's slots.
        request = HTTPXRequest()
        return telegram.Bot(
            token,
            base_url=f"{self.settings.telegram_api_url.rstrip('/')}/bot",
            request=request,
            get_updates_request=request,
        )

    async def _send_part(
        self, bot: telegram.Bot, chat: int | str, part: Part, index: int
    ) -> tuple[telegram.Message, int | str]:
        """Send one part, following migrations, sitting out short flood waits and falling back to text.

        Returns the sent message and the chat it went to (a new id after a group migration).
        """
        retries = 0
        while True:
            await self.limiter.acquire(str(chat))
            try:
                sent = await bot.send_message(
                    chat_id=chat,
                    text=part.text,
                    parse_mode=ParseMode.HTML if part.is_html else None,
                    link_preview_options=telegram.LinkPreviewOptions(is_disabled=True),
                    reply_markup=item_buttons(part.items, part.language),
                )
                return sent, chat
            except RetryAfter as exc:
                wait = _retry_seconds(exc)
                await self.limiter.postpone(str(chat), wait)
                if wait > MAX_INLINE_WAIT or retries >= MAX_PART_RETRIES:
                    raise self._translate(exc, chat, index) from None
            except ChatMigrated as exc:
                if retries >= MAX_PART_RETRIES:
                    raise self._translate(exc, chat, index) from None
                chat = exc.new_chat_id
            except BadRequest as exc:
                if not (part.is_html and "can't parse entities" in exc.message.lower()):
                    raise self._translate(exc, chat, index) from None
                # Our markup should never fail Telegram's parser; if it does, the words still go out.
                part = Part(html_to_text(part.text).strip(), False, part.items, part.language)
            except TelegramError as exc:
                raise self._translate(exc, chat, index) from None
            except (KeyError, ValueError, TypeError) as exc:
                # PTB reads answer["result"] blindly: an HTTP 200 with ok=false (a broken proxy) lands here.
                raise DeliveryError(
                    f"the Telegram Bot API at {self.settings.telegram_api_url} sent an unexpected answer "
                    f"({type(exc).__name__}); the digest stays pending and will be retried",
                    retryable=True,
                    delivered_parts=index,
                ) from None
            retries += 1

    def _translate(self, exc: TelegramError, chat: int | str, index: int) -> DeliveryError:
        """One DeliveryError for a python-telegram-bot error: retryable unless the chat itself refuses."""
        where = f"chat {chat}" if chat != "" else "the bot"
        reason = self._redact(exc.message)
        api = self.settings.telegram_api_url
        if isinstance(exc, RetryAfter):
            wait = _retry_seconds(exc)
            return DeliveryError(
                f"Telegram flood control for {where}: retry after {wait:g} s; the digest stays pending",
                retryable=True,
                retry_after=wait,
                delivered_parts=index,
            )
        if isinstance(exc, Forbidden):
            return DeliveryError(
                f"Telegram refuses messages to {where}: {reason}; the subscriber must unblock or re-add the "
                "bot (send /start) before digests can resume",
                retryable=False,
                delivered_parts=index,
            )
        if isinstance(exc, InvalidToken):
            # PTB puts the token itself into this message: never repeat it.
            return DeliveryError(
                f"the Telegram Bot API at {api} rejected the bot token; check PAPERTRAIL_TELEGRAM_TOKEN "
                "(from @BotFather); digests stay pending",
                retryable=True,
                delivered_parts=index,
            )
        if isinstance(exc, ChatMigrated):
            return DeliveryError(
                f"Telegram {where} keeps moving (last to {exc.new_chat_id}); the digest stays pending",
                retryable=True,
                delivered_parts=index,
            )
        if isinstance(exc, BadRequest):
            return DeliveryError(
                f"Telegram rejected the message to {where}: {reason}; check the chat id (the bot must have "
                "been started in that chat or added to the group)",
                retryable=False,
                delivered_parts=index,
            )
        if isinstance(exc, TimedOut):
            return DeliveryError(
                f"the Telegram Bot API at {api} timed out sending to {where} ({reason}); the digest stays "
                "pending and will be retried",
                retryable=True,
                delivered_parts=index,
            )
        if isinstance(exc, NetworkError):
            return DeliveryError(
                f"cannot deliver through the Telegram Bot API at {api} ({reason}); check "
                "PAPERTRAIL_TELEGRAM_API_URL and the network; the digest stays pending",
                retryable=True,
                delivered_parts=index,
            )
        return DeliveryError(
            f"Telegram error sending to {where}: {reason}; the digest stays pending",
            retryable=True,
            delivered_parts=index,
        )

    def _redact(self, text: str) -> str:
        token = self.settings.telegram_token.get_secret_value() if self.settings.telegram_token else ""
        return text.replace(token, "********") if token else text


def _chat_id(address: str, delivered: int) -> int | str:
    """The chat id of ``telegram:<id>`` (the part after the colon): a number, or @channelname."""
    target = address.strip()
    if target.lstrip("-").isdigit():
        return int(target)
    if target.startswith("@") and len(target) > 1:
        return target
    raise DeliveryError(
        f"telegram address {target!r} is not a chat id; subscribe as telegram:12345 (the chat's numeric id)",
        retryable=False,
        delivered_parts=delivered,
    )
