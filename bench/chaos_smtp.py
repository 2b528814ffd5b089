"""The chaos suite's mail server: a real SMTP server (aiosmtpd) on 127.0.0.1 that records every message it
accepts and misbehaves on request.

Faults (one per server, chosen by the trial):

* ``drop``: for a share of the transactions (``rate``, seeded) the server answers ``354`` to DATA, reads
  part of the message and closes the connection without a reply: the client sees the connection drop
  mid-DATA. Nothing is recorded: the message was not accepted.
* ``451``: for a share of the transactions the server reads the whole message and answers
  ``451 4.3.0`` (try again later). Nothing is recorded.
* ``550-one``: one recipient (``victim``) is refused at RCPT with ``550 5.1.1`` every time: a mailbox that
  does not exist.
* ``550-all``: while :attr:`RecordingSmtp.refusing` is set, every recipient is refused at RCPT with
  ``550 5.7.1``: the server refuses to relay for this client (a blocklisted IP, a revoked account). The
  trial clears it to end the outage.
* ``slow``: the server waits 3 to 10 s (``SLOW_SECONDS``, uniform, seeded) after each message's data
  before it answers 250 and records it: a mail server slow to accept, one transaction at a time per
  session.

Each accepted message is kept with its envelope recipient and the arXiv versions its text part lists
(the ``categories · 2411.12345v2`` line of each item in ``templates/digest.txt.j2``).
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope

from tests.servers import Received, SinkHandler, free_port

FAULTS = ("none", "drop", "451", "550-one", "550-all", "slow")
# Seconds a ``slow`` server waits before it answers a message (uniform in this range, seeded).
SLOW_SECONDS = (3.0, 10.0)
# One item of a digest's text part ends with "<categories> · <arXiv id>v<version>" (templates/digest.txt.j2).
_ITEM_LINE = re.compile(r"^  [^\n]*· (\S+?v\d+)$", re.M)
# The line a digest capped at PAPERTRAIL_DIGEST_MAX_ITEMS ends with: its other items are not listed.
_CAPPED = "more not shown"
# Lines of the message a dropping server reads after its 354 before it hangs up.
_DROP_AFTER_LINES = 5
# Seconds a dropped session waits to be cancelled (it is, at the next turn of the event loop).
_DROP_LINGER = 5.0


@dataclass(frozen=True, slots=True)
class Mail:
    """One accepted message: to whom, which versions it lists, whether it was cut by the item cap."""

    recipient: str
    versions: tuple[str, ...]
    capped: bool
    at: float


def read_mail(received: Received, at: float) -> Mail:
    """The recipient and listed versions of one accepted digest mail."""
    (recipient,) = received.rcpt_tos
    text = _plain_text(received.message)
    return Mail(recipient, tuple(_ITEM_LINE.findall(text)), _CAPPED in text, at)


def _plain_text(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("plain",))
    if body is None:
        return ""
    # SMTP carries CRLF line ends.
    return str(body.get_content()).replace("\r\n", "\n")


@dataclass
class FaultCounts:
    """What the server refused or broke, by kind."""

    dropped: int = 0
    temporary: int = 0
    refused: int = 0
    refused_addresses: set[str] = field(default_factory=set)


class FaultyHandler(SinkHandler):
    """Records accepted mail (as :class:`tests.servers.SinkHandler` does) and injects the trial's fault."""

    def __init__(self, fault: str, *, rate: float, seed: int, victim: str | None) -> None:
        super().__init__()
        if fault not in FAULTS:
            raise ValueError(f"unknown SMTP fault {fault!r}; choose one of {', '.join(FAULTS)}")
        self.fault = fault
        self.rate = rate
        self.victim = victim
        self.refusing = threading.Event()
        self.counts = FaultCounts()
        self.accepted_at: list[float] = []
        # aiosmtpd runs every handler call in its one event-loop thread: the RNG needs no lock.
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def should_drop(self) -> bool:
        """Whether the transaction starting DATA now is to be cut off (``drop``)."""
        if self.fault == "drop" and self._rng.random() < self.rate:
            with self._lock:
                self.counts.dropped += 1
            return True
        return False

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        """Refuse the victim (``550-one``) or everybody while refusing (``550-all``)."""
        refuse = (self.fault == "550-one" and address == self.victim) or (
            self.fault == "550-all" and self.refusing.is_set()
        )
        if refuse:
            with self._lock:
                self.counts.refused += 1
                self.counts.refused_addresses.add(address)
            if self.fault == "550-one":
                return "550 5.1.1 mailbox unavailable"
            return "550 5.7.1 relaying denied for this client"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        """Answer 451 to a share of the messages (``451``), or wait before answering (``slow``); record and
        accept the others."""
        if self.fault == "451" and self._rng.random() < self.rate:
            with self._lock:
                self.counts.temporary += 1
            return "451 4.3.0 temporary local problem, try again later"
        if self.fault == "slow":
            await asyncio.sleep(self._rng.uniform(*SLOW_SECONDS))
        reply = await super().handle_DATA(server, session, envelope)
        with self._lock:
            self.accepted_at.append(time.monotonic())
        return reply


class DroppingSMTP(SMTP):
    """aiosmtpd's SMTP session, which hangs up in the middle of DATA when its handler says so."""

    async def smtp_DATA(self, arg: str) -> None:
        """DATA: as usual, or 354, a few lines of the message, then the connection closed with no reply."""
        handler = self.event_handler
        envelope: Envelope | None = self.envelope
        if (
            not isinstance(handler, FaultyHandler)
            or envelope is None
            or not envelope.rcpt_tos
            or arg
            or not handler.should_drop()
        ):
            await super().smtp_DATA(arg)
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        # aiosmtpd keeps its stream reader private; reading a little first makes the drop fall inside the
        # message, as a server crash or a network cut would.
        reader = getattr(self, "_reader", None)
        if reader is not None:
            for _ in range(_DROP_AFTER_LINES):
                await reader.readuntil(b"\r\n")
        transport = self.transport
        if isinstance(transport, asyncio.Transport):
            transport.abort()
            # The session is cancelled as the connection goes (aiosmtpd's connection_lost); waiting for that
            # keeps it from reading the rest of the buffered message as commands ("unrecognised: ...").
            await asyncio.sleep(_DROP_LINGER)


class _Controller(Controller):
    def factory(self) -> SMTP:
        return DroppingSMTP(self.handler, **self.SMTP_kwargs)


class RecordingSmtp:
    """The running server: its port, the handler (faults, counts) and the accepted mail so far."""

    def __init__(self, handler: FaultyHandler, port: int) -> None:
        self.handler = handler
        self.port = port
        self._parsed: list[Mail] = []

    @property
    def refusing(self) -> threading.Event:
        """Set: every recipient is refused (``550-all``)."""
        return self.handler.refusing

    def accepted(self) -> int:
        """Messages accepted so far."""
        return len(self.handler.received)

    def mails(self) -> list[Mail]:
        """Every accepted message so far, read once each."""
        received = list(self.handler.received)
        times = list(self.handler.accepted_at)
        for index in range(len(self._parsed), min(len(received), len(times))):
            self._parsed.append(read_mail(received[index], times[index]))
        return list(self._parsed)


@contextmanager
def recording_smtp(
    fault: str = "none", *, rate: float = 0.2, seed: int = 0, victim: str | None = None
) -> Iterator[RecordingSmtp]:
    """A recording SMTP server with ``fault`` on a free loopback port, for the life of the block."""
    handler = FaultyHandler(fault, rate=rate, seed=seed, victim=victim)
    port = free_port()
    controller = _Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield RecordingSmtp(handler, port)
    finally:
        controller.stop()
