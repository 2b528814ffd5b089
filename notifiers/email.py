"""Email notifier: multipart/alternative (plain text + HTML) over SMTP, with optional STARTTLS and login.

smtplib is synchronous, so each send runs in a worker thread. Every smtplib and socket failure is
translated here into one DeliveryError that says whether trying again can help.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import ClassVar

import css_inline

from core.config import Settings
from core.delivery import DeliveryError
from core.text_safety import one_line
from core.values import Message, SendResult

# Format: multipart/alternative. Limit: none in the protocol; PAPERTRAIL_DIGEST_MAX_ITEMS caps digests.


class EmailNotifier:
    """Sends digests through the SMTP server named by ``PAPERTRAIL_SMTP_*``."""

    channel: ClassVar[str] = "email"
    max_length: ClassVar[int | None] = None

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def build(self, address: str, message: Message) -> EmailMessage:
        """The MIME message for one recipient."""
        mail = EmailMessage()
        mail["From"] = self.settings.smtp_from
        mail["To"] = address
        mail["Subject"] = one_line(message.subject)
        mail["Date"] = formatdate(localtime=False)
        mail["Message-ID"] = make_msgid(domain=self.settings.smtp_from.rpartition("@")[2].strip("> ") or None)
        mail["Auto-Submitted"] = "auto-generated"
        mail.set_content(message.text)
        if message.html:
            # Mail clients drop <style> blocks: inline the CSS into style attributes.
            mail.add_alternative(css_inline.inline(message.html), subtype="html")
        return mail

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver one digest; raises DeliveryError (retryable unless the server rejects the recipient)."""
        if not self.settings.smtp_host:
            raise DeliveryError(
                "email is not configured: set PAPERTRAIL_SMTP_HOST (and _PORT, _FROM); digests stay pending",
                retryable=True,
            )
        mail = self.build(address, message)
        await asyncio.to_thread(self._deliver, address, mail)
        return SendResult(platform_id=str(mail["Message-ID"]))

    async def aclose(self) -> None:
        """Nothing held between sends yet."""

    def _deliver(self, address: str, mail: EmailMessage) -> None:
        s = self.settings
        where = f"{s.smtp_host}:{s.smtp_port}"
        try:
            with smtplib.SMTP(s.smtp_host or "", s.smtp_port, timeout=s.smtp_timeout) as smtp:
                if s.smtp_starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if s.smtp_user:
                    password = s.smtp_password.get_secret_value() if s.smtp_password else ""
                    smtp.login(s.smtp_user, password)
                smtp.send_message(mail, to_addrs=[address])
        except smtplib.SMTPRecipientsRefused as exc:
            code, reply = next(iter(exc.recipients.values()), (0, b""))
            detail = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
            raise DeliveryError(
                f"SMTP server {where} refused recipient {address}: {code} {detail}",
                retryable=code < 500,
            ) from exc
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(
                f"SMTP login to {where} failed ({exc.smtp_code}); check PAPERTRAIL_SMTP_USER and _PASSWORD",
                retryable=True,
            ) from exc
        except smtplib.SMTPResponseException as exc:
            detail = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else ""
            raise DeliveryError(
                f"SMTP server {where} answered {exc.smtp_code} {detail}", retryable=exc.smtp_code < 500
            ) from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(
                f"cannot reach SMTP server {where}: {exc!r}; check PAPERTRAIL_SMTP_HOST/_PORT", retryable=True
            ) from exc
