"""Unsubscribe and manage pages: no account, a signed link per subscriber (core.people.tokens).

* ``GET /unsubscribe/{token}`` only asks: mail scanners and link previews follow every link in a mail, so
  a GET must never change anything. Its button posts the same body a mail client's one-click does.
* ``POST /unsubscribe/{token}`` unsubscribes (RFC 8058 one-click: the body is
  ``List-Unsubscribe=One-Click``, form-encoded, with no cookie and no CSRF token; the signed token in the
  URL is the authority). The subscriber keeps its follows, so the manage page can re-subscribe.
* ``GET /leave/{token}`` asks and ``POST /leave/{token}`` (one-click compatible, like unsubscribe) ends the
  membership of one newsletter only; the token binds the address and the newsletter's name. A digest that
  is one newsletter's issue only carries it as its unsubscribe link (core.delivery.render).
* ``GET /manage/{token}/export.json`` downloads the whole subscription as one JSON document
  (core.people.subscription: the file ``papertrail import subscription`` reads), and ``GET
  /manage/{token}/feeds.opml`` the reader's Atom feeds as OPML 2.0 (core.delivery.feed_links); both as
  attachments, never cached.
* ``GET /manage/{token}`` shows the follows, schedule, timezone, heartbeat, language and status; ``POST
  /manage/{token}`` with ``action`` = ``add``, ``remove``, ``schedule``, ``heartbeat`` (``heartbeat`` =
  ``on`` or ``off``), ``language``, ``unsubscribe``, ``resubscribe``, ``feed`` (revoke the private Atom
  feed's link and make a new one, core.delivery.feeds) or ``unvote`` (``paper`` and ``version``: undo one
  vote,
  core.taste.votes) changes them and redirects back (303) to the page with a notice. Any other action is
  refused with 400. The page shows the private feed's link, drawing its nonce the first time it is shown,
  and the reader's votes: the likes, dislikes and library seeds counted, the
  :data:`MAX_VOTES_SHOWN` newest votes listed, each with an undo button, and a form that uploads the
  reader's reference library to ``POST /manage/{token}/library`` (:mod:`papertrail.web.library`).

The pages speak the subscriber's stored language (``Subscriber.language``) unless the request chooses
one (``?lang=`` or the language cookie, :mod:`papertrail.web.pages`); choosing a language on the manage
page stores it for the digests too, and remembers it in the cookie.

A forged, altered or wrong-purpose token gets a 400 page that says so and what to do; with no
``PAPERTRAIL_SECRET_KEY`` the links cannot exist, and the pages answer 404 saying they are not enabled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple, dataclass
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from core.channel import normalise_address
from core.delivery.digests import resume
from core.delivery.feed_links import opml
from core.delivery.feeds import private_feed_url, renew_private_feed
from core.follows import subscribers
from core.follows.manage import follow
from core.follows.query import QueryError
from core.follows.subscribers import SubscriberSettings
from core.languages import LANGUAGES, N_, listing, normalize_language, said
from core.models import Follow, Newsletter, Subscriber, SubscriberStatus
from core.overview.screens import manage_page
from core.papers.citations import MAX_HISTORY_PAPERS
from core.people import newsletters, tokens
from core.people.masking import mask_address
from core.people.subscription import export_subscription
from core.people.subscription_file import dumps
from core.schedule import parse_schedule, zone
from core.taste.library_file import MAX_FILE_BYTES
from core.taste.votes import VoteState, undo_vote
from papertrail.service.context import AppContext
from papertrail.web.pages import PRIVATE_HEADERS, Pages, Reader, remember_language, token_problem

UNSUBSCRIBE_REASON = "unsubscribed through a link in a digest"
# Longest value accepted in a form field; the follow language itself stops at 1,000 characters.
MAX_FIELD = 2000
# The newest votes the manage page lists (the counts above the list cover them all).
MAX_VOTES_SHOWN = 20

# What the manage page says after a successful action (the redirect carries only the key).
NOTICES = {
    "added": N_("Follow added."),
    "updated": N_("That follow existed already; its options are updated."),
    "unchanged": N_("You follow that already; nothing changed."),
    "removed": N_("Follow removed."),
    "schedule": N_("Schedule and timezone saved."),
    "heartbeat_on": N_(
        "Heartbeat on: on arXiv announcement days when nothing matched, a one-line message at your digest "
        "time."
    ),
    "heartbeat_off": N_("Heartbeat off: on a day when nothing matched, nothing is sent."),
    "language": N_("Language saved: your digests and these pages use it."),
    "unsubscribed": N_("You are unsubscribed: no more digests. Your follows are kept below."),
    "resubscribed": N_("You are subscribed again: digests resume on your schedule."),
    "active": N_("You are subscribed already."),
    "feed": N_("Your feed has a new link; the old link no longer works."),
    "unvoted": N_("Vote undone."),
}
ACTIONS = (
    "add",
    "remove",
    "schedule",
    "heartbeat",
    "language",
    "unsubscribe",
    "resubscribe",
    "feed",
    "unvote",
)


@dataclass(frozen=True, slots=True)
class FormError:
    """A rejected form: the message, and for a query its position and a caret excerpt."""

    message: str
    excerpt: str = ""
    position: int | None = None


class SubscriberPages:
    """The unsubscribe and manage routes of one app."""

    def __init__(self, ctx: AppContext, pages: Pages) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.pages = pages

    def routes(self) -> list[Route]:
        """The eight routes (GET shows or downloads, POST acts)."""
        return [
            Route("/unsubscribe/{token}", self.unsubscribe_page, methods=["GET"]),
            Route("/unsubscribe/{token}", self.unsubscribe_post, methods=["POST"]),
            Route("/leave/{token}", self.leave_page, methods=["GET"]),
            Route("/leave/{token}", self.leave_post, methods=["POST"]),
            Route("/manage/{token}", self.manage_page, methods=["GET"]),
            Route("/manage/{token}", self.manage_post, methods=["POST"]),
            Route("/manage/{token}/export.json", self.export_json, methods=["GET"]),
            Route("/manage/{token}/feeds.opml", self.feeds_opml, methods=["GET"]),
        ]

    # -- tokens ------------------------------------------------------------------------------------------

    def _key(self) -> str:
        secret = self.ctx.settings.secret_key
        return secret.get_secret_value() if secret else ""

    def managed(self, token: str, reader: Reader) -> Subscriber | Response:
        """The subscriber a valid manage token names, or the page that says why there is none: for routes
        behind the manage link that live elsewhere (``papertrail.web.bibtex``)."""
        return self._subscriber(token, tokens.MANAGE, reader)

    def signed(self, token: str, purpose: str, reader: Reader) -> str | Response:
        """The subject of a valid ``purpose`` token, or the page that says why the link does not work: for
        the other signed links (``papertrail.web.votes``)."""
        return self._verify(token, purpose, reader)

    def broken(self, exc: tokens.InvalidToken, reader: Reader) -> Response:
        """The 400 page of a genuine token whose subject does not read (``tokens.split_vote``)."""
        return self._invalid(exc, reader)

    def subscriber_at(self, address: str, reader: Reader) -> Subscriber | Response:
        """The subscriber at a verified token's ``address``, or the page that says there is none."""
        return self._find(address, reader)

    def manage_path(self, address: str) -> str:
        """The path of ``address``'s manage page (signed with the server's key)."""
        return self._links(address)[1]

    def _subscriber(self, token: str, purpose: str, reader: Reader) -> Subscriber | Response:
        """The subscriber a valid token names, or the page that says why there is none."""
        verified = self._verify(token, purpose, reader)
        return verified if isinstance(verified, Response) else self._find(verified, reader)

    def _verify(self, token: str, purpose: str, reader: Reader) -> str | Response:
        """The subject of a valid token, or the page that says why the link does not work."""
        t = reader.t
        key = self._key()
        if not key:
            return self.pages.message(
                reader,
                t.gettext("Links not enabled"),
                t.gettext("Unsubscribe and manage links are not enabled on this PaperTrail server."),
                hint=t.gettext(
                    "Ask its operator to set PAPERTRAIL_SECRET_KEY; digests then carry working links."
                ),
                status=404,
                private=True,
            )
        try:
            return tokens.verify(key, purpose, token)
        except tokens.InvalidToken as exc:
            return self._invalid(exc, reader)

    def _invalid(self, exc: tokens.InvalidToken, reader: Reader) -> Response:
        t = reader.t
        return self.pages.message(
            reader,
            t.gettext("This link is not valid"),
            token_problem(exc, t),
            hint=t.gettext(
                "Open the link from your most recent digest again (the whole link, in one piece). "
                "If it still fails, the server's key may have changed: the next digest carries new links."
            ),
            status=400,
            private=True,
        )

    def _find(self, address: str, reader: Reader) -> Subscriber | Response:
        """The subscriber at ``address``, or the page that says there is none."""
        subscriber = subscribers.subscriber_by_address(self.db, address)
        if subscriber is None:
            try:
                subscriber = subscribers.subscriber_by_address(self.db, normalise_address(address))
            except ValueError:
                subscriber = None
        if subscriber is None or subscriber.id is None:
            t = reader.t
            return self.pages.message(
                reader,
                t.gettext("No subscription"),
                t.gettext(
                    "PaperTrail has no subscription for {address} any more.", address=mask_address(address)
                ),
                hint=t.gettext(
                    "Nothing will be sent to it. To subscribe again, add a follow through a chat bot "
                    "or ask the operator."
                ),
                status=404,
                private=True,
            )
        return subscriber

    def _links(self, address: str) -> tuple[str, str]:
        """The unsubscribe and manage paths of ``address`` (signed with the server's key)."""
        key = self._key()
        unsubscribe = tokens.sign(key, tokens.UNSUBSCRIBE, address)
        manage = tokens.sign(key, tokens.MANAGE, address)
        return f"/unsubscribe/{quote(unsubscribe, safe='')}", f"/manage/{quote(manage, safe='')}"

    # -- unsubscribe ---------------------------------------------------------------------------------------

    def unsubscribe_page(self, request: Request) -> Response:
        """Ask before unsubscribing; changes nothing."""
        reader = self.pages.reader(request)
        found = self._subscriber(request.path_params["token"], tokens.UNSUBSCRIBE, reader)
        if not isinstance(found, Subscriber):
            return found
        return self._unsubscribe_view(found, reader, done=False)

    async def unsubscribe_post(self, request: Request) -> Response:
        """One-click unsubscribe (RFC 8058) and the confirmation page's button."""
        # Read (and bound) the body; its content does not matter: the signed token is the authority.
        await request.form(max_fields=10, max_files=0)
        reader = self.pages.reader(request)
        return await run_in_threadpool(self._unsubscribe, request.path_params["token"], reader)

    def _unsubscribe(self, token: str, reader: Reader) -> Response:
        found = self._subscriber(token, tokens.UNSUBSCRIBE, reader)
        if not isinstance(found, Subscriber):
            return found
        already = found.status == SubscriberStatus.UNSUBSCRIBED
        if not already:
            assert found.id is not None
            found = subscribers.unsubscribe(self.db, found.id, reason=UNSUBSCRIBE_REASON)
        return self._unsubscribe_view(found, reader, done=True)

    def _unsubscribe_view(self, subscriber: Subscriber, reader: Reader, *, done: bool) -> Response:
        unsubscribe_path, manage_path = self._links(subscriber.address)
        assert subscriber.id is not None
        return self.pages.render(
            reader.with_stored(subscriber.language),
            "unsubscribe.html.j2",
            private=True,
            subscriber=subscriber,
            follows=len(subscribers.follows_of(self.db, subscriber.id)),
            done=done,
            unsubscribed=subscriber.status == SubscriberStatus.UNSUBSCRIBED,
            action=unsubscribe_path,
            manage=manage_path,
        )

    # -- leave one newsletter --------------------------------------------------------------------------------

    def _member(self, token: str, reader: Reader) -> tuple[Subscriber, Newsletter] | Response:
        """The subscriber and newsletter a valid leave token names, or the page that says why not."""
        verified = self._verify(token, tokens.LEAVE, reader)
        if isinstance(verified, Response):
            return verified
        try:
            address, name = tokens.split_leave(verified)
        except tokens.InvalidToken as exc:
            return self._invalid(exc, reader)
        subscriber = self._find(address, reader)
        if isinstance(subscriber, Response):
            return subscriber
        newsletter = newsletters.named(self.db, name)
        if newsletter is None or newsletter.id is None:
            reader = reader.with_stored(subscriber.language)
            t = reader.t
            return self.pages.message(
                reader,
                t.gettext("No such newsletter"),
                t.gettext(
                    "PaperTrail has no newsletter {name!r} any more, so nothing of it will be sent.",
                    name=name,
                ),
                hint=t.gettext("Your manage page, linked from every digest, shows what you still receive."),
                status=404,
                private=True,
            )
        return subscriber, newsletter

    def leave_page(self, request: Request) -> Response:
        """Ask before leaving the newsletter; changes nothing (mail scanners follow every link)."""
        reader = self.pages.reader(request)
        found = self._member(request.path_params["token"], reader)
        if isinstance(found, Response):
            return found
        return self._leave_view(*found, reader, done=False)

    async def leave_post(self, request: Request) -> Response:
        """Leave the newsletter: RFC 8058 one-click and the page's button; the token is the authority."""
        await request.form(max_fields=10, max_files=0)
        reader = self.pages.reader(request)
        return await run_in_threadpool(self._leave, request.path_params["token"], reader)

    def _leave(self, token: str, reader: Reader) -> Response:
        found = self._member(token, reader)
        if isinstance(found, Response):
            return found
        subscriber, newsletter = found
        assert subscriber.id is not None and newsletter.id is not None
        left = newsletters.leave_membership(self.db, newsletter.id, subscriber.id)
        # Left already (a second click): the page says so rather than claiming it just happened.
        return self._leave_view(subscriber, newsletter, reader, done=left)

    def _leave_view(
        self, subscriber: Subscriber, newsletter: Newsletter, reader: Reader, *, done: bool
    ) -> Response:
        assert subscriber.id is not None
        _, manage_path = self._links(subscriber.address)
        token = tokens.sign(
            self._key(), tokens.LEAVE, tokens.leave_subject(subscriber.address, newsletter.name)
        )
        member = any(n.id == newsletter.id for n in newsletters.newsletters_of(self.db, subscriber.id))
        return self.pages.render(
            reader.with_stored(subscriber.language),
            "leave.html.j2",
            private=True,
            subscriber=subscriber,
            newsletter=newsletter,
            member=member,
            done=done,
            action=f"/leave/{quote(token, safe='')}",
            manage=manage_path,
        )

    # -- manage --------------------------------------------------------------------------------------------

    def manage_page(self, request: Request) -> Response:
        """The subscriber's follows, schedule, language and status, with forms to change them."""
        reader = self.pages.reader(request)
        found = self._subscriber(request.path_params["token"], tokens.MANAGE, reader)
        if not isinstance(found, Subscriber):
            return found
        reader = reader.with_stored(found.language)
        notice = NOTICES.get(request.query_params.get("done", ""), "")
        return self._manage_view(found, reader, notice=reader.t.gettext(notice) if notice else "")

    async def manage_post(self, request: Request) -> Response:
        """Carry out one action from the manage page, then show the page again."""
        form = await request.form(max_fields=20, max_files=0)
        reader = self.pages.reader(request)
        fields: dict[str, str] = {}
        for name, value in form.multi_items():
            if not isinstance(value, str) or len(value) > MAX_FIELD:
                t = reader.t
                return self.pages.message(
                    reader,
                    t.gettext("Form not accepted"),
                    t.gettext("The field {name!r} is not a short text.", name=name),
                    status=400,
                    private=True,
                )
            fields.setdefault(name, value)
        return await run_in_threadpool(self._manage, request.path_params["token"], fields, reader)

    def _manage(self, token: str, fields: Mapping[str, str], reader: Reader) -> Response:
        found = self._subscriber(token, tokens.MANAGE, reader)
        if not isinstance(found, Subscriber):
            return found
        reader = reader.with_stored(found.language)
        t = reader.t
        action = fields.get("action", "")
        if action not in ACTIONS:
            return self._manage_view(
                found,
                reader,
                error=FormError(
                    t.gettext(
                        "unknown action {action!r}; the page's buttons send one of {actions}",
                        action=action,
                        actions=listing(t, ACTIONS),
                    )
                ),
                status=400,
            )
        outcome = getattr(self, f"_do_{action}")(found, fields, reader)
        if isinstance(outcome, FormError):
            return self._manage_view(found, reader, error=outcome, status=400, values=fields)
        redirect = RedirectResponse(f"/manage/{quote(token, safe='')}?done={outcome}", status_code=303)
        if action == "language":
            # The reader chose it here: this browser shows it too, whatever it was set to before.
            remember_language(redirect, fields["language"].strip())
        return redirect

    def _do_add(self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader) -> str | FormError:
        text = fields.get("query", "")
        try:
            result = follow(
                self.db,
                subscriber.address,
                text,
                timezone=subscriber.timezone,
                schedule=subscriber.schedule,
                revisions=fields.get("new_only") is None,
                instant=fields.get("instant") is not None,
            )
        except QueryError as exc:
            return FormError(exc.said(reader.t), exc.excerpt(), exc.position)
        except ValueError as exc:
            return FormError(said(exc, reader.t))
        return result.outcome

    def _do_remove(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        assert subscriber.id is not None
        wanted = fields.get("follow", "")
        target: Follow | None = next(
            (f for f in subscribers.follows_of(self.db, subscriber.id) if str(f.id) == wanted.strip()),
            None,
        )
        if target is None or target.id is None:
            return FormError(
                reader.t.gettext(
                    "that follow is not on your list (removed already?); the list below is current"
                )
            )
        subscribers.remove_follow(self.db, target.id)
        return "removed"

    def _do_schedule(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        assert subscriber.id is not None
        timezone = fields.get("timezone", "").strip() or subscriber.timezone
        try:
            parsed = parse_schedule(fields.get("schedule", ""))
            zone(timezone)
        except ValueError as exc:
            return FormError(said(exc, reader.t))
        subscribers.change_settings(
            self.db, subscriber.id, SubscriberSettings(schedule=parsed.text, timezone=timezone)
        )
        return "schedule"

    def _do_heartbeat(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        assert subscriber.id is not None
        chosen = fields.get("heartbeat", "").strip()
        if chosen not in ("on", "off"):
            return FormError(
                reader.t.gettext("unknown heartbeat choice {choice!r}; choose on or off", choice=chosen)
            )
        subscribers.change_settings(self.db, subscriber.id, SubscriberSettings(heartbeat=chosen == "on"))
        return f"heartbeat_{chosen}"

    def _do_language(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        assert subscriber.id is not None
        chosen = fields.get("language", "").strip()
        if chosen not in LANGUAGES:
            return FormError(
                reader.t.gettext(
                    "unknown language {language!r}; choose one of {choices}",
                    language=chosen,
                    choices=listing(reader.t, LANGUAGES),
                )
            )
        subscribers.change_settings(
            self.db, subscriber.id, SubscriberSettings(language=normalize_language(chosen))
        )
        return "language"

    def _do_unsubscribe(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        assert subscriber.id is not None
        if subscriber.status != SubscriberStatus.UNSUBSCRIBED:
            subscribers.unsubscribe(self.db, subscriber.id, reason="unsubscribed on the manage page")
        return "unsubscribed"

    def _do_resubscribe(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        if subscriber.status == SubscriberStatus.ACTIVE:
            return "active"
        # The same as `papertrail resume`: active again, dead-lettered digests re-queued.
        resume(self.db, subscriber.address)
        return "resubscribed"

    def _do_unvote(
        self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader
    ) -> str | FormError:
        assert subscriber.id is not None
        paper = fields.get("paper", "").strip()
        version = fields.get("version", "").strip()
        if not paper or not version.isdigit():
            return FormError(reader.t.gettext("that vote is not on your list; the list below is current"))
        outcome = undo_vote(self.db, subscriber.id, paper, version=int(version))
        if outcome.state == VoteState.NOT_VOTED:
            return FormError(
                reader.t.gettext("that vote is not on your list (undone already?); the list below is current")
            )
        return "unvoted"

    # -- downloads ----------------------------------------------------------------------------------------

    def export_json(self, request: Request) -> Response:
        """The subscription file of the token's subscriber, as a download (``papertrail import subscription``
        reads it on another server)."""
        reader = self.pages.reader(request)
        found = self._subscriber(request.path_params["token"], tokens.MANAGE, reader)
        if not isinstance(found, Subscriber):
            return found
        body = dumps(export_subscription(self.db, found.address, now=self.pages.clock()))
        return _download(body, "application/json", "papertrail-subscription.json")

    def feeds_opml(self, request: Request) -> Response:
        """The token's subscriber's Atom feeds as OPML 2.0, as a download for a feed reader."""
        reader = self.pages.reader(request)
        found = self._subscriber(request.path_params["token"], tokens.MANAGE, reader)
        if not isinstance(found, Subscriber):
            return found
        assert found.id is not None
        queries = [f.query for f in subscribers.follows_of(self.db, found.id)]
        private = private_feed_url(self.db, self.ctx.settings, found)
        body = opml(self.ctx.settings, found, queries, private=private, now=self.pages.clock())
        return _download(body, "text/x-opml", "papertrail-feeds.opml")

    def _do_feed(self, subscriber: Subscriber, fields: Mapping[str, str], reader: Reader) -> str | FormError:
        assert subscriber.id is not None
        renew_private_feed(self.db, subscriber.id)
        return "feed"

    def _manage_view(
        self,
        subscriber: Subscriber,
        reader: Reader,
        *,
        notice: str = "",
        error: FormError | None = None,
        status: int = 200,
        values: Mapping[str, str] | None = None,
    ) -> Response:
        assert subscriber.id is not None
        _, manage_path = self._links(subscriber.address)
        page = manage_page(self.db, subscriber.id, votes_shown=MAX_VOTES_SHOWN)
        form: dict[str, Any] = {"query": "", "schedule": subscriber.schedule, "timezone": subscriber.timezone}
        if values:
            form.update({k: v for k, v in values.items() if k in form})
        return self.pages.render(
            reader,
            "manage.html.j2",
            status=status,
            private=True,
            subscriber=subscriber,
            follows=page.follows,
            action=manage_path,
            downloads={"export": f"{manage_path}/export.json", "feeds": f"{manage_path}/feeds.opml"},
            notice=notice,
            error=error,
            form=form,
            statuses=SubscriberStatus,
            # What a subscriber who chose no language gets: the operator's default.
            default_language=self.pages.default_language,
            # The private Atom feed's link; its nonce is drawn the first time the page shows it.
            feed_url=private_feed_url(self.db, self.ctx.settings, subscriber),
            max_history=MAX_HISTORY_PAPERS,
            # Learned follows: the newest votes, and (likes, dislikes, library seeds).
            votes=page.votes,
            vote_counts=astuple(page.vote_counts),
            # The library upload's form posts to {action}/library (papertrail.web.library); its limit.
            library_mb=f"{MAX_FILE_BYTES / 1e6:,.0f}",
        )


def _download(body: str, media_type: str, filename: str) -> Response:
    """``body`` as an attachment named ``filename``: a subscriber's own data (its address, its private
    feed link), so never cached and never referred, like the pages of its link."""
    headers = {**PRIVATE_HEADERS, "Content-Disposition": f'attachment; filename="{filename}"'}
    return Response(body.encode("utf-8"), media_type=f"{media_type}; charset=utf-8", headers=headers)
