"""Telegram notifier: digests as Telegram HTML messages through python-telegram-bot's ``Bot``, and the one
send path that digests and the chat bot's replies (notifiers/telegram/chat_handlers.py) share.

Format: Telegram HTML, link previews off; a long digest is split (notifiers/telegram/format.py) at the
declared ``max_length`` (4096 UTF-16 code units) and sent as several messages to the same chat.

Sending one message (:func:`send_message`): it waits for the rate limiter, sits out a short flood-control
wait and sends again, follows a group that moved to a supergroup, and falls back to plain text when
Telegram cannot parse the HTML. Every python-telegram-bot error becomes one :class:`SendError` (a
:class:`core.channel.DeliveryError`) by the table :data:`ERRORS`. What digests and replies do differently
is a parameter, :class:`Budget`: a digest waits out longer flood waits (the ledger stands behind it), a
reply gives up sooner (someone is waiting for it). The digest adds its own rules around it: resuming
after the parts an earlier attempt delivered, renewing the lease between parts, and a subscriber that
moved with its group.

Rate limits: ``PAPERTRAIL_TELEGRAM_MAX_PER_SECOND`` overall, one message per
``PAPERTRAIL_TELEGRAM_CHAT_INTERVAL`` seconds per chat, ``PAPERTRAIL_TELEGRAM_GROUP_PER_MINUTE`` per group;
shared by every worker on a PostgreSQL database, per process on SQLite (notifiers/ratelimit.py), and
by the chat bot's replies, which the shell gives this notifier's limiter.
"""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass
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
from notifiers.telegram.format import MAX_LENGTH, html_to_text, item_buttons, split_message


@dataclass(frozen=True, slots=True)
class Budget:
    """How long one send keeps trying: a flood wait up to ``max_wait`` seconds is sat out in place, and one
    message is sent again at most ``max_retries`` times (after flood control, a group migration or the
    fall-back to plain text)."""

    max_wait: float
    max_retries: int


@dataclass(frozen=True, slots=True)
class Sent:
    """A message Telegram accepted, and the chat it went to (a new id after a group migration)."""

    message: telegram.Message
    chat: int | str


class SendError(DeliveryError):
    """A message Telegram did not take: the digest's :class:`DeliveryError`, plus ``reason``, Telegram's own
    words (token redacted) for a log line about something other than a digest (a chat reply)."""

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        retryable: bool,
        retry_after: float | None = None,
        delivered_parts: int = 0,
    ) -> None:
        super().__init__(
            message, retryable=retryable, retry_after=retry_after, delivered_parts=delivered_parts
        )
        self.reason = reason


def flood_wait(exc: RetryAfter) -> float:
    """Seconds Telegram's flood control asks to wait.

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


async def send_message(
    bot: telegram.Bot,
    chat: int | str,
    text: str,
    *,
    html: bool,
    markup: telegram.InlineKeyboardMarkup | None,
    limiter: RateLimiter,
    budget: Budget,
    api_url: str,
    reply_to: int | None = None,
    delivered: int = 0,
) -> Sent:
    """Send ``text`` (Telegram HTML when ``html``) to ``chat`` with ``markup`` under it, link previews off.

    ``reply_to``: the message it answers (sent anyway when that one is gone). ``delivered``: the parts of
    a digest sent before this one, which a failure reports as delivered. Raises :class:`SendError`.
    """
    retries = 0
    while True:
        await limiter.acquire(str(chat))
        try:
            message = await bot.send_message(
                chat_id=chat,
                text=text,
                parse_mode=ParseMode.HTML if html else None,
                link_preview_options=telegram.LinkPreviewOptions(is_disabled=True),
                reply_markup=markup,
                reply_parameters=(
                    telegram.ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
                ),
            )
            return Sent(message, chat)
        except RetryAfter as exc:
            wait = flood_wait(exc)
            # The limiter holds the next message to this chat, this one's next attempt included.
            await limiter.postpone(str(chat), wait)
            if wait > budget.max_wait or retries >= budget.max_retries:
                raise translate(exc, chat, api_url=api_url, token=bot.token, delivered=delivered) from None
        except ChatMigrated as exc:
            if retries >= budget.max_retries:
                raise translate(exc, chat, api_url=api_url, token=bot.token, delivered=delivered) from None
            chat = exc.new_chat_id
        except BadRequest as exc:
            if not (html and "can't parse entities" in exc.message.lower()):
                raise translate(exc, chat, api_url=api_url, token=bot.token, delivered=delivered) from None
            # Our markup should never fail Telegram's parser; if it does, the words still go out.
            text, html = html_to_text(text).strip(), False
        except TelegramError as exc:
            raise translate(exc, chat, api_url=api_url, token=bot.token, delivered=delivered) from None
        except (KeyError, ValueError, TypeError) as exc:
            # PTB reads answer["result"] blindly: an HTTP 200 with ok=false (a broken proxy) lands here.
            raise SendError(
                f"the Telegram Bot API at {api_url} sent an unexpected answer ({type(exc).__name__}); the "
                "digest stays pending and will be retried",
                reason=f"an unexpected answer ({type(exc).__name__})",
                retryable=True,
                delivered_parts=delivered,
            ) from None
        retries += 1


def translate(exc: TelegramError, chat: int | str, *, api_url: str, token: str, delivered: int) -> SendError:
    """One :class:`SendError` for a python-telegram-bot error, classified by :data:`ERRORS`.

    ``chat`` is "" for a failure of the bot itself (its token checked before any chat).
    """
    wait = flood_wait(exc) if isinstance(exc, RetryAfter) else None
    retryable, text = next((ok, text) for kind, ok, text in ERRORS if isinstance(exc, kind))
    reason = redact(exc.message, token)
    fields = {
        "where": f"chat {chat}" if chat != "" else "the bot",
        "reason": reason,
        "api": api_url,
        "wait": wait,
        "new_chat": getattr(exc, "new_chat_id", None),
    }
    if isinstance(exc, InvalidToken):
        reason = "the bot token was rejected"
    elif wait is not None:
        reason = f"flood control for {wait:g} s"
    return SendError(
        text.format(**fields),
        reason=reason,
        retryable=retryable,
        retry_after=wait,
        delivered_parts=delivered,
    )


def redact(text: str, token: str) -> str:
    """``text`` with the bot token masked (PTB quotes it in some messages)."""
    return text.replace(token, "********") if token else text


# A digest sits out a flood-control wait up to 30 s inline (a longer one goes back to the ledger's
# back-off) and sends one part at most 3 more times after "retry after" or a chat migration.
DIGEST_BUDGET = Budget(max_wait=30.0, max_retries=3)


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
            part = parts[index]
            sent = await send_message(
                bot,
                chat,
                part.text,
                html=part.is_html,
                markup=item_buttons(part.items, part.language),
                limiter=self.limiter,
                budget=DIGEST_BUDGET,
                api_url=self.settings.api_url,
                delivered=index,
            )
            first_id = first_id or str(sent.message.message_id)
            if sent.chat != chat:
                chat, moved_to = sent.chat, f"telegram:{sent.chat}"
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
                    token = self.settings.token.get_secret_value() if self.settings.token else ""
                    raise translate(
                        exc, "", api_url=self.settings.api_url, token=token, delivered=delivered
                    ) from None
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
