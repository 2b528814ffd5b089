"""Slack notifier: Block Kit messages through the Web API (``chat.postMessage``) with slack_sdk.

The Block Kit itself is built by notifiers/slack/blocks.py (limits in blocks, not characters). Rate: one
message per second per channel (Slack's limit for ``chat.postMessage``). The parts are sent by
notifiers/slack/send.py, shared with the incoming-webhook adapter (``notifiers.slack.webhook``).

Every slack_sdk and aiohttp failure is translated here into one :class:`DeliveryError`, by the table
:data:`ERRORS` (exception types) and :data:`PERMANENT_ERRORS` (the Web API's error codes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from core.channel import DeliveryError
from core.config_edges import SlackSettings
from core.delivery.rate_limit import RateLimit
from core.values import Message, SendResult
from notifiers.ratelimit import RateLimiter
from notifiers.slack.blocks import SlackPayload, build_payloads
from notifiers.slack.send import retry_after_seconds, send_parts

log = logging.getLogger(__name__)

# Builds the DeliveryError for an exception raised while posting to a channel.
ErrorMapper = Callable[[Exception, str], DeliveryError]

# Seconds to wait for one Web API call (connect, send, answer) before calling it a transient failure.
REQUEST_TIMEOUT = 30.0


# ---------------------------------------------------------------------------------------------------------
# Web API errors

_INVITE = "invite the bot into the channel with /invite @PaperTrail, then resume the subscription"
_TOKEN = "install the Slack app again and set PAPERTRAIL_SLACK_BOT_TOKEN to its bot token (xoxb-…)"
_BUG = "this is a PaperTrail bug in the Slack layout; please report it with the digest's key"

# Permanent errors of the bot's own token or of PaperTrail's layout, not of the channel: a delivery alarm
# for the operator (core.delivery.alarm), never a reason to pause the channel's subscription.
SENDER_ERRORS = frozenset(
    {
        "account_inactive",
        "invalid_auth",
        "not_authed",
        "token_revoked",
        "token_expired",
        "missing_scope",
        "msg_too_long",
        "invalid_blocks",
        "invalid_blocks_format",
    }
)
# Error codes after which the same message to the same channel can never succeed, with what to do.
PERMANENT_ERRORS: dict[str, str] = {
    "not_in_channel": f"the bot is not a member of the channel: {_INVITE}",
    "channel_not_found": "Slack knows no such conversation for this bot: check the id in the channel's "
    f"details; for a private channel, {_INVITE}",
    "is_archived": "the channel is archived: unarchive it or subscribe another channel",
    "restricted_action": "a workspace setting stops the bot from posting in this channel: ask an admin",
    "account_inactive": f"the bot's token belongs to a deactivated account or uninstalled app: {_TOKEN}",
    "invalid_auth": f"Slack rejected the bot token: {_TOKEN}",
    "not_authed": f"no bot token reached Slack: {_TOKEN}",
    "token_revoked": f"the bot token was revoked: {_TOKEN}",
    "token_expired": f"the bot token expired: {_TOKEN}",
    "missing_scope": "the bot token lacks the chat:write scope: add it to the app and reinstall it",
    "msg_too_long": f"Slack found the message too long; {_BUG}",
    "invalid_blocks": f"Slack rejected the Block Kit layout; {_BUG}",
    "invalid_blocks_format": f"Slack rejected the Block Kit layout; {_BUG}",
}


def _from_response(exc: Exception, channel: str) -> DeliveryError:
    """A SlackApiError by its HTTP status and the Web API's error code (:data:`PERMANENT_ERRORS`)."""
    response = getattr(exc, "response", None)
    status = int(getattr(response, "status_code", 0) or 0)
    data = getattr(response, "data", None)
    code = str(data.get("error") or "") if isinstance(data, dict) else ""
    if status == 429 or code == "ratelimited":
        retry_after = retry_after_seconds(getattr(response, "headers", None) or {})
        return DeliveryError(
            f"Slack rate-limited messages to {channel}; retrying after {retry_after or 1:g} s",
            retryable=True,
            retry_after=retry_after if retry_after is not None else 1.0,
        )
    if code in PERMANENT_ERRORS:
        return DeliveryError(
            f"Slack refused the digest for {channel} ({code}): {PERMANENT_ERRORS[code]}",
            retryable=False,
            kind=code,
            operator=code in SENDER_ERRORS,
        )
    # internal_error, fatal_error, service_unavailable, 5xx, and codes this table does not know yet: the
    # ledger retries with back-off and dead-letters after its attempts, so nothing is lost or looped.
    what = code or f"HTTP {status}"
    return DeliveryError(f"Slack failed to post to {channel} ({what}); will retry later", retryable=True)


def _network_error(exc: Exception, channel: str) -> DeliveryError:
    return DeliveryError(
        f"cannot reach the Slack Web API ({type(exc).__name__}: {exc}); will retry. If this persists, "
        "check the network and PAPERTRAIL_SLACK_API_URL",
        retryable=True,
    )


def _client_error(exc: Exception, channel: str) -> DeliveryError:
    return DeliveryError(f"Slack client error posting to {channel}: {exc}", retryable=True)


# How each exception AsyncWebClient raises is translated: the first entry whose types it is an instance of.
ERRORS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ErrorMapper], ...] = (
    (SlackApiError, _from_response),
    ((aiohttp.ClientError, TimeoutError), _network_error),
)


def translate_api_error(exc: Exception, channel: str) -> DeliveryError:
    """One DeliveryError for anything AsyncWebClient raised while posting to ``channel`` (:data:`ERRORS`;
    anything else is a retryable client error)."""
    mapper = next((mapper for kinds, mapper in ERRORS if isinstance(exc, kinds)), _client_error)
    return mapper(exc, channel)


# ---------------------------------------------------------------------------------------------------------
# The adapter


class SlackNotifier:
    """Posts digests to Slack conversations (``slack:C0123ABC``) as the PaperTrail bot.

    ``client`` is injected in tests (and by a shell that shares one client with the Bolt app); otherwise
    one is built on first use from ``PAPERTRAIL_SLACK_BOT_TOKEN`` and ``PAPERTRAIL_SLACK_API_URL``.

    The client built here has slack_sdk's retry handlers switched off: its default one re-sends a request
    after a dropped connection, which for ``chat.postMessage`` (not idempotent) can post a digest twice
    when Slack accepted it before the connection broke. Rate limits are handled in :func:`send_parts`
    (short waits in place, long ones handed to the ledger), and every other failure goes back to the
    ledger's back-off, which also knows how many parts were already delivered.
    """

    channel: ClassVar[str] = "slack"
    # Slack limits blocks, not characters: slack_blocks.build_payloads splits at 50 blocks per message.
    max_length: ClassVar[int | None] = None

    def __init__(
        self,
        settings: SlackSettings,
        *,
        client: AsyncWebClient | None = None,
        limiter: RateLimiter | None = None,
        slots: RateLimit | None = None,
    ) -> None:
        self.settings = settings
        self._client = client
        self._session: aiohttp.ClientSession | None = None
        # ``slots``: the shell's shared slots (every worker keeps Slack's 1/s per channel together).
        self.limiter = limiter or RateLimiter(interval=settings.channel_interval, slots=slots, scope="slack")

    async def send(self, address: str, message: Message) -> SendResult:
        """Post the digest to the conversation ``address`` (a C…/G…/D… id, or U… for a DM)."""
        client = self._ensure_client()
        payloads = build_payloads(message, vote_buttons=True)

        async def post(payload: SlackPayload) -> str | None:
            try:
                response = await client.chat_postMessage(
                    channel=address,
                    text=payload.text,
                    blocks=list(payload.blocks),
                    unfurl_links=False,
                    unfurl_media=False,
                )
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                raise translate_api_error(exc, address) from exc
            ts = response.get("ts")
            return str(ts) if ts is not None else None

        first = await send_parts(
            payloads, skip=message.skip_parts, post=post, limiter=self.limiter, key=address
        )
        return SendResult(platform_id=first, parts=len(payloads))

    async def aclose(self) -> None:
        """Close the HTTP session this notifier opened (an injected client stays open)."""
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._client = None

    def _ensure_client(self) -> AsyncWebClient:
        if self._client is not None:
            return self._client
        token = self.settings.bot_token
        if token is None or not token.get_secret_value().strip():
            raise DeliveryError(
                "Slack is not configured: set PAPERTRAIL_SLACK_BOT_TOKEN to the app's bot token (xoxb-…); "
                "Slack digests stay pending until then",
                retryable=True,
            )
        # One session for every message, so connections are reused; created here, inside the event loop.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT))
        self._client = AsyncWebClient(
            token=token.get_secret_value(),
            base_url=self.settings.api_url,
            session=self._session,
            retry_handlers=[],
        )
        return self._client
