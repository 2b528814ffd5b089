"""Slack incoming-webhook notifier: the same Block Kit digest, posted to a webhook URL instead of a bot.

For workspaces that will not install a bot: an admin creates an incoming webhook for one channel and the
subscriber's address is its full URL (``slack-webhook:https://hooks.slack.com/services/T…/B…/…``).

The URL is a secret (anyone holding it can post to the channel): it never appears in a log line or an error
message, only its host does. slack_sdk's webhook client logs the URL at DEBUG level, so it gets a logger
of its own that stays above DEBUG. Incoming webhooks answer with HTTP status codes and a short text body
(``no_service``, ``channel_is_archived``); they are rate-limited like the Web API, one message per second.
"""

from __future__ import annotations

import hashlib
import logging
from typing import ClassVar
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackClientError
from slack_sdk.webhook.async_client import AsyncWebhookClient
from slack_sdk.webhook.webhook_response import WebhookResponse

from core.channel import DeliveryError
from core.config_edges import SlackWebhookSettings
from core.delivery.rate_limit import RateLimit
from core.escaping import one_line
from core.values import Message, SendResult
from notifiers.ratelimit import RateLimiter
from notifiers.slack.blocks import SlackPayload, build_payloads
from notifiers.slack.send import retry_after_seconds, send_parts

# slack_sdk's webhook client writes the URL into DEBUG and INFO records; this logger never emits those.
_SDK_LOG = logging.getLogger(f"{__name__}.sdk")
_SDK_LOG.setLevel(logging.WARNING)

# Slack's own hosts for incoming webhooks. Any other host must be allowed in PAPERTRAIL_WEBHOOK_ALLOW_HOSTS:
# otherwise a subscriber could make PaperTrail POST to an internal address (SSRF).
SLACK_HOOK_HOSTS = frozenset({"hooks.slack.com", "hooks.slack-gov.com"})

_RECREATE = "create a new incoming webhook for the channel and subscribe its URL instead"
# What each status means for an incoming webhook, with what to do; all of them are permanent.
_PERMANENT_STATUS: dict[int, str] = {
    400: "Slack rejected the digest's layout; this is a PaperTrail bug, please report it",
    403: f"the webhook may no longer post (revoked or restricted by an admin); {_RECREATE}",
    404: f"the webhook no longer exists (removed, or its app uninstalled); {_RECREATE}",
    410: "the webhook's channel is archived: unarchive it, or subscribe a webhook for another channel",
}


class SlackWebhookNotifier:
    """Posts digests to Slack incoming webhooks (``slack-webhook:https://hooks.slack.com/services/…``).

    ``session`` (an aiohttp session) is injected in tests; otherwise one is opened on first use and closed
    by :meth:`aclose`. As in :class:`notifiers.slack.notifier.SlackNotifier`, slack_sdk's retry
    handlers are off: a webhook post is not idempotent, and the ledger owns retries.
    """

    channel: ClassVar[str] = "slack-webhook"
    # Limited in blocks (50 per message), not characters: build_payloads splits.
    max_length: ClassVar[int | None] = None

    def __init__(
        self,
        settings: SlackWebhookSettings,
        *,
        session: aiohttp.ClientSession | None = None,
        limiter: RateLimiter | None = None,
        slots: RateLimit | None = None,
    ) -> None:
        self.settings = settings
        self._session = session
        self._owns_session = session is None
        # ``slots``: the shell's shared slots (every worker keeps Slack's 1/s per channel together).
        self.limiter = limiter or RateLimiter(
            interval=settings.channel_interval, slots=slots, scope="slack-webhook"
        )

    async def send(self, address: str, message: Message) -> SendResult:
        """Post the digest to the incoming webhook at ``address``."""
        host = self._checked_host(address)
        client = AsyncWebhookClient(
            url=address, session=self._ensure_session(), logger=_SDK_LOG, retry_handlers=[]
        )

        async def post(payload: SlackPayload) -> None:
            try:
                response = await client.send_dict(payload.body())
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                # Not "from exc": aiohttp errors can quote the URL, and tracebacks get logged.
                raise _network_error(exc, address, host) from None
            _check(response, host)

        # Keys may be stored (the shared limiter's rate_slot table): a digest of the URL keeps the secret out.
        key = hashlib.sha256(address.encode()).hexdigest()[:16]
        payloads = build_payloads(message)
        await send_parts(payloads, skip=message.skip_parts, post=post, limiter=self.limiter, key=key)
        # Incoming webhooks return no message id.
        return SendResult(platform_id=None, parts=len(payloads))

    async def aclose(self) -> None:
        """Close the HTTP session if this notifier opened it."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None or (self._owns_session and self._session.closed):
            timeout = aiohttp.ClientTimeout(total=self.settings.timeout)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    def _checked_host(self, address: str) -> str:
        """The webhook's host, after refusing URLs that are not Slack's (unless allowed by settings)."""
        parts = urlsplit(address)
        host = (parts.hostname or "").lower()
        allowed = host in self.settings.allowed_hosts
        if not (allowed and parts.scheme in ("http", "https")) and not (
            parts.scheme == "https" and host in SLACK_HOOK_HOSTS
        ):
            raise DeliveryError(
                f"slack-webhook address on host {host or '?'} refused: it must be an "
                "https://hooks.slack.com/services/… URL (other hosts need PAPERTRAIL_WEBHOOK_ALLOW_HOSTS)",
                retryable=False,
            )
        return host


def _check(response: WebhookResponse, host: str) -> None:
    """Raise the DeliveryError for a webhook answer other than 200."""
    status = response.status_code
    if status == 200:
        return
    # The body is Slack's error code (no_service, invalid_blocks …); keep it short and printable.
    code = one_line(response.body or "")[:80] or "no body"
    where = f"Slack webhook on {host} answered {status} {code}"
    if status == 429:
        retry_after = retry_after_seconds(response.headers or {})
        raise DeliveryError(
            f"{where}: rate-limited; retrying after {retry_after or 1:g} s",
            retryable=True,
            retry_after=retry_after if retry_after is not None else 1.0,
        )
    if status >= 500:
        raise DeliveryError(f"{where}; will retry later", retryable=True)
    hint = _PERMANENT_STATUS.get(status, "the webhook refused the digest; check it in Slack's app settings")
    raise DeliveryError(f"{where}: {hint}", retryable=False)


def _network_error(exc: Exception, address: str, host: str) -> DeliveryError:
    """A retryable error that names the exception and the host, with the URL scrubbed out."""
    detail = str(exc).replace(address, host)
    path = urlsplit(address).path
    if len(path) > 1:  # the path holds the webhook's secret
        detail = detail.replace(path, "/…")
    reason = f"{type(exc).__name__}: {one_line(detail)[:200]}"
    return DeliveryError(
        f"cannot reach the Slack webhook on {host} ({reason}); will retry",
        retryable=True,
    )
