"""Votes from the signed links of email digests: 👍 and 👎 on one version of a paper.

Each item of an email digest links ``/vote/{token}`` twice, once per value; the token (purpose ``vote``,
``core.people.tokens.vote_subject``) binds the recipient's address, the version and the value, so the link
casts
exactly the vote it was made for and nothing else.

* ``GET /vote/{token}`` only asks: mail scanners and link previews follow every link in a mail, and a
  vote they cast would teach the reader's model what the reader never said. The page shows the paper (its
  title, escaped, and versioned id), the reader's current vote on it, and one button that posts.
* ``POST /vote/{token}`` records the vote (``core.taste.votes.cast_vote``: new, changed or unchanged) and
shows
  it with an Undo button.
* ``POST /vote/{token}/undo`` removes the reader's vote on that version (``core.taste.votes.undo_vote``) and
  offers to vote again.

A vote link opens its one paper's vote and nothing more: the pages link no manage page and show no other
token, because a vote link travels further than its reader (a webhook receiver's buttons show it to a
whole channel) and the manage page's export holds a webhook's URL. Undo is on the page itself.

Like the unsubscribe link, the signed token in the URL is the only authority: the POSTs need no cookie
and no CSRF token (a cross-site form would have to know the token), the pages are never cached nor sent
on as a Referer, and the CSP lets forms post only to this site. A forged or altered token is a 400 page
that says what to do; a paper no longer stored a 404 page that says so. The pages speak the subscriber's
language unless the request chooses one (:mod:`papertrail.web.pages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.models import Subscriber
from core.papers.status import stored_version
from core.people import tokens
from core.taste.votes import VoteState, cast_vote, undo_vote, votes_on
from papertrail.service.context import AppContext
from papertrail.web.pages import Pages, Reader
from papertrail.web.subscribers import SubscriberPages


@dataclass(frozen=True, slots=True)
class Ballot:
    """What a valid vote link names: the subscriber, the stored version and the value."""

    subscriber: Subscriber
    arxiv_id: str
    version: int
    value: int
    title: str
    authors: tuple[str, ...]
    version_id: int


class VoteRoutes:
    """The three ``/vote`` routes of one app."""

    def __init__(self, ctx: AppContext, pages: Pages, subscribers: SubscriberPages) -> None:
        self.db = ctx.db
        self.pages = pages
        self.subscribers = subscribers

    def routes(self) -> list[Route]:
        """GET asks, POST votes, POST ``/undo`` takes the vote back."""
        return [
            Route("/vote/{token}", self.ask, methods=["GET"]),
            Route("/vote/{token}", self.vote, methods=["POST"]),
            Route("/vote/{token}/undo", self.undo, methods=["POST"]),
        ]

    def ask(self, request: Request) -> Response:
        """The confirmation page: the paper and one button; records nothing."""
        reader = self.pages.reader(request)
        token = request.path_params["token"]
        found = self._ballot(token, reader)
        if isinstance(found, Response):
            return found
        assert found.subscriber.id is not None
        current = votes_on(self.db, found.subscriber.id, [found.version_id])
        return self._view(found, token, reader, state="ask", current=current.get(found.version_id))

    async def vote(self, request: Request) -> Response:
        """Record the link's vote and show it, with Undo."""
        # Read (and bound) the body; its content does not matter: the signed token is the authority.
        await request.form(max_fields=10, max_files=0)
        reader = self.pages.reader(request)
        return await run_in_threadpool(self._vote, request.path_params["token"], reader)

    async def undo(self, request: Request) -> Response:
        """Take back the reader's vote on the link's version, and offer to vote again."""
        await request.form(max_fields=10, max_files=0)
        reader = self.pages.reader(request)
        return await run_in_threadpool(self._undo, request.path_params["token"], reader)

    def _vote(self, token: str, reader: Reader) -> Response:
        found = self._ballot(token, reader)
        if isinstance(found, Response):
            return found
        assert found.subscriber.id is not None
        outcome = cast_vote(self.db, found.subscriber.id, found.arxiv_id, found.value, version=found.version)
        if outcome.state == VoteState.UNKNOWN_PAPER:  # removed since the page was shown
            return self._gone(found.arxiv_id, found.version, reader.with_stored(found.subscriber.language))
        return self._view(found, token, reader, state=outcome.state, current=found.value)

    def _undo(self, token: str, reader: Reader) -> Response:
        found = self._ballot(token, reader)
        if isinstance(found, Response):
            return found
        assert found.subscriber.id is not None
        outcome = undo_vote(self.db, found.subscriber.id, found.arxiv_id, version=found.version)
        return self._view(found, token, reader, state=outcome.state, current=None)

    def _ballot(self, token: str, reader: Reader) -> Ballot | Response:
        """What a valid vote token names, or the page that says why the link does not work."""
        verified = self.subscribers.signed(token, tokens.VOTE, reader)
        if isinstance(verified, Response):
            return verified
        try:
            address, arxiv_id, number, value = tokens.split_vote(verified)
        except tokens.InvalidToken as exc:
            return self.subscribers.broken(exc, reader)
        subscriber = self.subscribers.subscriber_at(address, reader)
        if isinstance(subscriber, Response):
            return subscriber
        stored = stored_version(self.db, arxiv_id, number)
        if stored is None or stored.id is None:
            return self._gone(arxiv_id, number, reader.with_stored(subscriber.language))
        return Ballot(
            subscriber, arxiv_id, number, value, stored.title, tuple(stored.authors or ()), stored.id
        )

    def _gone(self, arxiv_id: str, version: int, reader: Reader) -> Response:
        t = reader.t
        return self.pages.message(
            reader,
            t.gettext("Paper not stored"),
            t.gettext(
                "PaperTrail no longer has arXiv:{id}v{version}, so it cannot record a vote on it.",
                id=arxiv_id,
                version=version,
            ),
            hint=t.gettext("Nothing was recorded. The vote links of your newer digests work as before."),
            status=404,
            private=True,
        )

    def _view(
        self, ballot: Ballot, token: str, reader: Reader, *, state: str, current: int | None
    ) -> Response:
        path = f"/vote/{quote(token, safe='')}"
        return self.pages.render(
            reader.with_stored(ballot.subscriber.language),
            "vote.html.j2",
            private=True,
            ballot=ballot,
            like=ballot.value > 0,
            state=state,
            current=current,
            action=path,
            undo=f"{path}/undo",
        )
