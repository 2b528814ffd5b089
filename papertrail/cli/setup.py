"""The commands of a first look at PaperTrail: ``demo`` (the whole pipeline offline on a recorded arXiv
day, or that day loaded into the configured store) and ``config`` (the effective settings, secrets
masked).

Its sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; a command
imports what it needs when it runs (tests/test_cli_imports.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli.common import fail, load_settings, out

if TYPE_CHECKING:
    from core.config import Settings


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


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

    settings = (
        load_settings()
    )  # logging as every command has it (the throw-away demo builds its own settings)
    if load:
        _load_demo(settings)
        return

    from papertrail.cli.demo import run_demo

    sent = asyncio.run(run_demo(sys.stdout, max_items=max_items))
    if not sent:
        raise fail("the demo produced no digest; this is a bug, please report it")


def _load_demo(settings: Settings) -> None:
    """``demo --load``: the recorded day into the configured store, and what to do next."""
    import asyncio

    from papertrail.cli.demo import load_demo_day

    report, fanned = asyncio.run(load_demo_day(settings))
    if report.error:
        raise fail(f"the recorded day could not be loaded: {report.error}")
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
    settings = load_settings()
    for name, value in settings.masked().items():
        shown = str(value).lower() if isinstance(value, bool) else value
        out.print(f"PAPERTRAIL_{name.upper()}={'' if shown is None else shown}")
    out.print(f"# feed URL: {settings.arxiv_feed_url}")
