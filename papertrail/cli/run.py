"""The service commands of the command line: ``run`` (the long-running service), ``ingest`` (one source
once), ``backfill snapshot`` (history in bulk) and ``index`` (the search index a backfill left).

Its sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; it is built on
:mod:`papertrail.cli.common`'s helpers. As everywhere in the command line, a command imports what it needs
when it runs (``papertrail --help`` loads no database library: tests/test_cli_imports.py).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from papertrail.cli.common import (
    app_context,
    cannot_open,
    count_of,
    err,
    fail,
    load_settings,
    out,
    run_async,
    store_context,
)
from papertrail.service.source_names import SOURCE_NAMES

# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()

# `papertrail ingest` of a source another process is ingesting: nothing failed and nothing was done
# (EX_TEMPFAIL of sysexits.h, "try again later"), told apart from a failure (1) and bad input (2).
BUSY = 75
# Stopped by Ctrl-C or SIGTERM before the work finished (128 + SIGINT, as shells report it).
INTERRUPTED = 130


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

    from papertrail.service.context import build_context
    from papertrail.service.runtime import (
        WEB_PORT_HINT,
        RoleFailed,
        parse_roles,
        run_forever,
        web_port_problem,
    )

    try:
        roles = parse_roles(role or [])
    except ValueError as exc:
        raise fail(str(exc), 2) from exc
    settings = load_settings()
    # Before anything starts (migrations, the other roles): a taken port is said at once, on the last line.
    if "web" in roles and (problem := web_port_problem(settings.web_host, settings.web_port)):
        raise fail(f"the web role {problem}; {WEB_PORT_HINT}")
    try:
        ctx = build_context(settings)
    except Exception as exc:  # cannot reach or migrate the database: say which one, without the password
        raise cannot_open(settings, exc) from exc

    async def main() -> None:
        # Chat clients and the HTTP client belong to this loop: close them in it.
        try:
            await run_forever(ctx, roles=roles)
        finally:
            await ctx.aclose()

    try:
        asyncio.run(main())
    except RoleFailed as exc:
        raise fail(str(exc), 1) from exc


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

    One ingest of a source runs at a time: while another runs, this one does nothing and exits 75.

    arxiv-oai fills gaps: versions announced after the newest announcement already seen are news, older
    ones are stored as history.
    """
    from core.follows.manage import fan_out
    from core.models import utcnow
    from core.papers.pipeline import catch_up, complete_papers, ingest_community, ingest_once

    if source not in SOURCE_NAMES:
        raise fail(f"unknown source {source!r}; choose one of: {', '.join(SOURCE_NAMES)}", 2)
    try:
        wanted = date.fromisoformat(day) if day else utcnow().date()
    except ValueError as exc:
        raise fail(f"--date {day!r} is not a date like 2026-11-30", 2) from exc
    try:
        from_date = date.fromisoformat(since).isoformat() if since else None
    except ValueError as exc:
        raise fail(f"--since {since!r} is not a date like 2026-11-01", 2) from exc
    from papertrail.service.ingest_claim import SourceBusy, claim_source
    from papertrail.service.runtime import Interrupted, run_once

    with app_context() as ctx:
        if source == "arxiv-api":
            assert ctx.api is not None
            work = complete_papers(ctx.db, ctx.api)
        elif source in ctx.paged:
            work = catch_up(ctx.db, ctx.paged[source], since=from_date, history=history)
        elif source in ctx.community:
            work = ingest_community(ctx.db, ctx.community[source], wanted)
        else:
            work = ingest_once(ctx.db, ctx.sources[source])
        try:
            with claim_source(ctx.db, source):
                # Ctrl-C and SIGTERM as for `papertrail run`: the run finishes, or is closed as interrupted.
                report = run_async(run_once(ctx, work))
        except SourceBusy as exc:
            work.close()  # never started
            raise fail(str(exc), BUSY) from exc
        except Interrupted as exc:
            said = f"{source}: {exc}; its run is recorded as failed, what was stored stays"
            raise fail(said, INTERRUPTED) from exc
    if report.error:
        raise fail(f"{source}: {report.error}")
    # A one-shot command leaves the ledger complete: what matched reaches each follower's Match rows now
    # rather than at the next digest planning (which would do it first anyway), and so do the learned
    # recommendations of the new papers (core.taste.recommend).
    from core.taste.recommend import recommend_new

    fanned = fan_out(ctx.db)
    recommended = recommend_new(ctx.db).written
    out.print(
        f"{source}: {report.state}; {count_of(report.fetched, 'item')}, "
        f"{count_of(report.new_papers, 'new paper')}, "
        f"{count_of(report.revisions, 'revision')}, {report.duplicates} already known, "
        f"{count_of(report.matches, 'query match', 'query matches')} ({fanned} for subscribers)"
        + (f", {count_of(recommended, 'recommendation')}" if recommended else "")
        + (f"\nnote: {report.note}" if report.note else "")
    )


backfill_app = typer.Typer(help="Load history in bulk (stored, never sent as news).", no_args_is_help=True)
app.add_typer(backfill_app, name="backfill")


@backfill_app.command("snapshot")
def backfill_snapshot(
    path: Annotated[Path, typer.Argument(help="arxiv-metadata-oai-snapshot.json[.gz] (JSON Lines).")],
) -> None:
    """Stream the arXiv metadata snapshot into the store as history, with a progress bar."""
    from core.papers.pipeline import search_backlog
    from papertrail.cli.backfill import BackfillFailed, run_snapshot_backfill

    if not path.is_file():
        raise fail(f"{path} is not a file; download arxiv-metadata-oai-snapshot.json (Kaggle) first", 2)
    with store_context() as ctx:
        try:
            report = run_snapshot_backfill(ctx.db, path, err)
        except BackfillFailed as exc:  # a cut-short or corrupt gzip: click alone would print "Aborted."
            raise fail(str(exc), 1) from exc
        backlog = search_backlog(ctx.db)
    out.print(
        f"snapshot: {report.state}; {count_of(report.fetched, 'version')} read, {report.duplicates} "
        "already known"
    )
    if report.note:
        out.print(f"note: {report.note}")
    if backlog:
        out.print(
            f"search: {count_of(backlog, 'paper')} to index; the service indexes them in the background, "
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

    from core.papers import pipeline

    with store_context() as ctx:
        db = ctx.db
        waiting = pipeline.search_backlog(db)
        if not waiting:
            out.print("search index: up to date")
            return
        out.print(f"search index: {count_of(waiting, 'paper')} to index")
        started = time.monotonic()
        done = batches = 0
        while not limit or done < limit:
            batch = pipeline.index_search(db)
            done += batch.written
            batches += 1
            if not batch.full:
                break
            if batches % 25 == 0:
                err.print(f"  {done:,} indexed, {done / (time.monotonic() - started):,.0f} papers/s")
        pipeline.tidy_search_index(db)
        seconds = time.monotonic() - started
        left = pipeline.search_backlog(db)
    out.print(f"search index: {count_of(done, 'paper')} indexed in {seconds:,.0f} s; {left} left")
