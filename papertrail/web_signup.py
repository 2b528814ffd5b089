"""The sign-up form and the confirmation link (double opt-in; the rules are in core.signup).

* ``GET /subscribe`` shows the form (address, follows one per line, schedule, timezone, and a newsletter
  to join when the operator defined any; with one chosen the follows may stay empty).
* ``POST /subscribe`` records the sign-up and mails the confirmation link (or, for an address that is
  subscribed already, its manage link). The answer is the same "check your mail" page either way, so the
  form does not tell strangers who is subscribed. Bad input is shown on the form with what to fix.
* ``GET /confirm/{token}`` asks (mail scanners follow links: a GET changes nothing); its button posts.
* ``POST /confirm/{token}`` activates the subscription and links the manage page.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core import tokens
from core.delivery import DeliveryError
from core.query import QueryError
from core.signup import SignupOutcome, confirm, sign_up
from papertrail.context import AppContext
from papertrail.signup import SignupUnavailable, check_available, mail_outcome
from papertrail.web_pages import Pages

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

    def _unavailable(self) -> Response | None:
        try:
            check_available(self.ctx)
        except SignupUnavailable as exc:
            return self.pages.message(
                "Sign-up is not enabled",
                "This PaperTrail server does not take sign-ups by mail.",
                hint=f"Its operator can enable them: {exc}.",
                status=404,
            )
        return None

    def _form(self, *, status: int = 200, error: str = "", excerpt: str = "", **values: str) -> Response:
        settings = self.ctx.settings
        defaults = {
            "address": "",
            "follows": "",
            "schedule": settings.default_schedule,
            "timezone": settings.default_timezone,
            "newsletter": "",
        }
        return self.pages.render(
            "subscribe.html.j2",
            status=status,
            error=error,
            excerpt=excerpt,
            form={**defaults, **values},
            newsletters=self.ctx.store.newsletters(),
        )

    async def form(self, request: Request) -> Response:
        """The empty form."""
        return self._unavailable() or self._form()

    async def submit(self, request: Request) -> Response:
        """Record the sign-up and send its mail."""
        unavailable = self._unavailable()
        if unavailable:
            return unavailable
        form = await request.form(max_fields=10, max_files=0)
        values = {
            name: str(form.get(name, ""))[:MAX_FIELD]
            for name in ("address", "follows", "schedule", "timezone", "newsletter")
        }
        raw = values["address"].strip()
        address = raw if raw.startswith("email:") else f"email:{raw}"
        queries = values["follows"].splitlines()
        try:
            outcome: SignupOutcome = await run_in_threadpool(
                sign_up,
                self.ctx.store,
                address,
                queries,
                timezone=values["timezone"].strip() or self.ctx.settings.default_timezone,
                schedule=values["schedule"].strip() or self.ctx.settings.default_schedule,
                newsletter=values["newsletter"].strip() or None,
            )
        except QueryError as exc:
            return self._form(status=400, error=str(exc), excerpt=exc.excerpt(), **values)
        except (ValueError, LookupError) as exc:
            return self._form(status=400, error=str(exc).strip("'\""), **values)
        try:
            await mail_outcome(self.ctx, outcome)
        except DeliveryError as exc:
            return self.pages.message(
                "The mail could not be sent",
                "Your sign-up is recorded, but the confirmation mail did not go out.",
                hint=f"Try again in a few minutes. ({'temporary' if exc.retryable else 'refused'} failure)",
                status=503 if exc.retryable else 400,
            )
        return self.pages.message(
            "Check your mail",
            "If the address can receive mail, a message with a link is on its way. "
            "Nothing is sent to it until that link is followed.",
            hint="No mail after a few minutes? Look in the spam folder, or sign up again in ten minutes.",
            status=200,
        )

    def _token(self, request: Request) -> str:
        return str(request.path_params["token"])

    async def confirm_page(self, request: Request) -> Response:
        """Ask for the button press; changes nothing."""
        unavailable = self._unavailable()
        if unavailable:
            return unavailable
        token = self._token(request)
        return self.pages.render(
            "confirm.html.j2", private=True, action=f"/confirm/{quote(token, safe='')}", done=False
        )

    async def confirm_post(self, request: Request) -> Response:
        """Activate the subscription."""
        unavailable = self._unavailable()
        if unavailable:
            return unavailable
        await request.form(max_fields=10, max_files=0)
        key = check_available(self.ctx)
        try:
            subscriber = await run_in_threadpool(confirm, self.ctx.store, key, self._token(request))
        except tokens.InvalidToken as exc:
            return self.pages.message(
                "This link is not valid",
                f"{str(exc).capitalize()}.",
                hint="Open the link from the confirmation mail again, or sign up again.",
                status=400,
                private=True,
            )
        except LookupError as exc:
            return self.pages.message("No sign-up", f"{exc}.", status=404, private=True)
        manage = tokens.sign(key, tokens.MANAGE, subscriber.address)
        return self.pages.render(
            "confirm.html.j2",
            private=True,
            done=True,
            subscriber=subscriber,
            manage=f"/manage/{quote(manage, safe='')}",
        )
