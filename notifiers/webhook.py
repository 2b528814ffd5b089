"""Generic webhook notifier: each digest is one signed JSON POST (schema ``papertrail.digest/1``).

The body lists the digest's items as data (see docs/webhooks.md). It is signed with HMAC-SHA256 under a
secret derived from ``PAPERTRAIL_SECRET_KEY`` and the webhook URL, so that each receiver holds its own
secret and none of them can forge the unsubscribe and manage links that the master key signs.

The address is chosen by whoever registers the subscriber, so it is treated as hostile: the host is
resolved once, every loopback, private, link-local, multicast, reserved or unspecified address is refused
(unless the host is listed in ``PAPERTRAIL_WEBHOOK_ALLOW_HOSTS``), and the request goes to the address that
was checked (the connection is pinned to it; the Host header and TLS server name keep the original name),
so a DNS answer that changes between check and connect cannot redirect the POST. Redirects are never
followed, and proxies from the environment are ignored, for the same reason.

``sign_body`` and ``verify_signature`` are the one implementation of the signature scheme; receivers,
tests and docs use them.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from core.config import Settings
from core.delivery.contract import DeliveryError
from core.delivery.escaping import one_line, strip_control
from core.delivery.receipt_text import source_name
from core.papers.citations import bibtex_url
from core.retry_after import retry_after_seconds
from core.values import DigestItem, Message, Receipt, SendResult, VoteLinks

# Format: JSON (schema below). Limit: none; PAPERTRAIL_DIGEST_MAX_ITEMS caps digests.

SCHEMA = "papertrail.digest/1"
SIGNATURE_HEADER = "X-PaperTrail-Signature"
DELIVERY_HEADER = "X-PaperTrail-Delivery"
# Receivers reject signatures older (or newer) than this many seconds: a captured request cannot be
# replayed later.
DEFAULT_TOLERANCE = 300.0

log = logging.getLogger(__name__)

# How much of an error reply is read, and how much of it ends up in the error message.
_READ_LIMIT = 4096
_EXCERPT_CHARS = 200
# Gateway errors that usually clear within a second (a receiver restarting behind a proxy).
_QUICK_RETRY_STATUSES = frozenset({502, 503, 504})
# 4xx answers that mean "later", not "never".
_RETRYABLE_4XX = frozenset({408, 425, 429})
_SECRET_LABEL = b"papertrail.webhook/1\0"
# Well-known NAT64 prefix (RFC 6052): the last 32 bits are an IPv4 address a translator would reach.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# A host as httpx gives it: an IDNA-encoded DNS name or an IP literal (IPv6 without brackets).
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\.?|[0-9a-f:.]+", re.IGNORECASE)

# Digest keys go into a header: printable ASCII without separators, or a content hash replaces them.
_SAFE_KEY = re.compile(r"[A-Za-z0-9._:@+=-]{1,200}")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# --- signatures --------------------------------------------------------------------------------------


def webhook_secret(secret_key: str, url: str) -> str:
    """The signing secret for one webhook URL: hex HMAC-SHA256 of the URL under ``PAPERTRAIL_SECRET_KEY``.

    Give this value (never the master key) to the receiver at ``url``; it is all it needs to verify.
    """
    if not secret_key:
        raise ValueError("webhook signing needs PAPERTRAIL_SECRET_KEY; set it to a long random string")
    return hmac.new(secret_key.encode(), _SECRET_LABEL + url.encode(), hashlib.sha256).hexdigest()


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign_body(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``X-PaperTrail-Signature`` value for ``body``: ``t=<unix seconds>,v1=<hex HMAC-SHA256>``.

    The MAC covers ``f"{t}."`` followed by the exact body bytes, so neither can change unnoticed.
    """
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_mac(secret, t, body)}"


def verify_signature(
    secret: str,
    header: str | None,
    body: bytes,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> bool:
    """True when ``header`` is a valid signature of ``body`` made within ``tolerance`` seconds of now.

    Any ``v1=`` entry may match (room for a second secret during a rotation); a malformed header, an
    altered body, another secret or a stale or future timestamp gives False.
    """
    if not header or not secret:
        return False
    timestamp: int | None = None
    candidates: list[str] = []
    for element in header.split(","):
        name, _, value = element.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = _mac(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


# --- payload -----------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    # Same rule as every rendered channel: no control characters (terminal escapes, NULs) get through.
    return strip_control(text)


def _optional(text: str | None) -> str | None:
    return None if text is None else _clean(text)


def _guide(item: DigestItem) -> dict[str, Any] | None:
    # Machine-generated text, plain and untrusted like the title: data for the receiver to escape.
    guide = item.guide
    if guide is None:
        return None
    return {
        "tldr": _clean(guide.tldr),
        "contributions": [_clean(text) for text in guide.contributions[:3]],
        "changes": _optional(guide.changes),
        "machine_generated": True,
    }


def _votes(links: VoteLinks | None) -> dict[str, str] | None:
    # Signed links for the subscriber this webhook is: a receiver's own 👍 / 👎 buttons open them.
    return None if links is None else {"like": links.like, "dislike": links.dislike}


def _item(item: DigestItem, public_url: str, votes: VoteLinks | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "arxiv_id": item.arxiv_id,
        "version": item.version,
        "versioned_id": f"{item.arxiv_id}v{item.version}",
        "url": item.url,
        # The paper's BibTeX entry on this PaperTrail (PAPERTRAIL_PUBLIC_URL); null without a public URL.
        "bibtex_url": bibtex_url(public_url, item.arxiv_id) if public_url else None,
        "title": _clean(item.title),
        "authors": [_clean(name) for name in item.authors],
        "categories": list(item.categories),
        "reasons": [_clean(reason) for reason in item.reasons],
        "changes": list(item.changes),
        "upvotes": item.upvotes,
        "abstract": _clean(item.abstract),
        "comment": _optional(item.comment),
        "journal_ref": _optional(item.journal_ref),
        "doi": _optional(item.doi),
        "guide": _guide(item),
        # The signed 👍 / 👎 pages for this subscriber (docs/webhooks.md); null without PAPERTRAIL_SECRET_KEY.
        "vote_urls": _votes(votes),
    }
    if item.recommended is not None:
        # Only on learned recommendations (issue 17), so a digest of follows' matches is the same document
        # as before: the score and the reasons as data (the liked paper's id, the shared terms).
        data["recommended"] = item.recommended
        data["recommended_reasons"] = [
            {"field": reason.field, "term": _clean(reason.term)} for reason in item.reasons
        ]
    return data


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _receipt(receipt: Receipt | None) -> dict[str, Any] | None:
    # Data only: counts, stored source names and UTC times; the digest's text words it for people.
    if receipt is None:
        return None
    return {
        "since": _timestamp(receipt.since),
        "until": _timestamp(receipt.until),
        "timezone": receipt.timezone,
        "matched": receipt.matched,
        "sources": [
            {
                "source": _clean(scan.source),
                "name": _clean(source_name(scan.source)),
                "runs": scan.runs,
                "announcements": scan.announcements,
                "new_versions": scan.new_versions,
            }
            for scan in receipt.sources
        ],
        "outages": [
            {
                "source": _clean(outage.source),
                "name": _clean(source_name(outage.source)),
                "state": outage.state,
                "from": _timestamp(outage.start),
                "to": _timestamp(outage.end) if outage.end else None,
            }
            for outage in receipt.outages
        ],
    }


def digest_payload(message: Message, generated_at: datetime) -> dict[str, Any]:
    """The JSON document for one digest (schema ``papertrail.digest/1``, see docs/webhooks.md)."""
    items = [_item(item, message.public_url, message.votes_of(item)) for item in message.items]
    recommended = sum(1 for item in message.items if item.recommended is not None)
    revisions = sum(1 for item in message.items if item.is_revision and item.recommended is None)
    counts = {
        "new": len(items) - revisions - recommended,
        "revisions": revisions,
        # Matches left out by PAPERTRAIL_DIGEST_MAX_ITEMS; they are still marked sent.
        "more": max(0, message.item_count - len(items)),
    }
    if recommended:
        counts["recommended"] = recommended  # learned recommendations among items; absent when none
    return {
        "schema": SCHEMA,
        "digest": message.key if _SAFE_KEY.fullmatch(message.key) else _content_key(items),
        "generated_at": _timestamp(generated_at),
        # "heartbeat": no items, sent on an arXiv announcement day when nothing matched (the reader asked).
        "kind": "heartbeat" if message.heartbeat else "digest",
        "subject": one_line(message.subject),
        # The reader's language: the subject and the guides are in it; every key and the reasons and
        # changes stay English (they are data).
        "language": message.language,
        "counts": counts,
        "items": items,
        # What PaperTrail scanned for this reader since the previous digest (docs/webhooks.md).
        "receipt": _receipt(message.receipt),
    }


def _content_key(items: list[dict[str, Any]]) -> str:
    # A digest rendered without a ledger key still needs a stable id for receiver-side deduplication.
    ids = ",".join(str(item["versioned_id"]) for item in items)
    return "sha256-" + hashlib.sha256(ids.encode()).hexdigest()[:32]


def encode_payload(payload: Mapping[str, Any]) -> bytes:
    """The exact body bytes: compact JSON, ASCII only (bidi overrides and the like arrive escaped)."""
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode("ascii")


# --- where a webhook may go (SSRF) --------------------------------------------------------------------


def blocked_reason(ip: IPAddress) -> str | None:
    """Why PaperTrail refuses to post to ``ip`` (e.g. ``"loopback"``), or None for a public address.

    IPv6 forms that carry an IPv4 address (IPv4-mapped, 6to4, NAT64) are judged by that IPv4 address.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return blocked_reason(embedded)
    # Most specific first: 169.254.0.0/16 is also "private" to ipaddress, but link-local says more.
    for flag in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(ip, f"is_{flag}"):
            return flag.replace("_", "-")
    # Shared address space (100.64.0.0/10, carrier NAT) and the like: not private, not public either.
    return None if ip.is_global else "not globally routable"


def _host_allowed(host: str, allowed: frozenset[str]) -> bool:
    return host.lower().strip("[]") in allowed


async def public_addresses(host: str, port: int, allowed: frozenset[str]) -> list[str]:
    """Resolve ``host`` and return the addresses PaperTrail may post to, in resolver order.

    Addresses listed in ``allowed`` pass; any other loopback, private, link-local, multicast, reserved
    or unspecified address is dropped. No usable address left: a permanent DeliveryError naming the
    setting. A failed lookup is retryable (DNS outages pass).
    """
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        # "No such name" will not fix itself; anything else (a DNS server timing out) may.
        missing = exc.errno == socket.EAI_NONAME
        raise DeliveryError(
            f"cannot resolve webhook host {host!r} ({one_line(str(exc))}); "
            + ("check the address" if missing else "will retry later"),
            retryable=not missing,
        ) from exc
    return _usable(host, infos, allowed)


def _usable(host: str, infos: list[tuple[Any, ...]], allowed: frozenset[str]) -> list[str]:
    """The addresses of ``infos`` (getaddrinfo's answer) PaperTrail may post to; DeliveryError if none."""
    usable: list[str] = []
    refused: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
        reason = blocked_reason(ipaddress.ip_address(address))
        if reason is None or address in allowed:
            if address not in usable:
                usable.append(address)
        else:
            refused.append(f"{address} ({reason})")
    if not usable:
        raise DeliveryError(
            f"host {host!r} resolves only to non-public addresses: {', '.join(refused)}; "
            "PaperTrail refuses these to protect the internal network (SSRF). If this receiver is meant "
            "to be internal, add the host to PAPERTRAIL_WEBHOOK_ALLOW_HOSTS",
            retryable=False,
        )
    return usable


async def refusal(target: str, allowed: frozenset[str]) -> str | None:
    """Why delivery would refuse the webhook ``target`` (the URL after ``webhook:``), told when it is
    followed rather than at its first digest; None when it may go out.

    The rules are the delivery's own (``_parse``, ``public_addresses``): an http(s) URL with a host, whose
    address is public or allowed by PAPERTRAIL_WEBHOOK_ALLOW_HOSTS. A name that does not resolve now is
    not refused: PaperTrail may be offline, and delivery resolves it again.
    """
    try:
        url = _parse(target)
    except DeliveryError as exc:
        return str(exc)
    if _host_allowed(url.host, allowed):
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    try:
        _usable(url.host, infos, allowed)
    except DeliveryError as exc:
        return str(exc)
    return None


# --- the notifier ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Target:
    """One place to send the POST: the URL to connect to, plus what keeps the original name."""

    url: httpx.URL
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)


def describe(url: httpx.URL) -> str:
    """``scheme://host[:port]`` for messages: the path and credentials may be secrets, so never shown."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}" + (f":{url.port}" if url.port else "")


def _excerpt(raw: bytes) -> str:
    # The receiver's reply is untrusted: one line, no control characters, short, JSON-quoted so that
    # bidi overrides and other invisible characters show up as escapes in logs.
    text = " ".join(one_line(raw.decode("utf-8", "replace")).split())
    if len(text) > _EXCERPT_CHARS:
        text = text[: _EXCERPT_CHARS - 1] + "…"
    return json.dumps(text)


class WebhookNotifier:
    """POSTs each digest as signed JSON to the subscriber's http(s) URL.

    ``client`` is an httpx.AsyncClient to use (tests inject one; it is not closed here); ``clock`` gives
    ``generated_at`` (tests fix it); ``quick_retry_delay`` is the pause before the one in-adapter retry
    after a connection failure or a 502/503/504.
    """

    channel: ClassVar[str] = "webhook"
    max_length: ClassVar[int | None] = None

    def __init__(
        self,
        settings: Settings,
        *,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], datetime] | None = None,
        quick_retry_delay: float = 1.0,
    ) -> None:
        self.settings = settings
        self._client = client
        self._owns_client = client is None
        self._clock = clock or (lambda: datetime.now(UTC))
        self._quick_retry_delay = quick_retry_delay

    @property
    def user_agent(self) -> str:
        """Who is calling: the service's User-Agent plus the schema the body follows."""
        return f"{self.settings.user_agent} webhook {SCHEMA}"

    def payload(self, message: Message) -> dict[str, Any]:
        """The JSON document this notifier sends for ``message`` now (``generated_at`` from the clock)."""
        return digest_payload(message, self._clock())

    async def send(self, address: str, message: Message) -> SendResult:
        """POST one digest; raises DeliveryError (permanent for refused addresses and 4xx answers)."""
        if message.skip_parts >= 1:
            # An earlier attempt was accepted (the ledger recorded it); a webhook digest is one part.
            return SendResult(platform_id=message.key or None, parts=1)
        url = _parse(address)
        secret = self._secret(address)
        targets = await self._targets(url)
        payload = self.payload(message)
        delivery = str(payload["digest"])
        headers = {
            "Content-Type": "application/json",
            "User-Agent": self.user_agent,
            DELIVERY_HEADER: delivery,
        }
        await self._post_with_quick_retry(url, targets, encode_payload(payload), headers, secret)
        log.info("webhook digest %s delivered to %s", delivery, describe(url))
        return SendResult(platform_id=delivery, parts=1)

    async def aclose(self) -> None:
        """Close the HTTP client if this notifier made it."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    def _secret(self, address: str) -> str:
        key = self.settings.secret_key.get_secret_value() if self.settings.secret_key else ""
        if not key:
            raise DeliveryError(
                "webhook digests are signed: set PAPERTRAIL_SECRET_KEY (a long random string) and give "
                "each receiver its secret (see docs/webhooks.md); digests stay pending until then",
                retryable=True,
            )
        return webhook_secret(key, address)

    async def _targets(self, url: httpx.URL) -> list[_Target]:
        allowed = self.settings.webhook_allowed_hosts
        if _host_allowed(url.host, allowed):
            return [_Target(url)]
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await public_addresses(url.host, port, allowed)
        # Pin the connection to the checked address; Host and SNI keep the name for virtual hosting
        # and certificate verification.
        headers = {"Host": url.netloc.decode("ascii")}
        extensions: dict[str, Any] = {}
        if url.scheme == "https" and not _is_ip(url.host):
            extensions["sni_hostname"] = url.host
        return [_Target(url.copy_with(host=address), headers, extensions) for address in addresses]

    def _client_for_send(self) -> httpx.AsyncClient:
        if self._client is None:
            # trust_env=False: an HTTP(S)_PROXY from the environment would resolve the name itself and
            # undo the pinning above.
            self._client = httpx.AsyncClient(
                follow_redirects=False, trust_env=False, timeout=self.settings.webhook_timeout
            )
        return self._client

    async def _post_with_quick_retry(
        self, url: httpx.URL, targets: list[_Target], body: bytes, headers: dict[str, str], secret: str
    ) -> None:
        try:
            await self._post(url, targets, body, headers, secret)
        except _Transient as first:
            log.info("%s; trying once more in %.1f s", first, self._quick_retry_delay)
            await asyncio.sleep(self._quick_retry_delay)
            await self._post(url, targets, body, headers, secret)

    async def _post(
        self, url: httpx.URL, targets: list[_Target], body: bytes, headers: dict[str, str], secret: str
    ) -> None:
        where = describe(url)
        timeout = self.settings.webhook_timeout
        for index, target in enumerate(targets):
            # Signed per attempt so that the timestamp is fresh when a retry goes out.
            signed = {**headers, **target.headers, SIGNATURE_HEADER: sign_body(secret, body)}
            try:
                async with self._client_for_send().stream(
                    "POST",
                    target.url,
                    content=body,
                    headers=signed,
                    timeout=timeout,
                    follow_redirects=False,
                    extensions=target.extensions,
                ) as response:
                    await _check(response, where)
                    return
            except httpx.ConnectError as exc:
                # Nothing was sent: the next resolved address is safe to try.
                if index + 1 < len(targets):
                    continue
                raise _Transient(
                    f"cannot connect to webhook {where}: {_reason(exc)}; will retry later", retryable=True
                ) from exc
            except httpx.TimeoutException as exc:
                raise DeliveryError(
                    f"webhook {where} did not answer within {timeout:g} s "
                    f"(PAPERTRAIL_WEBHOOK_TIMEOUT); will retry later. The receiver may have processed "
                    f"the digest anyway: it should deduplicate on {DELIVERY_HEADER}",
                    retryable=True,
                ) from exc
            except httpx.HTTPError as exc:
                raise DeliveryError(
                    f"webhook {where} failed: {_reason(exc)}; will retry later", retryable=True
                ) from exc


def _parse(address: str) -> httpx.URL:
    try:
        url = httpx.URL(address)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise DeliveryError(
            f"webhook address is not a valid URL ({type(exc).__name__}); register e.g. "
            "webhook:https://hooks.example.org/papertrail",
            retryable=False,
        ) from exc
    if url.scheme not in ("http", "https") or not _HOST.fullmatch(url.host):
        raise DeliveryError(
            "webhook address must be an http(s) URL with a host, e.g. webhook:https://hooks.example.org/pt",
            retryable=False,
        )
    return url


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _reason(exc: Exception) -> str:
    detail = one_line(str(exc))[:_EXCERPT_CHARS]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


class _Transient(DeliveryError):
    """A failure worth one quick retry inside the adapter (the ledger's back-off starts at minutes)."""


async def _read_excerpt(response: httpx.Response) -> str:
    chunks = bytearray()
    async for chunk in response.aiter_bytes():
        chunks += chunk
        if len(chunks) >= _READ_LIMIT:
            break
    return _excerpt(bytes(chunks[:_READ_LIMIT]))


async def _check(response: httpx.Response, where: str) -> None:
    """Translate the receiver's status into success or one DeliveryError."""
    status = response.status_code
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        target = urlsplit(response.headers.get("Location", "")).hostname or "an unknown place"
        raise DeliveryError(
            f"webhook {where} answered HTTP {status}, a redirect to {json.dumps(target)}; PaperTrail does "
            "not follow redirects (one could lead to an internal address): register the final URL instead",
            retryable=False,
        )
    excerpt = await _read_excerpt(response)
    hint = retry_after_seconds(response.headers.get("Retry-After"))
    if status in _RETRYABLE_4XX or status >= 500:
        # A gateway error without a Retry-After is worth one quick retry; a hinted one waits for the ledger.
        kind = _Transient if status in _QUICK_RETRY_STATUSES and hint is None else DeliveryError
        raise kind(
            f"webhook {where} answered HTTP {status} {excerpt}; will retry later"
            + (f" (Retry-After {hint:g} s)" if hint is not None else ""),
            retryable=True,
            retry_after=hint,
        )
    if status == 410:
        raise DeliveryError(
            f"webhook {where} answered HTTP 410 Gone: the receiver asks PaperTrail to stop; remove the "
            "subscriber or register its new URL",
            retryable=False,
        )
    raise DeliveryError(
        f"webhook {where} refused the digest with HTTP {status} {excerpt}; check the URL and that the "
        "receiver verifies with its own webhook secret (docs/webhooks.md)",
        retryable=False,
    )
