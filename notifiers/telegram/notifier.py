"""Telegram notifier: digests as Telegram HTML messages through python-telegram-bot's ``Bot``.

Format: Telegram HTML, link previews off; a long digest is split (notifiers/telegram/format.py) at the
declared ``max_length`` (4096 UTF-16 code units) and sent as several messages to the same chat.

Rate limits: ``PAPERTRAIL_TELEGRAM_MAX_PER_SECOND`` overall, one message per
``PAPERTRAIL_TELEGRAM_CHAT_INTERVAL`` seconds per chat, ``PAPERTRAIL_TELEGRAM_GROUP_PER_MINUTE`` per group;
shared by every worker on a PostgreSQL database, per process on SQLite (notifiers/ratelimit.py).
Every python-telegram-bot error is translated here into one :class:`core.channel.DeliveryError`, by
the
table :data:`ERRORS`.
"""

from __future__ import annotations

import asyncio
import warnings
from datetime import timedelta
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

from core.channel import DeliveryError, part_delivered
from core.config_edges import TelegramSettings
from core.delivery.rate_limit import RateLimit
from core.values import Message, SendResult
from notifiers.ratelimit import RateLimiter, Window
from notifiers.telegram.format import MAX_LENGTH, Part, html_to_text, item_buttons, split_message

# A flood-control wait up to this long is sat out inline; a longer one goes back to the ledger's back-off.
MAX_INLINE_WAIT = 30.0
# How often one part is re-sent after "retry after" or a chat migration before giving up for this attempt.
MAX_PART_RETRIES = 3


def flood_wait(exc: RetryAfter) -> float:
    """Seconds Telegram's flood control asks to wait, for digests and chat replies alike.

    PTB 22 moves ``retry_after`` from int to timedelta and warns on reading it; either is accepted here,
    without the warning.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


# How each python-telegram-bot error is classified: the first entry whose type the error is an instance of
# wins (subclasses first: TimedOut and BadRequest are NetworkErrors). Each gives whether a later attempt may
# succeed and the message, a format string over ``where`` (the chat, or "the bot"), ``reason`` (PTB's
# message, token redacted), ``api`` (the Bot API URL), ``wait`` (RetryAfter's seconds) and ``new_chat``
# (ChatMigrated's new id).
ERRORS: tuple[tuple[type[TelegramError], bool, str], ...] = (
    (
        RetryAfter,
        True,
        "Telegram flood control for {where}: retry after {wait:g} s; the digest stays pending",
    ),
    (
        Forbidden,
        False,
        "Telegram refuses messages to {where}: {reason}; the subscriber must unblock or re-add the bot "
        "(send /start) before digests can resume",
    ),
    # PTB puts the token itself into this message: never repeat its reason.
    (
        InvalidToken,
        True,
        "the Telegram Bot API at {api} rejected the bot token; check PAPERTRAIL_TELEGRAM_TOKEN (from "
        "@BotFather); digests stay pending",
    ),
    (
        ChatMigrated,
        True,
        "Telegram {where} keeps moving (last to {new_chat}); the digest stays pending",
    ),
    (
        BadRequest,
        False,
        "Telegram rejected the message to {where}: {reason}; check the chat id (the bot must have been "
        "started in that chat or added to the group)",
    ),
    (
        TimedOut,
        True,
        "the Telegram Bot API at {api} timed out sending to {where} ({reason}); the digest stays pending "
        "and will be retried",
    ),
    (
        NetworkError,
        True,
        "cannot deliver through the Telegram Bot API at {api} ({reason}); check PAPERTRAIL_TELEGRAM_API_URL "
        "and the network; the digest stays pending",
    ),
    (TelegramError, True, "Telegram error sending to {where}: {reason}; the digest stays pending"),
)


class TelegramNotifier:
    """Sends digests to Telegram chats (``telegram:<chat id>``) through the Bot API."""

    channel: ClassVar[str] = "telegram"
    max_length: ClassVar[int | None] = MAX_LENGTH

    def __init__(
        self,
        settings: TelegramSettings,
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
            per_second=settings.max_per_second,
            interval=settings.chat_interval,
            window_for=self.window_for,
            slots=slots,
            scope="telegram",
        )

    def window_for(self, chat: str) -> Window | None:
        """Telegram's per-group limit: groups, supergroups and channels (negative ids, @channelname)."""
        per_minute = self.settings.group_per_minute
        return Window(per_minute, 60.0) if chat.startswith(("-", "@")) and per_minute > 0 else None

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver a digest as one or more messages; raises DeliveryError with the parts delivered so far."""
        chat = _chat_id(address, message.skip_parts)
        parts = split_message(message, self.max_length)
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
        token = self.settings.token.get_secret_value() if self.settings.token else ""
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
            base_url=f"{self.settings.api_url.rstrip('/')}/bot",
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
                wait = flood_wait(exc)
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
                    f"the Telegram Bot API at {self.settings.api_url} sent an unexpected answer "
                    f"({type(exc).__name__}); the digest stays pending and will be retried",
                    retryable=True,
                    delivered_parts=index,
                ) from None
            retries += 1

    def _translate(self, exc: TelegramError, chat: int | str, index: int) -> DeliveryError:
        """One DeliveryError for a python-telegram-bot error, classified by :data:`ERRORS`."""
        wait = flood_wait(exc) if isinstance(exc, RetryAfter) else None
        retryable, text = next((ok, text) for kind, ok, text in ERRORS if isinstance(exc, kind))
        fields = {
            "where": f"chat {chat}" if chat != "" else "the bot",
            "reason": self._redact(exc.message),
            "api": self.settings.api_url,
            "wait": wait,
            "new_chat": getattr(exc, "new_chat_id", None),
        }
        return DeliveryError(
            text.format(**fields), retryable=retryable, retry_after=wait, delivered_parts=index
        )

    def _redact(self, text: str) -> str:
        token = self.settings.token.get_secret_value() if self.settings.token else ""
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
