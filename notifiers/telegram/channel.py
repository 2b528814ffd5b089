"""The Telegram channel's rules: ``telegram:<chat id>`` addresses, the token it needs, its notifier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.channel import Notifier, NotifierParts
from core.people.masking import mask_text

if TYPE_CHECKING:
    from core.config import Settings


class TelegramChannel:
    """Telegram chats: a user, group or channel, by its numeric id."""

    name = "telegram"
    example = "telegram:12345"
    delivers = True
    vote_links = False  # chats vote with buttons that call back to the bot
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """A chat id: a number, negative for groups."""
        if not target.lstrip("-").isdigit():
            raise ValueError(f"telegram chat id {target!r} must be a number, e.g. telegram:12345")
        return target

    def mask(self, target: str) -> str:
        """A chat id carries no credential."""
        return mask_text(target)

    def missing_setting(self, settings: Settings) -> str | None:
        """The bot token from @BotFather."""
        return None if settings.telegram_token else "set PAPERTRAIL_TELEGRAM_TOKEN"

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The Telegram notifier (python-telegram-bot is imported only here, when one is built)."""
        from notifiers.telegram.notifier import TelegramNotifier

        return TelegramNotifier(settings.telegram(), slots=parts.slots)


TELEGRAM = TelegramChannel()
