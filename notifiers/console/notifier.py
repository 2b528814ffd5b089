"""Console notifier: prints the plain-text digest. Needs no configuration; ``papertrail demo`` uses it."""

from __future__ import annotations

import sys
from typing import ClassVar, TextIO

from core.channel import DeliveryError
from core.escaping import strip_control
from core.values import Message, SendResult


class ConsoleNotifier:
    """Writes each digest to a text stream (standard output by default). No length limit."""

    channel: ClassVar[str] = "console"
    max_length: ClassVar[int | None] = None

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    async def send(self, address: str, message: Message) -> SendResult:
        """Print the digest with a header naming the recipient.

        The header is a fixed English separator (scripts and tests split the output on it); the digest
        under it is worded in the subscriber's language.
        """
        out = self.stream or sys.stdout
        # Titles and names come from the network: never let them drive the terminal.
        text = f"--- digest for console:{strip_control(address)} ---\n{strip_control(message.text)}\n"
        try:
            out.write(text)
            out.flush()
        except OSError as exc:  # BrokenPipeError: `papertrail digest --now | head` whose reader exited
            # Not written is not sent: the digest stays pending for the next pass.
            raise DeliveryError(
                f"cannot write the digest to standard output: {exc.strerror or exc} (its reader closed it?)",
                retryable=True,
            ) from exc
        return SendResult(platform_id=None)

    async def aclose(self) -> None:
        """Nothing to release: the stream belongs to the caller."""
