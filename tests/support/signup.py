"""The sign-up pages' context, an SMTP sink and the tokens mailed."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from core.config import Settings
from core.db import Database
from core.delivery.render import Renderer
from ingest.http import HttpClient
from notifiers.email.notifier import EmailNotifier
from papertrail.service.context import AppContext
from tests.servers import SinkHandler, smtp_sink

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client


KEY = "signup-test-key-0123456789abcdef"


LINK = re.compile(r"https?://\S+/confirm/(\S+)")


@pytest.fixture(name="smtp")
def smtp_fixture() -> Iterator[tuple[SinkHandler, int]]:
    with smtp_sink() as sink:
        yield sink


def context(db: Database, port: int, **extra: Any) -> AppContext:
    url = db.engine.url.render_as_string(hide_password=False)
    values: dict[str, Any] = {
        "database_url": url,
        "smtp_host": "127.0.0.1",
        "smtp_port": port,
        "secret_key": KEY,
        "public_url": "https://papertrail.example",
        **extra,
    }
    settings = Settings(**values)
    notifiers = {"email": EmailNotifier(settings.smtp())} if settings.smtp_host else {}
    return AppContext(
        settings=settings,
        db=db,
        renderer=Renderer(
            public_url=settings.public_url, secret_key=KEY, default_language=settings.default_language
        ),
        notifiers=notifiers,  # type: ignore[arg-type]
        http=HttpClient("papertrail-tests"),
    )


def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str, smtp_port: int, tmp_path: Path) -> None:
    """Settings for an in-process CLI run: this database, the SMTP sink, the key, no papertrail.toml."""
    for name, value in {
        "DATABASE_URL": database_url,
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(smtp_port),
        "SECRET_KEY": KEY,
        "CONFIG": str(tmp_path / "none.toml"),
    }.items():
        monkeypatch.setenv(f"PAPERTRAIL_{name}", value)


def token_in(sink: SinkHandler, index: int = -1) -> str:
    body = sink.received[index].message.get_body(preferencelist=("plain",))
    assert body is not None
    found = LINK.search(body.get_content())
    assert found, body.get_content()
    return unquote(found[1])
