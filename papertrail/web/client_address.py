"""The IP address of the client behind a request, for per-client limits (the sign-up form's).

The connection's peer is the client, unless the peer is one of the operator's reverse proxies
(``PAPERTRAIL_TRUSTED_PROXIES``): then ``X-Forwarded-For`` is read from the right, where each proxy
appended the address it was connected from, skipping the trusted proxies, and the first address that is
not one of them is the client. Whatever stands further left was written by the client itself and is never
believed. With no trusted proxies the header is ignored: anyone can send it.

The web server is started without uvicorn's own proxy-header handling (``papertrail.service.runtime``), so the
peer seen here is the TCP peer, and this setting alone decides whom to believe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from starlette.requests import Request

IPAddress = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

# Hops read from X-Forwarded-For at most: a longer chain than any real proxy set-up is the client's own
# padding, and stopping early only means believing less of it.
MAX_HOPS = 20


def parse_ip(text: str) -> IPAddress | None:
    """An address as a proxy writes it (``192.0.2.1``, ``192.0.2.1:5000``, ``2001:db8::1``,
    ``[2001:db8::1]:5000``); None for anything else (``unknown``, an obfuscated name, garbage)."""
    text = text.strip()
    if text.startswith("["):
        host, bracket, _port = text[1:].partition("]")
        text = host if bracket else ""
    elif text.count(":") == 1:
        text = text.partition(":")[0]  # IPv4 with a port; an IPv6 address has two colons or more
    try:
        found = ip_address(text)
    except ValueError:
        return None
    if isinstance(found, IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _trusted(address: IPAddress, proxies: Sequence[Network]) -> bool:
    return any(address.version == net.version and address in net for net in proxies)


def client_ip(peer: str | None, forwarded: Iterable[str], proxies: Sequence[Network]) -> IPAddress | None:
    """The client's address given the connection's ``peer``, the ``X-Forwarded-For`` header values (in
    order) and the trusted proxies. None when the peer is not an IP address (a Unix socket, a test client).
    """
    client = parse_ip(peer) if peer else None
    if client is None or not _trusted(client, proxies):
        return client
    hops = [hop for value in forwarded for hop in value.split(",")]
    for hop in reversed(hops[-MAX_HOPS:]):
        address = parse_ip(hop)
        if address is None:
            break  # what a trusted proxy appended always parses: this was written by the client
        client = address
        if not _trusted(address, proxies):
            break
    return client


def request_client_ip(request: Request, proxies: Sequence[Network]) -> IPAddress | None:
    """:func:`client_ip` of a Starlette request."""
    peer = request.client.host if request.client else None
    return client_ip(peer, request.headers.getlist("x-forwarded-for"), proxies)
