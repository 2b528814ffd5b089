"""Email formatting: the MIME message of one digest for one recipient, and its bytes on the wire.

Format: multipart/alternative, the plain-text digest and (when the channel has an HTML template) the HTML
one with its CSS inlined; ``List-Unsubscribe`` with one-click (RFC 8058), ``Auto-Submitted`` (RFC 3834) and
``Content-Language`` (RFC 3282). Limit: none in the protocol; PAPERTRAIL_DIGEST_MAX_ITEMS caps digests.
Sending it over SMTP is notifiers/email/notifier.py's.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from urllib.parse import quote, urlsplit

import css_inline

from core.channel import DeliveryError
from core.escaping import one_line
from core.languages import DEFAULT_LANGUAGE, LANGUAGE_TAGS
from core.values import Message

# Bodies are encoded with the usual 78-character lines and 7-bit transfer encodings (quoted-printable
# where the text is not ASCII), which every server accepts without the 8BITMIME extension.
_BODY_POLICY = policy.SMTP.clone(cte_type="7bit")
# Headers go on the wire with lines of up to RFC 5322's hard limit of 998 characters: the default 78
# makes the email package fold a long List-Unsubscribe URL into RFC 2047 encoded words, which mail
# clients do not decode in that header, so the unsubscribe button would silently break.
_WIRE_POLICY = policy.SMTP.clone(max_line_length=998)

# A URI inside List-Unsubscribe's angle brackets: RFC 3986 characters without the comma (RFC 2369 needs
# commas escaped) — no space, CR, LF, '<' or '>' that could end the header or the bracket.
_SAFE_URI = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+;=%]+")


def list_unsubscribe_headers(unsubscribe_url: str, mailto: str) -> dict[str, str]:
    """``List-Unsubscribe`` (RFC 2369) and, with an https link, ``List-Unsubscribe-Post`` (RFC 8058).

    ``unsubscribe_url`` is the signed link the renderer made for this recipient; it is listed when it is
    https (one-click needs https), and its last path segment, the token, goes into the subject of the
    mailto: variant so that whoever processes that mailbox can check it with
    :func:`core.people.tokens.verify`.
    ``mailto`` is the bare address (or ``mailto:`` URI) from ``PAPERTRAIL_UNSUBSCRIBE_MAILTO``. A value
    that could break out of the header or its angle brackets is left out.
    """
    url = unsubscribe_url.strip()
    usable = url.startswith(("https://", "http://")) and bool(_SAFE_URI.fullmatch(url))
    https = usable and url.startswith("https://")
    token = urlsplit(url).path.rpartition("/")[2] if usable else ""
    uris = [url] if https else []
    target = mailto.strip().removeprefix("mailto:")
    if target:
        subject = f"unsubscribe {token}".strip()
        uri = f"mailto:{target}?subject={quote(subject, safe='')}"
        if "@" in target and _SAFE_URI.fullmatch(uri):
            uris.append(uri)
    headers: dict[str, str] = {}
    if uris:
        headers["List-Unsubscribe"] = ", ".join(f"<{uri}>" for uri in uris)
    if https:
        # One-click: the mailbox provider POSTs "List-Unsubscribe=One-Click" to the https URI itself.
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return headers


def build_mail(
    address: str, message: Message, *, sender: str, msgid_domain: str, unsubscribe_mailto: str
) -> EmailMessage:
    """The MIME message of ``message`` for ``address``; raises DeliveryError (permanent) for an unusable
    address. ``sender`` is the From header, ``msgid_domain`` the Message-ID's domain, ``unsubscribe_mailto``
    PAPERTRAIL_UNSUBSCRIBE_MAILTO (see :func:`list_unsubscribe_headers`)."""
    mail = EmailMessage(policy=_BODY_POLICY)
    mail["From"] = sender
    mail["To"] = _recipient(address)
    mail["Subject"] = one_line(message.subject)
    mail["Date"] = format_datetime(datetime.now(UTC))
    mail["Message-ID"] = make_msgid(domain=msgid_domain)
    # RFC 3834: vacation responders and the like must not answer automatic mail.
    mail["Auto-Submitted"] = "auto-generated"
    for name, value in list_unsubscribe_headers(message.unsubscribe_url, unsubscribe_mailto).items():
        mail[name] = value
    mail.set_content(message.text)
    if message.html:
        # Mail clients drop <style> blocks: inline the CSS into style attributes.
        mail.add_alternative(css_inline.inline(message.html), subtype="html")
    # RFC 3282: the language the mail is worded in (screen readers, translation offers). Set last:
    # set_content and add_alternative move or drop the Content-* headers set before them.
    mail["Content-Language"] = LANGUAGE_TAGS.get(message.language, LANGUAGE_TAGS[DEFAULT_LANGUAGE])
    return mail


def wire_bytes(mail: EmailMessage, *, utf8: bool) -> bytes:
    """The bytes of ``mail`` for SMTP DATA; ``utf8`` for a session with SMTPUTF8 (non-ASCII headers)."""
    return mail.as_bytes(policy=_WIRE_POLICY.clone(utf8=True) if utf8 else _WIRE_POLICY)


def _recipient(address: str) -> Address:
    """The To address, validated: no display name, no second address, nothing that could end the header."""
    try:
        if any(not ch.isprintable() or ch.isspace() for ch in address):
            raise ValueError("contains spaces or control characters")
        # The parser accepts only ASCII; check the shape of an internationalised address (RFC 6531) on an
        # ASCII stand-in and build it from its parts.
        checked = Address(addr_spec="".join(ch if ch.isascii() else "x" for ch in address))
        if not checked.domain:
            raise ValueError("has no domain")
        if address.isascii():
            return checked
        local, _, domain = address.rpartition("@")
        if local.startswith('"'):
            raise ValueError("quoted non-ASCII local part")
        return Address(username=local, domain=domain)
    except (ValueError, IndexError) as exc:
        raise DeliveryError(
            f"{one_line(address)!r} is not a usable email address ({exc}); "
            "subscribe the corrected address instead",
            retryable=False,
        ) from exc
