"""The Slack app: ``/papertrail <command>`` with the one chat grammar, and an App Home tab, on slack-bolt.

:class:`SlackBot` wraps a Bolt :class:`~slack_bolt.async_app.AsyncApp` and serves it two ways:

* **HTTP mode**: :meth:`SlackBot.routes` is one Starlette route, ``POST /slack/events``, for slash
  commands, events and interactivity alike. Bolt verifies every request's signature (HMAC-SHA256 of
  ``v0:{timestamp}:{body}`` with ``PAPERTRAIL_SLACK_SIGNING_SECRET``) and refuses a bad one, or one whose
  timestamp is more than 5 minutes off, with 401. A validly signed request whose signature was accepted
  before (a byte-identical replay within those 5 minutes) is answered 200 with nothing done: the signatures
  are remembered in the database (``core.replay``), so every web process refuses what another
  accepted.
* **Socket Mode**: :meth:`SlackBot.run_socket_mode` when ``PAPERTRAIL_SLACK_APP_TOKEN`` (xapp-…) is set:
  the app dials out to Slack over a WebSocket, so it needs no public URL.

Where a command manages what: in a direct message (a ``D…`` conversation) it is the person's own
subscription, ``slack:<user id>`` (``chat.postMessage`` to a user id delivers to the app's DM); in a
channel it is the channel's, ``slack:<channel id>``. Anyone may read a channel's follows; changing them
takes an *administrator of the channel*: a workspace owner or admin, or the person who created the
channel (Slack has no per-channel admin role in its API; see docs/slack-app.md).

Replies answer the slash command itself: ``ephemeral`` (only the sender sees it) except a change to a
channel's subscription, which goes ``in_channel`` so the channel sees who changed what. A reply not ready
within :data:`ACK_BUDGET` seconds (Slack waits 3) is acknowledged empty and sent to the command's
``response_url`` when ready.

What the app posts itself goes through the digests' send path (:func:`notifiers.slack.send.send_one`) and
their limiter, which the shell passes in: a late reply or a button's answer to a ``response_url`` under its
conversation (the channel, or the person's DM: one message per second, shared with the digests posted
there), an App Home publish under the person's home. A 429's Retry-After is waited out and the post sent
again, as for a digest; a longer wait drops it (logged). An acknowledgement is not paced: it is the answer
to Slack's own request, which Slack posts, and it cannot wait (Slack gives up after 3 s).

Every Web API client here has slack_sdk's retry handlers off: a retry after a dropped connection could
post a reply twice.

Replies, notes and the App Home are in the person's or channel's language: the one chosen with
``language``, else the sender's Slack locale (users.info), else the operator's default language.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from pydantic import SecretStr
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bot.commands import SORRY, handle, split_command
from bot.commands_base import Block, ChatContext, Problem, Reply, stored_language
from bot.commands_follows import follow_items
from bot.commands_status import describe_schedule
from bot.commands_table import BY_NAME, VOTE_COMMANDS
from core import replay
from core.channel import DeliveryError
from core.config_edges import SlackBotSettings
from core.db import Database
from core.follows import subscribers
from core.languages import LANGUAGES, N_, Translator, reader_language, translator
from core.models import SubscriberStatus, utcnow
from notifiers.ratelimit import RateLimiter
from notifiers.slack.chat_format import RUN_ACTION, UNFOLLOW_ACTION, VOTE_ACTIONS, home_view, reply_message
from notifiers.slack.chat_workspace import Conversation, SlackChannel, Workspace, chat_context, why
from notifiers.slack.send import retry_after_seconds, send_one

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
"""The one URL Slack calls in HTTP mode: slash commands, events and interactivity."""
DEFAULT_COMMAND = "/papertrail"
ACK_BUDGET = 2.5
"""Seconds a reply may take before the command is acknowledged empty and answered via response_url."""
API_TIMEOUT = 10
"""Seconds for one Web API or response_url call."""
DRAIN_SECONDS = 10.0
"""Seconds :meth:`SlackBot.aclose` gives replies in flight."""
REPLAY_MEMORY = timedelta(minutes=10)
"""How long an accepted request's signature is remembered: twice the 5 minutes a signature passes the
timestamp check, so that web processes whose clocks differ by up to 5 minutes still refuse a replay."""

_COMMAND_NAME = re.compile(r"^/[\w.-]{1,32}$")
_BOT_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
_ACTIONS = re.compile(rf"^(?:(?:{RUN_ACTION}|{UNFOLLOW_ACTION})_\d+|{'|'.join(VOTE_ACTIONS)})$")


class SlackSetupError(RuntimeError):
    """The Slack app cannot run with these settings; the message says which to set and how."""


def serves_http(settings: SlackBotSettings) -> bool:
    """Whether the web app should mount :meth:`SlackBot.routes` (signing secret and bot token set)."""
    return _secret(settings.signing_secret) is not None and _secret(settings.bot_token) is not None


def uses_socket_mode(settings: SlackBotSettings) -> bool:
    """Whether the bots role should run :meth:`SlackBot.run_socket_mode` (app token and bot token set)."""
    return _secret(settings.app_token) is not None and _secret(settings.bot_token) is not None


def _secret(value: SecretStr | None) -> str | None:
    text = value.get_secret_value().strip() if value is not None else ""
    return text or None


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply of the grammar and the Slack message that shows it."""

    reply: Reply
    message: dict[str, Any]


def changes_subscription(reply: Reply, text: str) -> bool:
    """Whether ``reply`` reports a change the command made (``digest`` alone only shows the schedule)."""
    info = BY_NAME.get(reply.command)
    if not reply.ok or info is None or not info.changes:
        return False
    if reply.command in VOTE_COMMANDS:
        # A vote is said to the voter alone, with its Undo button: a channel would otherwise read one
        # message per click.
        return False
    return reply.command not in ("digest", "timezone", "language") or bool(split_command(text)[1])


def command_prefix(command: Any) -> str:
    """``/papertrail `` or the name the workspace gave the command, with a space: every example uses it."""
    name = str(command or "")
    return f"{name} " if _COMMAND_NAME.match(name) else f"{DEFAULT_COMMAND} "


class SlackBot:
    """The Slack app over one store. ``client`` is injected in tests; otherwise built from settings.

    ``clock`` is "now" for the commands (tests pin it). ``ack_budget`` is how long a reply may take
    before the slash command is acknowledged empty and answered through its response_url. ``limiter``: the
    Slack digest notifier's (``SlackNotifier.limiter``), so that the app's own posts and the digests share
    one channel's limit; the shell always passes it. Without one (tests) posts are not paced, only 429s
    waited out.
    """

    def __init__(
        self,
        settings: SlackBotSettings,
        db: Database,
        *,
        client: AsyncWebClient | None = None,
        clock: Callable[[], datetime] = utcnow,
        ack_budget: float = ACK_BUDGET,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self.clock = clock
        self.ack_budget = ack_budget
        self.limiter = limiter or RateLimiter(scope="slack")
        self.client = client or self._build_client(settings)
        self.workspace = Workspace(self.client)
        self._inflight: set[asyncio.Task[Any]] = set()
        self.app = AsyncApp(
            # Bolt names a logger after the app and sets its level: "papertrail" silenced our own loggers.
            name="papertrail-slack-app",
            client=self.client,
            # Empty when unset: routes() refuses to serve HTTP then, and Socket Mode needs no signature.
            signing_secret=_secret(settings.signing_secret) or "",
            # Unhandled events (a manifest subscribing to more) are answered 404 and logged by Bolt.
            raise_error_for_unhandled_request=False,
        )
        self.app.command(re.compile(r"^/"))(self._on_command)
        self.app.event("app_home_opened")(self._on_home_opened)
        self.app.action(_ACTIONS)(self._on_action)

    @staticmethod
    def _build_client(settings: SlackBotSettings) -> AsyncWebClient:
        token = _secret(settings.bot_token)
        if token is None:
            raise SlackSetupError(
                "the Slack app needs PAPERTRAIL_SLACK_BOT_TOKEN: the app's bot token (xoxb-…) from "
                "OAuth & Permissions after installing it (docs/slack-app.md)"
            )
        # No session: each call opens its own, so the client works from any event loop (uvicorn's, the
        # bots role's). retry_handlers=[]: slack_sdk's default retries a dropped connection, which can
        # post the same message twice.
        return AsyncWebClient(token=token, base_url=settings.api_url, timeout=API_TIMEOUT, retry_handlers=[])

    # -- serving -------------------------------------------------------------------------------------------

    def routes(self) -> list[Route]:
        """``POST /slack/events`` for the web app: Bolt's Starlette adapter, which checks every signature.

        Raises :class:`SlackSetupError` without ``PAPERTRAIL_SLACK_SIGNING_SECRET``: unsigned requests
        must never reach the commands.
        """
        if _secret(self.settings.signing_secret) is None:
            raise SlackSetupError(
                "serving Slack over HTTP needs PAPERTRAIL_SLACK_SIGNING_SECRET (Basic Information → "
                "App Credentials → Signing Secret); or use Socket Mode with PAPERTRAIL_SLACK_APP_TOKEN"
            )
        handler = AsyncSlackRequestHandler(self.app)
        verifier = SignatureVerifier(_secret(self.settings.signing_secret) or "")

        async def events(request: Request) -> Response:
            # Bolt's verifier does int() on the timestamp: a malformed one would end in a 500.
            stamp = request.headers.get("x-slack-request-timestamp", "")
            if not (stamp.isascii() and stamp.isdigit()):
                return PlainTextResponse("invalid request: no valid X-Slack-Request-Timestamp", 401)
            if await self._replayed(verifier, request, stamp):
                # 200, not an error: Slack retries an event answered with an error, and the sender of a
                # slash command sees nothing either way. The first copy was answered already.
                log.warning("slack: refused a replayed signed request on %s", EVENTS_PATH)
                return Response(status_code=200)
            try:
                return await handler.handle(request)
            except (BoltError, ValueError, TypeError, AttributeError) as exc:
                # Bolt answers every failure inside its dispatch itself; what escapes is a body it
                # could not even parse (not UTF-8, not JSON where JSON was promised).
                log.warning("unreadable request on %s: %s", EVENTS_PATH, type(exc).__name__)
                return PlainTextResponse("bad request: the body is not a Slack payload", 400)

        return [Route(EVENTS_PATH, events, methods=["POST"])]

    async def _replayed(self, verifier: SignatureVerifier, request: Request, stamp: str) -> bool:
        """Whether ``request`` is validly signed and its signature was accepted before (a replay).

        A request that is not validly signed is not remembered (Bolt refuses it next, with 401), so a
        forger cannot fill the table or spend a signature ahead of Slack. Starlette keeps the body, so
        Bolt reads the same bytes again.
        """
        signature = request.headers.get("x-slack-signature", "")
        body = await request.body()
        try:
            if not signature.isascii() or not verifier.is_valid(body, stamp, signature):
                return False
        except UnicodeDecodeError:  # slack_sdk signs text; Bolt answers such a body with 400 next
            return False
        signed_at = datetime.fromtimestamp(int(stamp), UTC)
        # The real time, not self.clock (pinned in tests): the signature's window is Slack's real one.
        # A database failure propagates (500): unchecked, a replay would run; the command needs it anyway.
        return await asyncio.to_thread(
            replay.seen_before, self.db, signature, signed_at, now=utcnow(), keep=REPLAY_MEMORY
        )

    async def run_socket_mode(self, stop: asyncio.Event) -> None:
        """Receive commands and events over Socket Mode until ``stop`` is set; then close and drain.

        Raises :class:`SlackSetupError` when Slack refuses the app-level token (that does not get better
        by retrying). A network failure at start is logged and left to the SDK, which keeps reconnecting.
        """
        token = _secret(self.settings.app_token)
        if token is None:
            raise SlackSetupError(
                "Socket Mode needs PAPERTRAIL_SLACK_APP_TOKEN (xapp-…, scope connections:write)"
            )
        handler = AsyncSocketModeHandler(self.app, app_token=token, web_client=self.client)
        try:
            handler.client.wss_uri = await self._open_connection(token)
            connecting = asyncio.ensure_future(handler.connect_async())  # type: ignore[no-untyped-call]
            try:
                await stop.wait()
            finally:
                connecting.cancel()
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]  # no new envelopes after this
            await self.aclose()
        log.info("slack: Socket Mode stopped")

    async def _open_connection(self, token: str) -> Any:
        """The first WebSocket URL (None after a network failure: the SDK then asks again)."""
        try:
            opened = await self.client.apps_connections_open(app_token=token)
        except SlackApiError as exc:
            raise SlackSetupError(
                f"Slack refused the Socket Mode connection ({why(exc)}): check "
                "PAPERTRAIL_SLACK_APP_TOKEN (an app-level token xapp-… with connections:write) and that "
                "Socket Mode is on in the app's settings"
            ) from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack: cannot reach Slack to open Socket Mode (%s); retrying", type(exc).__name__)
            return None
        log.info("slack: connecting to Slack in Socket Mode")
        return opened.get("url")

    async def aclose(self) -> None:
        """Let the replies in flight (in this event loop) finish, for at most :data:`DRAIN_SECONDS`."""
        loop = asyncio.get_running_loop()
        mine = {task for task in self._inflight if task.get_loop() is loop and not task.done()}
        if mine:
            _, late = await asyncio.wait(mine, timeout=DRAIN_SECONDS)
            for task in late:
                task.cancel()

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            yield
        finally:
            if task is not None:
                self._inflight.discard(task)

    # -- listeners -----------------------------------------------------------------------------------------

    async def _on_command(self, ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
        """A slash command: answer in the acknowledgement, or via response_url when it takes long."""
        with self._tracked():
            conversation = Conversation(
                str(body.get("user_id") or ""),
                str(body.get("channel_id") or ""),
                str(body.get("channel_name") or ""),
            )
            work = asyncio.ensure_future(
                self.answer(
                    conversation,
                    str(body.get("text") or ""),
                    command_prefix(body.get("command")),
                    context.bot_user_id,
                )
            )
            try:
                answer = await asyncio.wait_for(asyncio.shield(work), self.ack_budget)
            except TimeoutError:
                await ack()  # Slack gives up after 3 s; the reply follows through the response_url
                answer = await work
                await self._respond(body.get("response_url"), answer.message, conversation)
                return
            message = answer.message
            await ack(
                text=message["text"],
                blocks=message["blocks"],
                response_type=message["response_type"],
                unfurl_links=False,
                unfurl_media=False,
            )

    async def _on_action(self, ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
        """A button: a suggestion under a reply (run that command), Unfollow in the App Home, or 👍 / 👎
        under a paper in a digest (``like ID`` / ``dislike ID`` for the channel, or the DM's person).

        The answer is ephemeral, to the clicker, through the action's response_url: a vote's carries the
        Undo button (``unvote IDvN``) that comes back here as a suggestion.
        """
        await ack()
        with self._tracked():
            actions = body.get("actions") or [{}]
            value = str(actions[0].get("value") or "")
            vote = VOTE_ACTIONS.get(str(actions[0].get("action_id") or ""))
            if vote is not None:
                value = f"{vote} {value}"
            user_id = str((body.get("user") or {}).get("id") or "")
            if (body.get("container") or {}).get("type") == "view":
                answer = await self.answer(Conversation(user_id), value, f"{DEFAULT_COMMAND} ", None)
                await self.publish_home(user_id, notice=answer.reply.text)
                return
            channel = body.get("channel") or {}
            conversation = Conversation(user_id, str(channel.get("id") or ""), str(channel.get("name") or ""))
            answer = await self.answer(conversation, value, f"{DEFAULT_COMMAND} ", context.bot_user_id)
            message = {**answer.message, "replace_original": False}
            await self._respond(body.get("response_url"), message, conversation)

    async def _on_home_opened(self, event: dict[str, Any]) -> None:
        """The App Home tab was opened: publish the person's follows (the Messages tab needs nothing)."""
        if event.get("tab") == "home":
            with self._tracked():
                await self.publish_home(str(event.get("user") or ""))

    # -- answering -----------------------------------------------------------------------------------------

    async def answer(
        self, conversation: Conversation, text: str, prefix: str, bot_user_id: str | None
    ) -> Answer:
        """Run ``text`` as a command from ``conversation`` and lay the reply out for Slack; never raises.

        The grammar answers every text itself; this catches what could still go wrong around it (a bug
        here), so that Slack gets an apology instead of a 500.
        """
        try:
            return await self._answer(conversation, text, prefix, bot_user_id)
        except Exception:
            log.exception("slack: answering a command from %s failed: %r", conversation.address, text[:200])
            language = await asyncio.to_thread(
                stored_language,
                self.db,
                conversation.address,
                default=self.settings.commands.default_language,
            )
            return _plain_answer(SORRY, Problem.INTERNAL, prefix, translator(language))

    async def _answer(
        self, conversation: Conversation, text: str, prefix: str, bot_user_id: str | None
    ) -> Answer:
        channel = None if conversation.is_dm else await self.workspace.channel(conversation.channel_id)
        user = await self.workspace.user(conversation.user_id)
        try:
            ctx = chat_context(conversation, prefix, user, channel)
        except ValueError:  # ids that are no Slack ids: not a payload Slack sends
            t = translator(reader_language(user.locale, default=self.settings.commands.default_language))
            return _plain_answer(NO_CONVERSATION, Problem.BAD_ARGUMENT, prefix, t)
        reply = await asyncio.to_thread(handle, self.db, self.settings.commands, ctx, text, now=self.clock())
        changed = ctx.is_group and changes_subscription(reply, text)
        invite = changed and channel is not None and channel.is_member is False
        message = reply_message(
            reply,
            prefix,
            # A change to a channel's subscription is the channel's business; everything else is private.
            response_type="in_channel" if changed else "ephemeral",
            notes=[_invite_note(bot_user_id, translator(reply.language))] if invite else [],
            buttons=not changed,
        )
        return Answer(reply, message)

    async def chat_context(
        self, conversation: Conversation, prefix: str, channel: SlackChannel | None = None
    ) -> ChatContext:
        """The grammar's view of the sender (see :func:`notifiers.slack.chat_workspace.chat_context`).

        Asks users.info about the sender; ``channel`` is what conversations.info said (None: unknown).
        Raises ValueError for ids that are not Slack ids.
        """
        user = await self.workspace.user(conversation.user_id)
        return chat_context(conversation, prefix, user, channel)

    async def publish_home(self, user_id: str, *, notice: str = "") -> None:
        """Publish the App Home of ``user_id``: their follows, how digests reach them, short help."""
        address = f"slack:{user_id}"
        try:
            items = await asyncio.to_thread(follow_items, self.db, address)
            subscriber = await asyncio.to_thread(subscribers.subscriber_by_address, self.db, address)
        except ValueError:
            log.warning("slack: app_home_opened for a malformed user id %r", user_id[:40])
            return
        except Exception:
            log.exception("slack: cannot read the follows of %s for the App Home", address)
            return
        if subscriber is not None and subscriber.language in LANGUAGES:
            t = translator(subscriber.language)
        else:  # not chosen yet: the person's Slack locale, as a command of theirs would be answered
            locale = (await self.workspace.user(user_id)).locale
            t = translator(reader_language(locale, default=self.settings.commands.default_language))
        p = f"{DEFAULT_COMMAND} "
        if subscriber is None:
            summary = t.gettext("Digests arrive in this app's Messages tab.")
        elif subscriber.status != SubscriberStatus.ACTIVE:
            summary = t.gettext("Digests are paused: {p}resume restarts them.", p=p)
        else:
            summary = t.gettext(
                "Digests arrive in this app's Messages tab, {schedule}.",
                schedule=describe_schedule(subscriber, t),
            )
        view = home_view(items, summary=summary, prefix=p, notice=notice, t=t)

        async def publish() -> None:
            try:
                await self.client.views_publish(user_id=user_id, view=view)
            except SlackApiError as exc:
                raise _refused(why(exc), exc.response.status_code, exc.response.headers) from None
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                raise DeliveryError(why(exc), retryable=True) from None

        try:
            await send_one(publish, limiter=self.limiter, key=f"home:{user_id}")
        except DeliveryError as exc:
            log.warning("slack: views.publish for %s failed (%s)", user_id, exc)

    async def _respond(self, response_url: Any, message: dict[str, Any], conversation: Conversation) -> None:
        """Post a late reply to the command's response_url (valid 30 minutes, 5 uses), paced as a message
        to ``conversation``."""
        if not isinstance(response_url, str) or not response_url.startswith(("https://", "http://")):
            log.warning("slack: a reply was ready but the request had no response_url")
            return
        client = AsyncWebhookClient(url=response_url, timeout=API_TIMEOUT, retry_handlers=[])

        async def post() -> None:
            try:
                response = await client.send_dict(message)
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                raise DeliveryError(why(exc), retryable=True) from None
            if response.status_code != 200:
                reason = f"HTTP {response.status_code}: {response.body[:100]}"
                raise _refused(reason, response.status_code, response.headers)

        try:
            await send_one(post, limiter=self.limiter, key=conversation.target)
        except DeliveryError as exc:
            log.warning("slack: a reply to %s was not posted (%s)", conversation.address, exc)


NO_CONVERSATION = N_("PaperTrail cannot tell which Slack conversation this command came from.")


def _refused(reason: str, status: int, headers: Mapping[str, Any] | None) -> DeliveryError:
    """A post of the app's own that Slack answered with an error. ``reason`` (Slack's error code, or the
    HTTP status and body) is for the log; a 429 carries Slack's Retry-After (1 s when it gave none), which
    the send path waits out when short, as for a digest."""
    if status == 429 or reason == "ratelimited":
        wait = retry_after_seconds(headers or {})
        return DeliveryError(reason, retryable=True, retry_after=wait if wait is not None else 1.0)
    return DeliveryError(reason, retryable=False)


def _plain_answer(message: str, problem: Problem, prefix: str, t: Translator) -> Answer:
    """An answer the app writes itself: ``message`` (an English message marked with N_) translated."""
    reply = Reply((Block(t.gettext(message)),), error=problem, language=t.language)
    return Answer(reply, reply_message(reply, prefix, response_type="ephemeral", buttons=False))


def _invite_note(bot_user_id: str | None, t: Translator) -> str:
    """mrkdwn (already safe): the bot must be in the channel before digests can be posted there."""
    who = f"<@{bot_user_id}>" if bot_user_id and _BOT_USER.match(bot_user_id) else "@PaperTrail"
    return t.gettext(
        "PaperTrail is not in this channel yet, so digests cannot be posted here: /invite {who}", who=who
    )


__all__ = [
    "ACK_BUDGET",
    "DEFAULT_COMMAND",
    "EVENTS_PATH",
    "Answer",
    "SlackBot",
    "SlackSetupError",
    "changes_subscription",
    "command_prefix",
    "serves_http",
    "uses_socket_mode",
]
