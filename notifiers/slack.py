"""Slack notifier: Block Kit messages through the Web API (``chat.postMessage``) with slack_sdk.

Format: Block Kit built from the ``slack.mrkdwn.j2`` template's blocks (see the convention at the top of
that template): a header, then a section (mrkdwn) and a context block per paper, and from the bot an
actions block with 👍 / 👎 (:data:`LIKE_ACTION`, :data:`DISLIKE_ACTION`) that the Slack app
(bot/slack.py) answers. Limits: 50 blocks per message, 3,000 characters per section, 150 per header; a
longer digest becomes several messages, split only between papers (with the buttons, 16 papers a message
instead of 24). Rate: one message per second per channel (Slack's limit for ``chat.postMessage``).

:func:`build_payloads` is the one place that turns a :class:`Message` into Block Kit; the incoming-webhook
adapter (``notifiers.slack_webhook``) uses it too, and :func:`send_parts` too, so both behave alike on
``skip_parts``, rate limits and ``delivered_parts``.

Every slack_sdk and aiohttp failure is translated here into one :class:`DeliveryError`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from core.config import Settings
from core.delivery.chat_buttons import DISLIKE_LABEL, LIKE_LABEL, SLACK_DISLIKE_ACTION, SLACK_LIKE_ACTION
from core.delivery.contract import DeliveryError, pack_blocks, part_delivered
from core.delivery.rate_limit import RateLimit
from core.delivery.render import PART, escape_mrkdwn
from core.i18n.languages import translator
from core.retry_after import retry_after_seconds as http_retry_after
from core.values import DigestItem, Message, SendResult
from notifiers.ratelimit import RateLimiter

log = logging.getLogger(__name__)

# Slack's Block Kit limits.
MAX_BLOCKS = 50
MAX_HEADER_CHARS = 150
MAX_SECTION_CHARS = 3000
# A template block that is exactly this becomes a divider.
DIVIDER = "---"
# The vote buttons under a paper (bot form only): action ids the Slack app handles (bot/slack_format.py
# names them too), the value is the versioned id, ``2306.03564v2``. Labels are the same in every language.
LIKE_ACTION, DISLIKE_ACTION = SLACK_LIKE_ACTION, SLACK_DISLIKE_ACTION

# Seconds to wait for one Web API call (connect, send, answer) before calling it a transient failure.
REQUEST_TIMEOUT = 30.0
# A Retry-After up to this long is waited out in place (and the same part sent again); a longer one ends
# the attempt with a retryable error carrying the hint, so the ledger reschedules the digest.
MAX_INLINE_WAIT = 5.0
# How often one part is retried in place after short rate limits before giving up for this attempt.
MAX_INLINE_RETRIES = 3

Block = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SlackPayload:
    """One Slack message of a digest: Block Kit blocks and the notification fallback text."""

    text: str
    blocks: tuple[Block, ...]

    def body(self) -> dict[str, Any]:
        """The JSON body for an incoming webhook (chat.postMessage takes the same fields)."""
        return {"text": self.text, "blocks": list(self.blocks), "unfurl_links": False, "unfurl_media": False}


# ---------------------------------------------------------------------------------------------------------
# Block Kit


def _unescape(text: str) -> str:
    """Undo :func:`core.delivery.render.escape_mrkdwn` for plain_text fields, which Slack shows verbatim."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def clip_mrkdwn(text: str, limit: int) -> str:
    """Cut mrkdwn to at most ``limit`` characters with an ellipsis, never inside ``<…>`` or ``&…;``.

    The template keeps sections short; this is the safety net for pathological input (a title made of
    ampersands grows fivefold when escaped).
    """
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    # A link or mention cut in half would swallow the rest of the text or show raw syntax.
    if cut.rfind("<") > cut.rfind(">"):
        cut = cut[: cut.rfind("<")]
    # Likewise half an entity (&am…).
    if cut.rfind("&") > cut.rfind(";"):
        cut = cut[: cut.rfind("&")]
    return cut.rstrip() + "…"


def _plain(text: str, limit: int, suffix: str = "") -> Block:
    text = " ".join(text.split())
    room = limit - len(suffix)
    if len(text) > room:
        text = text[: room - 1].rstrip() + "…"
    return {"type": "plain_text", "text": (text or "PaperTrail") + suffix, "emoji": True}


def _mrkdwn(text: str) -> Block:
    # verbatim: Slack must not turn "@channel" or "#general" in a title into a mention or a channel link;
    # only the explicit <url|text> links the template writes are links.
    return {"type": "mrkdwn", "text": clip_mrkdwn(text, MAX_SECTION_CHARS), "verbatim": True}


def header_block(text: str, suffix: str = "") -> Block:
    """A header block: plain text cut to fit 150 characters with ``suffix`` (e.g. " (2/3)") kept whole."""
    return {"type": "header", "text": _plain(text, MAX_HEADER_CHARS, suffix)}


def _units(template_blocks: Iterable[str]) -> list[list[Block]]:
    """Map template blocks (after the header) to Block Kit, grouped into units a split never cuts.

    A block with a context part (an item, the footer) closes a unit; headings and dividers stay with the
    block that follows them, so a message never ends on a lone "New papers" heading.
    """
    units: list[list[Block]] = []
    pending: list[Block] = []
    for raw in template_blocks:
        section, part, context = raw.partition(PART)
        section, context, has_part = section.strip(), context.strip(), bool(part)
        if not has_part and section == DIVIDER:
            pending.append({"type": "divider"})
            continue
        if section:
            pending.append({"type": "section", "text": _mrkdwn(section)})
        if context:
            pending.append({"type": "context", "elements": [_mrkdwn(context)]})
        if has_part and pending:
            units.append(pending)
            pending = []
    if pending:
        units.append(pending)
    return units


def _vote_block(paper: str) -> Block:
    """The actions block of 👍 / 👎 for one paper version (``2306.03564v2``)."""
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": label, "emoji": True},
                "action_id": action,
                "value": paper,
            }
            for label, action in ((LIKE_LABEL, LIKE_ACTION), (DISLIKE_LABEL, DISLIKE_ACTION))
        ],
    }


def _with_votes(units: list[list[Block]], items: Sequence[DigestItem]) -> list[list[Block]]:
    """Each paper's unit with its vote buttons after the context block; other units as they are.

    A paper's section holds its versioned link ``<https://arxiv.org/abs/IDvN|IDvN>`` once; a title cannot
    forge it, since every printed value has its ``>`` escaped.
    """
    markers = {f"/abs/{item.arxiv_id}v{item.version}|{item.arxiv_id}v{item.version}>": item for item in items}
    voted: list[list[Block]] = []
    for unit in units:
        paper = next(
            (
                f"{item.arxiv_id}v{item.version}"
                for block in unit
                if block["type"] == "section"
                for marker, item in markers.items()
                if marker in block["text"]["text"]
            ),
            None,
        )
        voted.append([*unit, _vote_block(paper)] if paper else unit)
    return voted


def _fallback_units(message: Message) -> list[list[Block]]:
    """Sections of the plain-text digest, for a message rendered without the Slack template."""
    lines = [escape_mrkdwn(line) + "\n" for line in message.text.splitlines()]
    chunks = pack_blocks(lines, MAX_SECTION_CHARS, shorten=clip_mrkdwn)
    return [[{"type": "section", "text": _mrkdwn(chunk)}] for chunk in chunks if chunk.strip()]


def _pack(units: Sequence[list[Block]], budget: int) -> list[list[Block]]:
    """Greedily fill messages of at most ``budget`` blocks with whole units, in order."""
    messages: list[list[Block]] = []
    current: list[Block] = []
    for unit in units:
        if current and len(current) + len(unit) > budget:
            messages.append(current)
            current = []
        current.extend(unit)
    if current or not messages:
        messages.append(current)
    return messages


def build_payloads(message: Message, *, vote_buttons: bool = False) -> list[SlackPayload]:
    """The Slack messages for one digest: at most 50 blocks each, split only between items.

    Each message starts with a header (the digest's first template block, numbered "(2/3)" when the
    digest takes several messages) and carries a ``text`` fallback for notifications and screen readers,
    worded in the message's language. ``vote_buttons`` puts 👍 / 👎 under each paper: only for the bot
    (:class:`SlackNotifier`), whose app receives the clicks; an incoming webhook's channel is no
    ``slack:`` subscriber a click could vote for.
    """
    t = translator(message.language)
    if message.mrkdwn_blocks:
        title = _unescape(message.mrkdwn_blocks[0].strip()) or message.subject
        units = _units(message.mrkdwn_blocks[1:])
        if vote_buttons:
            units = _with_votes(units, message.items)
    else:
        title = message.subject
        units = _fallback_units(message)
    messages = _pack(units, MAX_BLOCKS - 1)
    total = len(messages)
    payloads = []
    for number, blocks in enumerate(messages, start=1):
        suffix = f" ({number}/{total})" if total > 1 else ""
        header = header_block(title, suffix)
        numbered = t.gettext(" (part {number} of {total})", number=number, total=total) if total > 1 else ""
        text = escape_mrkdwn(message.subject + numbered)
        payloads.append(SlackPayload(text=text, blocks=(header, *blocks)))
    return payloads


# ---------------------------------------------------------------------------------------------------------
# Sending, shared with the webhook adapter


def retry_after_seconds(headers: Mapping[str, Any]) -> float | None:
    """The Retry-After header in seconds (Slack sends an integer), or None when absent or unreadable."""
    for name, value in headers.items():
        if name.lower() == "retry-after":
            return http_retry_after(str(value))
    return None


async def send_parts(
    payloads: Sequence[SlackPayload],
    *,
    skip: int,
    post: Callable[[SlackPayload], Awaitable[str | None]],
    limiter: RateLimiter,
    key: str,
) -> str | None:
    """Post each payload after the first ``skip`` ones, paced by ``limiter`` under ``key``.

    ``post`` sends one message and raises :class:`DeliveryError` (translated). A short rate limit is waited
    out and the same part sent again; any other failure is re-raised with ``delivered_parts`` set, counting
    the skipped parts. Returns the platform id of the first message this call posted.
    """
    first: str | None = None
    for index, payload in enumerate(payloads):
        if index < skip:
            continue
        retries = 0
        while True:
            await limiter.acquire(key)
            try:
                platform_id = await post(payload)
            except DeliveryError as exc:
                if _wait_in_place(exc) and retries < MAX_INLINE_RETRIES:
                    retries += 1
                    log.info("Slack rate limit: waiting %.1f s to resend part %d", exc.retry_after, index + 1)
                    await limiter.postpone(key, exc.retry_after or 0.0)
                    continue
                if exc.retry_after is not None:
                    await limiter.postpone(key, exc.retry_after)
                exc.delivered_parts = index
                raise
            break
        first = first or platform_id
        if index + 1 < len(payloads):
            # Renews the digest's lease (the ledger records the last part itself); LeaseLost stops here.
            await part_delivered(index + 1)
    return first


def _wait_in_place(exc: DeliveryError) -> bool:
    return exc.retryable and exc.retry_after is not None and exc.retry_after <= MAX_INLINE_WAIT


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


def translate_api_error(exc: Exception, channel: str) -> DeliveryError:
    """One DeliveryError for anything AsyncWebClient raised while posting to ``channel``."""
    if isinstance(exc, SlackApiError):
        return _from_response(exc, channel)
    if isinstance(exc, (aiohttp.ClientError, TimeoutError)):
        return DeliveryError(
            f"cannot reach the Slack Web API ({type(exc).__name__}: {exc}); will retry. If this persists, "
            "check the network and PAPERTRAIL_SLACK_API_URL",
            retryable=True,
        )
    return DeliveryError(f"Slack client error posting to {channel}: {exc}", retryable=True)


def _from_response(exc: SlackApiError, channel: str) -> DeliveryError:
    response = exc.response
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
    # Slack limits blocks, not characters: build_payloads splits at 50 blocks per message.
    max_length: ClassVar[int | None] = None

    def __init__(
        self,
        settings: Settings,
        *,
        client: AsyncWebClient | None = None,
        limiter: RateLimiter | None = None,
        slots: RateLimit | None = None,
    ) -> None:
        self.settings = settings
        self._client = client
        self._session: aiohttp.ClientSession | None = None
        # ``slots``: the shell's shared slots (every worker keeps Slack's 1/s per channel together).
        self.limiter = limiter or RateLimiter(
            interval=settings.slack_channel_interval, slots=slots, scope="slack"
        )

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
        token = self.settings.slack_bot_token
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
            base_url=self.settings.slack_api_url,
            session=self._session,
            retry_handlers=[],
        )
        return self._client
