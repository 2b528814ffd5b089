"""HTML pages for the web app: one Jinja environment over ``templates/web`` and the response headers.

Every value a template prints is escaped (autoescape for ``.html.j2``) after control and bidi-override
characters are stripped, as in :mod:`core.render`: titles, abstracts, author names, source errors and
search terms come from outside and can never add markup to a page.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
import markupsafe
from starlette.responses import HTMLResponse

from core.render import short_authors, shorten
from core.resources import resource_dir
from core.text_safety import strip_control

# No script may run on these pages (they need none), nothing may frame them, and forms post only here.
# Styles are inline in the page (<style> and the chart's SVG attributes).
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
# Pages whose URL carries a subscriber's token: never cached, never sent on as a Referer.
PRIVATE_HEADERS = {**SECURITY_HEADERS, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _autoescape(name: str | None) -> bool:
    return bool(name and name.endswith((".html.j2", ".html", ".svg.j2")))


def _finalize(value: object) -> object:
    # Markup (a macro's output, the chart) was built from values that already passed here.
    if isinstance(value, markupsafe.Markup):
        return value
    if isinstance(value, str):
        return strip_control(value)
    return value


def when(value: datetime | None) -> str:
    """A timestamp as ``2024-11-28 20:00 UTC``, or a dash when unknown."""
    if value is None:
        return "—"
    return f"{value:%Y-%m-%d %H:%M} UTC"


def ago(value: datetime | None, now: datetime) -> str:
    """How long ago ``value`` was, in words (``5 min ago``, ``3 h ago``, ``2 days ago``)."""
    if value is None:
        return "never"
    seconds = (now - value).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    if seconds < 60:
        text = "less than a minute"
    elif seconds < 3600:
        text = f"{int(seconds // 60)} min"
    elif seconds < 48 * 3600:
        text = f"{int(seconds // 3600)} h"
    else:
        text = f"{int(seconds // 86400)} days"
    return f"in {text}" if future else f"{text} ago"


def number(value: int) -> str:
    """``12,345``."""
    return f"{value:,}"


def safe_url(value: str | None) -> str:
    """``value`` when it is an http(s) URL, else empty: no ``javascript:`` link from untrusted data."""
    if not value:
        return ""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return ""
    return value.strip() if parts.scheme in ("http", "https") and parts.netloc else ""


def paper_path(arxiv_id: str) -> str:
    """The page of one paper (old-style ids keep their slash: ``/papers/hep-th/9901001``)."""
    return "/papers/" + quote(arxiv_id, safe="/")


def arxiv_url(arxiv_id: str, version: int | None = None) -> str:
    """arXiv's abstract page of a paper, or of one version."""
    suffix = f"v{version}" if version else ""
    return f"https://arxiv.org/abs/{quote(arxiv_id, safe='/')}{suffix}"


def query_url(path: str, params: Mapping[str, object], **changes: object) -> str:
    """``path`` with ``params`` updated by ``changes`` as its query string; empty values are left out."""
    merged = {**params, **changes}
    pairs = [(k, str(v)) for k, v in merged.items() if v not in (None, "", False, 0)]
    return f"{path}?{urlencode(pairs)}" if pairs else path


@functools.cache
def make_environment() -> jinja2.Environment:
    """The Jinja environment over ``templates/web`` (one per process: it caches compiled templates)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates") / "web")),
        autoescape=_autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters.update(
        when=when,
        ago=ago,
        number=number,
        safe_url=safe_url,
        short_authors=short_authors,
        shorten=shorten,
        paper_path=paper_path,
        arxiv_url=arxiv_url,
    )
    env.globals["query_url"] = query_url
    return env


class Pages:
    """Renders the templates into responses; ``clock`` is the time every page is computed for."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.env = make_environment()
        self.clock = clock

    def render(
        self,
        name: str,
        *,
        status: int = 200,
        private: bool = False,
        now: datetime | None = None,
        **values: Any,
    ) -> HTMLResponse:
        """Render ``name`` with ``values``; ``private`` pages (token links) are not cached or referred."""
        html = self.env.get_template(name).render(now=now or self.clock(), **values)
        headers = PRIVATE_HEADERS if private else SECURITY_HEADERS
        return HTMLResponse(html, status_code=status, headers=dict(headers))

    def message(
        self, title: str, text: str, *, status: int, hint: str = "", private: bool = False
    ) -> HTMLResponse:
        """A page that says one thing: an error with what to do, or a confirmation."""
        return self.render(
            "message.html.j2", status=status, private=private, title=title, text=text, hint=hint
        )
