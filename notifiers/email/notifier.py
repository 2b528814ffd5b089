"""Email notifier: multipart/alternative (plain text + HTML) over SMTP, with optional STARTTLS and login.

One SMTP connection serves many recipients: opening a session (TCP, greeting, EHLO, STARTTLS, AUTH) costs
several round trips, and servers limit how often a client may connect. smtplib is synchronous and an
``smtplib.SMTP`` object is not thread-safe, so every smtplib call runs in one dedicated worker thread:
sends queue up in front of it and use the session strictly one after another (the single thread is the
lock). A dedicated thread rather than ``asyncio.to_thread`` also keeps twenty queued digests from
occupying the event loop's shared default pool, which is only a handful of threads on a small machine.

Every smtplib and socket failure is translated into one DeliveryError that says whether trying again can
help and which setting to check. This module holds, in order: opening an SMTP session (connect, EHLO,
STARTTLS, AUTH) and the table that translates SMTP failures, both run only in the notifier's worker
thread, which owns the session; then the notifier.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import smtplib
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from email.utils import parseaddr
from functools import partial
from typing import Any, ClassVar, TypeVar

from core.channel import DeliveryError, accepted_recorder
from core.config_edges import SmtpSettings
from core.escaping import one_line
from core.values import Message, SendResult
from notifiers.email.message import build_mail, wire_bytes

# -------------------------------------------------------------------------------------------------------
# The SMTP session: opening one, and translating SMTP failures into DeliveryErrors.


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


# -------------------------------------------------------------------------------------------------------
# The notifier.

# Format: multipart/alternative, built by notifiers/email/message.py. Limit: none in the protocol (so
# ``max_length`` is None); PAPERTRAIL_DIGEST_MAX_ITEMS caps digests.

log = logging.getLogger(__name__)

# Close the connection after this many seconds without a send. The digests of one delivery pass follow
# each other within a second, so a few seconds keep one session for a whole pass; between passes
# (PAPERTRAIL_DIGEST_CHECK_SECONDS apart, a minute by default) an idle session would only hold one of the
# server's limited connection slots until the server drops it on its own timeout, mid-conversation.
IDLE_CLOSE_SECONDS = 5.0
# A session used less than this long ago is trusted without a NOOP round trip first.
NOOP_AFTER_IDLE_SECONDS = 1.0

_T = TypeVar("_T")


class EmailNotifier:
    """Sends digests through the SMTP server named by ``PAPERTRAIL_SMTP_*``, one session for many sends.

    ``smtp_factory`` returns a connected ``smtplib.SMTP`` (an ``SMTP_SSL`` for implicit TLS, or a client
    with a fixed EHLO name in tests); by default ``smtplib.SMTP(host, port, timeout=...)``. ``idle_close``
    is how long an unused session stays open.
    """

    channel: ClassVar[str] = "email"
    max_length: ClassVar[int | None] = None

    def __init__(
        self,
        settings: SmtpSettings,
        *,
        smtp_factory: Callable[[], smtplib.SMTP] | None = None,
        idle_close: float = IDLE_CLOSE_SECONDS,
    ) -> None:
        self.settings = settings
        self.idle_close = idle_close
        self._factory = smtp_factory or self._default_smtp
        self._where = f"{settings.host}:{settings.port}"
        self._from_header = one_line(settings.sender)
        self._from_addr = parseaddr(self._from_header)[1]
        self._msgid_domain = self._from_addr.rpartition("@")[2] or "papertrail.invalid"
        # Everything below is touched only in the worker thread (the idle timer hands its work over).
        self._executor: ThreadPoolExecutor | None = None
        self._smtp: smtplib.SMTP | None = None
        self._sends = 0
        self._last_used = 0.0
        self._idle_timer: threading.Timer | None = None

    def build(self, address: str, message: Message) -> EmailMessage:
        """The MIME message for one recipient (notifiers/email/message.py); raises DeliveryError
        (permanent) for an unusable address."""
        return build_mail(
            address,
            message,
            sender=self._from_header,
            msgid_domain=self._msgid_domain,
            unsubscribe_mailto=self.settings.unsubscribe_mailto,
        )

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver one digest; raises DeliveryError (retryable unless the server rejects the recipient)."""
        if message.skip_parts >= 1:
            # An email is one part: an earlier attempt already delivered it.
            return SendResult(platform_id=None, parts=1)
        if not self.settings.host:
            raise DeliveryError(
                "email is not configured: set PAPERTRAIL_SMTP_HOST (and _PORT, _FROM); digests stay pending",
                retryable=True,
            )
        mail = self.build(address, message)
        result = SendResult(platform_id=str(mail["Message-ID"]), parts=1)
        record = accepted_recorder()
        await self._in_worker(self._deliver, address, mail, partial(record, result) if record else None)
        return result

    async def aclose(self) -> None:
        """Say QUIT to the server and stop the worker thread; a later send starts afresh."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        await asyncio.get_running_loop().run_in_executor(executor, self._close)
        executor.shutdown(wait=False)

    async def _in_worker(self, func: Callable[..., _T], *args: object) -> _T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="papertrail-smtp")
        return await asyncio.get_running_loop().run_in_executor(self._executor, func, *args)

    # --- everything below runs in the worker thread ---

    def _default_smtp(self) -> smtplib.SMTP:
        s = self.settings
        return smtplib.SMTP(s.host or "", s.port, timeout=s.timeout)

    def _deliver(self, address: str, mail: EmailMessage, accepted: Callable[[], None] | None = None) -> None:
        """Send one mail in the session; ``accepted`` runs in this thread once the server took it.

        Recording the send here, before the thread takes the next queued digest, is what keeps a crash
        from repeating more than this one mail: the event loop that awaits the send may be busy for seconds
        (a feed being parsed by ``papertrail run``) while twenty digests wait in front of this thread.
        """
        self._send_mail(address, mail)
        if accepted is not None:
            accepted()

    def _send_mail(self, address: str, mail: EmailMessage) -> None:
        smtp = self._session()
        try:
            options = _mail_options(smtp, address)
            data = wire_bytes(mail, utf8=bool(options))
            smtp.sendmail(self._from_addr, [address], data, options)
        except smtplib.SMTPServerDisconnected as exc:
            self._drop()
            raise DeliveryError(
                f"SMTP server {self._where} closed the connection during the send; will retry",
                retryable=True,
            ) from exc
        except smtplib.SMTPException as exc:
            # smtplib has reset the transaction (RSET) or, after a 421, closed the connection itself.
            if smtp.sock is None:
                self._smtp = None
            raise translate(exc, self._where, address) from exc
        except OSError as exc:
            self._drop()
            raise DeliveryError(
                f"the connection to SMTP server {self._where} failed during the send ({exc}); will retry",
                retryable=True,
            ) from exc
        finally:
            # Whatever happened, an open session must not outlive the idle period.
            self._last_used = time.monotonic()
            self._sends += 1
            self._arm_idle_timer()

    def _session(self) -> smtplib.SMTP:
        """The open session, checked with NOOP when it sat idle a while, else a new one.

        Within a burst (the digests of one pass) the NOOP round trip is skipped: the server just answered
        the previous mail, and a session it drops mid-burst fails that one send as retryable.
        """
        if self._smtp is not None and time.monotonic() - self._last_used < NOOP_AFTER_IDLE_SECONDS:
            return self._smtp
        if self._smtp is not None:
            try:
                code, _ = self._smtp.noop()
            except (smtplib.SMTPException, OSError):
                code = 0
            if code == 250:
                return self._smtp
            log.info(
                "SMTP server %s closed the session (NOOP: %s); reconnecting", self._where, code or "none"
            )
            self._drop()
        self._smtp = open_session(self._factory, self.settings, self._where)
        log.debug("opened SMTP session with %s", self._where)
        return self._smtp

    def _arm_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._idle_timer = threading.Timer(self.idle_close, self._on_idle, args=(self._sends,))
        self._idle_timer.daemon = True
        self._idle_timer.start()

    def _on_idle(self, sends: int) -> None:
        # Runs in the timer's thread: hand the closing to the worker thread, which owns the session.
        executor = self._executor
        if executor is None:
            return
        # RuntimeError: aclose() shut the worker down meanwhile, and closed the session itself.
        with contextlib.suppress(RuntimeError):
            executor.submit(self._close_if_idle, sends)

    def _close_if_idle(self, sends: int) -> None:
        if sends == self._sends:  # no send since the timer was armed
            log.debug("closing idle SMTP session with %s", self._where)
            self._close()

    def _close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        smtp, self._smtp = self._smtp, None
        if smtp is None:
            return
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()

    def _drop(self) -> None:
        """Forget a session the server has closed, without talking to it."""
        smtp, self._smtp = self._smtp, None
        if smtp is not None:
            smtp.close()


def _mail_options(smtp: smtplib.SMTP, address: str) -> list[str]:
    """SMTPUTF8 (RFC 6531) for a recipient whose address is not ASCII, when the server offers it."""
    if address.isascii():
        return []
    if not smtp.has_extn("smtputf8"):
        raise DeliveryError(
            f"the SMTP server does not offer SMTPUTF8, which the address {address} needs",
            retryable=False,
        )
    return ["SMTPUTF8", "BODY=8BITMIME"]
