"""The Slack channels' rules: ``slack:<conversation id>`` through the bot, ``slack-webhook:<URL>`` through
an incoming webhook; their settings and notifiers."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from core.channel import Notifier, NotifierParts, http_target
from core.people.masking import mask_text, mask_url

if TYPE_CHECKING:
    from core.config import Settings

# Slack conversation ids: C (channel), G (private channel or group DM), D (DM), U/W (a user: DM opened).
_SLACK_ID = re.compile(r"^[CGDUW][A-Z0-9]{2,}$")


class SlackChannel:
    """A Slack conversation the bot posts to."""

    name = "slack"
    example = "slack:C0123"
    delivers = True
    vote_links = False  # chats vote with buttons that call back to the bot
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """A conversation id as Slack shows it in the channel's details."""
        if not _SLACK_ID.match(target):
            raise ValueError(
                f"slack conversation id {target!r} should look like C0123ABC (channel) or U0123ABC (user); "
                "copy it from the channel's details in Slack"
            )
        return target

    def mask(self, target: str) -> str:
        """A conversation id carries no credential."""
        return mask_text(target)

    def missing_setting(self, settings: Settings) -> str | None:
        """The bot token of the Slack app."""
        return None if settings.slack_bot_token else "set PAPERTRAIL_SLACK_BOT_TOKEN"

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The Slack bot's notifier (slack_sdk is imported only here, when one is built)."""
        from notifiers.slack.notifier import SlackNotifier

        return SlackNotifier(settings.slack(), slots=parts.slots)


class SlackWebhookChannel:
    """A Slack incoming webhook: the URL is the address, and its path the secret."""

    name = "slack-webhook"
    example = "slack-webhook:https://hooks.slack.com/services/…"
    delivers = True
    vote_links = False
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """An http(s) URL."""
        return http_target(self.name, target)

    def mask(self, target: str) -> str:
        """The URL with its secret path segments and every query value masked."""
        return mask_url(target.strip())

    def missing_setting(self, settings: Settings) -> str | None:
        """Nothing: the address carries its own credential."""
        return None

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The incoming-webhook notifier."""
        from notifiers.slack.webhook import SlackWebhookNotifier

        return SlackWebhookNotifier(settings.slack_webhook(), slots=parts.slots)


SLACK = SlackChannel()
SLACK_WEBHOOK = SlackWebhookChannel()
