"""The check that a page carries the security headers."""

from __future__ import annotations

import warnings
from typing import Any

from papertrail.web.pages import SECURITY_HEADERS

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client


def assert_secured(response: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        if name == "Referrer-Policy":  # signed-link pages tighten it to no-referrer
            assert response.headers.get(name) in (value, "no-referrer"), response.url
        else:
            assert response.headers.get(name) == value, (response.url, name)
