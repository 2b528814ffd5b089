"""Stateless signed tokens for links in digests (unsubscribe, manage, votes), confirmation mails and private
feeds.

A token is ``base64url(subject) "." base64url(HMAC-SHA256(key, purpose NUL subject))``, base64url without
padding. Each token has exactly one spelling: :func:`verify` refuses any text that does not re-encode to
itself (padding, junk characters, non-zero spare bits), so a token cannot be varied and still verify.
Nothing is stored:
the server recomputes the MAC. The purpose is inside the MAC, so an unsubscribe token cannot be replayed
as a manage token. Unsubscribe links carry no expiry on purpose: a link in a year-old mail must still work.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

UNSUBSCRIBE = "unsubscribe"
MANAGE = "manage"
# Confirming a pending sign-up: the subject is ``ADDRESS NUL NONCE`` (see :func:`confirm_subject`).
CONFIRM = "confirm"
# Why a confirmation link of older releases (subject: the address alone) confirms nothing: it is genuine,
# but bound to no particular sign-up.
OUTDATED = "this confirmation link is from an older sign-up; sign up again for a new one"
# Leaving one newsletter: the subject is ``ADDRESS NUL NAME`` (see :func:`leave_subject`).
LEAVE = "leave"
# Why a link opens nothing: its MAC does not verify, or its subject does not split into its two parts.
_NOT_VALID = "this link is not valid (altered, or made for something else)"
# Reading one subscriber's private Atom feed: the subject is ``ADDRESS NUL NONCE`` (see :func:`feed_subject`);
# a new nonce (``Subscriber.feed_nonce``) revokes every link made with the old one.
FEED = "feed"
# A 👍 or 👎 on one version of a paper, from a digest: the subject is
# ``ADDRESS NUL ID "v" NUMBER NUL VALUE`` (see :func:`vote_subject`), VALUE ``1`` (like) or ``-1`` (dislike).
VOTE = "vote"
_VOTE_VERSION = re.compile(r"(?P<id>[^\0\s]+)v(?P<number>[1-9][0-9]{0,3})")
_VOTE_VALUES = {"1": 1, "-1": -1}


class InvalidToken(ValueError):
    """The token was altered, forged, truncated, or made for another purpose or key."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# The base64url alphabet, nothing else: no padding, no whitespace, no standard-alphabet '+' or '/'.
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


def _unb64(text: str) -> bytes:
    """Decode unpadded base64url strictly; ValueError unless ``text`` is the one encoding of its bytes.

    The library decoder is lenient (it drops characters outside the alphabet, accepts extra padding and
    ignores the spare low bits of the last character), so several texts decode to the same bytes. The
    re-encoding check leaves exactly one.
    """
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64(data) != text:
        raise ValueError("not the canonical base64url encoding")
    return data


def _mac(key: str, purpose: str, subject: str) -> bytes:
    message = purpose.encode() + b"\0" + subject.encode()
    return hmac.new(key.encode(), message, hashlib.sha256).digest()


def sign(key: str, purpose: str, subject: str) -> str:
    """A URL-safe token binding ``subject`` (a subscriber address) to ``purpose``."""
    if not key:
        raise ValueError("signing needs PAPERTRAIL_SECRET_KEY; set it to a long random string")
    return f"{_b64(subject.encode())}.{_b64(_mac(key, purpose, subject))}"


def verify(key: str, purpose: str, token: str) -> str:
    """Return the subject of a valid token, or raise :class:`InvalidToken`."""
    # No strip(): a token is exactly what sign() returned; variants of it are refused, not repaired.
    body, dot, mac = token.partition(".")
    if not (key and dot and body and mac):
        raise InvalidToken("this link is incomplete; open the whole link from the mail")
    try:
        subject = _unb64(body).decode()
        given = _unb64(mac)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidToken("this link is damaged; open the whole link from the mail") from exc
    if not hmac.compare_digest(given, _mac(key, purpose, subject)):
        raise InvalidToken(_NOT_VALID)
    return subject


def leave_subject(address: str, newsletter: str) -> str:
    """The subject of a leave token: the member's address and the newsletter's name, NUL-separated.

    NUL appears in neither an address nor a newsletter name, so the pair cannot be read two ways.
    """
    return f"{address}\0{newsletter}"


def split_leave(subject: str) -> tuple[str, str]:
    """The (address, newsletter name) of a verified leave token's subject; InvalidToken if malformed."""
    return _split_pair(subject, _NOT_VALID)


def confirm_subject(address: str, nonce: str) -> str:
    """The subject of a confirmation token: the address and its pending sign-up's nonce, NUL-separated.

    The nonce changes whenever the pending sign-up is replaced, so a link confirms only the sign-up it
    was mailed for (core.people.signup).
    """
    return f"{address}\0{nonce}"


def split_confirm(subject: str) -> tuple[str, str]:
    """The (address, nonce) of a verified confirmation token's subject; InvalidToken if it has no nonce
    (a link mailed before links carried one: it cannot say which sign-up it confirms)."""
    return _split_pair(subject, OUTDATED)


def feed_subject(address: str, nonce: str) -> str:
    """The subject of a private feed token: the address and its current feed nonce, NUL-separated.

    The nonce is stored with the subscriber (``Subscriber.feed_nonce``) and replaced when the reader asks
    for a new link, so an older link stops working although its MAC is still genuine (core.delivery.feeds).
    """
    return f"{address}\0{nonce}"


def split_feed(subject: str) -> tuple[str, str]:
    """The (address, nonce) of a verified feed token's subject; InvalidToken if it has no nonce."""
    return _split_pair(subject, _NOT_VALID)


def vote_subject(address: str, arxiv_id: str, version: int, value: int) -> str:
    """The subject of a vote token: the voter's address, the versioned id and the value (1 or -1),
    NUL-separated (``email:ada@example.org NUL 2306.03564v2 NUL -1``).

    One token per value: a link casts the vote it was made for, and the page it opens says which.
    """
    if value not in (1, -1) or version < 1:
        raise ValueError(f"a vote token is for value 1 or -1 on a version >= 1, not {value!r} on v{version}")
    return f"{address}\0{arxiv_id}v{version}\0{value}"


def split_vote(subject: str) -> tuple[str, str, int, int]:
    """The (address, arXiv id, version, value) of a verified vote token's subject; InvalidToken if it is
    not three parts of that shape."""
    parts = subject.split("\0")
    if len(parts) != 3 or not parts[0]:
        raise InvalidToken(_NOT_VALID)
    address, versioned, value = parts
    found = _VOTE_VERSION.fullmatch(versioned)
    if found is None or value not in _VOTE_VALUES:
        raise InvalidToken(_NOT_VALID)
    return address, found["id"], int(found["number"]), _VOTE_VALUES[value]


def _split_pair(subject: str, problem: str) -> tuple[str, str]:
    """The two non-empty parts of a ``FIRST NUL SECOND`` subject; InvalidToken(``problem``) otherwise."""
    first, nul, second = subject.partition("\0")
    if not (nul and first and second) or "\0" in second:
        raise InvalidToken(problem)
    return first, second
