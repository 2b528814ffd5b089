"""Sending the mails of a self-service sign-up: the confirmation link, or the manage link of a known address.

Shared by ``papertrail subscribe`` and the web form; the rules live in :mod:`core.people.signup`. The mails
are
worded in the subscriber's language: the one stored with the subscriber (a sign-up stores the page's
language on a new address), else the ``language`` the caller passes (the page's), else the operator's
default language (``PAPERTRAIL_DEFAULT_LANGUAGE``; ``papertrail subscribe`` without ``--language``). A known
address's stored language wins over the page's: the mail goes to its owner, not to whoever typed it.

The confirmation mail goes to an address that has not confirmed, so it carries no text anyone
submitted: not the follows, not a name, not the address (its local part is free text). It says in fixed
words how many follows and newsletters the sign-up has, the schedule and timezone (both checked against
fixed forms), and the link; the follows themselves are on the page the link opens, escaped, with the
button that confirms them.
"""

from __future__ import annotations

from urllib.parse import quote

from core.channel import DeliveryError, split_address
from core.languages import reader_language, translator
from core.people import tokens
from core.people.signup import SignupOutcome, SignupState, confirm_token, mail_not_sent
from papertrail.service.context import AppContext


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
    language = reader_language(subscriber.language, language, default=ctx.settings.default_language)
    t = translator(language)
    _, target = split_address(subscriber.address)
    base = ctx.settings.public_url.rstrip("/")
    if outcome.state == SignupState.CONFIRM:
        token = confirm_token(key, subscriber)
        message = ctx.renderer.render_mail(
            "confirm",
            t.gettext("Confirm your PaperTrail subscription"),
            language=language,
            confirm_url=f"{base}/confirm/{quote(token, safe='')}",
            follows=outcome.follows,
            newsletters=outcome.newsletters,
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
    try:
        await ctx.notifiers["email"].send(target, message)
    except DeliveryError:
        # Not sent: the next sign-up of this address may mail it at once instead of waiting out the pause.
        mail_not_sent(ctx.db, outcome)
        raise
    return True


__all__ = ["SignupUnavailable", "check_available", "mail_outcome"]
