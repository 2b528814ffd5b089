"""PaperTrail's own web app: the freshness dashboard, the paper browser, health, metrics, unsubscribe.

``build_app(ctx)`` returns a Starlette app; ``papertrail run`` serves it with uvicorn. Routes:

=================================  =========================================================================
``/``                              status: last 24 hours, sources (ok/quiet/stale/failing), library, queue,
                                   a 30-day chart; refreshes every minute; no JavaScript
``/papers``                        the paper browser: sort, filters, text search, 50 per page (browser.py)
``/papers/{arxiv_id}``             one paper: versions, what each revision changed, AI guides, community
                                   picks, citation ``<meta>`` tags for Zotero and Google Scholar
``/papers/{arxiv_id}.bib``         the paper's BibTeX entry (its newest version), a download
``/sources/{name}``                a source's recent runs
``/healthz``                       liveness: 200 ``ok`` without touching the database
``/readyz``                        200 when ``SELECT 1`` works, else 503 with the reason
``/metrics``                       Prometheus text format, read from the database at scrape time
``/unsubscribe/{token}``           GET asks, POST unsubscribes (RFC 8058 one-click)
``/manage/{token}``                GET shows follows, schedule, language and votes, POST changes them
``/vote/{token}``                  a digest's 👍 / 👎 link: GET asks, POST votes, POST ``…/undo`` undoes
``/feeds?q=QUERY``                 Atom feed of a follow query (cached, conditional GET)
``/feeds/private/{token}``         Atom feed of what one subscriber's digests carried (signed, revocable)
``/manage/{token}/papers.bib``     every paper the subscriber's sent digests carried, as one BibTeX file
``/manage/{token}/likes.bib``      every version the subscriber liked, as one BibTeX file
``/manage/{token}/library``        POST: the reader's reference library (BibTeX, RIS, CSL-JSON, at most
                                   5 MB) seeds their recommendations; a page says what was used and why not
=================================  =========================================================================

Every page is in English or Simplified Chinese (gettext catalog ``locale/zh/LC_MESSAGES/web.po``): a
``lang`` query parameter, else the ``papertrail_lang`` cookie it sets, else the subscriber's stored
language on the pages of a signed link, else the browser's ``Accept-Language``, else the operator's
``PAPERTRAIL_DEFAULT_LANGUAGE`` (:class:`papertrail.web.pages.Reader`). ``/healthz``, ``/readyz`` and
``/metrics`` are for machines and stay English.

The database calls are synchronous; Starlette runs synchronous endpoints in its thread pool, so a slow
query never blocks the event loop the scheduler and the bots share in ``papertrail run``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from markupsafe import Markup
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.guides import service as guides_service
from core.languages import Translator, listing, translator
from core.models import utcnow
from core.overview import screens
from core.overview.status import SourceStatus
from core.papers import status as papers
from core.papers.citations import highwire_tags
from core.papers.health import Health
from core.papers.revisions import history
from core.values import DayCounts
from papertrail.service.context import AppContext
from papertrail.service.source_names import SOURCE_NAMES
from papertrail.web.bibtex import BibtexRoutes
from papertrail.web.browser import BrowserPages
from papertrail.web.chart import ChartWords, daily_chart
from papertrail.web.dashboard import headline_times
from papertrail.web.feeds import FeedPages
from papertrail.web.library import LibraryRoutes
from papertrail.web.metrics import StoreCollector, exposition, judged_sources, metrics_registry, readiness
from papertrail.web.pages import SECURITY_HEADERS, Pages, bare_paper_id, language_headers, number
from papertrail.web.signup import SignupPages
from papertrail.web.subscribers import SubscriberPages
from papertrail.web.votes import VoteRoutes

# The status page reloads itself this often (seconds): a wall display stays current with no script.
REFRESH_SECONDS = 60
CHART_DAYS = 30
# Forms are small, but a Slack App Home click carries the whole published view (up to 40 follows of up
# to 1,000 characters, URL-encoded); anything larger is refused before it is parsed.
MAX_BODY = 512 * 1024
# The site's icon, shipped in the package: browsers ask every site for /favicon.ico (a 404 in the log
# for each first visit otherwise); the pages link the SVG, which scales, and old browsers take the ICO.
STATIC = Path(__file__).with_name("static")
ICONS = {"/favicon.ico": ("favicon.ico", "image/x-icon"), "/favicon.svg": ("favicon.svg", "image/svg+xml")}
# A day: a changed icon shows up the next day, and a browser does not ask again on every page.
ICON_CACHE = "public, max-age=86400"


def build_app(ctx: AppContext, *, clock: Callable[[], datetime] = utcnow) -> Starlette:
    """The web app over ``ctx``'s store and settings; ``clock`` is "now" for every page (tests fix it)."""
    web = _Web(ctx, Pages(clock, ctx.settings.default_language, ctx.settings.display_timezone), clock)
    subscribers = SubscriberPages(ctx, web.pages)
    routes = [
        Route("/", web.status_page, methods=["GET"]),
        *BrowserPages(ctx, web.pages, clock).routes(),
        # Before the paper page, whose {arxiv_id:path} would also take "2411.17700.bib".
        *BibtexRoutes(ctx, web.pages, subscribers).routes(),
        Route("/papers/{arxiv_id:path}", web.paper_page, methods=["GET"]),
        Route("/sources/{name}", web.source_page, methods=["GET"]),
        Route("/healthz", web.healthz, methods=["GET"]),
        Route("/readyz", web.readyz, methods=["GET"]),
        Route("/metrics", web.metrics, methods=["GET"]),
        *icon_routes(),
        *subscribers.routes(),
        *VoteRoutes(ctx, web.pages, subscribers).routes(),
        *LibraryRoutes(ctx, web.pages, subscribers).routes(),
        *SignupPages(ctx, web.pages).routes(),
        *FeedPages(ctx, web.pages, clock).routes(),
    ]
    from notifiers.slack.chat import serves_http  # slack_bolt is imported only when Slack is configured

    if serves_http(ctx.settings.slack_bot()):
        routes += ctx.slack_bot().routes()
    telegram = ctx.telegram_bot() if ctx.settings.telegram_mode == "webhook" else None
    if telegram is not None:
        routes.append(telegram.webhook_route())  # POST /telegram/webhook, secret-checked
    return Starlette(
        routes=routes,
        # Every response gets the security headers, whichever route or error handler made it (405s,
        # /healthz, /metrics and the bots' webhook answers included), not only the rendered pages.
        middleware=[Middleware(SecurityHeadersMiddleware)],
        exception_handlers={404: web.not_found, 405: web.not_allowed, 500: server_error},
        max_body_size=MAX_BODY,
    )


def icon_routes() -> list[Route]:
    """``/favicon.ico`` and ``/favicon.svg``, read once, cached by browsers for a day."""
    routes = []
    for path, (name, media_type) in ICONS.items():
        body = (STATIC / name).read_bytes()

        async def icon(request: Request, body: bytes = body, media_type: str = media_type) -> Response:
            return Response(body, media_type=media_type, headers={"Cache-Control": ICON_CACHE})

        routes.append(Route(path, icon, methods=["GET"]))
    return routes


class SecurityHeadersMiddleware:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response that does not set them itself.

    A pure ASGI middleware (not ``BaseHTTPMiddleware``): it only edits the response start message, so
    streaming and the request body limit work as before. A page's own value wins (the signed-link pages'
    ``Referrer-Policy: no-referrer``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the missing headers to the response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def server_error(request: Request, exc: Exception) -> Response:
    """The 500 answer. Starlette sends it from outside the middleware stack, so it carries the security
    headers itself; it says nothing about the error (the log has the traceback)."""
    return PlainTextResponse("internal server error", status_code=500, headers=SECURITY_HEADERS)


@dataclass(frozen=True, slots=True)
class Banner:
    """The one line at the top of the status page that tells silence from breakage."""

    level: str  # ok | quiet | stale | failing | unknown
    headline: str
    detail: str


def overall(judged: Sequence[SourceStatus], new: int, revised: int, t: Translator | None = None) -> Banner:
    """Sum up every source's verdict: broken beats behind beats quiet beats ok (in ``t``'s language)."""
    t = t or translator(None)
    by_state: dict[Health, list[str]] = {}
    for item in judged:
        by_state.setdefault(item.verdict.standing, []).append(item.facts.source)
    if failing := by_state.get(Health.FAILING):
        return Banner(
            "failing",
            t.gettext("Broken: {sources} failing", sources=listing(t, failing)),
            t.gettext(
                "The last check failed; the reason is in the sources table. "
                "Papers may be missing until it recovers."
            ),
        )
    if stale := by_state.get(Health.STALE):
        return Banner(
            "stale",
            t.gettext("Behind: {sources} stale", sources=listing(t, stale)),
            t.gettext(
                "Checks succeed, but the source still serves an older announcement "
                "than arXiv's calendar expects."
            ),
        )
    counts = {"new": number(new), "revised": number(revised)}
    if all(item.verdict.standing == Health.UNKNOWN for item in judged):
        return Banner(
            "unknown",
            t.gettext("No source has been checked yet"),
            t.gettext("The first run has not finished."),
        )
    if Health.QUIET in by_state:
        return Banner(
            "quiet",
            t.gettext("Quiet: nothing new expected now"),
            t.gettext(
                "No arXiv announcement today (weekend or holiday); every source answered. "
                "{new} new papers and {revised} revised ones in the last 24 hours.",
                **counts,
            ),
        )
    if new or revised:
        return Banner(
            "ok",
            t.gettext("All sources healthy"),
            t.gettext("{new} new papers and {revised} revised ones in the last 24 hours.", **counts),
        )
    return Banner(
        "ok",
        t.gettext("All sources healthy: nothing new"),
        t.gettext(
            "Every source answered; {new} new papers and {revised} revised ones in the last 24 hours.",
            **counts,
        ),
    )


def chart_words(t: Translator, zone: str = "UTC") -> ChartWords:
    """The 30-day chart's legend, description and tooltips in ``t``'s language; ``zone`` names the zone
    whose calendar days the chart shows (``UTC``, ``Beijing time``, ``Europe/Berlin``)."""

    def counts(new: int, revisions: int) -> tuple[str, str]:
        return (
            t.ngettext("{count} new paper", "{count} new papers", new, count=number(new)),
            t.ngettext("{count} revision", "{count} revisions", revisions, count=number(revisions)),
        )

    def describe(days: Sequence[DayCounts]) -> str:
        if not days:
            return t.gettext("No days to show.")
        new, revisions = counts(sum(d.new for d in days), sum(d.revisions for d in days))
        text = t.gettext(
            "From {first} to {last} ({zone}): {new}, {revisions}, {ai} of them AI-related.",
            zone=zone,
            first=days[0].day.isoformat(),
            last=days[-1].day.isoformat(),
            new=new,
            revisions=revisions,
            ai=number(sum(d.ai_related for d in days)),
        )
        busiest = max(days, key=lambda d: (d.total, d.day))
        if busiest.total:
            return text + t.gettext(
                " Busiest day {day} with {count}.", day=busiest.day.isoformat(), count=number(busiest.total)
            )
        return text + t.gettext(" Nothing arrived in this period.")

    def tip(day: DayCounts) -> str:
        new, revisions = counts(day.new, day.revisions)
        return t.gettext(
            "{day}: {new}, {revisions}, {ai} AI-related",
            day=day.day.isoformat(),
            new=new,
            revisions=revisions,
            ai=number(day.ai_related),
        )

    return ChartWords(
        new=t.gettext("new papers"),
        revisions=t.gettext("revisions"),
        ai=t.gettext("AI-related"),
        nothing=t.gettext("nothing arrived in this period"),
        describe=describe,
        tip=tip,
    )


class _Web:
    """The status, paper, source and health endpoints of one app (the browser is ``BrowserPages``)."""

    def __init__(self, ctx: AppContext, pages: Pages, clock: Callable[[], datetime]) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.pages = pages
        self.clock = clock
        self.registry = metrics_registry(StoreCollector(ctx.db, ctx.settings, SOURCE_NAMES, clock))

    # -- pages -------------------------------------------------------------------------------------------

    def status_page(self, request: Request) -> Response:
        """The dashboard of freshness."""
        reader = self.pages.reader(request)
        t = reader.t
        now = self.clock()
        judged, summary = judged_sources(self.db, self.ctx.settings, SOURCE_NAMES, now)
        shown = self.pages.display(reader)
        page = screens.status_page(
            self.db, now, [item.facts.source for item in judged], days=CHART_DAYS, zone=shown.zone
        )
        counts, guides_24h, facts, days = page.counts, page.guides_24h, page.facts, page.days
        day_zone = shown.day_name(now)
        chart = Markup(
            daily_chart(
                days,
                title=t.gettext("News per day, last {n} days ({zone})", n=CHART_DAYS, zone=day_zone),
                words=chart_words(t, day_zone),
            )
        )
        return self.pages.render(
            reader,
            "status.html.j2",
            now=now,
            refresh=REFRESH_SECONDS,
            banner=overall(judged, counts.new_24h, counts.revised_24h, t),
            counts=counts,
            # Shown when guides are made here, or were (the setting may have been removed since).
            guides_24h=guides_24h if self.ctx.settings.llm_url or guides_24h else None,
            summary=summary,
            sources=[(item, facts[item.facts.source]) for item in judged],
            headline=headline_times(facts, counts),
            chart=chart,
            days=days,
            day_zone=day_zone,
        )

    def paper_page(self, request: Request) -> Response:
        """One paper with its version history, AI guides and community picks."""
        reader = self.pages.reader(request)
        t = reader.t
        raw = request.path_params["arxiv_id"]
        bare = bare_paper_id(raw)
        if not bare:
            return language_headers(RedirectResponse("/papers", status_code=307), reader)
        versions = papers.versions_of(self.db, bare)
        picks = papers.picks_of(self.db, bare)
        if not versions and not picks:
            return self.pages.message(
                reader,
                t.gettext("Paper not found"),
                t.gettext("PaperTrail has not seen {id}.", id=raw),
                hint=t.gettext("Check the id (e.g. 2411.17700), or search the library on the papers page."),
                status=404,
            )
        guides = guides_service.guides_for(
            self.db, [v.id for v in versions if v.id is not None], reader.language
        )
        return self.pages.render(
            reader,
            "paper.html.j2",
            arxiv_id=bare,
            latest=versions[-1] if versions else None,
            # Newest first, each with what it changed (core.papers.revisions).
            history=list(reversed(history(versions))),
            # The guides of the versions that have one, newest version first.
            guides=[(v, guides[v.id]) for v in reversed(versions) if v.id in guides],
            picks=list(reversed(picks)),
            upvotes=max((pick.upvotes for pick in picks), default=0),
            # Highwire Press <meta> tags for Zotero and Google Scholar (core.papers.citations); none without
            # a version.
            citation=highwire_tags(versions),
        )

    def source_page(self, request: Request) -> Response:
        """A source's verdict and its recent runs."""
        reader = self.pages.reader(request)
        t = reader.t
        name = request.path_params["name"]
        now = self.clock()
        judged, _ = judged_sources(self.db, self.ctx.settings, SOURCE_NAMES, now)
        verdict = next((item for item in judged if item.facts.source == name), None)
        if verdict is None:
            return self.pages.message(
                reader,
                t.gettext("Unknown source"),
                t.gettext("PaperTrail has no source called {name}.", name=name),
                hint=t.gettext(
                    "The sources are: {names}.",
                    names=listing(t, (item.facts.source for item in judged)),
                ),
                status=404,
            )
        return self.pages.render(
            reader,
            "source.html.j2",
            now=now,
            source=verdict,
            runs=screens.source_runs(self.db, name, limit=50),
        )

    # -- operations (machine-readable: English) --------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        """Liveness: the process answers. Never touches the database."""
        return PlainTextResponse("ok")

    async def readyz(self, request: Request) -> Response:
        """Readiness: the database answers ``SELECT 1``."""
        reason = await run_in_threadpool(readiness, self.db, self.ctx.settings)
        if reason is None:
            return PlainTextResponse("ready")
        return PlainTextResponse(f"not ready: {reason}", status_code=503)

    async def metrics(self, request: Request) -> Response:
        """Prometheus text exposition, read from the database now; behind a bearer token when one is set."""
        if not metrics_authorized(request, self.ctx.settings.metrics_token):
            return PlainTextResponse(
                "metrics need Authorization: Bearer <PAPERTRAIL_METRICS_TOKEN>",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"', "Cache-Control": "no-store"},
            )
        body = await run_in_threadpool(exposition, self.registry)
        return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        """A page for every unknown path (escaped like every other page)."""
        reader = self.pages.reader(request)
        t = reader.t
        return self.pages.message(
            reader,
            t.gettext("Not found"),
            t.gettext("There is no page at {path}.", path=request.url.path),
            hint=t.gettext("The status page is at /, the papers at /papers."),
            status=404,
        )

    async def not_allowed(self, request: Request, exc: Exception) -> Response:
        """Say which methods a path takes (a GET-only page posted to, and the reverse)."""
        reader = self.pages.reader(request)
        text = reader.t.gettext("{method} is not allowed here", method=request.method)
        return language_headers(PlainTextResponse(text, status_code=405), reader)


def metrics_authorized(request: Request, token: SecretStr | None) -> bool:
    """Whether ``request`` may read /metrics: always without a token, else with ``Bearer <token>``.

    Compared in constant time (over bytes, so a non-ASCII header cannot raise), so the answer's timing
    tells nothing about how much of a guess was right.
    """
    if token is None or not token.get_secret_value():
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected)
