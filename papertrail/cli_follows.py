"""The follow commands of the command line: ``follow``, ``unfollow``, ``follows``, ``schedule`` and
``subscribe`` (the self-service sign-up by mail).

Registered on :data:`papertrail.cli_common.app` when ``papertrail/cli.py`` imports this module, and built
on its helpers; a command imports what it needs when it runs (tests/test_cli_imports.py). Two checks of
what a reader typed are shared with other families: :func:`_webhook_refusal` (``import follows`` and
``import subscription`` refuse the same addresses as ``follow``) and :func:`_language_option` (``guides``
takes the same ``--language``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from papertrail.cli_common import USAGE, _code, _context, _explain, _fail, _run, _store_context, app, out

if TYPE_CHECKING:
    from core.config import Settings
    from core.models import Follow


@app.command()
def follow(
    address: Annotated[
        str, typer.Argument(help="email:ada@example.org, telegram:12345, slack:C0123, console:NAME")
    ],
    query: Annotated[str, typer.Argument(help="Follow query, e.g. 'cat:cs.DC au:\"Zeng Li\"'.")],
    timezone: Annotated[
        str | None, typer.Option(help="IANA timezone of the subscriber (changes an existing one's).")
    ] = None,
    schedule: Annotated[
        str | None,
        typer.Option(help="'instant', 'daily 08:00', 'weekly mon 09:00' (changes an existing one's)."),
    ] = None,
    new_only: Annotated[bool, typer.Option("--new-only", help="New papers only, no revisions.")] = False,
    instant: Annotated[
        bool, typer.Option("--instant", help="Send this follow's matches at once, not with the digest.")
    ] = False,
    language: Annotated[
        str | None,
        typer.Option(
            help="en or zh: the subscriber's digests, replies and AI guides "
            "(unset: PAPERTRAIL_DEFAULT_LANGUAGE)."
        ),
    ] = None,
) -> None:
    """Add a follow (or change its options); creates the subscriber when the address is new."""
    from core.follows import subscriber_records
    from core.follows.manage import follow as add_follow
    from core.follows.query import QueryError
    from core.people.masking import mask_address
    from core.schedule import parse_schedule

    chosen = _language_option(language)
    with _store_context() as ctx:
        _check_webhook(address, ctx.settings)
        try:
            result = add_follow(
                ctx.db,
                address,
                query,
                timezone=timezone or ctx.settings.default_timezone,
                schedule=schedule or ctx.settings.default_schedule,
                revisions=not new_only,
                instant=instant,
            )
        except (QueryError, ValueError) as exc:
            raise _fail(_explain(exc), 2) from exc
        who = result.subscriber
        before = f"{who.schedule} ({who.timezone})"
        fields: dict[str, Any] = {}
        if chosen is not None:
            fields["language"] = chosen
        if not result.subscriber_created:
            # An existing subscriber takes the --schedule and --timezone given, as `papertrail schedule`
            # and `import follows` do (they used to be ignored without a word); follow() checked both.
            if schedule is not None and parse_schedule(schedule).text != who.schedule:
                fields["schedule"] = parse_schedule(schedule).text
            if timezone is not None and timezone != who.timezone:
                fields["timezone"] = timezone
        if fields:
            who = subscriber_records.update_subscriber(ctx.db, who.id or 0, **fields)
    if result.subscriber_created:
        out.print(
            f"new subscriber {mask_address(who.address)} (schedule {who.schedule}, timezone {who.timezone})"
        )
    elif "schedule" in fields or "timezone" in fields:
        out.print(f"{mask_address(who.address)}: schedule {who.schedule} ({who.timezone}), was {before}")
    verb = {"added": "now follows", "updated": "updated", "unchanged": "already follows"}[result.outcome]
    out.print(f"{mask_address(who.address)} {verb}: {result.follow.query}{_options(result.follow)}")


def _check_webhook(address: str, settings: Settings) -> None:
    """Refuse (exit 2) a ``webhook:`` address its delivery would refuse, saying why (issue 16: the first
    digest found out, and paused the subscriber)."""
    reason = _webhook_refusal(settings)(address)
    if reason is not None:
        from core.people.masking import mask_address

        raise _fail(f"{mask_address(address)} cannot receive digests: {reason}", USAGE)


def _webhook_refusal(settings: Settings) -> Callable[[str], str | None]:
    """Why delivery would refuse an address: for ``webhook:`` its URL's rules
    (notifiers.public_address.refusal),
    for other channels nothing, and they load nothing here."""

    def refuse(address: str) -> str | None:
        channel, _, target = address.partition(":")
        if channel.strip().lower() != "webhook":
            return None
        import asyncio

        from notifiers.public_address import refusal

        return asyncio.run(refusal(target.strip(), settings.webhook_allowed_hosts))

    return refuse


def _language_option(value: str | None) -> str | None:
    """``--language``: en or zh (codes such as zh-CN accepted); exit 2 naming the choices otherwise."""
    if value is None:
        return None
    from core.languages import LANGUAGES, normalize_language

    chosen = normalize_language(value)
    if chosen is None:
        raise _fail(f"--language {value!r} is not one of: {', '.join(LANGUAGES)}", 2)
    return chosen


def _options(row: Follow) -> str:
    flags = [flag for flag, on in (("new papers only", not row.revisions), ("instant", row.instant)) if on]
    return f"  [{', '.join(flags)}]" if flags else ""


@app.command(name="unfollow")
def unfollow_command(
    address: Annotated[str, typer.Argument(help="The subscriber address.")],
    which: Annotated[str, typer.Argument(metavar="QUERY-OR-NUMBER", help="The query text or its number.")],
) -> None:
    """Remove a follow by its number (see `papertrail follows`) or its query text."""
    from core.follows.manage import unfollow
    from core.follows.query import QueryError

    with _store_context() as ctx:
        try:
            removed = unfollow(ctx.db, address, which)
        except (LookupError, QueryError, ValueError) as exc:
            raise _fail(_explain(exc), _code(exc)) from exc
    out.print(f"removed: {removed.query}")


@app.command()
def follows(address: Annotated[str, typer.Argument(help="The subscriber address.")]) -> None:
    """List a subscriber's follows, numbered."""
    from core.channel import normalise_address
    from core.follows import subscriber_records
    from core.people.masking import mask_address, mask_text

    with _store_context() as ctx:
        try:
            subscriber = subscriber_records.get_subscriber(ctx.db, normalise_address(address))
        except ValueError as exc:
            raise _fail(str(exc), 2) from exc
        if subscriber is None or subscriber.id is None:
            raise _fail(f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", 1)
        rows = subscriber_records.follows_of(ctx.db, subscriber.id)
    out.print(
        f"{mask_address(subscriber.address)} · {subscriber.status} · "
        f"schedule {subscriber.schedule} ({subscriber.timezone})"
        + (f" · paused because: {mask_text(subscriber.status_reason)}" if subscriber.status_reason else "")
    )
    for number, row in enumerate(rows, 1):
        out.print(f"{number:>3}. {row.query}{_options(row)}")
    if not rows:
        out.print("    (no follows)")


@app.command()
def schedule(
    address: Annotated[str, typer.Argument(help="The subscriber address.")],
    when: Annotated[
        str, typer.Argument(help="'instant', 'daily 08:00', 'weekdays 07:30', 'weekly mon 09:00'.")
    ],
    timezone: Annotated[str | None, typer.Option(help="IANA timezone, e.g. Europe/Berlin.")] = None,
    heartbeat: Annotated[
        bool | None,
        typer.Option(
            "--heartbeat/--no-heartbeat",
            help="A one-line message with the scan receipt on arXiv announcement days when nothing matched.",
        ),
    ] = None,
) -> None:
    """Change when a subscriber's digests go out (and optionally their timezone and heartbeat)."""
    from core.channel import normalise_address
    from core.follows import subscriber_records
    from core.people.masking import mask_address
    from core.schedule import parse_schedule, zone

    with _store_context() as ctx:
        try:
            parsed = parse_schedule(when)
            if timezone:
                zone(timezone)
            subscriber = subscriber_records.get_subscriber(ctx.db, normalise_address(address))
        except ValueError as exc:
            raise _fail(str(exc), 2) from exc
        if subscriber is None or subscriber.id is None:
            raise _fail(f"no subscriber {address}; add a follow first", 1)
        fields: dict[str, Any] = {"schedule": parsed.text}
        if timezone:
            fields["timezone"] = timezone
        if heartbeat is not None:
            fields["heartbeat"] = heartbeat
        updated = subscriber_records.update_subscriber(ctx.db, subscriber.id, **fields)
    beat = ", heartbeat on" if updated.heartbeat else ""
    out.print(f"{mask_address(updated.address)}: schedule {updated.schedule} ({updated.timezone}){beat}")


@app.command()
def subscribe(
    address: Annotated[str, typer.Argument(help="email:ADDRESS to sign up (double opt-in).")],
    queries: Annotated[list[str] | None, typer.Argument(help="Follows, in the follow language.")] = None,
    schedule: Annotated[str | None, typer.Option(help="e.g. 'daily 08:00' (default from settings).")] = None,
    timezone: Annotated[str | None, typer.Option(help="IANA zone, e.g. Europe/Berlin.")] = None,
    newsletter: Annotated[
        str | None, typer.Option(help="Also join this newsletter (see `papertrail newsletter list`).")
    ] = None,
    language: Annotated[
        str | None,
        typer.Option(
            help="en or zh: the subscriber's digests, replies and AI guides "
            "(unset: PAPERTRAIL_DEFAULT_LANGUAGE)."
        ),
    ] = None,
) -> None:
    """Sign an email address up the self-service way: it gets a confirmation link, and nothing else until
    it confirms (unlike `follow`, whose addresses count as confirmed)."""
    from core.channel import DeliveryError
    from core.follows.query import QueryError
    from core.people.signup import SignupState, sign_up
    from papertrail.signup import SignupUnavailable, check_available, mail_outcome

    with _context() as ctx:
        try:
            check_available(ctx)
            outcome = sign_up(
                ctx.db,
                address,
                queries or [],
                timezone=timezone or ctx.settings.default_timezone,
                schedule=schedule or ctx.settings.default_schedule,
                newsletter=newsletter,
                language=_language_option(language),
            )
        except (ValueError, LookupError, QueryError, SignupUnavailable) as exc:
            raise _fail(_explain(exc), _code(exc)) from exc

        async def send() -> bool:
            try:
                return await mail_outcome(ctx, outcome, language=language)
            finally:
                await ctx.close_notifiers()

        try:
            sent = _run(send())
        except DeliveryError as exc:
            raise _fail(f"the confirmation mail was not sent: {exc}; run the command again later") from exc
    who = outcome.subscriber.address
    if outcome.state == SignupState.CONFIRM:
        out.print(f"{who}: confirmation link sent; nothing is delivered until it is followed")
    elif outcome.state == SignupState.SUBSCRIBED:
        out.print(f"{who} is subscribed already; its manage link was mailed" if sent else who)
    else:
        out.print(f"{who}: a sign-up mail went to it less than 10 minutes ago; none sent, nothing changed")
