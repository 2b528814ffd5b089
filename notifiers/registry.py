"""The notifier registry: which adapter serves which address scheme.

A channel is registered only when it is configured (a token, an SMTP host, a signing key, the optional
library): a subscriber on an unconfigured channel keeps its matches pending until a process that can
deliver them runs, instead of burning through retries and dead-lettering.
"""

from __future__ import annotations

import importlib.util
from typing import TextIO

from core.channel import Notifier
from core.config import Settings
from core.delivery.rate_limit import RateLimit
from notifiers.apprise.notifier import AppriseNotifier
from notifiers.console.notifier import ConsoleNotifier
from notifiers.email.notifier import EmailNotifier
from notifiers.slack.notifier import SlackNotifier
from notifiers.slack.webhook import SlackWebhookNotifier
from notifiers.telegram.notifier import TelegramNotifier
from notifiers.webhook.notifier import WebhookNotifier


def build_notifiers(
    settings: Settings, *, console: TextIO | None = None, slots: RateLimit | None = None
) -> dict[str, Notifier]:
    """Every configured notifier, keyed by channel, each built from its own slice of ``settings``.

    ``slots``: the send slots the rate-limited adapters (Telegram, Slack) share, built by the shell from
    the database (``core.delivery.rate_limit.rate_limit_for``); None gives each adapter its own, in memory.
    """
    notifiers: list[Notifier] = [
        ConsoleNotifier(console),
        SlackWebhookNotifier(settings.slack_webhook(), slots=slots),
    ]
    if settings.smtp_host:
        notifiers.append(EmailNotifier(settings.smtp()))
    if settings.telegram_token:
        notifiers.append(TelegramNotifier(settings.telegram(), slots=slots))
    if settings.slack_bot_token:
        notifiers.append(SlackNotifier(settings.slack(), slots=slots))
    if settings.secret_key:
        notifiers.append(WebhookNotifier(settings.webhook()))
    if importlib.util.find_spec("apprise") is not None:
        notifiers.append(AppriseNotifier(settings.apprise()))
    return {notifier.channel: notifier for notifier in notifiers}
