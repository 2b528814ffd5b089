"""The ``papertrail`` command line: the ``papertrail`` console entry point is :data:`app` here.

Each command family is a module of this package with its own typer sub-app, added here without a name, so
that its commands and groups sit at the top level (``papertrail follow``, ``papertrail import follows``):

- ``run``: run, ingest, index, and the ``backfill`` group
- ``follows``: follow, unfollow, follows, schedule, subscribe
- ``import_export``: the ``import`` (follows, subscription, library) and ``export`` groups
- ``newsletters``: the ``newsletter`` group (create, list, show, add, remove)
- ``delivery``: resume, digest, worker, retry, guides, webhook-secret, and the ``alarms`` group
- ``status``: status, show, try
- ``recommend``: recommend, try-recommended
- ``setup``: demo, config
- ``votes``: like, dislike, unvote, likes

:mod:`papertrail.cli.common` holds what they share. ``papertrail --help`` lists the commands, then the
groups, each in the order the families are added below.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from papertrail.cli import delivery, follows, import_export, newsletters, recommend, run, setup, status, votes
from papertrail.cli.common import set_verbose


class CommandsThenGroups(TyperGroup):
    """Lists the commands before the groups, each in the order they were added (as one typer app would)."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        groups = [name for name in names if isinstance(self.commands[name], TyperGroup)]
        return [name for name in names if name not in groups] + groups


app = typer.Typer(
    cls=CommandsThenGroups,
    help="PaperTrail: alerts for new arXiv papers and revisions.",
    no_args_is_help=True,
    add_completion=False,
)
for family in (run, follows, import_export, newsletters, delivery, status, recommend, setup, votes):
    app.add_typer(family.app)


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False,
) -> None:
    set_verbose(verbose)
