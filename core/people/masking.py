"""Credentials out of subscriber addresses wherever one is printed, logged or shown.

Some addresses carry their own credentials: ``webhook:https://h/x?token=X``, a Slack incoming-webhook URL
(the path is the secret), ``apprise:mailto://user:pass@host``, ``apprise:tgram://BOT:TOKEN/CHAT``. The
address is the subscriber's identity, so it is stored and used whole; but a log line, a CLI listing or a
web page needs only enough to tell addresses apart. :func:`mask_address` keeps the channel, the URL scheme
and the host readable and masks the userinfo password, every query value and the path segments that look
like secrets. :func:`mask_text` does the same to every URL inside free text (log messages, stored delivery
errors), so a credential reaches no line whoever wrote it.
"""

from __future__ import annotations

import functools
import re

from core.channel import channels

MASK = "****"
# A URL in free text: a scheme, "://", then anything up to whitespace, a quote or an angle bracket (the
# characters that end a URL quoted in a message or a repr); after a registered channel's prefix, that
# channel's address.
_URL = r"\b(?P<url>[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+)"
# Query keys whose values are credentials even in URLs that are not subscriber addresses.
_SECRET_KEY = re.compile(r"token|key|secret|pass|pwd|sig|auth|code|hash|session|credential", re.IGNORECASE)
_TOKENISH = re.compile(r"[A-Za-z0-9_\-.~+=%:]+")


def looks_secret(segment: str) -> bool:
    """Whether a path segment or host part looks like a token rather than a word.

    Long runs of token characters (Slack's 24-character webhook secret), and shorter ones mixing letters
    and digits (ids and keys: ``B0123ABCD``), are masked; words and version numbers (``hooks``, ``v1``,
    ``papertrail-digest``) are kept, so the masked form still says where the address points.
    """
    if len(segment) < 8 or not _TOKENISH.fullmatch(segment):
        return False
    if len(segment) >= 20:
        return True
    return any(c.isdigit() for c in segment) and any(c.isalpha() for c in segment)


def _mask_netloc(netloc: str) -> str:
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        userinfo = f"{user}:{MASK}" if colon else (MASK if looks_secret(user) else user)
    if hostport.startswith("["):  # an IPv6 literal: its colons are not a port separator
        end = hostport.find("]") + 1
        host, colon, port = hostport[:end], hostport[end : end + 1], hostport[end + 1 :]
    else:
        host, colon, port = hostport.partition(":")
    if colon and not port.isdigit():
        port = MASK  # tgram://123456:SECRET/...: not a port but a token
    if looks_secret(host) and "." not in host:
        host = MASK  # a token in the host position (Apprise services with no real host)
    return f"{userinfo}{at}{host}{colon}{port}"


def mask_url(url: str, *, all_query_values: bool = True) -> str:
    """``url`` with its credentials replaced by ``****``; scheme and host stay readable.

    ``all_query_values`` masks every query value (right for a subscriber's address, where any parameter
    may be the secret); otherwise only values whose key names a credential, or that look like one, are
    masked (right for URLs met in free text, such as an API request in a library's log line).
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, hash_, fragment = rest.partition("#")
    rest, qmark, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    masked_path = "/".join(MASK if looks_secret(part) else part for part in path.split("/"))
    pairs = []
    for pair in query.split("&") if qmark else []:
        name, eq, value = pair.partition("=")
        secret = all_query_values or _SECRET_KEY.search(name) or looks_secret(value)
        pairs.append(f"{name}{eq}{MASK}" if eq and value and secret else pair)
    masked = f"{scheme}{sep}{_mask_netloc(netloc)}{slash}{masked_path}{qmark}{'&'.join(pairs)}"
    return masked + (f"{hash_}{MASK}" if fragment else hash_)


def mask_address(address: str) -> str:
    """A subscriber address fit to print, masked by its registered channel's rule (:meth:`Channel.mask`).

    ``email:ada@example.org`` and ``telegram:12345`` carry no credential and stay as they are: they are
    how an operator finds the subscriber. An address of no registered channel has its URLs masked.
    """
    channel, sep, target = address.partition(":")
    found = channels().find(channel.strip().lower()) if sep else None
    if found is None:
        return mask_text(address)
    return f"{channel}:{found.mask(target)}"


def mask_text(text: str) -> str:
    """``text`` with every URL in it masked: by its channel's rule after a channel's prefix (fully for the
    channels whose address is a URL), leniently elsewhere."""
    if "://" not in text:
        return text
    registered = channels()

    def one(match: re.Match[str]) -> str:
        found = registered.find(match["channel"]) if match["channel"] else None
        if found is None:
            return mask_url(match["url"], all_query_values=False)
        return f"{match['channel']}:{found.mask(match['url'])}"

    return _url_in_text(tuple(c.name for c in registered)).sub(one, text)


@functools.lru_cache(maxsize=8)
def _url_in_text(names: tuple[str, ...]) -> re.Pattern[str]:
    """The URL pattern, optionally after one of the channel prefixes ``names`` (longest first)."""
    prefixes = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?:\b(?P<channel>{prefixes}):)?{_URL}")


RECIPIENT = "<recipient>"


def mask_recipients(text: str, *targets: str) -> str:
    """``text`` with every ``targets`` (a recipient's email address, chat id or URL) replaced by
    ``<recipient>``, whatever its case: for text shown beyond the operator's console (the status page's
    delivery alarm), which must not name subscribers. A server's reply may quote the address again."""
    for target in sorted({t.strip() for t in targets if t.strip()}, key=len, reverse=True):
        text = re.sub(re.escape(target), RECIPIENT, text, flags=re.IGNORECASE)
    return text
