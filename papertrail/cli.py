"""The ``papertrail`` command line.

Module-level imports are only what defining the commands takes (typer, rich's console, the standard
library): each command imports the rest when it runs. ``papertrail --help`` thus loads no database,
network or chat library, and a command that only reads or changes the store opens it without the HTTP
client, the sources and the notifiers (issue 16; tests/test_cli_imports.py keeps it so, bench/cli.py
measures it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from papertrail.source_names import SOURCE_NAMES

if TYPE_CHECKING:
    import asyncio

    from core.config import Settings
    from core.delivery.digests import DigestReport
    from core.guides.service import GuideReport
    from core.models import DeliveryAlarm, Follow, Newsletter, Subscriber
    from core.papers.status import SourceStatus
    from core.store.facade import Store
    from core.store.subscription import Restored
    from core.taste.settings import TasteState
    from papertrail.context import AppContext
    from papertrail.store_context import StoreContext

app = typer.Typer(
    help="PaperTrail: alerts for new arXiv papers and revisions.", no_args_is_help=True, add_completion=False
)
# Markup off: addresses, queries and titles are user text, and "[...]" in them must print as written.
out = Console(markup=False, highlight=False, soft_wrap=True)
err = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


# Exit codes (README, "Exit codes"): 2 when what was typed or configured is wrong (a malformed argument or
# option, invalid or missing settings, a file argument that is not a file), 1 when a well-formed command
# failed while running (not found in the store, network, database, delivery, a file that cannot be read).
USAGE = 2
FAILURE = 1


def _fail(message: str, code: int = FAILURE) -> typer.Exit:
    err.print(Text("error: ", style="bold red") + Text(_masked(message)))
    return typer.Exit(code)


def _n(count: int, singular: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """``count`` and the word in the form it takes: "1 item", "19 items", "2 matches" (issue 16: "1 passes").

    The command line speaks English to the operator; readers' messages go through the catalogs' ngettext.
    """
    from core.i18n.english import counted

    return counted(count, singular, plural, grouped=grouped)


def _code(exc: Exception) -> int:
    """The exit code for an error from core: not found (LookupError) is a failure, anything else usage.

    A ValueError, a QueryError or a missing setting means the command line or the configuration is wrong;
    an unknown subscriber, paper or newsletter is a well-formed command that found nothing.
    """
    return FAILURE if isinstance(exc, LookupError) else USAGE


def _masked(message: str) -> str:
    """``message`` with every configured secret masked (a URL in an error may carry a token)."""
    from pydantic import ValidationError

    from core.config import Settings
    from papertrail import redact

    try:
        settings = Settings()
    except ValidationError:
        return message
    return redact.SecretRedactor(redact.secrets_of(settings)).mask(message)


def _explain(exc: Exception) -> str:
    """The error text; for a query, followed by the query with a caret under the bad spot."""
    from core.follows.query import QueryError

    if isinstance(exc, QueryError):
        return f"{exc}\n{exc.excerpt()}"
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])  # str() of a KeyError is the repr of its message, quotes and all
    # Not stripped of quotes: "'notanemail' is not an email address" lost its opening quote (issue 16).
    return str(exc)


# --verbose, as the main callback found it; logging is set up with the settings, when a command reads them
# (setting it up in the callback would load the settings' libraries for `papertrail follow --help`).
_VERBOSE: ContextVar[bool] = ContextVar("papertrail_cli_verbose", default=False)


def _settings() -> Settings:
    """The settings, with logging set up from them; exit 2 saying what is wrong with invalid ones."""
    from pydantic import ValidationError

    from core.config import Settings
    from papertrail import redact
    from papertrail.logs import configure_logging

    try:
        settings = Settings()
    except ValidationError as exc:
        configure_logging(None, _VERBOSE.get())  # plain text: nothing to mask with yet
        # pydantic words a validator's own message "Value error, ...": the message is ours, whole.
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise _fail(f"invalid settings: {problems}", 2) from exc
    configure_logging(settings, _VERBOSE.get())
    redact.install(settings)
    return settings


T = TypeVar("T")
# The event loop of the command being run (set by _context). The HTTP client's pooled keep-alive
# connections, the chat clients and the notifiers belong to the loop that opened them: closing them in a
# second asyncio.run() would touch a closed loop ("Event loop is closed", exit 1 after a good run).
_RUNNER: ContextVar[asyncio.Runner | None] = ContextVar("papertrail_cli_runner", default=None)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in the current command's one event loop (a fresh one outside ``_context``)."""
    runner = _RUNNER.get()
    if runner is not None:
        return runner.run(coro)
    import asyncio

    return asyncio.run(coro)


@contextmanager
def _context() -> Iterator[AppContext]:
    """The app context of one command, with one event loop for all its async work, closing included."""
    import asyncio

    from papertrail.context import build_context

    settings = _settings()
    try:
        ctx = build_context(settings)
    except Exception as exc:  # cannot reach or migrate the database: say which one, without the password
        raise _cannot_open(settings, exc) from exc
    with asyncio.Runner() as runner:
        token = _RUNNER.set(runner)
        try:
            yield ctx
        finally:
            try:
                runner.run(ctx.aclose())
            finally:
                _RUNNER.reset(token)


def _known_subscriber(store: Store, address: str) -> Subscriber:
    """The stored subscriber at ``address`` (its id set); exit 2 for a malformed address, 1 for an
    unknown one."""
    from core.delivery.contract import normalise_address

    try:
        found = store.subscribers.get_subscriber(normalise_address(address))
    except ValueError as exc:
        raise _fail(str(exc), USAGE) from exc
    if found is None or found.id is None:
        raise _fail(f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", FAILURE)
    return found


@contextmanager
def _store_context() -> Iterator[StoreContext]:
    """The settings and the store of a command that needs nothing else (no network, no notifiers)."""
    from papertrail.store_context import StoreContext, open_store

    settings = _settings()
    try:
        store = open_store(settings)
    except Exception as exc:  # cannot reach or migrate the database: say which one, without the password
        raise _cannot_open(settings, exc) from exc
    ctx = StoreContext(settings, store)
    try:
        yield ctx
    finally:
        ctx.close()


def _cannot_open(settings: Settings, exc: Exception) -> typer.Exit:
    from core.config import mask_url_password
    from core.store.facade import DatabaseFolderMissing

    # A mistyped path is configuration (exit 2); a server that cannot be reached, a failure (exit 1).
    code = USAGE if isinstance(exc, DatabaseFolderMissing) else FAILURE
    return _fail(f"cannot open database {mask_url_password(settings.database_url)}: {exc}", code)


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False,
) -> None:
    _VERBOSE.set(verbose)


@app.command()
def run(
    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role",
            metavar="ROLES",
            help="Roles to run: scheduler, bots, web, worker (comma-separated or repeated; default all).",
        ),
    ] = None,
) -> None:
    """Run the service until Ctrl-C or SIGTERM: ingest on schedule, deliver digests, serve the web page."""
    import asyncio

    from papertrail.context import build_context
    from papertrail.runtime import WEB_PORT_HINT, RoleFailed, parse_roles, run_forever, web_port_problem

    try:
        roles = parse_roles(role or [])
    except ValueError as exc:
        raise _fail(str(exc), 2) from exc
    settings = _settings()
    # Before anything starts (migrations, the other roles): a taken port is said at once, on the last line.
    if "web" in roles and (problem := web_port_problem(settings.web_host, settings.web_port)):
        raise _fail(f"the web role {problem}; {WEB_PORT_HINT}")
    try:
        ctx = build_context(settings)
    except Exception as exc:  # cannot reach or migrate the database: say which one, without the password
        raise _cannot_open(settings, exc) from exc

    async def main() -> None:
        # Chat clients and the HTTP client belong to this loop: close them in it.
        try:
            await run_forever(ctx, roles=roles)
        finally:
            await ctx.aclose()

    try:
        asyncio.run(main())
    except RoleFailed as exc:
        raise _fail(str(exc), 1) from exc


@app.command()
def ingest(
    source: Annotated[str, typer.Option(help=f"Source to run: {', '.join(SOURCE_NAMES)}.")] = "arxiv-rss",
    day: Annotated[
        str | None, typer.Option("--date", help="hf-daily: the day to fetch (YYYY-MM-DD, default today UTC).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="arxiv-oai: harvest records changed since this date (YYYY-MM-DD).")
    ] = None,
    history: Annotated[
        bool, typer.Option("--history", help="arxiv-oai: store everything as history; notify nobody.")
    ] = False,
) -> None:
    """Fetch one source once, store new versions and match them against the follows.

    arxiv-oai fills gaps: versions announced after the newest announcement already seen are news, older
    ones are stored as history.
    """
    from core.models import utcnow
    from core.papers.pipeline import complete_papers, ingest_community, ingest_once, ingest_paged
    from core.store.facade import Novelty

    if source not in SOURCE_NAMES:
        raise _fail(f"unknown source {source!r}; choose one of: {', '.join(SOURCE_NAMES)}", 2)
    try:
        wanted = date.fromisoformat(day) if day else utcnow().date()
    except ValueError as exc:
        raise _fail(f"--date {day!r} is not a date like 2026-11-30", 2) from exc
    try:
        from_date = date.fromisoformat(since).isoformat() if since else None
    except ValueError as exc:
        raise _fail(f"--since {since!r} is not a date like 2026-11-01", 2) from exc
    with _context() as ctx:
        if source == "arxiv-api":
            assert ctx.api is not None
            report = _run(complete_papers(ctx.store, ctx.api))
        elif source in ctx.paged:
            novelty = Novelty.HISTORY if history else Novelty.GAP
            report = _run(ingest_paged(ctx.store, ctx.paged[source], since=from_date, novelty=novelty))
        elif source in ctx.community:
            report = _run(ingest_community(ctx.store, ctx.community[source], wanted))
        else:
            report = _run(ingest_once(ctx.store, ctx.sources[source]))
    if report.error:
        raise _fail(f"{source}: {report.error}")
    # A one-shot command leaves the ledger complete: what matched reaches each follower's Match rows now
    # rather than at the next digest planning (which would do it first anyway), and so do the learned
    # recommendations of the new papers (core.taste.recommend).
    from core.taste.recommend import recommend_new

    fanned = ctx.store.matches.expand_matches()
    recommended = recommend_new(ctx.store).written
    out.print(
        f"{source}: {report.state}; {_n(report.fetched, 'item')}, {_n(report.new_papers, 'new paper')}, "
        f"{_n(report.revisions, 'revision')}, {report.duplicates} already known, "
        f"{_n(report.matches, 'query match', 'query matches')} ({fanned} for subscribers)"
        + (f", {_n(recommended, 'recommendation')}" if recommended else "")
        + (f"\nnote: {report.note}" if report.note else "")
    )


backfill_app = typer.Typer(help="Load history in bulk (stored, never sent as news).", no_args_is_help=True)
app.add_typer(backfill_app, name="backfill")


@backfill_app.command("snapshot")
def backfill_snapshot(
    path: Annotated[Path, typer.Argument(help="arxiv-metadata-oai-snapshot.json[.gz] (JSON Lines).")],
) -> None:
    """Stream the arXiv metadata snapshot into the store as history, with a progress bar."""
    from papertrail.backfill import BackfillFailed, run_snapshot_backfill

    if not path.is_file():
        raise _fail(f"{path} is not a file; download arxiv-metadata-oai-snapshot.json (Kaggle) first", 2)
    with _store_context() as ctx:
        try:
            report = run_snapshot_backfill(ctx.store, path, err)
        except BackfillFailed as exc:  # a cut-short or corrupt gzip: click alone would print "Aborted."
            raise _fail(str(exc), 1) from exc
        backlog = ctx.store.papers.search_backlog()
    out.print(
        f"snapshot: {report.state}; {_n(report.fetched, 'version')} read, {report.duplicates} already known"
    )
    if report.note:
        out.print(f"note: {report.note}")
    if backlog:
        out.print(
            f"search: {_n(backlog, 'paper')} to index; the service indexes them in the background, "
            "or run `papertrail index` to do it now"
        )


@app.command()
def index(
    limit: Annotated[
        int, typer.Option(min=0, help="Stop after about this many papers (0: until none is left).")
    ] = 0,
) -> None:
    """Write the search index entries a backfill left (the running service does it in the background)."""
    import time

    from core.store.search import INDEX_BATCH

    with _store_context() as ctx:
        store = ctx.store
        waiting = store.papers.search_backlog()
        if not waiting:
            out.print("search index: up to date")
            return
        out.print(f"search index: {_n(waiting, 'paper')} to index")
        started = time.monotonic()
        done = 0
        while not limit or done < limit:
            written = store.papers.index_search(INDEX_BATCH)
            done += written
            if written < INDEX_BATCH:
                break
            if done % (INDEX_BATCH * 25) == 0:
                err.print(f"  {done:,} indexed, {done / (time.monotonic() - started):,.0f} papers/s")
        store.papers.tidy_search_index()
        seconds = time.monotonic() - started
        left = store.papers.search_backlog()
    out.print(f"search index: {_n(done, 'paper')} indexed in {seconds:,.0f} s; {left} left")


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
    from core.delivery.schedule import parse_schedule
    from core.follows.manage import follow as add_follow
    from core.follows.query import QueryError
    from core.people.masking import mask_address

    chosen = _language_option(language)
    with _store_context() as ctx:
        _check_webhook(address, ctx.settings)
        try:
            result = add_follow(
                ctx.store,
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
            who = ctx.store.subscribers.update_subscriber(who.id or 0, **fields)
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
    """Why delivery would refuse an address: for ``webhook:`` its URL's rules (notifiers.webhook.refusal),
    for other channels nothing, and they load nothing here."""

    def refuse(address: str) -> str | None:
        channel, _, target = address.partition(":")
        if channel.strip().lower() != "webhook":
            return None
        import asyncio

        from notifiers.webhook import refusal

        return asyncio.run(refusal(target.strip(), settings.webhook_allowed_hosts))

    return refuse


def _language_option(value: str | None) -> str | None:
    """``--language``: en or zh (codes such as zh-CN accepted); exit 2 naming the choices otherwise."""
    if value is None:
        return None
    from core.i18n.languages import LANGUAGES, normalize_language

    chosen = normalize_language(value)
    if chosen is None:
        raise _fail(f"--language {value!r} is not one of: {', '.join(LANGUAGES)}", 2)
    return chosen


def _options(row: Follow) -> str:
    flags = [flag for flag, on in (("new papers only", not row.revisions), ("instant", row.instant)) if on]
    return f"  [{', '.join(flags)}]" if flags else ""


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
            ctx.store,
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
                ctx.store,
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
            export = exported(ctx.store, address)
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
    from core.delivery.contract import NEWSLETTER_CHANNEL, normalise_address, split_address
    from core.delivery.feed_links import opml
    from core.delivery.feeds import private_feed_url
    from core.models import utcnow

    with _store_context() as ctx:
        try:
            normal = normalise_address(address)
            if split_address(normal)[0] == NEWSLETTER_CHANNEL:
                raise ValueError(f"{normal} is a newsletter, not a reader's subscription")
        except ValueError as exc:
            raise _fail(_explain(exc), USAGE) from exc
        subscriber = ctx.store.subscribers.get_subscriber(normal)
        if subscriber is None or subscriber.id is None:
            raise _fail(f"no subscriber {address}", FAILURE)
        queries = [f.query for f in ctx.store.subscribers.follows_of(subscriber.id)]
        # The private feed's link is made here if the reader never opened it (as the manage page does).
        private = private_feed_url(ctx.store, ctx.settings, subscriber)
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
                ctx.store, data, mode=mode, refuse_address=_webhook_refusal(ctx.settings)
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
            removed = unfollow(ctx.store, address, which)
        except (LookupError, QueryError, ValueError) as exc:
            raise _fail(_explain(exc), _code(exc)) from exc
    out.print(f"removed: {removed.query}")


@app.command()
def follows(address: Annotated[str, typer.Argument(help="The subscriber address.")]) -> None:
    """List a subscriber's follows, numbered."""
    from core.delivery.contract import normalise_address
    from core.people.masking import mask_address, mask_text

    with _store_context() as ctx:
        try:
            subscriber = ctx.store.subscribers.get_subscriber(normalise_address(address))
        except ValueError as exc:
            raise _fail(str(exc), 2) from exc
        if subscriber is None or subscriber.id is None:
            raise _fail(f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", 1)
        rows = ctx.store.subscribers.follows_of(subscriber.id)
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
    from core.delivery.contract import normalise_address
    from core.delivery.schedule import parse_schedule, zone
    from core.people.masking import mask_address

    with _store_context() as ctx:
        try:
            parsed = parse_schedule(when)
            if timezone:
                zone(timezone)
            subscriber = ctx.store.subscribers.get_subscriber(normalise_address(address))
        except ValueError as exc:
            raise _fail(str(exc), 2) from exc
        if subscriber is None or subscriber.id is None:
            raise _fail(f"no subscriber {address}; add a follow first", 1)
        fields: dict[str, Any] = {"schedule": parsed.text}
        if timezone:
            fields["timezone"] = timezone
        if heartbeat is not None:
            fields["heartbeat"] = heartbeat
        updated = ctx.store.subscribers.update_subscriber(subscriber.id, **fields)
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
    from core.delivery.contract import DeliveryError
    from core.follows.query import QueryError
    from core.people.signup import SignupState, sign_up
    from papertrail.signup import SignupUnavailable, check_available, mail_outcome

    with _context() as ctx:
        try:
            check_available(ctx)
            outcome = sign_up(
                ctx.store,
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

    with _store_context() as ctx:
        try:
            created = newsletters.create(
                ctx.store,
                name,
                title,
                follows,
                schedule=schedule or ctx.settings.default_schedule,
                timezone=timezone or ctx.settings.default_timezone,
            )
        except (QueryError, ValueError) as exc:
            raise _fail(_explain(exc), 2) from exc
        shown = ctx.store.newsletters.newsletter_info(created.id or 0)
    out.print(
        f"newsletter {created.name} ({created.title}): {_n(len(shown.follows), 'follow')}, "
        f"schedule {shown.subscriber.schedule} ({shown.subscriber.timezone}); "
        f"its follows are those of {shown.subscriber.address}"
    )


@newsletter_app.command("list")
def newsletter_list() -> None:
    """Every newsletter: name, title, schedule, members and follows."""
    from rich.table import Table

    with _store_context() as ctx:
        infos = [ctx.store.newsletters.newsletter_info(n.id or 0) for n in ctx.store.newsletters.all()]
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

    with _store_context() as ctx:
        try:
            info = newsletters.info(ctx.store, name)
        except LookupError as exc:
            raise _fail(_explain(exc), 1) from exc
    who = info.subscriber
    out.print(f"{info.newsletter.name}: {info.newsletter.title}")
    out.print(f"schedule: {who.schedule} ({who.timezone}) · status: {who.status} · address: {who.address}")
    out.print(f"members: {info.members} ({info.active_members} active)")
    last = (
        f"{_iso(info.last_issue_at)} with {_n(info.last_issue_items, 'item')}; "
        f"{_n(info.issues, 'issue')} in all"
        if info.last_issue_at
        else "none yet"
    )
    out.print(f"last issue: {last}")
    out.print("follows:")
    for number, query in enumerate(info.follows, 1):
        out.print(f"{number:>3}. {query}")


def _membership(store: Store, name: str, address: str) -> tuple[Newsletter, Subscriber]:
    """The newsletter and the subscriber of ``newsletter add|remove NAME ADDRESS``, or exit saying which is
    missing: 2 for an address that is not one, 1 for a newsletter or a subscriber the store does not know."""
    from core.delivery.contract import normalise_address
    from core.people import newsletters

    try:
        normalised = normalise_address(address)
    except ValueError as exc:
        raise _fail(_explain(exc), USAGE) from exc
    try:
        newsletter = newsletters.find(store, name)
    except LookupError as exc:
        how = (
            "`papertrail newsletter list` shows them"
            if store.newsletters.all()
            else "create one with: papertrail newsletter create NAME --title T --follow Q"
        )
        raise _fail(f"{_explain(exc)}; {how}", FAILURE) from exc
    subscriber = store.subscribers.get_subscriber(normalised)
    if subscriber is None or subscriber.id is None:
        # An email address may rather be signed up, double opt-in, as a member from the start.
        signup = (
            f", or sign it up by mail: papertrail subscribe {normalised} --newsletter {newsletter.name}"
            if normalised.startswith("email:")
            else ""
        )
        raise _fail(
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

    with _store_context() as ctx:
        newsletter, subscriber = _membership(ctx.store, name, address)
        who = mask_address(subscriber.address)
        # An address's owner must have asked for mail: a pending sign-up has not shown it owns the address,
        # and an unsubscribed one asked for nothing more (a newsletter would reach it on re-subscribing).
        if subscriber.status == SubscriberStatus.UNCONFIRMED:
            raise _fail(
                f"{who} has not confirmed its sign-up; it must follow the link in its confirmation mail "
                "before it can be added to a newsletter",
                FAILURE,
            )
        if subscriber.status == SubscriberStatus.UNSUBSCRIBED:
            raise _fail(
                f"{who} unsubscribed; it can subscribe again from its manage page (or its chat's start "
                "command) before it is added to a newsletter",
                FAILURE,
            )
        try:
            added = newsletters.join(ctx.store, newsletter.name, subscriber)
        except ValueError as exc:  # a newsletter's own hidden subscriber
            raise _fail(_explain(exc), USAGE) from exc
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

    with _store_context() as ctx:
        newsletter, subscriber = _membership(ctx.store, name, address)
        left = newsletters.leave(ctx.store, newsletter.name, subscriber)
    who = mask_address(subscriber.address)
    if not left:
        out.print(f"{who} is not a member of {newsletter.name}; nothing changed")
        return
    out.print(
        f"{who} left {newsletter.name} ({newsletter.title}); it stays subscribed, with its own follows and "
        "other newsletters (copies already made still go out)"
    )


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
    from core.delivery.digests import resume
    from core.models import utcnow
    from core.people.masking import mask_address

    if address is not None and (reason is not None or since is not None):
        raise _fail("give either an ADDRESS or --reason/--since, not both", 2)
    if address is None and reason is None and since is None:
        raise _fail(
            "name the subscriber (papertrail resume email:ada@example.org) or choose them by cause with "
            "--reason TEXT and/or --since WHEN (add --dry-run to see whom first)",
            2,
        )
    if reason is not None and not reason.strip():
        raise _fail("--reason is empty; give part of the pause reason, e.g. --reason '550 5.7.1'", 2)
    after = _since(since) if since is not None else None
    with _store_context() as ctx:
        if address is not None:
            if dry_run:
                raise _fail("--dry-run goes with --reason/--since; `papertrail follows ADDRESS` shows one", 2)
            try:
                subscriber = resume(ctx.store, address)
            except (LookupError, ValueError) as exc:
                raise _fail(_explain(exc), _code(exc)) from exc
            out.print(f"{mask_address(subscriber.address)} is active again")
            return
        count, addresses = ctx.store.alarms.refused_subscribers(
            reason=reason, since=after, limit=RESUME_LISTED
        )
        cause = " and ".join(
            part
            for part in (
                f"a reason containing {reason!r}" if reason is not None else "",
                f"paused since {after.isoformat()}" if after is not None else "",
            )
            if part
        )
        if not count:
            raise _fail(
                f"no subscriber paused by a delivery refusal matches ({cause}); `papertrail status` counts "
                "the paused ones, `papertrail follows ADDRESS` shows one's reason",
                1,
            )
        if dry_run:
            out.print(f"would resume {_n(count, 'subscriber')} paused by a delivery refusal ({cause}):")
            for found in addresses:
                out.print(f"  {mask_address(found)}")
            if count > len(addresses):
                out.print(f"  …and {count - len(addresses)} more")
            return
        resumed = ctx.store.alarms.resume_refused(reason=reason, since=after, now=utcnow())
    out.print(
        f"resumed {_n(resumed, 'subscriber')} paused by a delivery refusal ({cause}); their held matches "
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
        raise _fail(
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

    with _context() as ctx:

        async def deliver() -> list[DigestReport]:
            # Chat clients are bound to the event loop that opened them: close them in the same one.
            try:
                return await send_due_digests(
                    ctx.store, ctx.notifiers, ctx.renderer, force=now, address=address, policy=ctx.policy
                )
            finally:
                await ctx.close_notifiers()

        try:
            reports = _run(deliver())
        except (ValueError, LookupError) as exc:
            raise _fail(_explain(exc), _code(exc)) from exc
    failed = 0
    summary: list[str] = []
    for report in reports:
        if report.sent:
            summary.append(f"sent {_n(report.items, 'item')} to {mask_address(report.address)}")
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
        # written is not sent: notifiers/console.py) and left before this summary. Say on stderr what
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
    from papertrail.worker import run_worker

    with _context() as ctx:

        async def main() -> None:
            try:
                totals = await run_worker(ctx, name=name, until_idle=until_idle)
            finally:
                await ctx.close_notifiers()
            out.print(
                f"worker finished: {_n(totals.sent, 'digest')} sent, {_n(totals.failed, 'failed attempt')}"
            )

        _run(main())


@app.command()
def retry(
    address: Annotated[str | None, typer.Argument(help="Only this subscriber's digests.")] = None,
) -> None:
    """Re-queue dead-lettered digests (they gave up after PAPERTRAIL_DELIVERY_MAX_ATTEMPTS failures)."""
    from core.delivery.contract import normalise_address

    with _store_context() as ctx:
        try:
            target = normalise_address(address) if address else None
        except ValueError as exc:
            raise _fail(str(exc), 2) from exc
        count = ctx.store.outcomes.requeue_dead(address=target)
    out.print(f"re-queued {_n(count, 'dead-lettered digest')}; they go out with the next digest pass")


alarms_app = typer.Typer(
    help="Delivery alarms: a channel refusing many recipients the same way (docs/delivery.md).",
    invoke_without_command=True,
)
app.add_typer(alarms_app, name="alarms")


@alarms_app.callback()
def alarms_list(ctx: typer.Context) -> None:
    """List the raised delivery alarms (the same as in `papertrail status`)."""
    if ctx.invoked_subcommand is not None:
        return
    with _store_context() as app_ctx:
        alarms = app_ctx.store.alarms.delivery_alarms()
    if not alarms:
        out.print("no delivery alarm is raised")
        return
    for alarm in alarms:
        out.print(_alarm_line(alarm))


@alarms_app.command("clear")
def alarms_clear(
    channel: Annotated[str | None, typer.Argument(help="Only this channel's alarms (e.g. email).")] = None,
) -> None:
    """Clear raised alarms by hand (they clear by themselves when the channel delivers again).

    While raised, an alarm holds its kind of refusal for a retry; once cleared, the next refusals are
    judged afresh: a few are paused as the recipients', many raise the alarm again.
    """
    from core.models import utcnow

    with _store_context() as ctx:
        cleared = ctx.store.alarms.clear_alarms(channel.strip().lower() if channel else None, now=utcnow())
    if not cleared:
        raise _fail(f"no delivery alarm is raised{f' on {channel}' if channel else ''}", 1)
    for name, kind in cleared:
        out.print(f"cleared the delivery alarm on {name} ({kind})")


def _alarm_line(alarm: DeliveryAlarm) -> str:
    return (
        f"delivery alarm on {alarm.channel}: {_n(alarm.recipients, 'recipient')} refused the same way "
        f"({alarm.kind}) since {alarm.first_seen.isoformat()}, last {alarm.last_seen.isoformat()}; "
        f"{_n(alarm.held, 'delivery', 'deliveries')} held for a retry, nobody paused. e.g. {alarm.sample}"
    )


@app.command()
def guides(
    language: Annotated[
        str | None, typer.Option(help="Only this language (en or zh); default: every language readers use.")
    ] = None,
) -> None:
    """Make the AI guides readers are waiting for now, within the daily cap (the service does it itself)."""
    from core.guides.service import make_guides, make_reader_guides
    from core.models import utcnow

    language = _language_option(language)
    with _context() as ctx:
        if ctx.guide_model is None:
            raise _fail(
                "AI guides are off: set PAPERTRAIL_LLM_URL and PAPERTRAIL_LLM_MODEL (docs/guides.md)", 2
            )
        model = ctx.guide_model

        async def main() -> list[GuideReport]:
            now = utcnow()
            if language is None:
                return await make_reader_guides(ctx.store, model, ctx.settings, now=now)
            return [await make_guides(ctx.store, model, ctx.settings, language=language, now=now)]

        reports = _run(main())
    for report in reports:
        out.print(
            f"{report.language}: {_n(report.made, 'guide')} made, {len(report.failures)} failed"
            + (f"; {report.note}" if report.note else "")
        )
        for version_id, reason in report.failures[:10]:
            err.print(f"  version {version_id}: {reason}")
    if any(r.failures for r in reports) and not any(r.made for r in reports):
        raise _fail("no guide could be made; the reasons are above")


@app.command(name="webhook-secret")
def webhook_secret_command(
    url: Annotated[str, typer.Argument(help="The webhook URL as registered (after webhook:).")],
) -> None:
    """Print the signing secret to give the receiver at URL (derived from PAPERTRAIL_SECRET_KEY)."""
    from notifiers.webhook import webhook_secret

    settings = _settings()
    if not settings.secret_key:
        raise _fail(
            "set PAPERTRAIL_SECRET_KEY first: webhook digests are signed with a secret derived from it", 2
        )
    key = settings.secret_key.get_secret_value()
    sys.stdout.write(webhook_secret(key, url.removeprefix("webhook:")) + "\n")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@app.command()
def status(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Papers stored; new papers, revisions and AI-related papers in the last 24 h; health of each source."""
    from core.papers.status import source_statuses
    from core.people.masking import mask_address, mask_text
    from notifiers.channels import unconfigured_channels

    with _store_context() as ctx:
        summary = ctx.store.dashboard.status(sources=SOURCE_NAMES)
        dead = ctx.store.ledger.dead_digests()
        backlog = ctx.store.papers.search_backlog()
        settings = ctx.settings
        waiting = {
            channel: (count, unconfigured_channels(settings)[channel])
            for channel, count in ctx.store.ledger.pending_by_channel().items()
            if channel in unconfigured_channels(settings)
        }
    judged = source_statuses(
        summary,
        holidays=settings.holiday_dates,
        grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )
    if as_json:
        data = {
            "papers": summary.papers,
            "versions": summary.versions,
            "last_24h": {
                "new_papers": summary.new_papers_24h,
                "revisions": summary.revisions_24h,
                "ai_related": summary.ai_related_24h,
                "ai_guides": summary.guides_24h,
            },
            "subscribers": summary.subscribers,
            "follows": summary.follows,
            "pending_matches": summary.pending_matches,
            # Of pending_matches, the learned recommendations (issue 17).
            "pending_recommended": summary.pending_recommended,
            "delivery": {
                "queued_digests": summary.queued_digests,
                "dead_digests": summary.dead_digests,
                "paused_subscribers": summary.paused_subscribers,
                "waiting_for_configuration": {
                    channel: {"pending_matches": count, "hint": hint}
                    for channel, (count, hint) in waiting.items()
                },
                "alarms": [
                    {
                        "channel": a.channel,
                        "kind": a.kind,
                        "first_seen": _iso(a.first_seen),
                        "last_seen": _iso(a.last_seen),
                        "recipients": a.recipients,
                        "held": a.held,
                        "sample": a.sample,
                    }
                    for a in summary.alarms
                ],
                "dead": [
                    {
                        "digest": d.id,
                        "address": mask_address(address),
                        "attempts": d.attempts,
                        "error": mask_text(d.error or ""),
                    }
                    for d, address in dead
                ],
            },
            "community_discoveries_24h": summary.community_24h,
            "search_index": {"waiting": backlog},
            "sources": [
                {
                    "source": j.facts.source,
                    "state": j.verdict.state,
                    "reason": j.verdict.reason,
                    "lag_seconds": round(j.verdict.lag.total_seconds()) if j.verdict.lag else 0,
                    "last_run": j.facts.last_state,
                    "last_check": _iso(j.facts.last_check),
                    "last_success": _iso(j.facts.last_success),
                    "last_new_version": _iso(j.facts.last_new_version),
                    "error": j.facts.last_error,
                    "note": j.facts.last_note,
                }
                for j in judged
            ],
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    recommended = f" ({summary.pending_recommended} recommended)" if summary.pending_recommended else ""
    out.print(
        f"papers stored: {summary.papers} ({_n(summary.versions, 'version')})\n"
        f"last 24 h: {_n(summary.new_papers_24h, 'new paper')}, {_n(summary.revisions_24h, 'revision')}, "
        f"{summary.ai_related_24h} AI-related, AI guides: +{summary.guides_24h}\n"
        f"subscribers: {summary.subscribers}, follows: {summary.follows}, "
        f"pending matches: {summary.pending_matches}{recommended}\n"
        f"community discoveries in the last 24 h: {summary.community_24h}\n"
        f"delivery: {_n(summary.queued_digests, 'digest')} queued, {summary.dead_digests} dead-lettered, "
        f"{_n(summary.paused_subscribers, 'subscriber')} paused"
    )
    if backlog:
        out.print(
            f"search index: {_n(backlog, 'paper')} not yet searchable (the service indexes them; "
            "`papertrail index` does it now)"
        )
    for alarm in summary.alarms:
        err.print(_alarm_line(alarm) + f" (`papertrail alarms clear {alarm.channel}` once fixed)")
    for channel, (count, hint) in waiting.items():
        waits = "match waits" if count == 1 else "matches wait"
        err.print(f"{count} {waits} for the {channel} channel, which is not configured: {hint}")
    for digest, address in dead:
        err.print(
            f"dead digest {digest.id} to {mask_address(address)} after {_n(digest.attempts, 'attempt')}: "
            f"{mask_text(digest.error or '')} "
            "(`papertrail retry` re-queues it)"
        )
    _print_sources(judged)


# Below this many columns the sources are printed one block each instead of as a table: seven columns of
# which three are dates need about 120, and an 80-column table wrapped "why" one word a line (issue 16).
STATUS_TABLE_MIN_WIDTH = 120


def _print_sources(judged: list[SourceStatus]) -> None:
    """The sources' health: a table on a wide terminal, stacked blocks on a narrow one (COLUMNS)."""
    import textwrap

    from rich.table import Table

    # COLUMNS as it is now: a console made while COLUMNS was set keeps that width for good.
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() else out.size.width
    if width >= STATUS_TABLE_MIN_WIDTH:
        table = Table("source", "state", "last check", "last success", "last new version", "lag", "why")
        for column in table.columns[2:6]:
            column.no_wrap = True  # a date is read whole or not at all
        for j in judged:
            table.add_row(
                j.facts.source,
                j.verdict.state,
                _when(j.facts.last_check),
                _when(j.facts.last_success),
                _when(j.facts.last_new_version),
                _duration(j.verdict.lag),
                j.verdict.reason,
            )
        # A console of this width: ``out`` may have fixed another one when it was made.
        Console(markup=False, highlight=False, width=width).print(table)
        return
    for j in judged:
        lag = _duration(j.verdict.lag)
        out.print(f"\n{j.facts.source}: {j.verdict.state}" + (f", lag {lag}" if lag else ""))
        out.print(f"  last check        {_when(j.facts.last_check)}")
        out.print(f"  last success      {_when(j.facts.last_success)}")
        out.print(f"  last new version  {_when(j.facts.last_new_version)}")
        why = textwrap.wrap(j.verdict.reason, width=max(width - 7, 20), break_long_words=False)
        out.print("\n".join(("  why: " if i == 0 else "       ") + line for i, line in enumerate(why)))


def _when(value: datetime | None) -> str:
    """A time for people: ``2026-12-02 01:00 UTC``, or ``never``."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if value else "never"


def _duration(lag: timedelta | None) -> str:
    if not lag:
        return ""
    hours = lag.total_seconds() / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} d"


@app.command()
def show(
    arxiv_id: Annotated[str, typer.Argument(metavar="ARXIV_ID", help="e.g. 2411.17700 or quant-ph/0201082")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """One paper with every known version, what each revision changed, and its sources."""
    from core.papers.status import show_paper

    with _store_context() as ctx:
        try:
            paper = show_paper(ctx.store, arxiv_id)
        except LookupError as exc:
            raise _fail(_explain(exc), 1) from exc
    if as_json:
        data = {
            "id": paper.id,
            "title": paper.title,
            "authors": list(paper.authors),
            "categories": list(paper.categories),
            "abstract": paper.abstract,
            "url": f"https://arxiv.org/abs/{paper.id}",
            "sources": list(paper.sources),
            "upvotes": paper.upvotes,
            "community": [
                {
                    "source": pick.source,
                    "day": pick.day.isoformat(),
                    "upvotes": pick.upvotes,
                    "comments": pick.comments,
                    "keywords": pick.keywords,
                    "github_repo": pick.github_repo,
                }
                for pick in paper.picks
            ],
            "versions": [
                {
                    "version": v.version,
                    "date": v.date.isoformat(),
                    "announce_type": v.announce_type,
                    "source": v.source,
                    "changed": list(v.changed),
                }
                for v in paper.versions
            ],
        }
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    out.print(f"{paper.id}  {paper.title}\n{', '.join(paper.authors)}\n{' '.join(paper.categories)}")
    out.print(f"https://arxiv.org/abs/{paper.id} · sources: {', '.join(paper.sources)}")
    for pick in paper.picks:
        repo = f" · {pick.github_repo}" if pick.github_repo else ""
        out.print(
            f"  {pick.source} {pick.day}: {_n(pick.upvotes, 'upvote')}, {_n(pick.comments, 'comment')}{repo}"
        )
    for v in paper.versions:
        what = (
            ("changed: " + ", ".join(v.changed))
            if v.changed
            else ("first seen" if v is paper.versions[0] else "")
        )
        out.print(f"  v{v.version}  {v.date:%Y-%m-%d %H:%M} UTC  {v.announce_type:<13} {what}")


@app.command(name="try")
def try_command(
    query: Annotated[str, typer.Argument(help="A follow query to test, e.g. 'cat:cs.DC graph'.")],
    days: Annotated[int, typer.Option(min=1, help="Look at versions first seen in the last N days.")] = 7,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many.")] = 20,
) -> None:
    """Show which stored papers of the last N days a query would have matched, and why."""
    from core.follows.manage import try_query
    from core.follows.query import QueryError

    with _store_context() as ctx:
        try:
            hits = try_query(ctx.store, query, days=days)
        except QueryError as exc:
            raise _fail(_explain(exc), 2) from exc
    for hit in hits[:limit]:
        out.print(f"{hit.arxiv_id}v{hit.version}  {hit.title}\n    why: {'; '.join(hit.reasons)}")
    shown = min(limit, len(hits))
    out.print(
        f"{_n(len(hits), 'match', 'matches')} in the last {_n(days, 'day')}"
        + (f", {shown} shown" if shown < len(hits) else "")
    )


@app.command(name="recommend")
def recommend_command(
    address: Annotated[str, typer.Argument(help="The subscriber address.")],
    state: Annotated[
        str | None,
        typer.Argument(
            metavar="[on|off]", help="Turn learned recommendations on or off; without it, show them."
        ),
    ] = None,
    count: Annotated[
        int | None,
        typer.Option("--count", help="With 'on': recommendations per digest, 1 to 20 (default 5)."),
    ] = None,
) -> None:
    """Learned recommendations of a subscriber: papers like the ones it liked, in each digest (issue 17)."""
    from core.people.masking import mask_address
    from core.taste.settings import (
        DEFAULT_COUNT,
        NotEnoughLikes,
        check_count,
        taste_state,
        turn_off,
        turn_on,
    )

    wanted = state.casefold() if state else None
    if wanted not in (None, "on", "off"):
        raise _fail(f"{state!r} is neither 'on' nor 'off'", USAGE)
    if count is not None and wanted != "on":
        raise _fail("--count goes with 'on' (papertrail recommend ADDRESS on --count 10)", USAGE)
    try:
        check_count(DEFAULT_COUNT if count is None else count)
    except ValueError as exc:
        raise _fail(str(exc), USAGE) from exc
    with _store_context() as ctx:
        subscriber = _known_subscriber(ctx.store, address)
        try:
            if wanted == "on":
                shown = turn_on(ctx.store, subscriber, DEFAULT_COUNT if count is None else count)
            elif wanted == "off":
                shown = turn_off(ctx.store, subscriber)
            else:
                shown = taste_state(ctx.store, subscriber)
        except NotEnoughLikes as exc:
            raise _fail(str(exc), FAILURE) from exc
    setting = f"on, up to {_n(shown.recommend, 'paper')} per digest" if shown.recommend else "off"
    out.print(
        f"{mask_address(subscriber.address)}: recommendations {setting}; {shown.likes} liked, "
        f"{shown.dislikes} disliked, {shown.seeds} from a library; {_model_text(shown)}"
    )


def _model_text(state: TasteState) -> str:
    """Whether a subscriber's recommendation model exists, and what it lacks when it does not."""
    if state.model:
        return "model trained"
    if state.enough:
        return "no model yet: nothing stored this week to contrast the likes with; the next like trains it"
    return (
        f"no model: it needs {_n(state.needed, 'liked paper')} (votes, or an imported library), "
        f"and has {state.positives}"
    )


@app.command(name="try-recommended")
def try_recommended_command(
    address: Annotated[str, typer.Argument(help="The subscriber address.")],
    days: Annotated[int, typer.Option(min=1, max=31, help="Look at new papers of the last N days.")] = 7,
    limit: Annotated[
        int | None, typer.Option(min=1, max=100, help="Show at most this many (default: its setting, or 5).")
    ] = None,
) -> None:
    """Show what a subscriber's learned recommendations would have brought lately, and why (nothing saved)."""
    from core.delivery.render import reasons_text
    from core.taste.recommend import PREVIEW_SHOWN, preview
    from core.taste.settings import taste_state

    with _store_context() as ctx:
        subscriber = _known_subscriber(ctx.store, address)
        assert subscriber.id is not None  # a stored subscriber
        shown = limit or subscriber.recommend or PREVIEW_SHOWN
        picks = preview(ctx.store, subscriber.id, limit=shown, days=days)
        state = taste_state(ctx.store, subscriber) if picks is None else None
    if state is not None:
        raise _fail(f"{address}: {_model_text(state)}", FAILURE)
    assert picks is not None
    for pick in picks:
        out.print(
            f"{pick.arxiv_id}v1  {pick.title}\n    why: {reasons_text(pick.reasons, 'en')} "
            f"(score {pick.score:.2f})"
        )
    out.print(f"{_n(len(picks), 'recommendation')} from the last {_n(days, 'day')}")


@app.command()
def demo(
    load: Annotated[
        bool,
        typer.Option(
            "--load",
            help="Store the recorded day in the configured database and match your follows, "
            "instead of a throw-away demo.",
        ),
    ] = False,
    max_items: Annotated[
        int,
        typer.Option(
            min=1,
            help="Items in the demo's digest (10: one screen, and the 'and N more' line shows the cap; "
            "real digests use PAPERTRAIL_DIGEST_MAX_ITEMS).",
        ),
    ] = 10,
) -> None:
    """Run the whole pipeline offline on a recorded arXiv feed and print the digest.

    With --load, store that day (rss.arxiv.org, 28 Nov 2024) in the configured database instead and
    match it against every stored follow, so that try, show, digest --now and the status page have
    something to show with no network.
    """
    import asyncio

    settings = _settings()  # logging as every command has it (the throw-away demo builds its own settings)
    if load:
        _load_demo(settings)
        return

    from papertrail.demo import run_demo

    sent = asyncio.run(run_demo(sys.stdout, max_items=max_items))
    if not sent:
        raise _fail("the demo produced no digest; this is a bug, please report it")


def _load_demo(settings: Settings) -> None:
    """``demo --load``: the recorded day into the configured store, and what to do next."""
    import asyncio

    from papertrail.demo import load_demo_day

    report, fanned = asyncio.run(load_demo_day(settings))
    if report.error:
        raise _fail(f"the recorded day could not be loaded: {report.error}")
    out.print(
        f"stored the recorded day (rss.arxiv.org, 28 Nov 2024) in {settings.masked()['database_url']}: "
        f"{report.fetched} items, {report.new_papers} new papers, {report.revisions} revisions, "
        f"{report.duplicates} already known, {report.matches} query matches ({fanned} for subscribers)"
    )
    if not report.new_papers and not report.revisions:
        # Matching runs on new versions only: a follow added after the first load matched nothing here.
        out.print(
            "the recorded day was already in this store: nothing new was matched; "
            "papertrail try QUERY shows what a follow would have matched"
        )
        return
    out.print(
        "next: papertrail digest --now sends what your follows matched; papertrail try QUERY tunes a "
        "follow; papertrail status and the status page show the day"
    )


@app.command()
def config() -> None:
    """Print the effective settings, secrets masked."""
    settings = _settings()
    for name, value in settings.masked().items():
        shown = str(value).lower() if isinstance(value, bool) else value
        out.print(f"PAPERTRAIL_{name.upper()}={'' if shown is None else shown}")
    out.print(f"# feed URL: {settings.arxiv_feed_url}")


# The vote commands (like, dislike, unvote, likes) and `import library` live in their own modules, which
# register them on this app with the helpers above; imported last, when everything they use is defined
# (issue 17).
from papertrail import cli_library, cli_votes  # noqa: E402, F401
