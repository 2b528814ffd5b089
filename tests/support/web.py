"""The web app's test client and context on a store."""

from __future__ import annotations

import warnings
from typing import Any

from core.config import Settings
from core.db import Database
from core.delivery.render import Renderer
from ingest.http import HttpClient
from papertrail.service.context import AppContext
from papertrail.web.app import build_app

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same for these tests.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


KEY = "test-secret-key-0123456789abcdef"


def web_context(db: Database, **settings: Any) -> AppContext:
    """An application context over ``store`` (no notifiers: the web app never sends)."""
    url = db.engine.url.render_as_string(hide_password=False)
    return AppContext(
        settings=Settings(database_url=url, **settings),
        db=db,
        renderer=Renderer(),
        notifiers={},
        http=HttpClient("papertrail-tests"),
    )


def client_for(db: Database, **settings: Any) -> TestClient:
    """A test client of the app over ``store``; the secret key is set unless given."""
    settings.setdefault("secret_key", KEY)
    return TestClient(build_app(web_context(db, **settings)), follow_redirects=False)
