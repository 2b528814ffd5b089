"""HTML pages for the web app: a Jinja environment per language over ``templates/web``, the reader's
language, and the response headers.

Every value a template prints is escaped (autoescape for ``.html.j2``) after control and bidi-override
characters are stripped, as in :mod:`core.delivery.render`: titles, abstracts, author names, source errors, AI
guides and search terms come from outside and can never add markup to a page. Values filled into a
translated sentence pass the same finalize and escaping (:func:`core.languages.install_jinja`).

The language of a page (:class:`Reader`): a ``lang`` query parameter wins and is remembered in the
``papertrail_lang`` cookie; else that cookie; else, on the pages of a subscriber's signed link, the
subscriber's stored language; else the browser's ``Accept-Language``; else the operator's default language
(``PAPERTRAIL_DEFAULT_LANGUAGE``, given to :class:`Pages`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
import markupsafe
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from core.delivery.render import CHANGE_LABELS, short_authors, shorten
from core.escaping import strip_control
from core.languages import (
    DEFAULT_LANGUAGE,
    LANGUAGE_NAMES,
    LANGUAGE_TAGS,
    LANGUAGES,
    N_,
    Translator,
    install_jinja,
    listing,
    negotiate,
    normalize_language,
    reader_language,
    translator,
)
from core.papers.citations import bibtex_path
from core.people.masking import mask_address
from core.resources import resource_dir
from papertrail.web.times import DisplayZone, display_zone

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

# The language switch's choice, remembered for a year on every path; SameSite=Lax so that a link from a
# mail or another site carries it, while a cross-site form cannot.
LANGUAGE_COOKIE = "papertrail_lang"
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
# A page's language depends on these request headers: caches must keep one copy per value.
VARY = "Accept-Language, Cookie"


@dataclass(frozen=True, slots=True)
class Reader:
    """Who reads a page: what each way of choosing a language says, and the resulting language.

    ``asked`` is the ``lang`` query parameter (remembered in the cookie when the page is sent),
    ``remembered`` the cookie, ``stored`` the subscriber's own language on the pages of a signed link,
    ``browser`` the best match of ``Accept-Language`` (the operator's default language when it names none
    PaperTrail speaks). ``query`` holds the request's other query parameters, which the language switch
    keeps.
    """

    asked: str | None = None
    remembered: str | None = None
    stored: str | None = None
    browser: str = DEFAULT_LANGUAGE
    query: tuple[tuple[str, str], ...] = ()

    @property
    def language(self) -> str:
        """The page's language: asked, else remembered, else stored, else the browser's."""
        return self.asked or self.remembered or self.stored or self.browser

    @property
    def t(self) -> Translator:
        """Translates the page's messages written in Python."""
        return translator(self.language)

    def with_stored(self, language: str | None) -> Reader:
        """This reader on a page of a subscriber whose stored language is ``language`` (None: unknown)."""
        return replace(self, stored=normalize_language(language))

    def switch_url(self, language: str) -> str:
        """This page in ``language``: a query-only link, so it resolves against the page's own path."""
        return "?" + urlencode([*self.query, ("lang", language)])

    def switch(self) -> list[tuple[str, str, str, bool]]:
        """The language switch: (tag, name in itself, link, current) per language."""
        return [
            (LANGUAGE_TAGS[code], LANGUAGE_NAMES[code], self.switch_url(code), code == self.language)
            for code in LANGUAGES
        ]


def reader_of(request: Request, default: str = DEFAULT_LANGUAGE) -> Reader:
    """The reader of ``request``: its ``lang`` parameter, language cookie and Accept-Language, with
    ``default`` (the operator's default language) when the header names no language PaperTrail speaks."""
    return Reader(
        asked=normalize_language(request.query_params.get("lang")),
        remembered=normalize_language(request.cookies.get(LANGUAGE_COOKIE)),
        browser=negotiate(request.headers.get("accept-language"), default),
        query=tuple((k, v) for k, v in request.query_params.multi_items() if k != "lang"),
    )


def remember_language(response: Response, language: str) -> Response:
    """Set the language cookie: a year, every path, SameSite=Lax (no script reads it)."""
    response.set_cookie(
        LANGUAGE_COOKIE, language, max_age=LANGUAGE_COOKIE_AGE, path="/", samesite="lax", httponly=True
    )
    return response


def language_headers(response: Response, reader: Reader) -> Response:
    """Say the page's language, that it varies with the request's, and remember a ``lang`` choice."""
    response.headers["Content-Language"] = LANGUAGE_TAGS[reader.language]
    response.headers["Vary"] = VARY
    if reader.asked:
        remember_language(response, reader.asked)
    return response


def _autoescape(name: str | None) -> bool:
    return bool(name and name.endswith((".html.j2", ".html", ".svg.j2")))


def _finalize(value: object) -> object:
    # Markup (a macro's output, the chart) was built from values that already passed here.
    if isinstance(value, markupsafe.Markup):
        return value
    if isinstance(value, str):
        return strip_control(value)
    return value


def ago(value: datetime | None, now: datetime, t: Translator | None = None) -> str:
    """How long ago ``value`` was, in words (``5 min ago``, ``3 h ago``, ``2 days ago``; or ``in 5 min``)."""
    t = t or translator(DEFAULT_LANGUAGE)
    if value is None:
        return t.gettext("never")
    seconds = (now - value).total_seconds()
    if seconds < 0:
        seconds = -seconds
        if seconds < 60:
            return t.gettext("in less than a minute")
        if seconds < 3600:
            return t.gettext("in {n} min", n=int(seconds // 60))
        if seconds < 48 * 3600:
            return t.gettext("in {n} h", n=int(seconds // 3600))
        return t.ngettext("in {n} day", "in {n} days", int(seconds // 86400))
    if seconds < 60:
        return t.gettext("less than a minute ago")
    if seconds < 3600:
        return t.gettext("{n} min ago", n=int(seconds // 60))
    if seconds < 48 * 3600:
        return t.gettext("{n} h ago", n=int(seconds // 3600))
    return t.ngettext("{n} day ago", "{n} days ago", int(seconds // 86400))


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


def bare_paper_id(raw: str) -> str:
    """The paper id a ``/papers/...`` path names: without ``arXiv:`` prefix or version (``2411.17700v2``)."""
    return re.sub(r"v\d+$", "", raw.strip().removeprefix("arXiv:").removeprefix("arxiv:"))


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


# Words the pages show for fixed values stored in English (states, field names): translated where shown.
# A value not listed here (a source's error, a note) is shown as it is.
WORDS = {
    # source health (core.papers.health.Health)
    "ok": N_("ok"),
    "quiet": N_("quiet"),
    "stale": N_("stale"),
    "failing": N_("failing"),
    "unknown": N_("unknown"),
    "checking": N_("checking…"),
    # how a run ended (core.models.RunState)
    "running": N_("running"),
    "empty": N_("empty"),
    "not_modified": N_("not modified"),
    "error": N_("error"),
    # what a revision changed (core.papers.revisions), worded as digests word it
    **CHANGE_LABELS,
    # how arXiv announced a version (core.values.AnnounceType)
    "new": N_("new"),
    "cross": N_("cross"),
    "replace": N_("replace"),
    "replace-cross": N_("replace-cross"),
    # subscriber status (core.models.SubscriberStatus)
    "active": N_("active"),
    "paused": N_("paused"),
    "unsubscribed": N_("unsubscribed"),
    "unconfirmed": N_("unconfirmed"),
}


def word(value: object, t: Translator | None = None) -> str:
    """A fixed English value (a state, a field name) in the reader's language; any other value as it is."""
    text = str(value)
    known = WORDS.get(text)
    return (t or translator(DEFAULT_LANGUAGE)).gettext(known) if known else text


# A source's verdict in words, where core.papers.health and core.papers.status word it the same way every
# time; errors
# and notes of a run (and anything new) are shown as they are.
_FIXED_REASONS = frozenset(
    (
        N_("never checked"),
        N_("never checked successfully"),
        N_("the last check failed"),
        N_("last check succeeded"),
        N_("no arXiv announcement today (weekend or holiday)"),
        N_("feed unchanged since the last check (HTTP 304)"),
        N_("no papers waiting for arXiv metadata"),
    )
)
# core.papers.status.CHECKING_REASON: the verdict of the last finished check, while one is in flight.
_CHECKING = re.compile(r"last check: (\w+) — (.*)", re.S)
_CURRENT = re.compile(r"current: mailing of (\d{4}-\d{2}-\d{2})")
_STALE = re.compile(
    r"serves the mailing of (\d{4}-\d{2}-\d{2}); arXiv announced the one of (\d{4}-\d{2}-\d{2}) "
    r"at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC"
)


# The run notes of core.papers.pipeline, one pattern and message per kind; a note joins its parts with "; ".
# Notes say "1 version" / "3 versions" (core.english.counted); runs stored before that say "version(s)",
# so a noun's ending matches all three. The msgids keep "(s)": they are the catalogs' keys, and English
# readers see the stored note as it is.
_S = r"(?:s|\(s\))?"
_DAY = r"\d{4}-\d{2}-\d{2}"
_NOTES = (
    (
        re.compile(rf"(\d+) pick{_S} on ({_DAY}), (\d+) new, (\d+) paper{_S} new to PaperTrail"),
        N_("{picks} pick(s) on {day}, {new} new, {unseen} paper(s) new to PaperTrail"),
        ("picks", "day", "new", "unseen"),
    ),
    (re.compile(rf"(\d+) version{_S} stored as history"), N_("{n} version(s) stored as history"), ("n",)),
    (
        re.compile(rf"completed (\d+) of (\d+) paper{_S}"),
        N_("completed {n} of {total} paper(s)"),
        ("n", "total"),
    ),
    (re.compile(r"skipped (\d+): (.*)", re.S), N_("skipped {n}: {items}"), ("n", "items")),
    (re.compile(rf"skipped (\d+) line{_S}: (.*)", re.S), N_("skipped {n} line(s): {items}"), ("n", "items")),
    (re.compile(r"arXiv does not know (.*)", re.S), N_("arXiv does not know {ids}"), ("ids",)),
)


def source_reason(reason: str | None, t: Translator | None = None, zone: DisplayZone | None = None) -> str:
    """A verdict's reason or a run's note in ``t``'s language when it is a fixed one, else as it is.

    A note of two parts (``15 pick(s) on …; skipped 2: …``) is worded part by part; what the parts quote
    (skipped lines, ids) is shown as stored. The time in a stale feed's reason (stored in UTC) is shown
    in ``zone`` (UTC when None).
    """
    if not reason:
        return ""
    t = t or translator(DEFAULT_LANGUAGE)
    if found := _CHECKING.fullmatch(reason):
        return t.gettext(
            "last check: {state} — {reason}", state=word(found[1], t), reason=source_reason(found[2], t, zone)
        )
    head, separator, tail = reason.partition("; ")
    if separator and (said := _note(head, t)) is not None:
        # The tail quotes data (skipped lines, unknown ids) that may itself hold "; ": only its lead-in is
        # worded, the data is shown as stored.
        return said + t.gettext("; ") + (_note(tail, t) or tail)
    if (said := _note(reason, t)) is not None:
        return said
    if reason in _FIXED_REASONS:
        return t.gettext(reason)
    if found := _CURRENT.fullmatch(reason):
        return t.gettext("current: mailing of {day}", day=found[1])
    if found := _STALE.fullmatch(reason):
        announced = datetime.strptime(found[3], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
        return t.gettext(
            "serves the mailing of {served}; arXiv announced the one of {expected} at {at}",
            served=found[1],
            expected=found[2],
            at=(zone or display_zone("UTC", t)).when(announced),
        )
    return reason


def _note(part: str, t: Translator) -> str | None:
    for pattern, message, names in _NOTES:
        if found := pattern.fullmatch(part):
            if t.language == DEFAULT_LANGUAGE:
                return part  # stored in English, with its plurals
            values = dict(zip(names, found.groups(), strict=True))
            if (
                "ids" in values
            ):  # core.papers.pipeline lists the ids with ", ": a list, in the reader's language
                values["ids"] = listing(t, values["ids"].split(", "))
            return t.gettext(message, **values)
    return None


# What core.people.tokens says about a link that does not verify, as a sentence for the page.
_TOKEN_PROBLEMS = {
    "this link is incomplete; open the whole link from the mail": N_(
        "This link is incomplete; open the whole link from the mail."
    ),
    "this link is damaged; open the whole link from the mail": N_(
        "This link is damaged; open the whole link from the mail."
    ),
    "this link is not valid (altered, or made for something else)": N_(
        "This link is not valid (altered, or made for something else)."
    ),
    "this confirmation link is from an older sign-up; sign up again for a new one": N_(
        "This confirmation link is from an older sign-up; sign up again for a new one."
    ),
}


def token_problem(exc: Exception, t: Translator) -> str:
    """Why a signed link was refused (core.people.tokens.InvalidToken), as a sentence in ``t``'s language."""
    text = str(exc)
    known = _TOKEN_PROBLEMS.get(text)
    return t.gettext(known) if known else f"{text[:1].upper()}{text[1:]}."


@functools.cache
def make_environment(language: str = DEFAULT_LANGUAGE, zone: str = "UTC") -> jinja2.Environment:
    """The Jinja environment of ``language`` over ``templates/web``, showing times in the IANA ``zone``
    (one per language, zone and process: it caches compiled templates)."""
    t = translator(language)
    shown = display_zone(zone, t)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates") / "web")),
        autoescape=_autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
        extensions=["jinja2.ext.i18n"],
    )

    def translated_ago(value: datetime | None, now: datetime) -> str:
        return ago(value, now, t)

    def translated_authors(authors: Sequence[str]) -> str:
        return short_authors(authors, t.language)

    def translated_word(value: object) -> str:
        return word(value, t)

    def translated_reason(value: str | None) -> str:
        return source_reason(value, t, shown)

    env.filters.update(
        when=shown.when,
        ago=translated_ago,
        number=number,
        safe_url=safe_url,
        short_authors=translated_authors,
        shorten=shorten,
        paper_path=paper_path,
        bibtex_path=bibtex_path,
        arxiv_url=arxiv_url,
        word=translated_word,
        reason=translated_reason,
        # Pages show a subscriber's address to whoever holds the link: never the URL's credentials.
        mask_address=mask_address,
    )
    env.globals.update(
        query_url=query_url, language_names=LANGUAGE_NAMES, language_tags=LANGUAGE_TAGS, zone=shown
    )
    install_jinja(env, t.language, lambda context, value: _finalize(value))
    return env


class Pages:
    """Renders the templates into responses; ``clock`` is the time every page is computed for,
    ``default_language`` the language of readers whose request names none (``Settings.default_language``),
    ``zone`` the IANA zone its times are shown in (``PAPERTRAIL_DISPLAY_TIMEZONE``).
    """

    def __init__(
        self, clock: Callable[[], datetime], default_language: str = DEFAULT_LANGUAGE, zone: str = "UTC"
    ) -> None:
        self.default_language = reader_language(default=default_language)
        self.env = make_environment(self.default_language)
        self.clock = clock
        self.zone = zone

    def display(self, reader: Reader) -> DisplayZone:
        """The display zone in the reader's language (for times worded in Python: the chart)."""
        return display_zone(self.zone, reader.t)

    def reader(self, request: Request) -> Reader:
        """The reader of ``request`` (see :func:`reader_of`), with this site's default language."""
        return reader_of(request, self.default_language)

    def render(
        self,
        reader: Reader,
        name: str,
        *,
        status: int = 200,
        private: bool = False,
        now: datetime | None = None,
        **values: Any,
    ) -> HTMLResponse:
        """Render ``name`` in the reader's language with ``values``; ``private`` pages (token links) are
        not cached or referred."""
        env = make_environment(reader.language, self.zone)
        html = env.get_template(name).render(
            now=now or self.clock(),
            reader=reader,
            html_lang=LANGUAGE_TAGS[reader.language],
            switch=reader.switch(),
            **values,
        )
        headers = PRIVATE_HEADERS if private else SECURITY_HEADERS
        response = HTMLResponse(html, status_code=status, headers=dict(headers))
        language_headers(response, reader)
        return response

    def message(
        self,
        reader: Reader,
        title: str,
        text: str,
        *,
        status: int,
        hint: str = "",
        private: bool = False,
    ) -> HTMLResponse:
        """A page that says one thing (already in the reader's language): an error with what to do, or a
        confirmation."""
        return self.render(
            reader, "message.html.j2", status=status, private=private, title=title, text=text, hint=hint
        )
