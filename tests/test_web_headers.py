"""Every response carries the security headers; /metrics can be closed with a bearer token; the web server
is started with the limits uvicorn offers."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.db import Database
from papertrail.service import runtime
from papertrail.web.app import build_app
from tests.support.web import client_for, web_context
from tests.support.web_headers import assert_secured

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

METRICS_TOKEN = "metrics-token-0123456789"


def test_every_response_has_the_security_headers(sqlite_store: Database) -> None:
    client = client_for(sqlite_store)
    responses = [
        client.get("/healthz"),
        client.get("/readyz"),
        client.get("/metrics"),
        client.post("/healthz"),  # 405
        client.post("/"),  # 405
        client.delete("/metrics"),  # 405
        client.get("/no/such/page"),  # 404
        client.get("/"),
        client.get("/unsubscribe/garbage"),  # 400, private
    ]
    assert [r.status_code for r in responses] == [200, 200, 200, 405, 405, 405, 404, 200, 400]
    for response in responses:
        assert_secured(response)
    assert responses[-1].headers["referrer-policy"] == "no-referrer"


def test_the_site_icon_is_served_and_linked(sqlite_store: Database) -> None:
    """Browsers ask every site for /favicon.ico: it answers, cached, and every page links the icons."""
    client = client_for(sqlite_store)
    ico = client.get("/favicon.ico")
    assert ico.status_code == 200 and ico.headers["content-type"] == "image/x-icon"
    assert ico.content.startswith(b"\x00\x00\x01\x00")  # an ICO directory: reserved 0, type 1 (icon)
    assert "max-age=86400" in ico.headers["cache-control"]
    assert_secured(ico)
    svg = client.get("/favicon.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.startswith("<svg") and "max-age" in svg.headers["cache-control"]
    assert client.head("/favicon.ico").status_code == 200
    for path in ("/", "/papers", "/subscribe"):
        page = client.get(path).text
        assert '<link rel="icon" href="/favicon.svg" type="image/svg+xml">' in page, path
        assert '<link rel="icon" href="/favicon.ico"' in page, path


def test_a_server_error_has_the_security_headers_and_no_details(sqlite_store: Database) -> None:
    app = build_app(web_context(sqlite_store))

    async def boom(request: Request) -> Response:
        raise RuntimeError("secret detail")

    app.router.routes.append(Route("/boom", boom))
    response = TestClient(app, raise_server_exceptions=False).get("/boom")
    assert response.status_code == 500 and "secret detail" not in response.text
    assert_secured(response)


def test_metrics_behind_a_bearer_token(sqlite_store: Database) -> None:
    open_client = client_for(sqlite_store)
    assert open_client.get("/metrics").status_code == 200  # no token set: open, as before
    client = client_for(sqlite_store, metrics_token=METRICS_TOKEN)
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {METRICS_TOKEN}x"},
        {"Authorization": f"Basic {METRICS_TOKEN}"},
        {"Authorization": METRICS_TOKEN},
        {"Authorization": "Bearer"},
    ):
        refused = client.get("/metrics", headers=headers)
        assert refused.status_code == 401, headers
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "papertrail_" not in refused.text
        assert_secured(refused)
    allowed = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert allowed.status_code == 200 and "papertrail_" in allowed.text
    assert client.get("/healthz").status_code == 200  # only /metrics is closed


def test_the_web_server_gets_uvicorns_limits(sqlite_store: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def config(app: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise Stop

    import uvicorn

    monkeypatch.setattr(uvicorn, "Config", config)
    with pytest.raises(Stop):
        asyncio.run(runtime.web_role(web_context(sqlite_store), asyncio.Event()))
    assert seen["timeout_keep_alive"] == runtime.WEB_KEEP_ALIVE_SECONDS
    assert seen["h11_max_incomplete_event_size"] == runtime.WEB_MAX_HEADER_BYTES
    assert seen["limit_concurrency"] == runtime.WEB_MAX_CONNECTIONS
    # Every option given exists in the installed uvicorn (a misspelt one would fail only at start-up).
    import inspect

    params = inspect.signature(uvicorn.config.Config.__init__).parameters
    assert set(seen) <= set(params)
