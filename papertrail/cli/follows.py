"""The follow commands of the command line: ``follow``, ``unfollow``, ``follows``, ``schedule`` and
``subscribe`` (the self-service sign-up by mail).

Its sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; it is built on
:mod:`papertrail.cli.common`'s helpers, among them the two checks of what a reader typed that other families
share (:func:`~papertrail.cli.common.webhook_refusal`, :func:`~papertrail.cli.common.language_option`). A
command imports what it needs when it runs (tests/test_cli_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli.common import (
    USAGE,
    app_context,
    exit_code_for,
    explain,
    fail,
    language_option,
    out,
    run_async,
    store_context,
    webhook_refusal,
)

# `--language` of the commands that create a subscriber.
SubscriberLanguage = Annotated[
    str | None,
    typer.Option(
        help="en or zh: the subscriber's digests, replies and AI guides (unset: PAPERTRAIL_DEFAULT_LANGUAGE)."
    ),
]

if TYPE_CHECKING:
    from core.config import Settings
    from core.models import Follow


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


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
    language: SubscriberLanguage = None,
) -> None:
    """Add a follow (or change its options); creates the subscriber when the address is new."""
    from core.follows.manage import follow as add_follow
    from core.follows.query import QueryError
    from core.follows.subscribers import SubscriberSettings
    from core.people.masking import mask_address
    from core.schedule import parse_schedule

    chosen = language_option(language)
    with store_context() as ctx:
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
                language=chosen,
                # An existing subscriber takes the --schedule and --timezone given, as `papertrail schedule`
                # and `import follows` do; follow() checks both before it stores anything.
                settings=SubscriberSettings(
                    schedule=parse_schedule(schedule).text if schedule is not None else None,
                    timezone=timezone,
                    language=chosen,
                ),
            )
        except (QueryError, ValueError) as exc:
            raise fail(explain(exc), 2) from exc
        who, was = result.subscriber, result.before
    if result.subscriber_created:
        out.print(
            f"new subscriber {mask_address(who.address)} (schedule {who.schedule}, timezone {who.timezone})"
        )
    elif was is not None and (was.schedule, was.timezone) != (who.schedule, who.timezone):
        out.print(
            f"{mask_address(who.address)}: schedule {who.schedule} ({who.timezone}), "
            f"was {was.schedule} ({was.timezone})"
        )
    verb = {"added": "now follows", "updated": "updated", "unchanged": "already follows"}[result.outcome]
    out.print(f"{mask_address(who.address)} {verb}: {result.follow.query}{_options(result.follow)}")


def _check_webhook(address: str, settings: Settings) -> None:
    """Refuse (exit 2) a ``webhook:`` address its delivery would refuse, saying why (the first
    digest found out, and paused the subscriber)."""
    reason = webhook_refusal(settings)(address)
    if reason is not None:
        from core.people.masking import mask_address

        raise fail(f"{mask_address(address)} cannot receive digests: {reason}", USAGE)


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

    with store_context() as ctx:
        try:
            removed = unfollow(ctx.db, address, which)
        except (LookupError, QueryError, ValueError) as exc:
            raise fail(explain(exc), exit_code_for(exc)) from exc
    out.print(f"removed: {removed.query}")


@app.command()
def follows(address: Annotated[str, typer.Argument(help="The subscriber address.")]) -> None:
    """List a subscriber's follows, numbered."""
    from core.channel import normalise_address
    from core.follows import subscribers
    from core.people.masking import mask_address, mask_text

    with store_context() as ctx:
        try:
            subscriber = subscribers.subscriber_by_address(ctx.db, normalise_address(address))
        except ValueError as exc:
            raise fail(str(exc), 2) from exc
        if subscriber is None or subscriber.id is None:
            raise fail(f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", 1)
        rows = subscribers.follows_of(ctx.db, subscriber.id)
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
    from core.follows import subscribers
    from core.follows.subscribers import SubscriberSettings
    from core.people.masking import mask_address
    from core.schedule import parse_schedule, zone

    with store_context() as ctx:
        try:
            parsed = parse_schedule(when)
            if timezone:
                zone(timezone)
            subscriber = subscribers.subscriber_by_address(ctx.db, normalise_address(address))
        except ValueError as exc:
            raise fail(str(exc), 2) from exc
        if subscriber is None or subscriber.id is None:
            raise fail(f"no subscriber {address}; add a follow first", 1)
        wanted = SubscriberSettings(schedule=parsed.text, timezone=timezone or None, heartbeat=heartbeat)
        updated = subscribers.change_settings(ctx.db, subscriber.id, wanted)
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
    language: SubscriberLanguage = None,
) -> None:
    """Sign an email address up the self-service way: it gets a confirmation link, and nothing else until
    it confirms (unlike `follow`, whose addresses count as confirmed)."""
    from core.channel import DeliveryError
    from core.follows.query import QueryError
    from core.people.signup import SignupState, sign_up
    from papertrail.service.signup import SignupUnavailable, check_available, mail_outcome

    with app_context() as ctx:
        try:
            check_available(ctx)
            outcome = sign_up(
                ctx.db,
                address,
                queries or [],
                timezone=timezone or ctx.settings.default_timezone,
                schedule=schedule or ctx.settings.default_schedule,
                newsletter=newsletter,
                language=language_option(language),
            )
        except (ValueError, LookupError, QueryError, SignupUnavailable) as exc:
            raise fail(explain(exc), exit_code_for(exc)) from exc

        async def send() -> bool:
            try:
                return await mail_outcome(ctx, outcome, language=language)
            finally:
                await ctx.close_notifiers()

        try:
            sent = run_async(send())
        except DeliveryError as exc:
            raise fail(f"the confirmation mail was not sent: {exc}; run the command again later") from exc
    who = outcome.subscriber.address
    if outcome.state == SignupState.CONFIRM:
        out.print(f"{who}: confirmation link sent; nothing is delivered until it is followed")
    elif outcome.state == SignupState.SUBSCRIBED:
        out.print(f"{who} is subscribed already; its manage link was mailed" if sent else who)
    else:
        out.print(f"{who}: a sign-up mail went to it less than 10 minutes ago; none sent, nothing changed")
