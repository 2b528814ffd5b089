"""How many sign-ups PaperTrail accepts per hour: from one client, from one network, and from everyone.

The sign-up form mails whatever address it is given, so without limits it is a mail relay for anyone
(one client sent 100 mails to 100 addresses in 5 s). Three counts per clock hour (UTC) bound it:

* one client IP address (``PAPERTRAIL_SIGNUP_IP_PER_HOUR``, 5),
* its network, IPv4 /24 or IPv6 /64 (``PAPERTRAIL_SIGNUP_NETWORK_PER_HOUR``, 20): a neighbour's address,
  or the next address of the /64 every IPv6 host is given, is the same client for this count,
* everyone together (``PAPERTRAIL_SIGNUP_MAILS_PER_HOUR``, 200): each accepted sign-up sends at most one
  mail, so this caps the server's sign-up mails per hour, however many networks they come from.

A sign-up counts once it is valid, whether or not it then sends a mail (a repeat within the resend window
sends none), and one that any count refuses is not counted at all (nor stored, nor mailed). The counts
live in the database (table ``signup_quota``), so every web process and a restart share them.

Clients are stored as keyed hashes (HMAC-SHA256 with ``PAPERTRAIL_SECRET_KEY``) of their address and
network, never the addresses: the table only has to tell two clients apart for an hour.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

from core.db import Database
from core.people import signup_records
from core.people.signup_records import QuotaRequest

log = logging.getLogger(__name__)

# The counting period: a clock hour, UTC.
HOUR = timedelta(hours=1)
# The network a client's address belongs to for the network count. /24 is a typical IPv4 allocation to one
# site; every IPv6 subscriber line is given at least a /64, so one host can walk through 2^64 addresses.
IPV4_PREFIX = 24
IPV6_PREFIX = 64

IPAddress = IPv4Address | IPv6Address


class Scope(StrEnum):
    """Which count refused a sign-up; the page words its advice by it."""

    CLIENT = "client"  # this IP address
    NETWORK = "network"  # its /24 or /64
    EVERYONE = "everyone"  # the server's hourly cap


@dataclass(frozen=True, slots=True)
class Quota:
    """One count a sign-up must fit in: at most ``limit`` per hour for ``key``."""

    scope: Scope
    key: str
    limit: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """A sign-up no count had room for: which one, and the seconds until the next hour's counts."""

    scope: Scope
    limit: int
    retry_after: int


def plain_address(client: IPAddress) -> IPAddress:
    """``client`` without what would make one host look like several: an IPv4 address written as IPv6
    (``::ffff:192.0.2.1``) becomes IPv4, and an IPv6 zone (``fe80::1%eth0``) is dropped."""
    if isinstance(client, IPv6Address):
        if client.ipv4_mapped is not None:
            return client.ipv4_mapped
        if client.scope_id is not None:
            return IPv6Address(int(client))
    return client


def network_of(client: IPAddress) -> IPv4Network | IPv6Network:
    """The client's network for the network count: its IPv4 /24 or IPv6 /64."""
    prefix = IPV4_PREFIX if client.version == 4 else IPV6_PREFIX
    return ip_network(f"{client}/{prefix}", strict=False)


def _hashed(secret: str, kind: str, value: str) -> str:
    digest = hmac.new(secret.encode(), f"{kind}\0{value}".encode(), hashlib.sha256).hexdigest()
    return f"{kind}:{digest[:32]}"


def quotas_for(
    client: IPAddress | None, *, per_client: int, per_network: int, per_hour: int, secret: str
) -> list[Quota]:
    """The counts a sign-up from ``client`` must fit in, in the order they are taken.

    ``client`` None (a request whose peer is not an IP address, such as a Unix socket) counts as one
    client named ``unknown``: such requests share one allowance rather than having none.
    """
    if client is None:
        address = network = "unknown"
    else:
        client = plain_address(client)
        address, network = str(client), str(network_of(client))
    return [
        Quota(Scope.CLIENT, _hashed(secret, "ip", address), per_client),
        Quota(Scope.NETWORK, _hashed(secret, "net", network), per_network),
        Quota(Scope.EVERYONE, "all", per_hour),
    ]


def hour_of(now: datetime) -> int:
    """Hours since the epoch (UTC): the counting period ``now`` falls in."""
    return int(now.astimezone(UTC).timestamp() // HOUR.total_seconds())


def take(db: Database, quotas: Sequence[Quota], now: datetime) -> Refusal | None:
    """Count one sign-up against every quota, or refuse it without counting anything.

    None when the sign-up may go ahead; else the first full count and when the next hour begins.
    """
    hour = hour_of(now)
    full = signup_records.take(db, [QuotaRequest(q.key, q.limit) for q in quotas], hour)
    if full is None:
        return None
    quota = quotas[full]
    next_hour = (hour + 1) * HOUR.total_seconds()
    retry_after = max(1, int(next_hour - now.astimezone(UTC).timestamp() + 0.999))
    log.info("sign-up refused: %s limit of %d per hour reached", quota.scope, quota.limit)
    return Refusal(quota.scope, quota.limit, retry_after)
