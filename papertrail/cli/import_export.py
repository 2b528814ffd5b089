"""The ``import`` and ``export`` command groups: follows in bulk as JSON Lines, one reader's whole
subscription as one JSON document, and a reader's feeds as OPML.

Both groups are this family's sub-app, which papertrail/cli/app.py adds to the root app. A command imports
what it needs when it runs (tests/test_cli_imports.py). Exports are data: written byte for byte to stdout,
or to a file renamed into place once complete. An import prints at most :data:`_BAD_LINES_SHOWN` refused
lines or entries.

``import library`` seeds a reader's learned follows with their reference library: the file is read by
:func:`core.taste.library_file.read_library` and imported by :func:`core.taste.library_import.import_library`,
the step the manage page's upload runs too (``papertrail/web/library.py``). It needs the arXiv API for ids
PaperTrail has not stored, so it opens the whole application context, not the store alone.

Exit codes as in the README: 2 for a malformed address, a file argument that is not a file, or a file that
is not a library (its refusal printed, nothing imported); 1 for an unknown subscriber or a file that cannot
be read. Entries that cannot be used do not fail the command: they are listed after the summary, each with
its line and reason, as ``import follows`` lists its bad lines.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.text import Text

from papertrail.cli.common import (
    FAILURE,
    USAGE,
    app_context,
    count_of,
    err,
    exit_code_for,
    explain,
    fail,
    out,
    run_async,
    store_context,
    webhook_refusal,
)

if TYPE_CHECKING:
    from core.people.subscription_records import Restored
    from core.taste.library_file import EntryProblem, LibraryRead
    from core.taste.library_import import LibraryReport


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


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
    from papertrail.service import redact

    if str(path) != "-" and not path.is_file():
        raise fail(f"{path} is not a file", 2)
    with store_context() as ctx, sys.stdin.buffer if str(path) == "-" else path.open("rb") as stream:
        report = import_follows(
            ctx.db,
            read_lines(stream),
            skip_invalid=skip_invalid,
            timezone=ctx.settings.default_timezone,
            schedule=ctx.settings.default_schedule,
            refuse_address=webhook_refusal(ctx.settings),
        )
        # One redactor for every reason printed (a reason quotes the line's address or query).
        redactor = redact.SecretRedactor(redact.secrets_of(ctx.settings))
    checked, counts = report.checked, report.counts
    for bad in report.bad[:_BAD_LINES_SHOWN]:
        err.print(Text(f"{path}:{bad.line}: ", style="bold") + Text(redactor.mask(bad.reason)))
    if len(report.bad) > _BAD_LINES_SHOWN:
        err.print(
            f"... and {count_of(len(report.bad) - _BAD_LINES_SHOWN, 'more invalid line', grouped=True)}"
        )
    if counts is None:
        if report.bad:
            hint = "" if skip_invalid else "; fix them, or import the good lines with --skip-invalid"
            raise fail(
                f"{len(report.bad):,} of {checked.lines:,} lines invalid; nothing imported{hint}", USAGE
            )
        out.print(f"{path}: no follows to import")
        return
    out.print(
        f"{path}: {count_of(checked.lines, 'line', grouped=True)}; follows: {counts.follows_added:,} added, "
        f"{counts.follows_updated:,} updated, {counts.follows_unchanged:,} unchanged; "
        f"subscribers: {counts.subscribers_created:,} created, {counts.subscribers_updated:,} updated"
        + (f"; {count_of(checked.duplicates, 'duplicate line', grouped=True)}" if checked.duplicates else "")
        + (f"; {count_of(len(report.bad), 'invalid line', grouped=True)} skipped" if report.bad else "")
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

    with store_context() as ctx:
        try:
            lines = export_follows(
                ctx.db,
                address,
                timezone=ctx.settings.default_timezone,
                schedule=ctx.settings.default_schedule,
            )
        except (LookupError, ValueError) as exc:
            raise fail(explain(exc), exit_code_for(exc)) from exc
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

    with store_context() as ctx:
        try:
            export = exported(ctx.db, address)
        except (LookupError, ValueError) as exc:
            raise fail(explain(exc), exit_code_for(exc)) from exc
    doc = export.document
    text = dumps(doc)
    # On stderr, so that a file written to stdout is still data only.
    if export.votes_left_out:
        err.print(
            f"note: the {count_of(export.votes_left_out, 'oldest vote', grouped=True)} left out: a file "
            "holds the "
            f"newest {MAX_VOTES:,}"
        )
    if export.library_left_out:
        left = count_of(
            export.library_left_out, "oldest library entry", "oldest library entries", grouped=True
        )
        err.print(f"note: the {left} left out: a file holds the newest {MAX_LIBRARY:,}")
    if output is None:
        sys.stdout.write(text)  # data, byte for byte: not through the rich console
        return
    _write_output(output, text)
    counts = (
        count_of(len(doc["follows"]), "follow"),
        count_of(len(doc["received"]), "received paper", grouped=True),
        count_of(len(doc["votes"]), "vote", grouped=True),
        count_of(len(doc["library"]), "library entry", "library entries", grouped=True),
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
    from core.follows import subscribers
    from core.models import utcnow

    with store_context() as ctx:
        try:
            normal = normalise_address(address)
            if not channel_of(normal).delivers:
                raise ValueError(f"{normal} is a newsletter, not a reader's subscription")
        except ValueError as exc:
            raise fail(explain(exc), USAGE) from exc
        subscriber = subscribers.subscriber_by_address(ctx.db, normal)
        if subscriber is None or subscriber.id is None:
            raise fail(f"no subscriber {address}", FAILURE)
        queries = [f.query for f in subscribers.follows_of(ctx.db, subscriber.id)]
        # The private feed's link is made here if the reader never opened it (as the manage page does).
        private = private_feed_url(ctx.db, ctx.settings, subscriber)
        text = opml(ctx.settings, subscriber, queries, private=private, now=utcnow())
    if private is None:
        err.print("note: no private feed in the file: PAPERTRAIL_SECRET_KEY is not set")
    if output is None:
        sys.stdout.write(text)
        return
    _write_output(output, text)
    out.print(f"{count_of(len(queries) + (private is not None), 'feed')} written to {output}")


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
    from core.people.subscription import import_subscription
    from core.people.subscription_file import MAX_DOCUMENT_BYTES, DocumentError, Mode, SubscriptionExists

    if merge and replace:
        raise fail("--merge and --replace exclude each other; choose one", USAGE)
    if str(path) != "-" and not path.is_file():
        raise fail(f"{path} is not a file", USAGE)
    mode = Mode.MERGE if merge else Mode.REPLACE if replace else Mode.REFUSE
    with store_context() as ctx:
        try:
            with sys.stdin.buffer if str(path) == "-" else path.open("rb") as stream:
                data = stream.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise fail(f"cannot read {path}: {exc}", FAILURE) from exc
        try:
            wanted, done = import_subscription(
                ctx.db, data, mode=mode, refuse_address=webhook_refusal(ctx.settings)
            )
        except DocumentError as exc:
            raise fail(
                f"{path}: {exc}; nothing imported. Fix that key, or export the subscription again "
                "(`papertrail export subscription ADDRESS`, or the download on its manage page)",
                USAGE,
            ) from exc
        except SubscriptionExists as exc:
            raise fail(
                f"{mask_address(exc.address)} is a subscriber here already, with other settings "
                f"({'; '.join(exc.differences)}); nothing imported. Run again with --merge to take the "
                "file's settings and add its follows, newsletters, votes and library, or with --replace to "
                "make them exactly the file's",
                FAILURE,
            ) from exc
        except IntegrityError as exc:
            # Another command created the address (or one of its rows) between the look-up and the insert.
            raise fail(
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
        + f"; history: {count_of(done.papers_recorded, 'paper', grouped=True)} in "
        f"{count_of(done.digests_recorded, 'digest', grouped=True)} recorded"
        + (f", {done.papers_known:,} recorded before" if done.papers_known else "")
        + (_learned_summary(done) if done.learned_in_file else "")
    )
    if done.newsletters_missing:
        out.print(f"note: no such newsletter here, not joined: {', '.join(done.newsletters_missing)}")
    if done.papers_missing:
        out.print(
            f"note: {count_of(done.papers_missing, 'received paper', grouped=True)} not in this library: "
            "kept in "
            "the file only, not recorded here"
        )
    if done.votes_missing:
        out.print(
            f"note: {count_of(done.votes_missing, 'vote', grouped=True)} on papers this server has not "
            "stored "
            f"{'was' if done.votes_missing == 1 else 'were'} skipped (a vote is kept per stored version)"
        )
    if done.votes_kept:
        out.print(
            f"note: {count_of(done.votes_kept, 'vote', grouped=True)} cast here after the file's kept (the "
            "newer "
            "vote wins)"
        )
    if done.library_as_text:
        entries = count_of(done.library_as_text, "library entry", "library entries", grouped=True)
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


# -- import library --------------------------------------------------------------------------------------

# How the summary names each format.
FORMAT_NAMES = {"bibtex": "BibTeX", "ris": "RIS", "csl-json": "CSL-JSON"}
_STDIN = "<stdin>"


@import_app.command("library")
def import_library_command(
    address: Annotated[
        str, typer.Argument(help="The subscriber address, e.g. telegram:12345 or email:ada@example.org.")
    ],
    path: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="A BibTeX, RIS or CSL-JSON export of a reference library; - for stdin."
        ),
    ],
) -> None:
    """Seed a reader's recommendations with the papers of their reference library (Zotero, Mendeley,
    JabRef): each entry is used by its arXiv id, its DOI, or its title and abstract, and counted as a
    paper the reader likes. Every entry not used is listed with its line and reason; importing the same
    file again adds nothing."""
    from core.channel import normalise_address
    from core.follows.subscribers import subscriber_by_address
    from core.taste.library_file import MAX_FILE_BYTES, LibraryFileError, read_library
    from core.taste.library_import import import_library
    from papertrail.service import channels

    stdin = str(path) == "-"
    name = _STDIN if stdin else str(path)
    if not stdin and not path.is_file():
        raise fail(f"{path} is not a file", USAGE)
    channels.install()  # the address is checked before the settings are read
    try:
        normal = normalise_address(address)
    except ValueError as exc:
        raise fail(str(exc), USAGE) from exc
    try:
        with sys.stdin.buffer if stdin else path.open("rb") as stream:
            # One byte more than read_library reads: a larger file is refused, not cut.
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise fail(f"cannot read {name}: {exc}", FAILURE) from exc
    if len(data) > MAX_FILE_BYTES:  # said here: read_library would give the size of the part read
        raise fail(
            f"{name}: the file is larger than {MAX_FILE_BYTES / 1e6:,.0f} MB, the most PaperTrail reads; "
            "export one collection at a time; nothing imported",
            USAGE,
        )
    try:
        read = read_library(data, None if stdin else path.name)
    except LibraryFileError as exc:
        raise fail(f"{name}: {exc}; nothing imported", USAGE) from exc
    with app_context() as ctx:
        subscriber = subscriber_by_address(ctx.db, normal)
        if subscriber is None or subscriber.id is None:
            raise fail(
                f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", FAILURE
            )
        report = run_async(import_library(ctx.db, subscriber.id, read, lookup=ctx.api))
    out.print(summary(name, read, report))
    if report.lookup_failed:
        err.print(
            "note: the arXiv API could not be reached: papers not stored here were used by their title and "
            "abstract where the file has them; import the file again in an hour to look them up"
        )
    if report.unused:
        out.print("not used:")
    for problem in report.unused[:_BAD_LINES_SHOWN]:
        out.print(problem_line(name, problem))
    if len(report.unused) > _BAD_LINES_SHOWN:
        out.print(
            "... and "
            f"{count_of(len(report.unused) - _BAD_LINES_SHOWN, 'more entry', 'more entries', grouped=True)}"
        )


def summary(name: str, read: LibraryRead, report: LibraryReport) -> str:
    """``zotero.bib (BibTeX): 12 entries; 10 used: 7 stored papers, 1 looked up on arXiv, 1 by DOI, 1 by
    title and abstract; 9 new`` (a part that counts nothing is left out)."""
    kind = FORMAT_NAMES.get(report.format, report.format)
    if read.encoding not in ("utf-8", "utf-16"):
        kind += f", read as {read.encoding}"  # a legacy export: accented titles may read wrong
    parts = [
        count_of(report.stored, "stored paper", grouped=True) if report.stored else "",
        f"{report.fetched:,} looked up on arXiv" if report.fetched else "",
        f"{report.by_doi:,} by DOI" if report.by_doi else "",
        f"{report.by_text:,} by title and abstract" if report.by_text else "",
    ]
    how = ", ".join(part for part in parts if part)
    return (
        f"{name} ({kind}): {count_of(report.entries, 'entry', 'entries', grouped=True)}; "
        f"{report.used:,} used{': ' + how if how else ''}; {report.added:,} new"
    )


def problem_line(name: str, problem: EntryProblem) -> str:
    """``FILE:LINE: entry KEY: reason``, in English (the command line speaks to the operator); the key
    and reason come from the reader's file, so control characters are taken out before they print."""
    from core.escaping import strip_control

    where = name if problem.line is None else f"{name}:{problem.line}"
    key = f" entry {strip_control(problem.key)}:" if problem.key else ""
    return f"{where}:{key} {strip_control(str(problem.reason))}"
