"""The channels this PaperTrail delivers to: the one list, registered into core when a process starts.

Core names no channel; it asks the registered one of an address for its rules (core.channel.Channels).
Adding a channel is one package under notifiers/ and one line here.
"""

from __future__ import annotations

from core.channel import Channels, install_channels
from notifiers.apprise.channel import APPRISE
from notifiers.console.channel import CONSOLE
from notifiers.email.channel import EMAIL
from notifiers.slack.channel import SLACK, SLACK_WEBHOOK
from notifiers.telegram.channel import TELEGRAM
from notifiers.webhook.channel import WEBHOOK

CHANNELS = Channels(
    (CONSOLE, EMAIL, TELEGRAM, SLACK, SLACK_WEBHOOK, WEBHOOK, APPRISE),
    # the example addresses a malformed address's hint shows, in this order
    examples=("email", "telegram", "slack", "console"),
)


def install() -> Channels:
    """Register :data:`CHANNELS` into core; idempotent."""
    install_channels(CHANNELS)
    return CHANNELS
