"""Email notifier: multipart/alternative (plain text + HTML) over SMTP, with optional STARTTLS and login.

One SMTP connection serves many recipients: opening a session (TCP, greeting, EHLO, STARTTLS, AUTH) costs
several round trips, and servers limit how often a client may connect. smtplib is synchronous and an
``smtplib.SMTP`` object is not thread-safe, so every smtplib call runs in one dedicated worker thread:
sends queue up in front of it and use the session strictly one after another (the single thread is the
lock). A dedicated thread rather than ``asyncio.to_thread`` also keeps twenty queued digests from
occupying the event loop's shared default pool, which is only a handful of threads on a small machine.

Every smtplib and socket failure is translated here into one DeliveryError that says whether trying
again can help and which setting to check (notifiers/email/session.py, which also opens the session).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import smtplib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from email.utils import parseaddr
from functools import partial
from typing import ClassVar, TypeVar

from core.channel import DeliveryError, accepted_recorder
from core.config_edges import SmtpSettings
from core.escaping import one_line
from core.values import Message, SendResult
from notifiers.email.message import build_mail, wire_bytes
from notifiers.email.session import open_session, translate

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
