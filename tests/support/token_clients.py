"""A web client for the token tests."""

from __future__ import annotations

import warnings

from core.config import Settings
from core.db import Database
from core.delivery.render import Renderer
from ingest.http import HttpClient
from notifiers.email.notifier import EmailNotifier
from papertrail.service.context import AppContext
from papertrail.web.app import build_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient


KEY = "tokens-test-key-0123456789abcdef"


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _spare_bits_variant(part: str) -> str | None:
    """``part`` with its last character changed only in the bits base64 leaves unused (None if it has none).

    A lenient decoder reads both spellings as the same bytes; that is the malleability under test.
    """
    spare = {2: 4, 3: 2}.get(len(part) % 4, 0)  # unused low bits of the last character
    if not spare:
        return None
    value = _ALPHABET.index(part[-1])
    return part[:-1] + _ALPHABET[value ^ 1]


def variants(token: str) -> list[str]:
    """Texts a lenient decoder reads as ``token``'s bytes (or nearly), each of which must be refused."""
    body, _, mac = token.partition(".")
    found = [
        f"{body}=.{mac}",  # padding on the subject
        f"{body}.{mac}=",
        f"{body}.{mac}==",
        f"{body}.{mac}====",
        f"{body[:3]}!{body[3:]}.{mac}",  # junk inside: the library decoder drops it
        f"{body}.{mac[:5]}*{mac[5:]}",
        f"{body}.{mac[:5]}~{mac[5:]}",
        f"{body}.{mac}$",
        f"{body}.{mac} ",  # whitespace was stripped before
        f" {body}.{mac}",
        f"{body}.{mac}\n",
        f"{body.swapcase()}.{mac}",  # another subject: changed bytes
        f"{body}.{mac[:-3]}{mac[-3:].swapcase()}",  # another MAC
    ]
    body_variant = _spare_bits_variant(body)
    if body_variant:
        found.append(f"{body_variant}.{mac}")
    mac_variant = _spare_bits_variant(mac)
    assert mac_variant is not None  # 32 bytes: 43 characters, the last one with 2 spare bits
    found.append(f"{body}.{mac_variant}")
    return found


def client_for(db: Database) -> TestClient:
    """The app over ``store`` with links and sign-up enabled (the SMTP server is never contacted)."""
    url = db.engine.url.render_as_string(hide_password=False)
    settings = Settings(database_url=url, secret_key=KEY, smtp_host="127.0.0.1", smtp_port=9)
    ctx = AppContext(
        settings=settings,
        db=db,
        renderer=Renderer(secret_key=KEY),
        notifiers={"email": EmailNotifier(settings.smtp())},
        http=HttpClient("papertrail-tests"),
    )
    return TestClient(build_app(ctx), follow_redirects=False)
