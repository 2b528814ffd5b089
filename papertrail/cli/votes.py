"""The vote commands of the command line: ``like``, ``dislike``, ``unvote`` and ``likes``.

Their sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; they use
:mod:`papertrail.cli.common`'s helpers (the store alone through ``store_context``, errors through
``fail``). As there, a command imports what it needs when it runs: ``papertrail --help`` loads no database
library (tests/test_cli_imports.py). Every vote goes through :mod:`core.taste.votes`, the step the chats and
the digest buttons use too. Exit codes as in the README: 2 for a malformed address or paper id, 1 for an
unknown subscriber, paper or vote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli.common import FAILURE, USAGE, fail, known_subscriber, out, store_context

if TYPE_CHECKING:
    from core.db import Database
    from core.models import Version


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()

_ADDRESS = typer.Argument(help="The subscriber address, e.g. telegram:12345 or email:ada@example.org.")
_PAPER = typer.Argument(
    metavar="ARXIV_ID", help="2306.03564 (the newest stored version), 2306.03564v2, or an arxiv.org link."
)
_WORDS = {1: ("like", "likes"), -1: ("dislike", "dislikes")}


def _paper(text: str) -> tuple[str, int | None]:
    """(arXiv id, version or None) of what was typed; exit 2 when it is not an arXiv id."""
    from core.taste.votes import read_paper_ref

    ref = read_paper_ref(text)
    if ref is None:
        raise fail(
            f"{text!r} is not an arXiv id: write 2306.03564 or 2306.03564v2 (hep-th/9901001 for papers "
            "before 2007), or an arxiv.org link",
            USAGE,
        )
    return ref


def _versions(db: Database, address: str, arxiv_id: str, version: int | None) -> list[Version]:
    """The stored versions of the paper; exit 1 when it (or the version asked for) is not stored."""
    from core.papers.status import versions_of

    stored = versions_of(db, arxiv_id)
    if not stored:
        raise fail(
            f"PaperTrail has not stored {arxiv_id}: votes go to papers it has collected; "
            f"papertrail follow {address} id:{arxiv_id} watches it",
            FAILURE,
        )
    if version is not None and all(row.number != version for row in stored):
        have = ", ".join(f"v{row.number}" for row in stored)
        raise fail(f"PaperTrail has no v{version} of {arxiv_id}; it has {have}", FAILURE)
    return stored


def _vote(address: str, paper: str, value: int) -> None:
    from core.people.masking import mask_address
    from core.taste.votes import VoteState, cast_vote

    arxiv_id, version = _paper(paper)
    with store_context() as ctx:
        subscriber = known_subscriber(ctx.db, address)
        stored = _versions(ctx.db, address, arxiv_id, version)
        outcome = cast_vote(ctx.db, subscriber.id or 0, arxiv_id, value, version=version)
    if outcome.state is VoteState.UNKNOWN_PAPER:  # removed between the two reads
        raise fail(f"PaperTrail has not stored {arxiv_id}", FAILURE)
    title = next((row.title for row in stored if row.number == outcome.version), "")
    verb = _WORDS[value][1]
    if outcome.state is VoteState.UNCHANGED:
        verb = f"already {verb}"
    elif outcome.state is VoteState.CHANGED:
        verb = f"{verb} (was {_WORDS[-value][0]})"
    who = mask_address(subscriber.address)
    out.print(f"{who} {verb} {arxiv_id}v{outcome.version}: {' '.join(title.split())}")


@app.command()
def like(
    address: Annotated[str, _ADDRESS],
    paper: Annotated[str, _PAPER],
) -> None:
    """Record that a subscriber liked a paper: learned follows recommend more like it."""
    _vote(address, paper, 1)


@app.command()
def dislike(
    address: Annotated[str, _ADDRESS],
    paper: Annotated[str, _PAPER],
) -> None:
    """Record that a paper was not for a subscriber: fewer like it."""
    _vote(address, paper, -1)


@app.command()
def unvote(
    address: Annotated[str, _ADDRESS],
    paper: Annotated[str, _PAPER],
) -> None:
    """Take back a subscriber's vote on a paper (every version, or the one vN names)."""
    from core.people.masking import mask_address
    from core.taste.votes import VoteState, paper_name, undo_vote

    arxiv_id, version = _paper(paper)
    name = paper_name(arxiv_id, version)
    with store_context() as ctx:
        subscriber = known_subscriber(ctx.db, address)
        outcome = undo_vote(ctx.db, subscriber.id or 0, arxiv_id, version=version)
    who = mask_address(subscriber.address)
    if outcome.state is VoteState.NOT_VOTED:
        raise fail(f"{who} has no vote on {name}; papertrail likes {address} lists the votes", FAILURE)
    out.print(f"{who}: vote on {name} taken back")


@app.command()
def likes(
    address: Annotated[str, _ADDRESS],
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, newest first.")] = 50,
) -> None:
    """List a subscriber's votes, newest first, with how many papers it liked and disliked."""
    from core.english import counted
    from core.people.masking import mask_address
    from core.taste.votes import vote_counts, votes

    with store_context() as ctx:
        subscriber = known_subscriber(ctx.db, address)
        sid = subscriber.id or 0
        tally = vote_counts(ctx.db, sid)
        liked, disliked, seeds = tally.liked, tally.disliked, tally.seeds
        shown = votes(ctx.db, sid, limit=limit)
    counts = [counted(liked, "like"), counted(disliked, "dislike")]
    if seeds:
        counts.append(counted(seeds, "library paper"))
    out.print(f"{mask_address(subscriber.address)} · {', '.join(counts)}")
    for view in shown:
        word = _WORDS.get(view.value, ("?", "?"))[0]
        when = f"{view.created_at:%Y-%m-%d %H:%M} UTC"
        out.print(f"  {word:<7}  {view.arxiv_id}v{view.version}  {when}  {' '.join(view.title.split())}")
    if not shown:
        out.print("    (no votes)")
    elif liked + disliked > len(shown):
        out.print(f"  … and {counted(liked + disliked - len(shown), 'older vote')} (--limit shows more)")
