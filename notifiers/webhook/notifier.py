"""Generic webhook notifier: each digest is one signed JSON POST (schema ``papertrail.digest/1``).

The body and its signature are built by notifiers/webhook/payload.py (see docs/webhooks.md). The address is
chosen by whoever registers the subscriber, so it is treated as hostile: notifiers/public_address.py
resolves the host once and refuses non-public addresses (unless the host is listed in
``PAPERTRAIL_WEBHOOK_ALLOW_HOSTS``), and the request here goes to the address that was checked (the
connection is pinned to it; the Host header and TLS server name keep the original name), so a DNS answer
that changes between check and connect cannot redirect the POST. Redirects are never followed, and proxies
from the environment are ignored, for the same reason.

httpx failures are translated by the table :data:`ERRORS`, the receiver's status by :func:`_check`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from core.channel import DeliveryError
from core.config_edges import WebhookSettings
from core.escaping import one_line
from core.retry_after import retry_after_seconds
from core.values import Message, SendResult
from notifiers.public_address import host_allowed, is_ip, parse_url, public_addresses
from notifiers.webhook.payload import SCHEMA, digest_payload, encode_payload, sign_body, webhook_secret

# Format: JSON (notifiers/webhook/payload.py). Limit: none, so ``max_length`` is None;
# PAPERTRAIL_DIGEST_MAX_ITEMS caps digests.

SIGNATURE_HEADER = "X-PaperTrail-Signature"
DELIVERY_HEADER = "X-PaperTrail-Delivery"

log = logging.getLogger(__name__)

# How much of an error reply is read, and how much of it ends up in the error message.
_READ_LIMIT = 4096
_EXCERPT_CHARS = 200
# Gateway errors that usually clear within a second (a receiver restarting behind a proxy).
_QUICK_RETRY_STATUSES = frozenset({502, 503, 504})
# 4xx answers that mean "later", not "never".
_RETRYABLE_4XX = frozenset({408, 425, 429})

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
        settings: WebhookSettings,
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
        url = parse_url(address)
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
        allowed = self.settings.allowed_hosts
        if host_allowed(url.host, allowed):
            return [_Target(url)]
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await public_addresses(url.host, port, allowed)
        # Pin the connection to the checked address; Host and SNI keep the name for virtual hosting
        # and certificate verification.
        headers = {"Host": url.netloc.decode("ascii")}
        extensions: dict[str, Any] = {}
        if url.scheme == "https" and not is_ip(url.host):
            extensions["sni_hostname"] = url.host
        return [_Target(url.copy_with(host=address), headers, extensions) for address in addresses]

    def _client_for_send(self) -> httpx.AsyncClient:
        if self._client is None:
            # trust_env=False: an HTTP(S)_PROXY from the environment would resolve the name itself and
            # undo the pinning above.
            self._client = httpx.AsyncClient(
                follow_redirects=False, trust_env=False, timeout=self.settings.timeout
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
        timeout = self.settings.timeout
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
            except httpx.HTTPError as exc:
                # A refused connection sent nothing: the next resolved address is safe to try.
                if isinstance(exc, httpx.ConnectError) and index + 1 < len(targets):
                    continue
                raise _translate(exc, where, timeout) from exc


def _reason(exc: Exception) -> str:
    detail = one_line(str(exc))[:_EXCERPT_CHARS]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


class _Transient(DeliveryError):
    """A failure worth one quick retry inside the adapter (the ledger's back-off starts at minutes)."""


# How an httpx failure of the POST is translated: the first entry whose type the exception is an instance
# of (ConnectTimeout is a TimeoutException, not a ConnectError). Each gives the error's class (_Transient:
# worth one quick retry in place) and its message over ``where`` (scheme://host:port), ``reason`` (the
# exception, one line) and ``timeout`` (PAPERTRAIL_WEBHOOK_TIMEOUT); every one of them is retryable.
ERRORS: tuple[tuple[type[httpx.HTTPError], type[DeliveryError], str], ...] = (
    (httpx.ConnectError, _Transient, "cannot connect to webhook {where}: {reason}; will retry later"),
    (
        httpx.TimeoutException,
        DeliveryError,
        "webhook {where} did not answer within {timeout:g} s (PAPERTRAIL_WEBHOOK_TIMEOUT); will retry "
        "later. The receiver may have processed the digest anyway: it should deduplicate on "
        + DELIVERY_HEADER,
    ),
    (httpx.HTTPError, DeliveryError, "webhook {where} failed: {reason}; will retry later"),
)


def _translate(exc: httpx.HTTPError, where: str, timeout: float) -> DeliveryError:
    """One retryable DeliveryError for an httpx failure, by :data:`ERRORS`."""
    error, text = next((error, text) for kind, error, text in ERRORS if isinstance(exc, kind))
    return error(text.format(where=where, reason=_reason(exc), timeout=timeout), retryable=True)


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
