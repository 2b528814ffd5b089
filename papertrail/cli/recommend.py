"""The learned-recommendation commands of the command line: ``recommend`` (show a subscriber's
setting, or turn it on or off) and ``try-recommended`` (what the model would have brought lately).

Its sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; the votes
that train the model are ``papertrail/cli/votes.py``'s. A command imports what it needs when it runs
(tests/test_cli_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli.common import FAILURE, USAGE, count_of, fail, known_subscriber, out, store_context

if TYPE_CHECKING:
    from core.taste.settings import TasteState


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


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
    """Learned recommendations of a subscriber: papers like the ones it liked, in each digest."""
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
        raise fail(f"{state!r} is neither 'on' nor 'off'", USAGE)
    if count is not None and wanted != "on":
        raise fail("--count goes with 'on' (papertrail recommend ADDRESS on --count 10)", USAGE)
    try:
        check_count(DEFAULT_COUNT if count is None else count)
    except ValueError as exc:
        raise fail(str(exc), USAGE) from exc
    with store_context() as ctx:
        subscriber = known_subscriber(ctx.db, address)
        try:
            if wanted == "on":
                shown = turn_on(ctx.db, subscriber, DEFAULT_COUNT if count is None else count)
            elif wanted == "off":
                shown = turn_off(ctx.db, subscriber)
            else:
                shown = taste_state(ctx.db, subscriber)
        except NotEnoughLikes as exc:
            raise fail(str(exc), FAILURE) from exc
    setting = f"on, up to {count_of(shown.recommend, 'paper')} per digest" if shown.recommend else "off"
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
        f"no model: it needs {count_of(state.needed, 'liked paper')} (votes, or an imported library), "
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

    with store_context() as ctx:
        subscriber = known_subscriber(ctx.db, address)
        assert subscriber.id is not None  # a stored subscriber
        shown = limit or subscriber.recommend or PREVIEW_SHOWN
        picks = preview(ctx.db, subscriber.id, limit=shown, days=days)
        state = taste_state(ctx.db, subscriber) if picks is None else None
    if state is not None:
        raise fail(f"{address}: {_model_text(state)}", FAILURE)
    assert picks is not None
    for pick in picks:
        out.print(
            f"{pick.arxiv_id}v1  {pick.title}\n    why: {reasons_text(pick.reasons, 'en')} "
            f"(score {pick.score:.2f})"
        )
    out.print(f"{count_of(len(picks), 'recommendation')} from the last {count_of(days, 'day')}")
