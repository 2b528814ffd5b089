"""Which delivery channels this process lacks the settings (or the package) for.

Apart from :mod:`notifiers.registry`, which imports every adapter's client library: ``papertrail status``
reports the unconfigured channels without loading aiohttp, Slack's or Telegram's clients.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.config import Settings


def unconfigured_channels(settings: Settings) -> dict[str, str]:
    """Channels this process cannot deliver to, with the setting that would enable each."""
    missing = {
        "email": (settings.smtp_host, "set PAPERTRAIL_SMTP_HOST"),
        "telegram": (settings.telegram_token, "set PAPERTRAIL_TELEGRAM_TOKEN"),
        "slack": (settings.slack_bot_token, "set PAPERTRAIL_SLACK_BOT_TOKEN"),
        "webhook": (settings.secret_key, "set PAPERTRAIL_SECRET_KEY (webhook bodies are signed)"),
    }
    found = {channel: hint for channel, (value, hint) in missing.items() if not value}
    if importlib.util.find_spec("apprise") is None:
        found["apprise"] = "pip install 'papertrail[apprise]'"
    return found
