"""Who is asking from where in Slack, and what they may change: the payload's ids, users.info and
conversations.info, and the rule that turns them into the grammar's :class:`~bot.commands.ChatContext`.

The rule: in a direct message a person manages their own subscription (``slack:<user id>``) and may
change everything. A channel's subscription (``slack:<channel id>``) may be changed by the channel's
administrators, which Slack's API knows as the workspace's owners and admins (users.info ``is_owner``,
``is_primary_owner``, ``is_admin``) and the channel's creator (conversations.info ``creator``); everyone
may read it. Slack has no per-channel admin role in its API, and this matches what the grammar tells a
refused member ("Only admins of this channel can change …"). When Slack cannot be asked (a missing scope,
a network failure) a channel is read-only for that command: the rule fails closed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.commands_base import ChatContext

log = logging.getLogger(__name__)

ADMIN_FLAGS = ("is_admin", "is_owner", "is_primary_owner")
"""users.info flags of the people who may change any channel's subscription."""
SCOPES_HINT = "the app needs the scopes users:read, channels:read and groups:read (docs/slack-app.md)"
_SCOPE_ERRORS = frozenset({"missing_scope", "not_allowed_token_type", "no_permission", "access_denied"})
# Slack's names for a conversation it does not describe: not worth showing as a channel name.
_PLACEHOLDER_NAMES = frozenset({"directmessage", "privategroup", ""})


@dataclass(frozen=True, slots=True)
class Conversation:
    """Where a command came from, as Slack's payload says: the sender and the conversation."""

    user_id: str
    channel_id: str = ""
    channel_name: str = ""

    @property
    def is_dm(self) -> bool:
        """A direct message (or the App Home, which has no channel): the person's own subscription."""
        return not self.channel_id or self.channel_id.startswith("D") or self.channel_name == "directmessage"

    @property
    def target(self) -> str:
        """The user id in a DM (digests reach it in the app's DM), the channel id in a channel: where this
        conversation's digests are posted, and so its key in the rate limiter."""
        return self.user_id if self.is_dm else self.channel_id

    @property
    def address(self) -> str:
        """``slack:<user id>`` in a DM, ``slack:<channel id>`` in a channel."""
        return f"slack:{self.target}"


@dataclass(frozen=True, slots=True)
class SlackUser:
    """What users.info says about the sender; the defaults when it could not be asked."""

    id: str
    name: str = ""
    locale: str | None = None
    workspace_admin: bool = False


@dataclass(frozen=True, slots=True)
class SlackChannel:
    """What conversations.info says about a channel. ``is_member`` is None when unknown."""

    creator: str = ""
    name: str = ""
    is_member: bool | None = None


def chat_context(
    conversation: Conversation, prefix: str, user: SlackUser, channel: SlackChannel | None
) -> ChatContext:
    """The grammar's view of the sender: address, who may change it, name, language and prefix.

    Raises ValueError for ids that are not Slack ids (the address does not validate).
    """
    if conversation.is_dm:
        return ChatContext(
            conversation.address,
            platform="slack",
            can_change=True,
            chat_name=user.name,
            language=user.locale,
            prefix=prefix,
        )
    channel = channel or SlackChannel()
    name = channel.name or conversation.channel_name
    creator = bool(channel.creator) and channel.creator == user.id
    return ChatContext(
        conversation.address,
        platform="slack",
        can_change=user.workspace_admin or creator,
        is_group=True,
        chat_name=f"#{name}" if name not in _PLACEHOLDER_NAMES else "",
        language=user.locale,
        prefix=prefix,
    )


class Workspace:
    """users.info and conversations.info, asked fresh for every command so a changed role counts at once.

    Humans type slash commands far below the methods' rate tiers (users.info: Tier 4, 100+ a minute;
    conversations.info: Tier 3, 50+ a minute), so nothing is cached.
    """

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def user(self, user_id: str) -> SlackUser:
        """users.info with the locale; a failure is logged and gives a user with no rights beyond a DM."""
        try:
            response = await self.client.users_info(user=user_id, include_locale=True)
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            _failed("users.info", exc)
            return SlackUser(user_id)
        data = response.get("user") or {}
        profile = data.get("profile") or {}
        name = profile.get("real_name") or data.get("real_name") or profile.get("display_name") or ""
        locale = data.get("locale")
        return SlackUser(
            user_id,
            name=str(name),
            locale=str(locale) if locale else None,
            workspace_admin=any(bool(data.get(flag)) for flag in ADMIN_FLAGS),
        )

    async def channel(self, channel_id: str) -> SlackChannel:
        """conversations.info: the channel's name, its creator and whether the bot is in it."""
        try:
            response = await self.client.conversations_info(channel=channel_id)
        except SlackApiError as exc:
            if why(exc) == "channel_not_found":  # a private channel the bot is not in
                return SlackChannel(is_member=False)
            _failed("conversations.info", exc)
            return SlackChannel()
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            _failed("conversations.info", exc)
            return SlackChannel()
        data = response.get("channel") or {}
        member = data.get("is_member")
        return SlackChannel(
            creator=str(data.get("creator") or ""),
            name=str(data.get("name") or ""),
            is_member=member if isinstance(member, bool) else None,
        )


def _failed(method: str, exc: Exception) -> None:
    """Log a failed lookup; a permission error says which scopes the app needs."""
    code = why(exc)
    hint = f"; {SCOPES_HINT}" if code in _SCOPE_ERRORS else ""
    log.warning("slack: %s failed (%s); in channels the sender counts as no admin%s", method, code, hint)


def why(exc: Exception) -> str:
    """Slack's error code, or the exception's class: short, and never a token."""
    if isinstance(exc, SlackApiError) and isinstance(exc.response.data, dict):
        return str(exc.response.data.get("error") or f"HTTP {exc.response.status_code}")
    return type(exc).__name__


__all__ = [
    "ADMIN_FLAGS",
    "Conversation",
    "SlackChannel",
    "SlackUser",
    "Workspace",
    "chat_context",
    "why",
]
