"""Atom feeds (RFC 4287): a public feed of any follow query, and each subscriber's private feed of what
their digests carried (docs/feeds.md).

* ``GET /feeds?q=QUERY[&lang=en|zh]``: the newest :data:`core.delivery.feeds.QUERY_FEED_ENTRIES` news
  versions a follow of ``QUERY`` finds (core.delivery.feed_records), new papers and revisions each as
  their own entry. Kept in an in-process cache per normalised query and language for
  :data:`FEED_CACHE_SECONDS` (at most :data:`FEED_CACHE_ENTRIES` feeds), answered with ``ETag`` and
  ``Last-Modified`` and ``304`` to a matching ``If-None-Match`` or ``If-Modified-Since``. A query that does
  not parse gets ``400`` with the parser's message and a caret under the position, in plain text.
* ``GET /feeds/private/{token}``: one subscriber's sent digests' items, newest first, at most
  :data:`core.delivery.feeds.PRIVATE_FEED_ENTRIES`, with each version's AI guide in the subscriber's
  language. The
  token is signed (core.people.tokens.FEED) over the address and the subscriber's feed nonce; a link replaced
  on
  the manage page answers ``410``, any link that was never genuine ``404``, both with the same short text.
  Never cached by anyone (``Cache-Control: private, no-store``) and never sent on as a Referer.

The words of a feed (its title, labels, "revision v2") are in the ``lang`` parameter's language, else the
operator's default language for a query feed and the subscriber's language for a private one; paper
titles, abstracts and author names are as arXiv has them. Feeds are for feed readers, which neither keep
cookies nor say a useful Accept-Language, so neither is read: a query feed's document depends on its URL
alone, which is what lets one cached copy serve every reader.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from core.delivery import feeds
from core.delivery.feed_links import PRIVATE_FEED_PREFIX, query_feed_url
from core.delivery.feeds import PRIVATE_FEED_ENTRIES, QUERY_FEED_ENTRIES, FeedRevoked, feed_subscriber
from core.delivery.render import changes_text, reasons_text, short_authors
from core.escaping import strip_control
from core.follows.query import QueryError, parse
from core.follows.search_text import SearchError, compile_search
from core.languages import LANGUAGE_TAGS, Translator, normalize_language, translator
from core.models import Subscriber
from core.people import tokens
from core.values import DigestItem, FeedEntry
from papertrail.service.context import AppContext
from papertrail.web.atom import MEDIA_TYPE, Entry, Feed, Link, Paragraph, serialize
from papertrail.web.pages import PRIVATE_HEADERS, SECURITY_HEADERS, Pages, arxiv_url, paper_path

# A query feed is built at most once per this many seconds per (normalised query, language) and process;
# readers polling in between get the cached document (or a 304). Also its Cache-Control max-age.
FEED_CACHE_SECONDS = 300
# Query feeds kept in that cache, least recently used dropped first. A feed of 50 entries is about
# 100-200 KB (abstracts and guides), so the cache holds at most some 20 MB.
FEED_CACHE_ENTRIES = 100
# Authors named as atom:author elements of an entry; the content's author line says how many there are.
FEED_MAX_AUTHORS = 20
# A private feed, and every answer about one, is never stored by a cache and never indexed.
PRIVATE_FEED_HEADERS = {**PRIVATE_HEADERS, "Cache-Control": "private, no-store", "X-Robots-Tag": "noindex"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Rendered:
    """A serialized feed with its validators: ``etag`` (quoted, strong: a hash of the bytes) and
    ``last_modified`` (the feed's ``updated``)."""

    body: bytes
    etag: str
    last_modified: datetime

    @classmethod
    def of(cls, body: bytes, updated: datetime) -> Rendered:
        """The validators of ``body``."""
        return cls(body, f'"{hashlib.sha256(body).hexdigest()[:32]}"', updated)


class FeedCache:
    """Query feeds by (normalised query, language), each for :data:`FEED_CACHE_SECONDS`, at most
    :data:`FEED_CACHE_ENTRIES`, least recently used out first. Thread-safe: feeds are built in Starlette's
    thread pool. Two readers who miss at the same moment both build the feed (no lock is held while one
    is built); the second one's copy replaces the first."""

    def __init__(self, seconds: float = FEED_CACHE_SECONDS, entries: int = FEED_CACHE_ENTRIES) -> None:
        self.ttl = timedelta(seconds=seconds)
        self.entries = entries
        self._items: OrderedDict[tuple[str, str], tuple[datetime, Rendered]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str], now: datetime) -> Rendered | None:
        """The cached feed of ``key`` if it was built less than the TTL before ``now``."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            made, rendered = found
            if not made <= now < made + self.ttl:
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return rendered

    def put(self, key: tuple[str, str], rendered: Rendered, now: datetime) -> None:
        """Keep ``rendered`` for ``key`` from ``now``; drop the least recently used beyond the size."""
        with self._lock:
            self._items[key] = (now, rendered)
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def not_modified(request: Request, rendered: Rendered) -> bool:
    """Whether the client's copy is current (RFC 9110 section 13.2.2): ``If-None-Match`` when sent (weak
    comparison, ``*`` included), else ``If-Modified-Since`` against ``Last-Modified`` (whole seconds)."""
    match = request.headers.get("if-none-match")
    if match is not None:
        given = {tag.strip().removeprefix("W/") for tag in match.split(",")}
        return "*" in given or rendered.etag in given
    since = request.headers.get("if-modified-since")
    if not since:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError, IndexError):
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return rendered.last_modified.replace(microsecond=0) <= when


def feed_response(request: Request, rendered: Rendered, headers: Mapping[str, str]) -> Response:
    """``200`` with the feed, or ``304`` with its validators only when the client's copy is current."""
    validators = {
        **headers,
        "ETag": rendered.etag,
        "Last-Modified": format_datetime(rendered.last_modified.astimezone(UTC), usegmt=True),
    }
    if not_modified(request, rendered):
        return Response(status_code=304, headers=validators)
    return Response(rendered.body, media_type=MEDIA_TYPE, headers=validators)


def _said(t: Translator, message: str, **values: str) -> str:
    """A message shared with the templates, whose fields are ``%(name)s``, in ``t``'s language."""
    return t.gettext(message) % values


class FeedPages:
    """The feed routes of one app; ``clock`` is "now" for the cache and empty feeds."""

    def __init__(self, ctx: AppContext, pages: Pages, clock: Callable[[], datetime]) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.pages = pages
        self.clock = clock
        self.cache = FeedCache()
        self.public_url = ctx.settings.public_url.rstrip("/")

    def routes(self) -> list[Route]:
        """``/feeds`` and ``/feeds/private/{token}`` (GET, and HEAD with it)."""
        return [
            Route("/feeds", self.query_feed, methods=["GET"]),
            Route("/feeds/private/{token}", self.private_feed, methods=["GET"]),
        ]

    # -- a query's feed ----------------------------------------------------------------------------------

    def query_feed(self, request: Request) -> Response:
        """The public feed of a follow query."""
        asked = normalize_language(request.query_params.get("lang"))
        language = asked or self.pages.default_language
        t = translator(language)
        text = " ".join(request.query_params.get("q", "").split())
        if not text:
            return self._refused(
                t.gettext("Give a follow query, for example /feeds?q=cat:cs.LG"), language, status=400
            )
        try:
            query = parse(text)
        except QueryError as exc:
            return self._refused(
                t.gettext("cannot read the query: {reason}", reason=exc.said(t)) + "\n" + exc.excerpt(),
                language,
                status=400,
            )
        canonical = query.canonical()
        try:
            search = compile_search(canonical)
        except SearchError as exc:
            return self._refused(
                t.gettext("cannot search for {text!r}: {reason}", text=text, reason=str(exc)),
                language,
                status=400,
            )
        now = self.clock()
        key = (canonical, language)
        rendered = self.cache.get(key, now)
        if rendered is None:
            versions = feeds.query_feed(self.db, search, limit=QUERY_FEED_ENTRIES, language=language)
            # The links name the language unless it is the default: the document then depends on the
            # cache's key alone, whichever request built it.
            chosen = {"lang": language} if language != self.pages.default_language else {}
            self_url = f"{self.public_url}/feeds?{urlencode({'q': canonical, **chosen})}"
            page_url = f"{self.public_url}/papers?{urlencode({'q': canonical, **chosen})}"
            updated = max((v.updated_at for v in versions), default=now)
            feed = Feed(
                id=query_feed_url(self.public_url, canonical),
                title=t.gettext("PaperTrail: {query}", query=canonical),
                subtitle=t.gettext(
                    "The newest papers and revisions the follow {query} finds, newest first "
                    "(at most {count}).",
                    query=canonical,
                    count=QUERY_FEED_ENTRIES,
                ),
                updated=updated,
                links=(
                    Link(self_url, "self", "application/atom+xml"),
                    Link(page_url, "alternate", "text/html"),
                ),
                author="PaperTrail",
                author_uri=f"{self.public_url}/",
                language=LANGUAGE_TAGS[language],
                entries=[self._entry(v, t) for v in versions],
            )
            rendered = Rendered.of(serialize(feed), updated)
            self.cache.put(key, rendered, now)
        headers = {**SECURITY_HEADERS, "Cache-Control": f"public, max-age={FEED_CACHE_SECONDS}"}
        return feed_response(request, rendered, headers)

    # -- a subscriber's feed ---------------------------------------------------------------------------

    def private_feed(self, request: Request) -> Response:
        """The private feed of one subscriber: what their sent digests carried."""
        token = request.path_params["token"]
        secret = self.ctx.settings.secret_key
        key = secret.get_secret_value() if secret else ""
        asked = normalize_language(request.query_params.get("lang"))
        gone = 404
        subscriber: Subscriber | None = None
        if key:
            try:
                subscriber = feed_subscriber(self.db, key, token)
            except tokens.InvalidToken:
                subscriber = None
            except FeedRevoked:
                gone = 410  # the link was genuine: a feed reader may stop asking
        if subscriber is None or subscriber.id is None:
            language = asked or self.pages.reader(request).language
            t = translator(language)
            text = t.gettext(
                "There is no feed at this link: it is not valid, or a newer link replaced it. "
                "The manage page linked from your digests shows your current feed link."
            )
            return self._refused(text, language, status=gone, private=True)
        language = asked or normalize_language(subscriber.language) or self.pages.default_language
        t = translator(language)
        versions = feeds.sent_feed(self.db, subscriber.id, limit=PRIVATE_FEED_ENTRIES, language=language)
        updated = max((v.updated_at for v in versions), default=subscriber.created_at or _EPOCH)
        own = self.public_url + PRIVATE_FEED_PREFIX + quote(token, safe="")
        feed = Feed(
            # Stable while links are replaced, and it names no address: a UUID of the subscriber's row.
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"{self.public_url}/feeds/subscriber/{subscriber.id}").urn,
            # No address: feed readers keep titles on their servers and show them in lists.
            title=t.gettext("PaperTrail: your digests"),
            subtitle=t.gettext(
                "The papers and revisions your newest digests carried, newest first (at most {count}).",
                count=PRIVATE_FEED_ENTRIES,
            ),
            updated=updated,
            links=(
                Link(own, "self", "application/atom+xml"),
                Link(f"{self.public_url}/", "alternate", "text/html"),
            ),
            author="PaperTrail",
            author_uri=f"{self.public_url}/",
            language=LANGUAGE_TAGS[language],
            entries=[self._entry(v, t) for v in versions],
        )
        return feed_response(request, Rendered.of(serialize(feed), updated), PRIVATE_FEED_HEADERS)

    # -- both ------------------------------------------------------------------------------------------

    def _entry(self, entry: FeedEntry, t: Translator) -> Entry:
        """One version as an entry, its own words in ``t``'s language."""
        version = entry.item
        versioned = f"{version.arxiv_id}v{version.version}"
        title = " ".join(version.title.split())
        if version.is_revision:
            title = t.gettext("{title} (revision v{version})", title=title, version=version.version)
        paragraphs: list[Paragraph] = []
        if version.is_revision:
            changed = (
                changes_text(version.changes, t.language)
                if version.changes
                else t.gettext("no change in the tracked fields")
            )
            paragraphs.append(
                Paragraph(
                    t.gettext("changed: {fields}", fields=changed),
                    label=t.gettext("Revision v{version}", version=version.version),
                )
            )
        paragraphs.append(Paragraph(short_authors(version.authors, t.language), label=t.gettext("Authors:")))
        paragraphs.append(Paragraph(" ".join(version.abstract.split())))
        if version.comment:
            paragraphs.append(Paragraph(_said(t, "Comment: %(comment)s", comment=version.comment)))
        if version.journal_ref:
            paragraphs.append(Paragraph(_said(t, "Journal reference: %(ref)s", ref=version.journal_ref)))
        if version.doi:
            paragraphs.append(Paragraph(_said(t, "DOI: %(doi)s", doi=version.doi)))
        if version.reasons:
            paragraphs.append(Paragraph(reasons_text(version.reasons, t.language), label=t.gettext("Why:")))
        paragraphs += self._guide(version, t)
        paragraphs.append(Paragraph(f"arXiv:{versioned}", href=arxiv_url(version.arxiv_id, version.version)))
        return Entry(
            id=arxiv_url(version.arxiv_id, version.version),
            title=title,
            updated=entry.updated_at,
            published=entry.published_at,
            links=(
                Link(arxiv_url(version.arxiv_id, version.version), "alternate", "text/html"),
                Link(f"https://arxiv.org/pdf/{versioned}", "related", "application/pdf", "PDF"),
                Link(self.public_url + paper_path(version.arxiv_id), "related", "text/html", "PaperTrail"),
            ),
            authors=tuple(version.authors[:FEED_MAX_AUTHORS]),
            categories=version.categories,
            summary=" ".join(version.abstract.split()),
            content=tuple(paragraphs),
        )

    @staticmethod
    def _guide(version: DigestItem, t: Translator) -> Sequence[Paragraph]:
        """The version's AI guide, labelled machine-generated, in its own paragraphs."""
        guide = version.guide
        if guide is None:
            return ()
        lang = LANGUAGE_TAGS[t.language]
        paragraphs = [
            Paragraph(
                guide.tldr,
                label=_said(t, "AI guide to v%(version)s (machine-generated)", version=str(version.version)),
                lang=lang,
            )
        ]
        if guide.contributions:
            paragraphs.append(
                Paragraph("", label=t.gettext("Key contributions:"), items=guide.contributions, lang=lang)
            )
        if guide.changes:
            paragraphs.append(
                Paragraph(_said(t, "What changed: %(changes)s", changes=guide.changes), lang=lang)
            )
        return paragraphs

    def _refused(self, text: str, language: str, *, status: int, private: bool = False) -> Response:
        """A plain-text refusal in ``language``."""
        headers = dict(PRIVATE_FEED_HEADERS if private else SECURITY_HEADERS)
        headers["Content-Language"] = LANGUAGE_TAGS[language]
        return PlainTextResponse(strip_control(text), status_code=status, headers=headers)
