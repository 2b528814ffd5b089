"""The ``import`` and ``export`` command groups: follows in bulk as JSON Lines, one reader's whole
subscription as one JSON document, and a reader's feeds as OPML.

Both groups are added to :data:`papertrail.cli_common.app` here; ``import library`` is registered on
:data:`import_app` by ``papertrail/cli_library.py``, which also prints at most :data:`_BAD_LINES_SHOWN`
refused entries. A command imports what it needs when it runs (tests/test_cli_imports.py). Exports are
data: written byte for byte to stdout, or to a file renamed into place once complete.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.text import Text

from papertrail.cli_common import FAILURE, USAGE, _code, _explain, _fail, _n, _store_context, app, err, out
from papertrail.cli_follows import _webhook_refusal

if TYPE_CHECKING:
    from core.people.subscription_records import Restored


import_app = typer.Typer(
    help="Load follows in bulk, or one reader's whole subscription, from a file.", no_args_is_help=True
)
app.add_typer(import_app, name="import")
export_app = typer.Typer(
    help="Write follows in bulk, one reader's whole subscription, or its feeds as OPML.", no_args_is_help=True
)
app.add_typer(export_app, name="export")
# Refused lines printed at most: a broken 100,000-line file must not bury the summary (the count is whole).
_BAD_LINES_SHOWN = 1000


@import_app.command("follows")
def import_follows_command(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="FILE.jsonl", help='One {"address": ..., "query": ...} per line; - for stdin.'
        ),
    ],
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the good lines even when some are invalid.")
    ] = False,
) -> None:
    """Add follows in bulk, like `follow` for each line; every line is checked first, and importing the
    same file again changes nothing. Keys: address, query, schedule, timezone, language, new_only, instant.
    """
    from core.follows.file import read_lines
    from core.follows.manage import import_follows
    from papertrail import redact

    if str(path) != "-" and not path.is_file():
        raise _fail(f"{path} is not a file", 2)
    with _store_context() as ctx, sys.stdin.buffer if str(path) == "-" else path.open("rb") as stream:
        report = import_follows(
            ctx.db,
            read_lines(stream),
            skip_invalid=skip_invalid,
            timezone=ctx.settings.default_timezone,
            schedule=ctx.settings.default_schedule,
            refuse_address=_webhook_refusal(ctx.settings),
        )
        # One redactor for every reason printed (a reason quotes the line's address or query).
        redactor = redact.SecretRedactor(redact.secrets_of(ctx.settings))
    checked, counts = report.checked, report.counts
    for bad in report.bad[:_BAD_LINES_SHOWN]:
        err.print(Text(f"{path}:{bad.line}: ", style="bold") + Text(redactor.mask(bad.reason)))
    if len(report.bad) > _BAD_LINES_SHOWN:
        err.print(f"... and {_n(len(report.bad) - _BAD_LINES_SHOWN, 'more invalid line', grouped=True)}")
    if counts is None:
        if report.bad:
            hint = "" if skip_invalid else "; fix them, or import the good lines with --skip-invalid"
            raise _fail(
                f"{len(report.bad):,} of {checked.lines:,} lines invalid; nothing imported{hint}", USAGE
            )
        out.print(f"{path}: no follows to import")
        return
    out.print(
        f"{path}: {_n(checked.lines, 'line', grouped=True)}; follows: {counts.follows_added:,} added, "
        f"{counts.follows_updated:,} updated, {counts.follows_unchanged:,} unchanged; "
        f"subscribers: {counts.subscribers_created:,} created, {counts.subscribers_updated:,} updated"
        + (f"; {_n(checked.duplicates, 'duplicate line', grouped=True)}" if checked.duplicates else "")
        + (f"; {_n(len(report.bad), 'invalid line', grouped=True)} skipped" if report.bad else "")
    )
    if counts.inactive:
        out.print(
            f"note: {counts.inactive:,} of these subscribers are paused, unsubscribed or unconfirmed; "
            "their follows are stored but not matched until they are active"
        )


@export_app.command("follows")
def export_follows_command(
    address: Annotated[str | None, typer.Argument(help="Only this subscriber's follows.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Write the follows of active and paused subscribers as JSON Lines, the input of `import follows`."""
    from core.follows.manage import export_follows

    with _store_context() as ctx:
        try:
            lines = export_follows(
                ctx.db,
                address,
                timezone=ctx.settings.default_timezone,
                schedule=ctx.settings.default_schedule,
            )
        except (LookupError, ValueError) as exc:
            raise _fail(_explain(exc), _code(exc)) from exc
        if output is None:
            # Plain writes, not the rich console: the lines are data and must come out byte for byte.
            for line in lines:
                sys.stdout.write(line + "\n")
            return
        count = 0
        with _output_file(output) as file:
            for line in lines:
                file.write(line + "\n")
                count += 1
    out.print(f"{count:,} follows written to {output}")


@contextmanager
def _output_file(output: Path) -> Iterator[TextIO]:
    """A file to write an export into: written beside ``output`` and renamed to it once complete, so an
    interrupted export never leaves half a file behind."""
    partial = output.with_name(output.name + ".partial")
    with partial.open("w", encoding="utf-8") as file:
        yield file
    partial.replace(output)


def _write_output(output: Path, text: str) -> None:
    """``text`` into ``output`` (see :func:`_output_file`)."""
    with _output_file(output) as file:
        file.write(text)


@export_app.command("subscription")
def export_subscription_command(
    address: Annotated[str, typer.Argument(help="The subscriber address.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Write one subscriber's whole subscription as one JSON document, the input of `import subscription`:
    status, schedule, timezone, language, heartbeat, newsletters, follows, the papers it received, its
    votes, library seeds and recommendations."""
    from core.people.masking import mask_address
    from core.people.subscription import exported
    from core.people.subscription_file import MAX_LIBRARY, MAX_VOTES, dumps

    with _store_context() as ctx:
        try:
            export = exported(ctx.db, address)
        except (LookupError, ValueError) as exc:
            raise _fail(_explain(exc), _code(exc)) from exc
    doc = export.document
    text = dumps(doc)
    # On stderr, so that a file written to stdout is still data only.
    if export.votes_left_out:
        err.print(
            f"note: the {_n(export.votes_left_out, 'oldest vote', grouped=True)} left out: a file holds the "
            f"newest {MAX_VOTES:,}"
        )
    if export.library_left_out:
        left = _n(export.library_left_out, "oldest library entry", "oldest library entries", grouped=True)
        err.print(f"note: the {left} left out: a file holds the newest {MAX_LIBRARY:,}")
    if output is None:
        sys.stdout.write(text)  # data, byte for byte: not through the rich console
        return
    _write_output(output, text)
    counts = (
        _n(len(doc["follows"]), "follow"),
        _n(len(doc["received"]), "received paper", grouped=True),
        _n(len(doc["votes"]), "vote", grouped=True),
        _n(len(doc["library"]), "library entry", "library entries", grouped=True),
    )
    out.print(f"{mask_address(doc['address'])}: {', '.join(counts)} written to {output}")


@export_app.command("opml")
def export_opml_command(
    address: Annotated[str, typer.Argument(help="The subscriber address.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Write the subscriber's Atom feeds as OPML 2.0 for a feed reader: its private feed (its link made if
    it has none) and one public feed per follow, at PAPERTRAIL_PUBLIC_URL."""
    from core.channel import channel_of, normalise_address
    from core.delivery.feed_links import opml
    from core.delivery.feeds import private_feed_url
    from core.follows import subscriber_records
    from core.models import utcnow

    with _store_context() as ctx:
        try:
            normal = normalise_address(address)
            if not channel_of(normal).delivers:
                raise ValueError(f"{normal} is a newsletter, not a reader's subscription")
        except ValueError as exc:
            raise _fail(_explain(exc), USAGE) from exc
        subscriber = subscriber_records.get_subscriber(ctx.db, normal)
        if subscriber is None or subscriber.id is None:
            raise _fail(f"no subscriber {address}", FAILURE)
        queries = [f.query for f in subscriber_records.follows_of(ctx.db, subscriber.id)]
        # The private feed's link is made here if the reader never opened it (as the manage page does).
        private = private_feed_url(ctx.db, ctx.settings, subscriber)
        text = opml(ctx.settings, subscriber, queries, private=private, now=utcnow())
    if private is None:
        err.print("note: no private feed in the file: PAPERTRAIL_SECRET_KEY is not set")
    if output is None:
        sys.stdout.write(text)
        return
    _write_output(output, text)
    out.print(f"{_n(len(queries) + (private is not None), 'feed')} written to {output}")


@import_app.command("subscription")
def import_subscription_command(
    path: Annotated[
        Path,
        typer.Argument(metavar="FILE.json", help="A file of `export subscription`; - for stdin."),
    ],
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="The address exists: take the file's settings, add its follows, newsletters, votes and "
            "library.",
        ),
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="The address exists: make its settings, follows, newsletters, votes and library the file's.",
        ),
    ] = False,
) -> None:
    """Restore one subscription exported from another PaperTrail, in one transaction: the subscriber, its
    settings, follows, newsletters (those that exist here), the papers it received, its votes and library
    seeds. The file is checked whole first; an address that exists with other settings is refused unless
    --merge or --replace."""
    from sqlalchemy.exc import IntegrityError

    from core.people.masking import mask_address
    from core.people.subscription import Mode, SubscriptionExists, import_subscription
    from core.people.subscription_file import MAX_DOCUMENT_BYTES, DocumentError

    if merge and replace:
        raise _fail("--merge and --replace exclude each other; choose one", USAGE)
    if str(path) != "-" and not path.is_file():
        raise _fail(f"{path} is not a file", USAGE)
    mode = Mode.MERGE if merge else Mode.REPLACE if replace else Mode.REFUSE
    with _store_context() as ctx:
        try:
            with sys.stdin.buffer if str(path) == "-" else path.open("rb") as stream:
                data = stream.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise _fail(f"cannot read {path}: {exc}", FAILURE) from exc
        try:
            wanted, done = import_subscription(
                ctx.db, data, mode=mode, refuse_address=_webhook_refusal(ctx.settings)
            )
        except DocumentError as exc:
            raise _fail(
                f"{path}: {exc}; nothing imported. Fix that key, or export the subscription again "
                "(`papertrail export subscription ADDRESS`, or the download on its manage page)",
                USAGE,
            ) from exc
        except SubscriptionExists as exc:
            raise _fail(
                f"{mask_address(exc.address)} is a subscriber here already, with other settings "
                f"({'; '.join(exc.differences)}); nothing imported. Run again with --merge to take the "
                "file's settings and add its follows, newsletters, votes and library, or with --replace to "
                "make them exactly the file's",
                FAILURE,
            ) from exc
        except IntegrityError as exc:
            # Another command created the address (or one of its rows) between the look-up and the insert.
            raise _fail(
                "the subscriber changed while it was imported (another command wrote it); nothing imported. "
                "Run the import again",
                FAILURE,
            ) from exc
    who = mask_address(wanted.address)
    follows = done.follows
    state = (
        f"created ({done.status}, {wanted.schedule}, {wanted.timezone})"
        if done.created
        else ("updated" if done.settings_changed else "unchanged")
    )
    out.print(
        f"{who}: {state}; follows: {follows.follows_added} added, {follows.follows_updated} updated, "
        f"{follows.follows_unchanged} unchanged"
        + (f", {done.follows_removed} removed" if done.follows_removed else "")
        + f"; newsletters: {done.newsletters_joined} joined"
        + (f", {done.newsletters_left} left" if done.newsletters_left else "")
        + f"; history: {_n(done.papers_recorded, 'paper', grouped=True)} in "
        f"{_n(done.digests_recorded, 'digest', grouped=True)} recorded"
        + (f", {done.papers_known:,} recorded before" if done.papers_known else "")
        + (_learned_summary(done) if done.learned_in_file else "")
    )
    if done.newsletters_missing:
        out.print(f"note: no such newsletter here, not joined: {', '.join(done.newsletters_missing)}")
    if done.papers_missing:
        out.print(
            f"note: {_n(done.papers_missing, 'received paper', grouped=True)} not in this library: kept in "
            "the file only, not recorded here"
        )
    if done.votes_missing:
        out.print(
            f"note: {_n(done.votes_missing, 'vote', grouped=True)} on papers this server has not stored "
            f"{'was' if done.votes_missing == 1 else 'were'} skipped (a vote is kept per stored version)"
        )
    if done.votes_kept:
        out.print(
            f"note: {_n(done.votes_kept, 'vote', grouped=True)} cast here after the file's kept (the newer "
            "vote wins)"
        )
    if done.library_as_text:
        entries = _n(done.library_as_text, "library entry", "library entries", grouped=True)
        out.print(f"note: {entries} on papers this server has not stored kept by title and abstract")
    if not done.learned_in_file:
        out.print("note: a version-1 file: votes, library and recommendations here left as they are")
    if done.status != done.status_in_file:
        out.print(f"note: status kept: {done.status} here, {done.status_in_file} in the file")


def _learned_summary(done: Restored) -> str:
    """The votes and library part of an import's summary line (a version-2 file)."""
    return (
        f"; votes: {done.votes_added:,} added, {done.votes_changed:,} changed"
        + (f", {done.votes_removed:,} removed" if done.votes_removed else "")
        + f"; library: {done.library_added:,} added"
        + (f", {done.library_removed:,} removed" if done.library_removed else "")
    )
