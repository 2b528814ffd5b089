"""Where a webhook may go: the address checks that keep a subscriber's URL off the internal network (SSRF).

The address is chosen by whoever registers the subscriber, so it is treated as hostile: it must be an
http(s) URL with a host (:func:`parse_url`); the host is resolved once, and every loopback, private,
link-local, multicast, reserved or unspecified address is refused (:func:`blocked_reason`) unless the host
is listed in ``PAPERTRAIL_WEBHOOK_ALLOW_HOSTS``. notifiers/webhook/notifier.py then connects to an address
checked here; the Apprise adapter checks its generic HTTP services here too, and ``papertrail follow`` asks
:func:`refusal` when an address is followed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from typing import Any

import httpx

from core.channel import DeliveryError
from core.escaping import one_line

# Well-known NAT64 prefix (RFC 6052): the last 32 bits are an IPv4 address a translator would reach.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# A host as httpx gives it: an IDNA-encoded DNS name or an IP literal (IPv6 without brackets).
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\.?|[0-9a-f:.]+", re.IGNORECASE)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


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


def host_allowed(host: str, allowed: frozenset[str]) -> bool:
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

    The rules are the delivery's own (:func:`parse_url`, :func:`public_addresses`): an http(s) URL with a
    host, whose address is public or allowed by PAPERTRAIL_WEBHOOK_ALLOW_HOSTS. A name that does not
    resolve now is not refused: PaperTrail may be offline, and delivery resolves it again.
    """
    try:
        url = parse_url(target)
    except DeliveryError as exc:
        return str(exc)
    if host_allowed(url.host, allowed):
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


def parse_url(address: str) -> httpx.URL:
    """The webhook URL of ``address``; a permanent DeliveryError unless it is http(s) with a host."""
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


def is_ip(host: str) -> bool:
    """Whether ``host`` is an IP literal (brackets allowed) rather than a name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
