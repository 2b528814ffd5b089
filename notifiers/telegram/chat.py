"""The Telegram bot: people manage their follows with ``/commands`` in private chats and groups.

:class:`TelegramBot` wraps a python-telegram-bot ``Application`` whose handlers
(:class:`notifiers.telegram.chat_handlers.ChatHandlers`) run every command through the one grammar in
``bot/commands.py``.
Updates arrive one of two ways, chosen by ``PAPERTRAIL_TELEGRAM_MODE``:

- ``polling`` (the default; works behind NAT): :meth:`TelegramBot.run_polling` long-polls ``getUpdates``
  with PTB's ``Updater`` (which deletes any webhook first) until a stop event; stopping cancels the open
  long poll, so the bot stops within a second or two.
- ``webhook``: :meth:`TelegramBot.register_webhook` calls ``setWebhook`` with
  ``{PAPERTRAIL_PUBLIC_URL}/telegram/webhook`` and a secret token; the web app serves
  :meth:`TelegramBot.webhook_route`, which checks ``X-Telegram-Bot-Api-Secret-Token`` in constant time (401
  otherwise) and hands the update to :meth:`TelegramBot.process`. The secret is
  ``PAPERTRAIL_TELEGRAM_WEBHOOK_SECRET``, or else derived from ``PAPERTRAIL_SECRET_KEY`` with HMAC-SHA256.

On start the bot checks its token (``getMe``) and sets the command menu (``setMyCommands``) from
:data:`bot.commands.COMMANDS`: in the operator's default language (``PAPERTRAIL_DEFAULT_LANGUAGE``) for
everyone, and once more for each other language PaperTrail speaks with that ``language_code`` (Telegram
shows it to people whose app is in that language). The bot
never installs signal handlers: the process's runtime owns them and sets the stop event. Set-up, group
rules and limits: docs/telegram-bot.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import telegram
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from telegram import BotCommand, Update
from telegram.error import BadRequest, Conflict, InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    ChatMemberHandler,
    MessageHandler,
    filters,
)

from bot.commands_table import COMMANDS
from core.config_edges import TelegramBotSettings
from core.db import Database
from core.json_input import JSONLimitError, JSONReader
from core.languages import LANGUAGES, translator
from core.models import utcnow
from notifiers.ratelimit import RateLimiter
from notifiers.telegram.chat_handlers import ChatHandlers, Context

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
POLL_TIMEOUT = timedelta(seconds=30)
"""How long one getUpdates long poll stays open when nothing happens (Telegram allows up to 50 s)."""
ALLOWED_UPDATES = ("message", "edited_message", "callback_query", "my_chat_member")
"""The updates the bot asks Telegram for, in polling and webhook mode alike."""
START_RETRY_MAX = 60.0
"""The longest pause between two attempts to reach the Bot API at start-up (doubling from 1 s)."""
_SECRET_CHARS = re.compile(r"[A-Za-z0-9_-]{1,256}")
_DERIVATION = b"papertrail telegram webhook secret token"
# A webhook body is read by the shared rules of untrusted JSON (its nesting limit), as Starlette's
# request.json() would read it otherwise: a body nested thousands deep is a 400, not a RecursionError.
_UPDATES = JSONReader(unique_keys=False)

AnyApplication = Application[Any, Any, Any, Any, Any, Any]


class TelegramBotError(RuntimeError):
    """The bot cannot run; the message says what to change. ``permanent``: retrying will not help."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class TelegramBot:
    """The PaperTrail Telegram bot over one store: lifecycle, polling, webhook, update processing."""

    def __init__(
        self,
        settings: TelegramBotSettings,
        db: Database,
        *,
        bot: telegram.Bot | None = None,
        clock: Callable[[], datetime] = utcnow,
        limiter: RateLimiter | None = None,
    ) -> None:
        """Build the Application (no network yet).

        ``bot``: a Bot to use instead of one built from ``PAPERTRAIL_TELEGRAM_TOKEN`` and
        ``PAPERTRAIL_TELEGRAM_API_URL`` (tests); it belongs to this bot from then on and is shut down by
        :meth:`stop`. ``clock`` is "now" for the commands (tests pin it). ``limiter``: the Telegram digest
        notifier's (``TelegramNotifier.limiter``), so that replies and digests share one chat's limits; the
        shell always passes it. Without one (tests, benchmarks) replies are not paced, only flood waits kept.
        Raises :class:`TelegramBotError` when neither a Bot nor a token is given.
        """
        self.settings = settings
        self.db = db
        self._app = self._build(bot)
        limiter = limiter or RateLimiter(scope="telegram")
        self.handlers = ChatHandlers(
            settings.commands, db, lambda: self._app.bot, clock, limiter, settings.api_url
        )
        self._register(self._app, self.handlers)
        self._lock = asyncio.Lock()
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def application(self) -> AnyApplication:
        """The python-telegram-bot Application (for tests and for ``process_update``)."""
        return self._app

    @property
    def username(self) -> str:
        """The bot's @username without the @ (known once started)."""
        return str(self._app.bot.username)

    def _build(self, bot: telegram.Bot | None) -> AnyApplication:
        if bot is not None:
            return ApplicationBuilder().bot(bot).job_queue(None).build()
        token = self.settings.token.get_secret_value() if self.settings.token else ""
        if not token:
            raise TelegramBotError(
                "the Telegram bot needs PAPERTRAIL_TELEGRAM_TOKEN: create a bot with @BotFather and set "
                "its token, or leave the bots role out",
                permanent=True,
            )
        return (
            ApplicationBuilder()
            .token(token)
            .base_url(f"{self.settings.api_url.rstrip('/')}/bot")
            .job_queue(None)
            .build()
        )

    @staticmethod
    def _register(app: AnyApplication, chat: ChatHandlers) -> None:
        app.add_handler(MessageHandler(filters.UpdateType.MESSAGE, chat.on_message))
        app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, chat.on_edited))
        app.add_handler(CallbackQueryHandler(chat.on_callback))
        app.add_handler(ChatMemberHandler(chat.on_my_chat_member, ChatMemberHandler.MY_CHAT_MEMBER))
        app.add_error_handler(_log_error)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Check the token (getMe), set the command menu, start processing; does nothing when started.

        Raises :class:`TelegramBotError` when the Bot API refuses the token (permanent) or cannot be
        reached (not permanent: try again later).
        """
        async with self._lock:
            if self._started:
                return
            try:
                await self._app.initialize()
            except InvalidToken:
                # PTB's message quotes the token: never repeat it.
                raise TelegramBotError(
                    f"the Telegram Bot API at {self.settings.api_url} rejected the bot token; check "
                    "PAPERTRAIL_TELEGRAM_TOKEN (from @BotFather)",
                    permanent=True,
                ) from None
            except TelegramError as exc:
                raise TelegramBotError(
                    f"cannot reach the Telegram Bot API at {self.settings.api_url} "
                    f"({self._redact(exc.message)}); check PAPERTRAIL_TELEGRAM_API_URL and the network",
                    permanent=False,
                ) from None
            await self._set_commands()
            await self._app.start()
            self._loop = asyncio.get_running_loop()
            self._started = True
            log.info("telegram: bot @%s started", self.username, extra={"role": "bots"})

    async def stop(self) -> None:
        """Stop polling and processing, close the Bot's connections; safe to call twice or before start."""
        async with self._lock:
            app = self._app
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                await app.stop()
            await app.shutdown()
            if self._started:
                log.info("telegram: bot stopped", extra={"role": "bots"})
            self._started = False

    async def _set_commands(self) -> None:
        # The menu without a language_code is everyone's whose app language has no menu of its own: the
        # operator's default language; each other language gets its own.
        default = self.settings.commands.default_language
        for language in (default, *(code for code in LANGUAGES if code != default)):
            t = translator(language)
            commands = [BotCommand(info.name, info.summary_in(t)) for info in COMMANDS]
            try:
                await self._app.bot.set_my_commands(
                    commands, language_code=None if language == default else language
                )
            except TelegramError as exc:  # the menu is a convenience: commands work without it
                log.warning(
                    "telegram: the %s command menu was not set: %s", language, self._redact(exc.message)
                )
                return

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` in the configured mode: long polling, or register the webhook and wait.

        In webhook mode the updates arrive through :meth:`webhook_route` (served by the web role). Raises
        :class:`TelegramBotError` for a configuration that cannot work (a rejected token, webhook settings).
        """
        if self.settings.mode != "webhook":
            await self.run_polling(stop)
            return
        try:
            if await self._until_done(stop, self.register_webhook):
                await stop.wait()
        finally:
            await self.stop()

    async def run_polling(self, stop: asyncio.Event) -> None:
        """Long-poll getUpdates and process every update until ``stop`` is set.

        Starts the bot when it is not started (retrying while the Bot API cannot be reached) and then
        stops it again at the end; a bot started before keeps running (only polling stops).
        """
        started_here = not self._started
        try:
            if not await self._until_done(stop, self.start):
                return
            updater = self._app.updater
            assert updater is not None  # the builder always makes one
            polling = asyncio.create_task(
                updater.start_polling(
                    timeout=POLL_TIMEOUT,
                    allowed_updates=list(ALLOWED_UPDATES),
                    bootstrap_retries=-1,  # deleteWebhook until it works, or until stop
                    error_callback=self._polling_error,
                )
            )
            if not await _until_done_or_stopped(polling, stop):
                return
            log.info("telegram: polling for updates as @%s", self.username, extra={"role": "bots"})
            await stop.wait()
        finally:
            if started_here:
                await self.stop()
            elif self._app.updater is not None and self._app.updater.running:
                await self._app.updater.stop()

    async def _until_done(self, stop: asyncio.Event, step: Callable[[], Awaitable[None]]) -> bool:
        """``step`` retried with back-off while the Bot API is unreachable; False if stopped first.

        A permanent :class:`TelegramBotError` (a rejected token, webhook settings) is raised at once.
        """
        delay = 1.0
        while not stop.is_set():
            try:
                await step()
                return True
            except TelegramBotError as exc:
                if exc.permanent:
                    raise
                log.warning("telegram: %s; trying again in %g s", exc, delay, extra={"role": "bots"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            delay = min(delay * 2, START_RETRY_MAX)
        return False

    def _polling_error(self, exc: TelegramError) -> None:
        """Errors of one getUpdates call; PTB retries with back-off after each."""
        if isinstance(exc, Conflict):
            log.warning(
                "telegram: Telegram refuses long polling (%s): another process polls with this bot token, "
                "or a webhook is set; run one bots role per token",
                self._redact(exc.message),
                extra={"role": "bots"},
            )
        else:
            log.warning(
                "telegram: getUpdates failed (%s); retrying",
                self._redact(exc.message),
                extra={"role": "bots"},
            )

    # -- webhook ---------------------------------------------------------------------------------------

    @property
    def webhook_url(self) -> str:
        """Where Telegram posts updates in webhook mode: ``{PAPERTRAIL_PUBLIC_URL}/telegram/webhook``."""
        return self.settings.public_url.rstrip("/") + WEBHOOK_PATH

    def webhook_secret(self) -> str:
        """The secret token Telegram echoes in every webhook request.

        ``PAPERTRAIL_TELEGRAM_WEBHOOK_SECRET`` when set, else HMAC-SHA256 of a fixed label under
        ``PAPERTRAIL_SECRET_KEY`` (hex, so within Telegram's alphabet). Raises :class:`TelegramBotError`
        when neither is set or the configured secret has characters Telegram does not allow.
        """
        configured = self.settings.webhook_secret
        if configured is not None and configured.get_secret_value():
            secret = configured.get_secret_value()
            if not _SECRET_CHARS.fullmatch(secret):
                raise TelegramBotError(
                    "PAPERTRAIL_TELEGRAM_WEBHOOK_SECRET may hold only A-Z, a-z, 0-9, _ and -, at most "
                    "256 characters (Telegram's rule for secret_token)",
                    permanent=True,
                )
            return secret
        key = self.settings.secret_key.get_secret_value() if self.settings.secret_key else ""
        if not key:
            raise TelegramBotError(
                "Telegram webhook mode needs a secret: set PAPERTRAIL_TELEGRAM_WEBHOOK_SECRET or "
                "PAPERTRAIL_SECRET_KEY, or use PAPERTRAIL_TELEGRAM_MODE=polling",
                permanent=True,
            )
        return hmac.new(key.encode(), _DERIVATION, hashlib.sha256).hexdigest()

    async def register_webhook(self) -> None:
        """setWebhook with :attr:`webhook_url` and the secret token (starting the bot when needed).

        Raises :class:`TelegramBotError` for a URL Telegram cannot use (not https) or when Telegram
        refuses the webhook.
        """
        secret = self.webhook_secret()
        url = self.webhook_url
        if not url.startswith("https://"):
            raise TelegramBotError(
                f"Telegram sends webhooks only to https:// addresses, and PAPERTRAIL_PUBLIC_URL gives {url}; "
                "set it to the public HTTPS address of the web role, or use PAPERTRAIL_TELEGRAM_MODE=polling",
                permanent=True,
            )
        await self.start()
        try:
            await self._app.bot.set_webhook(
                url, secret_token=secret, allowed_updates=list(ALLOWED_UPDATES), drop_pending_updates=False
            )
        except TelegramError as exc:
            raise TelegramBotError(
                f"Telegram refused the webhook {url}: {self._redact(exc.message)}; check that "
                "PAPERTRAIL_PUBLIC_URL is public HTTPS on port 443, 80, 88 or 8443",
                permanent=isinstance(exc, BadRequest),
            ) from None
        log.info("telegram: webhook set to %s", url, extra={"role": "bots"})

    def webhook_route(self) -> Route:
        """``POST /telegram/webhook`` for the web app: secret checked (401), then :meth:`process`.

        Raises :class:`TelegramBotError` when no secret can be made (see :meth:`webhook_secret`). Answers
        200 to every authentic update, even one whose processing failed (that is logged): Telegram would
        otherwise resend it again and again. The first request starts the bot when nothing else did.
        """
        expected = self.webhook_secret().encode("latin-1")

        async def endpoint(request: Request) -> Response:
            # Starlette decodes header bytes as latin-1, so encoding back gives the bytes Telegram sent.
            given = request.headers.get(SECRET_HEADER, "").encode("latin-1")
            if not hmac.compare_digest(given, expected):
                log.warning(
                    "telegram: webhook request without the right secret token refused",
                    extra={"role": "web"},
                )
                return PlainTextResponse("wrong or missing secret token\n", status_code=401)
            try:
                update = _UPDATES.loads(await request.body())
            except JSONLimitError as exc:  # nested too deeply: no traceback, no work
                return PlainTextResponse(f"the body is {exc}\n", status_code=400)
            except ValueError:  # not JSON, not UTF-8
                return PlainTextResponse("the body is not JSON\n", status_code=400)
            if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
                return PlainTextResponse("the body is not a Telegram update\n", status_code=400)
            await self._hand_over(update)
            return Response(status_code=200)

        return Route(WEBHOOK_PATH, endpoint, methods=["POST"], name="telegram_webhook")

    async def _hand_over(self, update: dict[str, Any]) -> None:
        """Process on the bot's own event loop (the Bot's connections live there), whichever loop serves."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
            await self.process(update)
        else:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.process(update), loop))

    async def process(self, update_json: dict[str, Any]) -> None:
        """Process one update given as the Bot API's JSON (from the webhook); starts the bot if needed.

        A malformed update is logged and dropped; errors in handling are logged by the error handler.
        """
        await self.start()
        try:
            update = Update.de_json(update_json, self._app.bot)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            log.warning(
                "telegram: update %s does not parse and was dropped: %s",
                update_json.get("update_id"),
                type(exc).__name__,
                extra={"role": "bots"},
            )
            return
        await self._app.process_update(update)

    def _redact(self, text: str) -> str:
        token = self.settings.token.get_secret_value() if self.settings.token else ""
        return text.replace(token, "********") if token else text


async def _until_done_or_stopped(task: asyncio.Task[Any], stop: asyncio.Event) -> bool:
    """Wait for ``task``; True when it finished first (its error raised), False when ``stop`` came first."""
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


async def _log_error(update: object, context: Context) -> None:
    """Log an update whose handling failed, with its traceback; the bot goes on with the next update."""
    update_id = update.update_id if isinstance(update, Update) else None
    log.error(
        "telegram: handling update %s failed: %r",
        update_id,
        context.error,
        exc_info=context.error,
        extra={"role": "bots"},
    )


__all__ = [
    "ALLOWED_UPDATES",
    "POLL_TIMEOUT",
    "SECRET_HEADER",
    "WEBHOOK_PATH",
    "TelegramBot",
    "TelegramBotError",
]
