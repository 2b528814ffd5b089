"""The ``newsletter`` command group: ``create``, ``list``, ``show``, ``add`` and ``remove``.

A newsletter is one set of follows and a schedule sent to every member (:mod:`core.people.newsletters`). The
group is this family's sub-app, added to the root app by ``papertrail/cli/app.py``; a command imports what
it needs when it runs (tests/test_cli_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli.common import FAILURE, USAGE, count_of, explain, fail, iso, out, store_context

if TYPE_CHECKING:
    from core.db import Database
    from core.models import Newsletter, Subscriber


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


newsletter_app = typer.Typer(
    help="Named newsletters: one set of follows and a schedule, sent to every member.", no_args_is_help=True
)
app.add_typer(newsletter_app, name="newsletter")


@newsletter_app.command("create")
def newsletter_create(
    name: Annotated[str, typer.Argument(help="Lowercase letters, digits and dashes, e.g. ml-weekly.")],
    title: Annotated[str, typer.Option("--title", help="The title members see.")],
    follows: Annotated[
        list[str], typer.Option("--follow", help="A follow query; repeat for several.", show_default=False)
    ],
    schedule: Annotated[
        str | None, typer.Option(help="'daily 08:00', 'weekly mon 09:00' ... (default from settings).")
    ] = None,
    timezone: Annotated[str | None, typer.Option(help="IANA timezone of the schedule.")] = None,
) -> None:
    """Define a newsletter. People join it with `subscribe --newsletter`, the /subscribe form or `join`;
    the operator adds existing subscribers with `newsletter add`."""
    from core.follows.query import QueryError
    from core.people import newsletters

    with store_context() as ctx:
        try:
            created = newsletters.create(
                ctx.db,
                name,
                title,
                follows,
                schedule=schedule or ctx.settings.default_schedule,
                timezone=timezone or ctx.settings.default_timezone,
            )
        except (QueryError, ValueError) as exc:
            raise fail(explain(exc), 2) from exc
        shown = newsletters.info(ctx.db, created.name)
    out.print(
        f"newsletter {created.name} ({created.title}): {count_of(len(shown.follows), 'follow')}, "
        f"schedule {shown.subscriber.schedule} ({shown.subscriber.timezone}); "
        f"its follows are those of {shown.subscriber.address}"
    )


@newsletter_app.command("list")
def newsletter_list() -> None:
    """Every newsletter: name, title, schedule, members and follows."""
    from rich.table import Table

    from core.people.newsletters import all_infos

    with store_context() as ctx:
        infos = all_infos(ctx.db)
    if not infos:
        out.print("no newsletters; create one with: papertrail newsletter create NAME --title T --follow Q")
        return
    table = Table("name", "title", "schedule", "members", "follows")
    for info in infos:
        table.add_row(
            info.newsletter.name,
            info.newsletter.title,
            f"{info.subscriber.schedule} ({info.subscriber.timezone})",
            f"{info.active_members} active of {info.members}",
            "; ".join(info.follows),
        )
    out.print(table)


@newsletter_app.command("show")
def newsletter_show(name: Annotated[str, typer.Argument(help="The newsletter's name.")]) -> None:
    """One newsletter: follows, members and its last issue."""
    from core.people import newsletters

    with store_context() as ctx:
        try:
            info = newsletters.info(ctx.db, name)
        except LookupError as exc:
            raise fail(explain(exc), 1) from exc
    who = info.subscriber
    out.print(f"{info.newsletter.name}: {info.newsletter.title}")
    out.print(f"schedule: {who.schedule} ({who.timezone}) · status: {who.status} · address: {who.address}")
    out.print(f"members: {info.members} ({info.active_members} active)")
    last = (
        f"{iso(info.last_issue_at)} with {count_of(info.last_issue_items, 'item')}; "
        f"{count_of(info.issues, 'issue')} in all"
        if info.last_issue_at
        else "none yet"
    )
    out.print(f"last issue: {last}")
    out.print("follows:")
    for number, query in enumerate(info.follows, 1):
        out.print(f"{number:>3}. {query}")


def _membership(db: Database, name: str, address: str) -> tuple[Newsletter, Subscriber]:
    """The newsletter and the subscriber of ``newsletter add|remove NAME ADDRESS``, or exit saying which is
    missing: 2 for an address that is not one, 1 for a newsletter or a subscriber the store does not know."""
    from core.channel import normalise_address
    from core.follows.subscribers import subscriber_by_address
    from core.people import newsletters

    try:
        normalised = normalise_address(address)
    except ValueError as exc:
        raise fail(explain(exc), USAGE) from exc
    try:
        newsletter = newsletters.find(db, name)
    except LookupError as exc:
        how = (
            "`papertrail newsletter list` shows them"
            if newsletters.all_newsletters(db)
            else "create one with: papertrail newsletter create NAME --title T --follow Q"
        )
        raise fail(f"{explain(exc)}; {how}", FAILURE) from exc
    subscriber = subscriber_by_address(db, normalised)
    if subscriber is None or subscriber.id is None:
        # An email address may rather be signed up, double opt-in, as a member from the start.
        signup = (
            f", or sign it up by mail: papertrail subscribe {normalised} --newsletter {newsletter.name}"
            if normalised.startswith("email:")
            else ""
        )
        raise fail(
            f"no subscriber {normalised}; create it with: papertrail follow {normalised} QUERY{signup}",
            FAILURE,
        )
    return newsletter, subscriber


@newsletter_app.command("add")
def newsletter_add(
    name: Annotated[str, typer.Argument(help="The newsletter's name (see `papertrail newsletter list`).")],
    address: Annotated[
        str,
        typer.Argument(help="An existing, confirmed subscriber: email:ada@example.org, telegram:12345 ..."),
    ],
) -> None:
    """Make an existing, confirmed subscriber a member of a newsletter; a member already stays one."""
    from core.models import SubscriberStatus
    from core.people import newsletters
    from core.people.masking import mask_address

    with store_context() as ctx:
        newsletter, subscriber = _membership(ctx.db, name, address)
        who = mask_address(subscriber.address)
        # An address's owner must have asked for mail: a pending sign-up has not shown it owns the address,
        # and an unsubscribed one asked for nothing more (a newsletter would reach it on re-subscribing).
        if subscriber.status == SubscriberStatus.UNCONFIRMED:
            raise fail(
                f"{who} has not confirmed its sign-up; it must follow the link in its confirmation mail "
                "before it can be added to a newsletter",
                FAILURE,
            )
        if subscriber.status == SubscriberStatus.UNSUBSCRIBED:
            raise fail(
                f"{who} unsubscribed; it can subscribe again from its manage page (or its chat's start "
                "command) before it is added to a newsletter",
                FAILURE,
            )
        try:
            added = newsletters.join(ctx.db, newsletter.name, subscriber)
        except ValueError as exc:  # a newsletter's own hidden subscriber
            raise fail(explain(exc), USAGE) from exc
    if not added:
        out.print(f"{who} is a member of {newsletter.name} already; nothing changed")
        return
    out.print(f"{who} joined {newsletter.name} ({newsletter.title}): it gets each issue from the next one on")
    if subscriber.status != SubscriberStatus.ACTIVE:
        out.print(f"note: {who} is {subscriber.status}; issues reach it once it is active again")


@newsletter_app.command("remove")
def newsletter_remove(
    name: Annotated[str, typer.Argument(help="The newsletter's name (see `papertrail newsletter list`).")],
    address: Annotated[str, typer.Argument(help="The member's address, e.g. email:ada@example.org.")],
) -> None:
    """End a subscriber's membership of a newsletter, as its /leave link does: the subscriber stays
    subscribed, with its own follows and other newsletters."""
    from core.people import newsletters
    from core.people.masking import mask_address

    with store_context() as ctx:
        newsletter, subscriber = _membership(ctx.db, name, address)
        left = newsletters.leave(ctx.db, newsletter.name, subscriber)
    who = mask_address(subscriber.address)
    if not left:
        out.print(f"{who} is not a member of {newsletter.name}; nothing changed")
        return
    out.print(
        f"{who} left {newsletter.name} ({newsletter.title}); it stays subscribed, with its own follows and "
        "other newsletters (copies already made still go out)"
    )
