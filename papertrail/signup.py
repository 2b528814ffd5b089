"""Sending the mails of a self-service sign-up: the confirmation link, or the manage link of a known address.

Shared by ``papertrail subscribe`` and the web form; the rules live in :mod:`core.signup`. The mails are
worded in the subscriber's language: the one stored with the subscriber (a sign-up stores the page's
language on a new address), else the ``language`` the caller passes (the page's), else English. A known
address's stored language wins over the page's: the mail goes to its owner, not to whoever typed it.
"""

from __future__ import annotations

from urllib.parse import quote

from core import tokens
from core.delivery import DeliveryError, split_address
from core.i18n import normalize_language, translator
from core.signup import SignupOutcome, SignupState
from papertrail.context import AppContext


class SignupUnavailable(RuntimeError):
    """Sign-up mails cannot be sent with this configuration (no SMTP server, no secret key)."""


def check_available(ctx: AppContext) -> str:
    """The signing key, or SignupUnavailable saying which setting is missing."""
    key = ctx.settings.secret_key.get_secret_value() if ctx.settings.secret_key else ""
    if not key:
        raise SignupUnavailable("sign-up needs PAPERTRAIL_SECRET_KEY (it signs the confirmation links)")
    if "email" not in ctx.notifiers:
        raise SignupUnavailable("sign-up needs PAPERTRAIL_SMTP_HOST (confirmation links go out by mail)")
    return key


async def mail_outcome(ctx: AppContext, outcome: SignupOutcome, *, language: str | None = None) -> bool:
    """Send the mail the outcome calls for; True when one was sent. Raises DeliveryError from the adapter.

    ``language`` is the sign-up page's (see the module docstring for which language the mail is in).
    """
    if outcome.state == SignupState.THROTTLED:
        return False
    key = check_available(ctx)
    subscriber = outcome.subscriber
    language = normalize_language(subscriber.language) or normalize_language(language)
    t = translator(language)
    _, target = split_address(subscriber.address)
    base = ctx.settings.public_url.rstrip("/")
    if outcome.state == SignupState.CONFIRM:
        token = tokens.sign(key, tokens.CONFIRM, subscriber.address)
        assert subscriber.id is not None
        follows = [f.query for f in ctx.store.follows_of(subscriber.id)]
        # The confirmation mail lists the newsletters joined with the follows (the template lists both).
        follows += [
            t.gettext("the newsletter {title} ({name})", title=n.title, name=n.name)
            for n in ctx.store.newsletters_of(subscriber.id)
        ]
        message = ctx.renderer.render_mail(
            "confirm",
            t.gettext("Confirm your PaperTrail subscription"),
            language=language,
            address=target,
            confirm_url=f"{base}/confirm/{quote(token, safe='')}",
            follows=follows,
            schedule=subscriber.schedule,
            timezone=subscriber.timezone,
        )
    else:
        token = tokens.sign(key, tokens.MANAGE, subscriber.address)
        message = ctx.renderer.render_mail(
            "signup-known",
            t.gettext("Your PaperTrail subscription"),
            language=language,
            address=target,
            manage_url=f"{base}/manage/{quote(token, safe='')}",
        )
    await ctx.notifiers["email"].send(target, message)
    return True


__all__ = ["DeliveryError", "SignupUnavailable", "check_available", "mail_outcome"]
