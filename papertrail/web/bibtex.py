"""BibTeX downloads: one paper's entry, and a subscriber's whole history (the entries are
``core.papers.citations``'s).

* ``GET /papers/{arxiv_id}.bib``: the entry of the paper's newest stored version, as a download
  (``Content-Type: application/x-bibtex; charset=utf-8``, ``Content-Disposition: attachment;
  filename="2411.17700.bib"``). The id is read like the paper page reads it: ``arXiv:`` prefix and version
  suffix dropped, old-style ids keep their slash (``/papers/hep-th/9901001.bib``). A paper PaperTrail has
  not seen, or knows only from a community pick (no arXiv metadata yet), is a 404 page.
* ``GET /manage/{token}/papers.bib``: behind the manage link's token, one entry per paper that a sent
  digest of the subscriber carried (``core.delivery.history``), the most recently sent first, at most
  :data:`MAX_HISTORY_PAPERS`; streamed a page of the ledger at a time. Its ``@comment`` lines are in the
  reader's language; the entries are data and never translated. Not cached, not referred (like the manage
  page). Only what digests carried: the papers a subscriber liked are the next file.
* ``GET /manage/{token}/likes.bib``: behind the same token, one entry per version the subscriber liked (👍),
  the most recent vote first, at most :data:`MAX_HISTORY_PAPERS`; the version that was liked
  is cited, whichever is newest. Headers as for the history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from core.delivery.history import sent_papers
from core.languages import Translator
from core.models import Subscriber, Version
from core.papers import status as papers
from core.papers.citations import MAX_HISTORY_PAPERS, MEDIA_TYPE, entry, file_name
from core.taste.votes import liked_versions
from papertrail.service.context import AppContext
from papertrail.web.pages import PRIVATE_HEADERS, Pages, bare_paper_id, language_headers, paper_path
from papertrail.web.subscribers import SubscriberPages

HISTORY_FILE = "papertrail.bib"
LIKES_FILE = "papertrail-likes.bib"


def _attachment(name: str) -> str:
    return f'attachment; filename="{name}"'


def _comment(text: str) -> str:
    # Our own sentences: no braces, so the @comment is balanced whatever the language.
    return "@comment{" + text.replace("{", "(").replace("}", ")") + "}\n\n"


class BibtexRoutes:
    """The three ``.bib`` routes of one app."""

    def __init__(self, ctx: AppContext, pages: Pages, subscribers: SubscriberPages) -> None:
        self.db = ctx.db
        self.pages = pages
        self.subscribers = subscribers

    def routes(self) -> list[Route]:
        """``/papers/{arxiv_id}.bib`` (before the paper page's route), ``/manage/{token}/papers.bib`` and
        ``/manage/{token}/likes.bib``."""
        return [
            Route("/papers/{arxiv_id:path}.bib", self.paper_bib, methods=["GET"]),
            Route("/manage/{token}/papers.bib", self.history_bib, methods=["GET"]),
            Route("/manage/{token}/likes.bib", self.likes_bib, methods=["GET"]),
        ]

    def paper_bib(self, request: Request) -> Response:
        """The BibTeX entry of one paper's newest stored version."""
        reader = self.pages.reader(request)
        t = reader.t
        raw = request.path_params["arxiv_id"]
        bare = bare_paper_id(raw)
        versions = papers.versions_of(self.db, bare) if bare else []
        if not versions:
            known = bool(bare) and bool(papers.picks_of(self.db, bare))
            return self.pages.message(
                reader,
                t.gettext("Paper not found"),
                t.gettext(
                    "PaperTrail knows {id} only from a community pick: it has no arXiv metadata to cite yet.",
                    id=raw,
                )
                if known
                else t.gettext("PaperTrail has not seen {id}.", id=raw),
                hint=t.gettext("Its page is {path}.", path=paper_path(bare))
                if known
                else t.gettext("Check the id (e.g. 2411.17700), or search the library on the papers page."),
                status=404,
            )
        newest = versions[-1]
        return Response(
            entry(newest),
            media_type=MEDIA_TYPE,
            headers={"Content-Disposition": _attachment(file_name(newest.paper_id))},
        )

    def history_bib(self, request: Request) -> Response:
        """Every paper the subscriber's sent digests carried, as one streamed BibTeX file."""
        return self._private_file(request, HISTORY_FILE, self._history)

    def likes_bib(self, request: Request) -> Response:
        """Every version the subscriber liked, as one BibTeX file."""
        return self._private_file(request, LIKES_FILE, self._likes)

    def _private_file(
        self, request: Request, name: str, lines: Callable[[Subscriber, Translator], Iterator[str]]
    ) -> Response:
        """A download behind the manage link's token: ``lines`` of the subscriber, in its language."""
        reader = self.pages.reader(request)
        found = self.subscribers.managed(request.path_params["token"], reader)
        if not isinstance(found, Subscriber):
            return found
        reader = reader.with_stored(found.language)
        response = StreamingResponse(
            lines(found, reader.t),
            media_type=MEDIA_TYPE,
            headers={**PRIVATE_HEADERS, "Content-Disposition": _attachment(name)},
        )
        return language_headers(response, reader)

    def _likes(self, subscriber: Subscriber, t: Translator) -> Iterator[str]:
        assert subscriber.id is not None
        yield _comment(
            t.gettext("PaperTrail: the papers you liked, most recent first; one entry per version.")
        )
        liked = liked_versions(self.db, subscriber.id, limit=MAX_HISTORY_PAPERS + 1)
        yield from _entries(liked, t, none=t.gettext("You have liked no paper yet."))

    def _history(self, subscriber: Subscriber, t: Translator) -> Iterator[str]:
        assert subscriber.id is not None
        yield _comment(
            t.gettext(
                "PaperTrail: the papers of the digests sent to you, most recently sent first; one entry per "
                "paper, for its newest version."
            )
        )
        # One more than the limit: the extra one only says that the file stops short.
        sent = sent_papers(self.db, subscriber.id, limit=MAX_HISTORY_PAPERS + 1)
        yield from _entries(sent, t, none=t.gettext("PaperTrail has sent you no digest yet."))


def _entries(versions: Iterable[Version], t: Translator, *, none: str) -> Iterator[str]:
    """The BibTeX entries of ``versions``, at most :data:`MAX_HISTORY_PAPERS` (a comment says where the
    file stops short), or the comment ``none`` when there are none."""
    count = 0
    for version in versions:
        if count == MAX_HISTORY_PAPERS:
            yield _comment(
                t.gettext(
                    "PaperTrail stopped at {n} papers, the most one download holds: older papers are "
                    "not in this file.",
                    n=MAX_HISTORY_PAPERS,
                )
            )
            return
        try:
            text = entry(version)
        except ValueError:  # an id that is not arXiv's (none is stored today): nothing to cite
            continue
        yield text + "\n"
        count += 1
    if not count:
        yield _comment(none)
