"""The sign-up form and the confirmation link (double opt-in; the rules are in core.signup).

* ``GET /subscribe`` shows the form (address, follows one per line, schedule, timezone, and a newsletter
  to join when the operator defined any; with one chosen the follows may stay empty).
* ``POST /subscribe`` records the sign-up and mails the confirmation link (or, for an address that is
  subscribed already, its manage link). The answer is the same "check your mail" page either way, so the
  form does not tell strangers who is subscribed. Bad input is shown on the form with what to fix. The
  form carries the page's language: the new subscriber's pages, confirmation mail and digests use it.
* ``GET /confirm/{token}`` asks (mail scanners follow links: a GET changes nothing); its button posts.
* ``POST /confirm/{token}`` activates the subscription and links the manage page.

The confirmation pages speak the signed-up address's stored language unless the request chooses one.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core import tokens
from core.delivery import DeliveryError
from core.i18n import normalize_language, said
from core.query import QueryError
from core.signup import SignupOutcome, confirm, sign_up
from papertrail.context import AppContext
from papertrail.signup import SignupUnavailable, check_available, mail_outcome
from papertrail.web_pages import Pages, Reader, token_problem

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
            newsletters=self.ctx.store.newsletters(),
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
            outcome: SignupOutcome = await run_in_threadpool(
                lambda: sign_up(
                    self.ctx.store,
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

    def _token(self, request: Request) -> str:
        return str(request.path_params["token"])

    def _stored_language(self, key: str, token: str) -> str | None:
        """The language of the address a confirmation token names (None for a bad token: the page says
        nothing about it until the button is pressed)."""
        try:
            address = tokens.verify(key, tokens.CONFIRM, token)
        except tokens.InvalidToken:
            return None
        subscriber = self.ctx.store.get_subscriber(address)
        return subscriber.language if subscriber is not None else None

    async def confirm_page(self, request: Request) -> Response:
        """Ask for the button press; changes nothing."""
        reader = self.pages.reader(request)
        unavailable = self._unavailable(reader)
        if unavailable:
            return unavailable
        token = self._token(request)
        stored = await run_in_threadpool(self._stored_language, check_available(self.ctx), token)
        return self.pages.render(
            reader.with_stored(stored),
            "confirm.html.j2",
            private=True,
            action=f"/confirm/{quote(token, safe='')}",
            done=False,
        )

    async def confirm_post(self, request: Request) -> Response:
        """Activate the subscription."""
        reader = self.pages.reader(request)
        unavailable = self._unavailable(reader)
        if unavailable:
            return unavailable
        await request.form(max_fields=10, max_files=0)
        key = check_available(self.ctx)
        t = reader.t
        try:
            subscriber = await run_in_threadpool(confirm, self.ctx.store, key, self._token(request))
        except tokens.InvalidToken as exc:
            return self.pages.message(
                reader,
                t.gettext("This link is not valid"),
                token_problem(exc, t),
                hint=t.gettext("Open the link from the confirmation mail again, or sign up again."),
                status=400,
                private=True,
            )
        except LookupError:
            return self.pages.message(
                reader,
                t.gettext("No sign-up"),
                t.gettext("This sign-up does not exist any more; sign up again."),
                status=404,
                private=True,
            )
        manage = tokens.sign(key, tokens.MANAGE, subscriber.address)
        return self.pages.render(
            reader.with_stored(subscriber.language),
            "confirm.html.j2",
            private=True,
            done=True,
            subscriber=subscriber,
            manage=f"/manage/{quote(manage, safe='')}",
        )
