"""The webhook channel's rules: ``webhook:<URL>``, the key it signs with, its notifier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.channel import Notifier, NotifierParts, http_target
from core.people.masking import mask_url

if TYPE_CHECKING:
    from core.config import Settings


class WebhookChannel:
    """Signed JSON posted to a URL the subscriber chose."""

    name = "webhook"
    example = "webhook:https://example.org/hook"
    delivers = True
    vote_links = True  # the signed vote links are data for the receiver's own buttons
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """An http(s) URL."""
        return http_target(self.name, target)

    def mask(self, target: str) -> str:
        """The URL with its password, secret path segments and every query value masked."""
        return mask_url(target.strip())

    def missing_setting(self, settings: Settings) -> str | None:
        """The secret key webhook bodies are signed with."""
        return None if settings.secret_key else "set PAPERTRAIL_SECRET_KEY (webhook bodies are signed)"

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The webhook notifier."""
        from notifiers.webhook.notifier import WebhookNotifier

        return WebhookNotifier(settings.webhook())


WEBHOOK = WebhookChannel()
