"""The notifier contract shared by every channel adapter, and the one error they raise."""

from __future__ import annotations

from typing import ClassVar, Protocol

from core.values import Message, SendResult


class DeliveryError(Exception):
    """A message could not be delivered.

    ``retryable`` says whether trying again later may work (a timeout, a 429, an unreachable server)
    or not (a blocked bot, an address that does not exist). ``retry_after`` is the platform's own hint in
    seconds, when it gave one.
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class Notifier(Protocol):
    """One channel adapter. ``address`` is the part of the subscriber address after ``channel:``."""

    channel: ClassVar[str]

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver one rendered digest, or raise :class:`DeliveryError`."""
        ...


def split_address(address: str) -> tuple[str, str]:
    """Split ``email:ada@example.org`` into ``("email", "ada@example.org")``.

    Raises ValueError with a hint when the address has no known shape.
    """
    channel, sep, target = address.partition(":")
    if not sep or not channel or not target.strip():
        raise ValueError(
            f"address {address!r} is not of the form CHANNEL:TARGET; "
            "use e.g. email:ada@example.org, telegram:12345, slack:C0123 or console:NAME"
        )
    return channel.strip().lower(), target.strip()


KNOWN_CHANNELS = ("console", "email", "telegram", "slack", "webhook")


def normalise_address(address: str) -> str:
    """Validate an address and return its canonical spelling (channel lower-cased, email lower-cased)."""
    channel, target = split_address(address)
    if channel not in KNOWN_CHANNELS:
        raise ValueError(
            f"unknown channel {channel!r} in {address!r}; known channels: {', '.join(KNOWN_CHANNELS)}"
        )
    if channel == "email":
        local, at, domain = target.rpartition("@")
        if not at or not local or "." not in domain or any(c.isspace() for c in target):
            raise ValueError(f"{target!r} is not an email address; write it as email:ada@example.org")
        target = f"{local}@{domain.lower()}"
    if channel == "telegram" and not target.lstrip("-").isdigit():
        raise ValueError(f"telegram chat id {target!r} must be a number, e.g. telegram:12345")
    if channel == "webhook" and not target.startswith(("https://", "http://")):
        raise ValueError(f"webhook target {target!r} must be an http(s) URL")
    return f"{channel}:{target}"
