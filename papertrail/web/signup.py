"""The sign-up form and the confirmation link (double opt-in; the rules are in core.people.signup).

* ``GET /subscribe`` shows the form (address, follows one per line, schedule, timezone, and a newsletter
  to join when the operator defined any; with one chosen the follows may stay empty).
* ``POST /subscribe`` checks the input, counts the sign-up against the per-client, per-network and hourly
  limits (core.people.signup_limits; the client is the connection's peer, or with PAPERTRAIL_TRUSTED_PROXIES
  the
  address its proxy names), records it and mails the confirmation link (or, for an address that is
  subscribed already, its manage link). The answer is the same "check your mail" page either way, so the
  form does not tell strangers who is subscribed. Bad input is shown on the form with what to fix; a
  sign-up over a limit, or for an address mailed less than ten minutes ago, gets a 429 page with
  Retry-After that says when to try again, and nothing is stored or mailed. The form carries the page's
  language: the new subscriber's pages, confirmation mail and digests use it.
* ``GET /confirm/{token}`` shows what the link would confirm: the follows, newsletter, schedule and
  timezone of the pending sign-up it was mailed for (escaped; the mail itself names none of them). Mail
  scanners follow links, so a GET changes nothing; the page's button posts.
* ``POST /confirm/{token}`` activates exactly that sign-up, or says that a later sign-up replaced it.

The confirmation pages speak the signed-up address's stored language unless the request chooses one.
"""

from __future__ import annotations

import math
from datetime import datetime
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.channel import DeliveryError
from core.follows.query import QueryError
from core.languages import normalize_language, said
from core.people import newsletters, tokens
from core.people.signup import (
    RESEND_AFTER,
    SignupChanged,
    SignupOutcome,
    SignupRequest,
    SignupState,
    confirm,
    pending_sign_up,
    prepare,
    record,
)
from core.people.signup_limits import Refusal, Scope, quotas_for, take
from papertrail.service.context import AppContext
from papertrail.service.signup import SignupUnavailable, check_available, mail_outcome
from papertrail.web.client_address import request_client_ip
from papertrail.web.pages import Pages, Reader, token_problem

MAX_FIELD = 4000


class SignupPages:
    """The sign-up and confirmation routes of one app."""

    def __init__(self, ctx: AppContext, pages: Pages) -> None:
        self.ctx = ctx
        self.pages = pages

    def routes(self) -> list[Route]:
        """GET shows, POST acts."""
        return [
            Route("/subscribe", self.form, methods=["GET"]),
            Route("/subscribe", self.submit, methods=["POST"]),
            Route("/confirm/{token}", self.confirm_page, methods=["GET"]),
            Route("/confirm/{token}", self.confirm_post, methods=["POST"]),
        ]

    def _unavailable(self, reader: Reader) -> Response | None:
        try:
            check_available(self.ctx)
        except SignupUnavailable as exc:
            t = reader.t
            return self.pages.message(
                reader,
                t.gettext("Sign-up is not enabled"),
                t.gettext("This PaperTrail server does not take sign-ups by mail."),
                # The reason names a setting: for the operator, in English.
                hint=t.gettext("Its operator can enable them: {reason}.", reason=exc),
                status=404,
            )
        return None

    def _form(
        self, reader: Reader, *, status: int = 200, error: str = "", excerpt: str = "", **values: str
    ) -> Response:
        settings = self.ctx.settings
        defaults = {
            "address": "",
            "follows": "",
            "schedule": settings.default_schedule,
            "timezone": settings.default_timezone,
            "newsletter": "",
        }
        return self.pages.render(
            reader,
            "subscribe.html.j2",
            status=status,
            error=error,
            excerpt=excerpt,
            form={**defaults, **values},
            newsletters=newsletters.all_newsletters(self.ctx.db),
        )

    async def form(self, request: Request) -> Response:
        """The empty form."""
        reader = self.pages.reader(request)
        return self._unavailable(reader) or self._form(reader)

    async def submit(self, request: Request) -> Response:
        """Record the sign-up and send its mail."""
        reader = self.pages.reader(request)
        unavailable = self._unavailable(reader)
        if unavailable:
            return unavailable
        form = await request.form(max_fields=10, max_files=0)
        values = {
            name: str(form.get(name, ""))[:MAX_FIELD]
            for name in ("address", "follows", "schedule", "timezone", "newsletter")
        }
        # The language the form was shown in (a hidden field), else the one this request resolves to.
        language = normalize_language(str(form.get("language", ""))[:16]) or reader.language
        reader = reader.with_stored(language)
        raw = values["address"].strip()
        address = raw if raw.startswith("email:") else f"email:{raw}"
        queries = values["follows"].splitlines()
        try:
            wanted: SignupRequest = await run_in_threadpool(
                lambda: prepare(
                    self.ctx.db,
                    address,
                    queries,
                    timezone=values["timezone"].strip() or self.ctx.settings.default_timezone,
                    schedule=values["schedule"].strip() or self.ctx.settings.default_schedule,
                    newsletter=values["newsletter"].strip() or None,
                    language=language,
                )
            )
        except QueryError as exc:
            error = exc.said(reader.t)
            return self._form(reader, status=400, error=error, excerpt=exc.excerpt(), **values)
        except (ValueError, LookupError) as exc:
            error = said(exc, reader.t)
            return self._form(reader, status=400, error=error, **values)
        # Counted only once valid, before anything is stored: a refused sign-up leaves no trace.
        now = self.pages.clock()
        refusal = await run_in_threadpool(self._take_quota, request, now)
        if refusal is not None:
            return self._refused(reader, refusal)
        outcome: SignupOutcome = await run_in_threadpool(lambda: record(self.ctx.db, wanted, now=now))
        if outcome.state == SignupState.THROTTLED:
            return self._throttled(reader, outcome, now)
        t = reader.t
        try:
            await mail_outcome(self.ctx, outcome, language=language)
        except DeliveryError as exc:
            return self.pages.message(
                reader,
                t.gettext("The mail could not be sent"),
                t.gettext("Your sign-up is recorded, but the confirmation mail did not go out."),
                hint=t.gettext("Try again in a few minutes. (temporary failure)")
                if exc.retryable
                else t.gettext("Try again in a few minutes. (refused failure)"),
                status=503 if exc.retryable else 400,
            )
        return self.pages.message(
            reader,
            t.gettext("Check your mail"),
            t.gettext(
                "If the address can receive mail, a message with a link is on its way. "
                "Nothing is sent to it until that link is followed."
            ),
            hint=t.gettext(
                "No mail after a few minutes? Look in the spam folder, or sign up again in ten minutes."
            ),
            status=200,
        )

    def _take_quota(self, request: Request, now: datetime) -> Refusal | None:
        """Count this sign-up against its client's, network's and everyone's hourly limits."""
        settings = self.ctx.settings
        client = request_client_ip(request, settings.trusted_proxy_networks)
        quotas = quotas_for(
            client,
            per_client=settings.signup_ip_per_hour,
            per_network=settings.signup_network_per_hour,
            per_hour=settings.signup_mails_per_hour,
            secret=check_available(self.ctx),
        )
        return take(self.ctx.db, quotas, now)

    def _too_many(self, reader: Reader, title: str, text: str, hint: str, seconds: int) -> Response:
        """A 429 page that says what to do, with Retry-After."""
        response = self.pages.message(reader, title, text, hint=hint, status=429)
        response.headers["Retry-After"] = str(seconds)
        return response

    def _refused(self, reader: Reader, refusal: Refusal) -> Response:
        """A sign-up over one of the hourly limits: nothing was stored or mailed."""
        t = reader.t
        minutes = max(1, math.ceil(refusal.retry_after / 60))
        if refusal.scope == Scope.EVERYONE:
            text = t.gettext(
                "This server takes at most {n} sign-ups an hour from everyone together, and this hour's are"
                " taken.",
                n=refusal.limit,
            )
        elif refusal.scope == Scope.NETWORK:
            text = t.gettext(
                "This server takes at most {n} sign-ups an hour from one network, and yours has reached"
                " that.",
                n=refusal.limit,
            )
        else:
            text = t.gettext(
                "This server takes at most {n} sign-ups an hour from one internet address, and yours has"
                " reached that.",
                n=refusal.limit,
            )
        hint = t.ngettext(
            "Nothing was recorded and no mail was sent. Please sign up again in {n} minute.",
            "Nothing was recorded and no mail was sent. Please sign up again in {n} minutes.",
            minutes,
        )
        return self._too_many(reader, t.gettext("Too many sign-ups"), text, hint, refusal.retry_after)

    def _throttled(self, reader: Reader, outcome: SignupOutcome, now: datetime) -> Response:
        """A sign-up for an address mailed less than RESEND_AFTER ago: it changed nothing."""
        t = reader.t
        sent = outcome.subscriber.confirm_sent_at or now
        # Within 1 s .. RESEND_AFTER even if another process's clock ran ahead when it sent the mail.
        pause = RESEND_AFTER.total_seconds()
        seconds = min(int(pause), max(1, math.ceil((sent + RESEND_AFTER - now).total_seconds())))
        # Worded alike for a pending and a subscribed address: the page must not tell which it is.
        return self._too_many(
            reader,
            t.gettext("A mail is already on its way"),
            t.gettext(
                "PaperTrail mailed this address less than {n} minutes ago, so this sign-up changed nothing:"
                " the link in that mail still confirms what it showed.",
                n=int(RESEND_AFTER.total_seconds() // 60),
            ),
            t.ngettext(
                "Use the link in that mail (look in the spam folder too). To sign up with these settings"
                " instead, send this form again in {n} minute: a new mail then replaces the first.",
                "Use the link in that mail (look in the spam folder too). To sign up with these settings"
                " instead, send this form again in {n} minutes: a new mail then replaces the first.",
                max(1, math.ceil(seconds / 60)),
            ),
            seconds,
        )

    def _token(self, request: Request) -> str:
        return str(request.path_params["token"])

    def _link_problem(self, reader: Reader, exc: Exception) -> Response:
        """The page for a confirmation link that confirms nothing: why, and what to do."""
        t = reader.t
        if isinstance(exc, tokens.InvalidToken):
            return self.pages.message(
                reader,
                t.gettext("This link is not valid"),
                token_problem(exc, t),
                hint=t.gettext("Open the link from the confirmation mail again, or sign up again."),
                status=400,
                private=True,
            )
        if isinstance(exc, SignupChanged):
            return self.pages.message(
                reader,
                t.gettext("This link was replaced"),
                t.gettext(
                    "A later sign-up for this address replaced the one this link was mailed for, so it no"
                    " longer confirms anything."
                ),
                hint=t.gettext("Use the link in the newest mail from PaperTrail, or sign up again."),
                status=410,
                private=True,
            )
        return self.pages.message(
            reader,
            t.gettext("No sign-up"),
            t.gettext("This sign-up does not exist any more; sign up again."),
            status=404,
            private=True,
        )

    async def confirm_page(self, request: Request) -> Response:
        """Show what the link would confirm, and ask for the button press; changes nothing."""
        reader = self.pages.reader(request)
        unavailable = self._unavailable(reader)
        if unavailable:
            return unavailable
        token = self._token(request)
        key = check_available(self.ctx)
        try:
            subscriber, pending = await run_in_threadpool(pending_sign_up, self.ctx.db, key, token)
        except (tokens.InvalidToken, LookupError) as exc:
            return self._link_problem(reader, exc)
        return self.pages.render(
            reader.with_stored(subscriber.language),
            "confirm.html.j2",
            private=True,
            action=f"/confirm/{quote(token, safe='')}",
            done=False,
            pending=pending,
        )

    async def confirm_post(self, request: Request) -> Response:
        """Activate exactly the sign-up the link was mailed for."""
        reader = self.pages.reader(request)
        unavailable = self._unavailable(reader)
        if unavailable:
            return unavailable
        await request.form(max_fields=10, max_files=0)
        key = check_available(self.ctx)
        try:
            subscriber = await run_in_threadpool(confirm, self.ctx.db, key, self._token(request))
        except (tokens.InvalidToken, LookupError) as exc:
            return self._link_problem(reader, exc)
        manage = tokens.sign(key, tokens.MANAGE, subscriber.address)
        return self.pages.render(
            reader.with_stored(subscriber.language),
            "confirm.html.j2",
            private=True,
            done=True,
            subscriber=subscriber,
            manage=f"/manage/{quote(manage, safe='')}",
        )
