"""The email notifier's SMTP sessions: opening one (connect, EHLO, STARTTLS, AUTH), and the table that
translates SMTP failures into DeliveryErrors saying whether trying again can help and which setting to check.

Everything here runs in the email notifier's worker thread (notifiers/email/notifier.py), which owns the
session.
"""

from __future__ import annotations

import re
import smtplib
import ssl
from collections.abc import Callable
from typing import Any

from core.channel import DeliveryError
from core.config_edges import SmtpSettings
from core.escaping import one_line


def open_session(factory: Callable[[], smtplib.SMTP], settings: SmtpSettings, where: str) -> smtplib.SMTP:
    """A new session with the server ``where`` (``host:port``): connected by ``factory``, greeted, with
    STARTTLS and login as the settings ask; every failure a DeliveryError naming the setting to check."""
    s = settings
    try:
        smtp = factory()
    except smtplib.SMTPConnectError as exc:
        raise DeliveryError(
            f"SMTP server {where} refused the connection: {exc.smtp_code} {_text(exc.smtp_error)}"
            "; will retry",
            retryable=True,
        ) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryError(
            f"cannot reach SMTP server {where} ({exc}); check PAPERTRAIL_SMTP_HOST and PAPERTRAIL_SMTP_PORT",
            retryable=True,
        ) from exc
    try:
        _greet(smtp, where)
        if s.starttls:
            _starttls(smtp, where)
        if s.user:
            _login(smtp, s, where)
    except BaseException:
        smtp.close()
        raise
    return smtp


def _greet(smtp: smtplib.SMTP, where: str) -> None:
    try:
        smtp.ehlo_or_helo_if_needed()
    except (smtplib.SMTPException, OSError) as exc:
        raise translate(exc, where, "") from exc


def _starttls(smtp: smtplib.SMTP, where: str) -> None:
    try:
        smtp.starttls(context=ssl.create_default_context())
    except smtplib.SMTPNotSupportedError as exc:
        raise DeliveryError(
            f"SMTP server {where} does not offer STARTTLS; "
            "set PAPERTRAIL_SMTP_STARTTLS=false or use a server that does",
            retryable=True,
        ) from exc
    except ssl.SSLError as exc:
        raise DeliveryError(
            f"TLS with SMTP server {where} failed ({exc.reason or exc}); check its certificate "
            "and PAPERTRAIL_SMTP_HOST (the name must match the certificate)",
            retryable=True,
        ) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise translate(exc, where, "") from exc


def _login(smtp: smtplib.SMTP, settings: SmtpSettings, where: str) -> None:
    user = settings.user or ""
    secret = settings.password
    password = secret.get_secret_value() if secret else ""
    try:
        smtp.login(user, password)
    except smtplib.SMTPAuthenticationError as exc:
        # The server's reply names the failure; scrub the password in case a server echoes it.
        detail = _text(exc.smtp_error).replace(password, "********") if password else _text(exc.smtp_error)
        raise DeliveryError(
            f"SMTP login to {where} as {user!r} failed: {exc.smtp_code} {detail}; "
            "check PAPERTRAIL_SMTP_USER and PAPERTRAIL_SMTP_PASSWORD",
            retryable=True,
            kind=_kind("login", exc.smtp_code, exc.smtp_error),
            operator=exc.smtp_code >= 500,
        ) from exc
    except smtplib.SMTPNotSupportedError as exc:
        raise DeliveryError(
            f"SMTP server {where} does not offer AUTH on this connection (many offer it only "
            "after STARTTLS: set PAPERTRAIL_SMTP_STARTTLS=true), or unset PAPERTRAIL_SMTP_USER",
            retryable=True,
        ) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise translate(exc, where, "") from exc


def _recipients_refused(exc: smtplib.SMTPRecipientsRefused, where: str, address: str) -> DeliveryError:
    code, reply = next(iter(exc.recipients.values()), (0, b""))
    advice = "will retry" if code < 500 else "check the address; `papertrail resume` re-activates it"
    return DeliveryError(
        f"SMTP server {where} refused recipient {address}: {code} {_text(reply)}; {advice}",
        retryable=code < 500,
        kind=_kind("rcpt", code, reply),
    )


def _sender_refused(exc: smtplib.SMTPSenderRefused, where: str, address: str) -> DeliveryError:
    # Our own From address: the operator's setting, not the subscriber's fault; never pause for it.
    return DeliveryError(
        f"SMTP server {where} refused the sender {exc.sender}: {exc.smtp_code} {_text(exc.smtp_error)}; "
        "check PAPERTRAIL_SMTP_FROM (and that PAPERTRAIL_SMTP_USER may send as it)",
        retryable=True,
        kind=_kind("sender", exc.smtp_code, exc.smtp_error),
        operator=exc.smtp_code >= 500,
    )


def _reply(exc: smtplib.SMTPResponseException, where: str, address: str) -> DeliveryError:
    code = exc.smtp_code
    what = "rejected the message to " + address if address else "answered"
    # Without an address the reply came before any recipient (greeting, EHLO, STARTTLS): the server
    # refuses this sender's session, whoever the digest was for.
    return DeliveryError(
        f"SMTP server {where} {what}: {code} {_text(exc.smtp_error)}"
        + ("; will retry" if code < 500 else ""),
        retryable=code < 500,
        kind=_kind("data" if address else "session", code, exc.smtp_error),
        operator=not address and code >= 500,
    )


# How an SMTP failure is translated, given the server (``host:port``) and the recipient: the first entry
# whose type the exception is an instance of (subclasses first: both refusals are SMTPResponseExceptions
# or carry replies of their own); anything else is a retryable failure.
# Each mapper takes the exception (of its entry's type, hence Any), the server and the recipient.
ERRORS: tuple[tuple[type[Exception], Callable[[Any, str, str], DeliveryError]], ...] = (
    (smtplib.SMTPRecipientsRefused, _recipients_refused),
    (smtplib.SMTPSenderRefused, _sender_refused),
    (smtplib.SMTPResponseException, _reply),
)


def translate(exc: Exception, where: str, address: str) -> DeliveryError:
    """One DeliveryError for an SMTP failure with the server ``where`` (:data:`ERRORS`): 4xx may pass, 5xx
    about the recipient will not. ``address`` is empty for a reply before any recipient (greeting, EHLO,
    STARTTLS, AUTH)."""
    mapper = next((mapper for kind, mapper in ERRORS if isinstance(exc, kind)), None)
    if mapper is None:
        return DeliveryError(f"SMTP with {where} failed ({exc}); will retry", retryable=True)
    return mapper(exc, where, address)


# An enhanced status code (RFC 3463) at the start of a reply: class.subject.detail, e.g. 5.7.1.
_ENHANCED = re.compile(r"^\s*([245]\.\d{1,3}\.\d{1,3})\b")


def _kind(stage: str, code: int, reply: bytes | str) -> str:
    """How the server said no, without the recipient: the SMTP stage, reply code and enhanced status
    code (``rcpt 550 5.7.1``). Digests refused the same way group into one alarm (core.delivery.alarm)."""
    enhanced = _ENHANCED.match(_text(reply))
    return f"{stage} {code} {enhanced[1]}" if enhanced else f"{stage} {code}"


def _text(reply: bytes | str) -> str:
    """A server reply as one printable line."""
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
    return one_line(text)
