"""The delivery commands of the command line: ``resume`` (paused subscribers), ``digest`` (send what is
due), ``worker`` (delivery only), ``retry`` (dead-lettered digests), the ``alarms`` group, ``guides``
(the AI guides the digests carry) and ``webhook-secret`` (what a webhook receiver checks signatures with).

Its sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; ``papertrail status`` prints
alarms with :func:`papertrail.cli.common.alarm_line` too. A command imports what it needs when
it runs (tests/test_cli_imports.py).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli.common import (
    FAILURE,
    alarm_line,
    app_context,
    count_of,
    err,
    exit_code_for,
    explain,
    fail,
    language_option,
    load_settings,
    out,
    run_async,
    store_context,
)

if TYPE_CHECKING:
    from core.delivery.digests import DigestReport
    from core.guides.service import GuideReport


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


# Addresses `resume --dry-run` lists before "…and N more".
RESUME_LISTED = 20


@app.command(name="resume")
def resume_command(
    address: Annotated[str | None, typer.Argument(help="The subscriber address.")] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            help="Resume every subscriber a delivery refusal paused whose reason contains TEXT "
            "(case-insensitive), e.g. '550 5.7.1'.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Resume every subscriber a delivery refusal paused at or after WHEN: an ISO date or time "
            "(UTC unless it says otherwise) or a time ago (90m, 6h, 2d).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only count and list whom it would resume.")
    ] = False,
) -> None:
    """Re-activate a subscriber paused after a permanent delivery failure, or all those one cause paused.

    With --reason and/or --since, every subscriber the delivery ledger paused after a refusal that matches
    is resumed at once (a reader's own pause is left alone); their held matches go out with their next
    digest.
    """
    from core.delivery import alarm
    from core.delivery.digests import resume
    from core.models import utcnow
    from core.people.masking import mask_address

    if address is not None and (reason is not None or since is not None):
        raise fail("give either an ADDRESS or --reason/--since, not both", 2)
    if address is None and reason is None and since is None:
        raise fail(
            "name the subscriber (papertrail resume email:ada@example.org) or choose them by cause with "
            "--reason TEXT and/or --since WHEN (add --dry-run to see whom first)",
            2,
        )
    if reason is not None and not reason.strip():
        raise fail("--reason is empty; give part of the pause reason, e.g. --reason '550 5.7.1'", 2)
    after = _since(since) if since is not None else None
    with store_context() as ctx:
        if address is not None:
            if dry_run:
                raise fail("--dry-run goes with --reason/--since; `papertrail follows ADDRESS` shows one", 2)
            try:
                subscriber = resume(ctx.db, address)
            except (LookupError, ValueError) as exc:
                raise fail(explain(exc), exit_code_for(exc)) from exc
            out.print(f"{mask_address(subscriber.address)} is active again")
            return
        count, addresses = alarm.refused_subscribers(ctx.db, reason=reason, since=after, limit=RESUME_LISTED)
        cause = " and ".join(
            part
            for part in (
                f"a reason containing {reason!r}" if reason is not None else "",
                f"paused since {after.isoformat()}" if after is not None else "",
            )
            if part
        )
        if not count:
            raise fail(
                f"no subscriber paused by a delivery refusal matches ({cause}); `papertrail status` counts "
                "the paused ones, `papertrail follows ADDRESS` shows one's reason",
                1,
            )
        if dry_run:
            out.print(f"would resume {count_of(count, 'subscriber')} paused by a delivery refusal ({cause}):")
            for found in addresses:
                out.print(f"  {mask_address(found)}")
            if count > len(addresses):
                out.print(f"  …and {count - len(addresses)} more")
            return
        resumed = alarm.resume_refused(ctx.db, reason=reason, since=after, now=utcnow())
    out.print(
        f"resumed {count_of(resumed, 'subscriber')} paused by a delivery refusal ({cause}); their held "
        "matches "
        "go out with their next digest"
    )


def _since(text: str) -> datetime:
    """``--since``: ISO date or time (UTC when no zone is named) or a time ago (``90m``, ``6h``, ``2d``)."""
    from core.models import utcnow

    value = text.strip()
    units = {"m": "minutes", "h": "hours", "d": "days"}
    if value[:-1].isdigit() and value[-1:].lower() in units:
        return utcnow() - timedelta(**{units[value[-1].lower()]: int(value[:-1])})
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise fail(
            f"--since {text!r} is neither a time like 2026-12-08T10:00 (UTC) nor a time ago like 6h or 2d", 2
        ) from exc
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@app.command()
def digest(
    address: Annotated[str | None, typer.Argument(help="Only this subscriber.")] = None,
    now: Annotated[
        bool, typer.Option("--now", help="Send every pending match regardless of schedule.")
    ] = False,
) -> None:
    """Send the digests that are due (all pending ones with --now)."""
    from core.delivery.digests import send_due_digests
    from core.people.masking import mask_address, mask_text

    with app_context() as ctx:

        async def deliver() -> list[DigestReport]:
            # Chat clients are bound to the event loop that opened them: close them in the same one.
            try:
                return await send_due_digests(
                    ctx.db, ctx.notifiers, ctx.renderer, force=now, address=address, policy=ctx.policy
                )
            finally:
                await ctx.close_notifiers()

        try:
            reports = run_async(deliver())
        except (ValueError, LookupError) as exc:
            raise fail(explain(exc), exit_code_for(exc)) from exc
    failed = 0
    summary: list[str] = []
    for report in reports:
        if report.sent:
            summary.append(f"sent {count_of(report.items, 'item')} to {mask_address(report.address)}")
        else:
            failed += 1
            state = "paused" if report.paused else "dead-lettered" if report.dead else "will retry"
            err.print(
                f"not sent to {mask_address(report.address)} ({state}): {mask_text(report.error or '')}"
            )
    if not reports:
        summary.append("no digests due" if not now else "nothing pending")
    try:
        # Plain writes: rich would answer a closed pipe with exit 1 and nothing said.
        for line in summary:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # `digest --now | head`: the reader took the console digests whole (a digest that could not be
        # written is not sent: notifiers/console/notifier.py) and left before this summary. Say on stderr what
        # the ledger recorded.
        _stdout_closed()
        err.print("standard output was closed before this summary (`| head`?); recorded:")
        for line in summary:
            err.print(f"  {line}")
    if failed:
        raise typer.Exit(FAILURE)


def _stdout_closed() -> None:
    """Point standard output at /dev/null once its reader is gone, so that nothing more fails on it.

    Without this the interpreter's last flush at exit raises BrokenPipeError again and prints
    "Exception ignored ...". Not possible (nor needed) where standard output is no file (tests).
    """
    import io
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


@app.command()
def worker(
    name: Annotated[str | None, typer.Option(help="Name in the ledger's claims (default host:pid).")] = None,
    until_idle: Annotated[
        bool, typer.Option("--until-idle", help="Exit once a pass finds nothing to send.")
    ] = False,
) -> None:
    """Deliver digests only (no ingest): run several of these against PostgreSQL to send in parallel."""
    from papertrail.service.worker import run_worker

    with app_context() as ctx:

        async def main() -> None:
            try:
                totals = await run_worker(ctx, name=name, until_idle=until_idle)
            finally:
                await ctx.close_notifiers()
            out.print(
                f"worker finished: {count_of(totals.sent, 'digest')} sent, "
                f"{count_of(totals.failed, 'failed attempt')}"
            )

        run_async(main())


@app.command()
def retry(
    address: Annotated[str | None, typer.Argument(help="Only this subscriber's digests.")] = None,
) -> None:
    """Re-queue dead-lettered digests (they gave up after PAPERTRAIL_DELIVERY_MAX_ATTEMPTS failures)."""
    from core.channel import normalise_address
    from core.delivery import queue

    with store_context() as ctx:
        try:
            target = normalise_address(address) if address else None
        except ValueError as exc:
            raise fail(str(exc), 2) from exc
        count = queue.requeue_dead(ctx.db, address=target)
    out.print(f"re-queued {count_of(count, 'dead-lettered digest')}; they go out with the next digest pass")


alarms_app = typer.Typer(
    help="Delivery alarms: a channel refusing many recipients the same way (docs/delivery.md).",
    invoke_without_command=True,
)
app.add_typer(alarms_app, name="alarms")


@alarms_app.callback()
def alarms_list(ctx: typer.Context) -> None:
    """List the raised delivery alarms (the same as in `papertrail status`)."""
    from core.delivery.alarm import raised_alarms

    if ctx.invoked_subcommand is not None:
        return
    with store_context() as app_ctx:
        alarms = raised_alarms(app_ctx.db)
    if not alarms:
        out.print("no delivery alarm is raised")
        return
    for alarm in alarms:
        out.print(alarm_line(alarm))


@alarms_app.command("clear")
def alarms_clear(
    channel: Annotated[str | None, typer.Argument(help="Only this channel's alarms (e.g. email).")] = None,
) -> None:
    """Clear raised alarms by hand (they clear by themselves when the channel delivers again).

    While raised, an alarm holds its kind of refusal for a retry; once cleared, the next refusals are
    judged afresh: a few are paused as the recipients', many raise the alarm again.
    """
    from core.delivery.alarm import clear_alarms
    from core.models import utcnow

    with store_context() as ctx:
        cleared = clear_alarms(ctx.db, channel.strip().lower() if channel else None, now=utcnow())
    if not cleared:
        raise fail(f"no delivery alarm is raised{f' on {channel}' if channel else ''}", 1)
    for name, kind in cleared:
        out.print(f"cleared the delivery alarm on {name} ({kind})")


@app.command()
def guides(
    language: Annotated[
        str | None, typer.Option(help="Only this language (en or zh); default: every language readers use.")
    ] = None,
) -> None:
    """Make the AI guides readers are waiting for now, within the daily cap (the service does it itself)."""
    from core.guides.service import make_guides, make_reader_guides
    from core.models import utcnow

    language = language_option(language)
    with app_context() as ctx:
        if ctx.guide_model is None:
            raise fail(
                "AI guides are off: set PAPERTRAIL_LLM_URL and PAPERTRAIL_LLM_MODEL (docs/guides.md)", 2
            )
        model = ctx.guide_model

        async def main() -> list[GuideReport]:
            now = utcnow()
            if language is None:
                return await make_reader_guides(ctx.db, model, ctx.settings, now=now)
            return [await make_guides(ctx.db, model, ctx.settings, language=language, now=now)]

        reports = run_async(main())
    for report in reports:
        out.print(
            f"{report.language}: {count_of(report.made, 'guide')} made, {len(report.failures)} failed"
            + (f"; {report.note}" if report.note else "")
        )
        for version_id, reason in report.failures[:10]:
            err.print(f"  version {version_id}: {reason}")
    if any(r.failures for r in reports) and not any(r.made for r in reports):
        raise fail("no guide could be made; the reasons are above")


@app.command(name="webhook-secret")
def webhook_secret_command(
    url: Annotated[str, typer.Argument(help="The webhook URL as registered (after webhook:).")],
) -> None:
    """Print the signing secret to give the receiver at URL (derived from PAPERTRAIL_SECRET_KEY)."""
    from notifiers.webhook.payload import webhook_secret

    settings = load_settings()
    if not settings.secret_key:
        raise fail(
            "set PAPERTRAIL_SECRET_KEY first: webhook digests are signed with a secret derived from it", 2
        )
    key = settings.secret_key.get_secret_value()
    sys.stdout.write(webhook_secret(key, url.removeprefix("webhook:")) + "\n")
