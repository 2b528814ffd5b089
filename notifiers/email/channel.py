"""The email channel's rules: ``email:<address>``, the SMTP server it needs, its notifier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.channel import Notifier, NotifierParts
from core.languages import N_, Phrase, Refusal
from core.people.masking import mask_text

if TYPE_CHECKING:
    from core.config import Settings


class EmailChannel:
    """Mail to one address over SMTP."""

    name = "email"
    example = "email:ada@example.org"
    delivers = True
    vote_links = True  # mail carries signed vote links per item
    confirms_by_mail = True

    def normalise(self, target: str) -> str:
        """The address with its domain lower-cased; its local part is kept as typed, since RFC 5321 lets a
        server tell ``Ada`` from ``ada`` (docs/delivery.md, "Email addresses")."""
        local, at, domain = target.rpartition("@")
        if not at or not local or "." not in domain or any(c.isspace() for c in target):
            raise Refusal(
                Phrase(N_("'{address}' is not an email address"), address=target),
                Phrase(N_("write it as email:ada@example.org")),
            )
        return f"{local}@{domain.lower()}"

    def mask(self, target: str) -> str:
        """An email address is how an operator finds the subscriber: kept."""
        return mask_text(target)

    def missing_setting(self, settings: Settings) -> str | None:
        """The SMTP server to send through."""
        return None if settings.smtp_host else "set PAPERTRAIL_SMTP_HOST"

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The SMTP notifier."""
        from notifiers.email.notifier import EmailNotifier

        return EmailNotifier(settings.smtp())


EMAIL = EmailChannel()
