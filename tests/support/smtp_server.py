"""A local SMTP server (aiosmtpd) with optional authentication."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.servers import LoopbackController


@dataclass
class Got:
    """One message the server accepted, with the connection it came over and its raw bytes."""

    peer: Any
    rcpt_tos: list[str]
    message: EmailMessage
    raw: bytes


class Recorder:
    """aiosmtpd handler: records connections, logins and messages; answers commands as scripted."""

    def __init__(self) -> None:
        self.received: list[Got] = []
        self.peers: list[Any] = []  # one per connection (its EHLO)
        self.ehlo_names: list[str] = []
        self.servers: list[Any] = []
        self.logins: list[tuple[bytes, bool]] = []
        self.quit_seen = threading.Event()
        self.quits = 0
        self.noop_reply: str | None = None
        self.mail_reply: str | None = None
        self.rcpt_replies: dict[str, str] = {}
        self.data_reply: str | None = None

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        session.host_name = hostname
        self.peers.append(session.peer)
        self.ehlo_names.append(hostname)
        self.servers.append(server)
        return responses

    async def handle_NOOP(self, server: Any, session: Any, envelope: Any, arg: str) -> str:
        return self.noop_reply or "250 OK"

    async def handle_QUIT(self, server: Any, session: Any, envelope: Any) -> str:
        self.quits += 1
        self.quit_seen.set()
        return "221 Bye"

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if self.mail_reply:
            return self.mail_reply
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if address in self.rcpt_replies:
            return self.rcpt_replies[address]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.data_reply:
            return self.data_reply
        raw = envelope.original_content or envelope.content
        message = message_from_bytes(raw, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.received.append(Got(session.peer, list(envelope.rcpt_tos), message, raw))
        return "250 Message accepted"

    def drop_connections(self, controller: Controller) -> None:
        """Close every client connection from the server side, as a server's idle timeout does."""

        async def close() -> None:
            for server in self.servers:
                if server.transport is not None:
                    server.transport.close()
            while any(server.transport is not None for server in self.servers):
                await asyncio.sleep(0.01)

        asyncio.run_coroutine_threadsafe(close(), controller.loop).result(timeout=5)


def authenticate(
    server: Any, session: Any, envelope: Any, mechanism: str, auth_data: LoginPassword
) -> AuthResult:
    """Accept ada / right-password only; record each attempt's login and outcome."""
    success = (auth_data.login, auth_data.password) == (b"ada", b"right-password")
    server.event_handler.logins.append((auth_data.login, success))
    return AuthResult(success=success, handled=False)


@contextmanager
def smtp_server(**smtp_options: Any) -> Iterator[tuple[Recorder, Controller]]:
    """A real SMTP server on 127.0.0.1 with the Recorder as its handler."""
    handler = Recorder()
    controller = LoopbackController(handler, **smtp_options)
    controller.start()
    try:
        yield handler, controller
    finally:
        controller.stop()
