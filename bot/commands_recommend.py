"""The commands about learned recommendations: ``recommend`` (show), ``recommend on [N]``,
``recommend off``, and ``try recommended`` (what the model would have picked lately; ``try`` hands it
over here)."""

from __future__ import annotations

from bot.commands_base import Call, Problem, Reply, cut
from core.delivery.render import reasons_text
from core.languages import N_
from core.taste.recommend import PREVIEW_DAYS, preview
from core.taste.settings import (
    DEFAULT_COUNT,
    MAX_COUNT,
    NotEnoughLikes,
    TasteState,
    taste_state,
    turn_off,
    turn_on,
)

_ON = frozenset({"on", "start", "yes"})
_OFF = frozenset({"off", "stop", "no", "none"})
# Enough liked papers but no model: nothing else stored this week to contrast them with (core.taste.training).
_NO_MODEL_YET = N_("No model yet: it is trained with your next like.")
TRY_WORDS = frozenset({"recommended", "recommendations", "recommend"})
"""``try`` followed by one of these words shows the model's picks instead of trying a query (a query for
the word itself: ``try abs:recommended``)."""


def recommend(call: Call) -> Reply:
    """``recommend``: the state; ``recommend on [N]`` / ``recommend N``: on with up to N per digest;
    ``recommend off``."""
    t, p = call.t, call.p
    words = call.args.casefold().split(" ") if call.args else []
    if not words:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        state = taste_state(call.db, subscriber)
        return call.reply(
            _setting_text(call, state),
            _signals_text(call, state),
            t.gettext(
                "{p}recommend on N turns them on with up to N per digest (1 to {max}, {default} when not "
                "said), {p}recommend off turns them off, {p}try recommended shows what the last {days} days "
                "would have brought.",
                p=p,
                max=MAX_COUNT,
                default=DEFAULT_COUNT,
                days=PREVIEW_DAYS,
            ),
        )
    if words[0] in _OFF and len(words) == 1:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        turn_off(call.db, subscriber)
        return call.reply(
            t.gettext(
                "Recommendations are off. The papers you liked are kept: {p}recommend on turns them on "
                "again.",
                p=p,
            )
        )
    count = _count(words)
    if count is None:
        return call.reply(
            t.gettext(
                'Cannot read "{typed}". Write {p}recommend on, {p}recommend on 10 (1 to {max}) or '
                "{p}recommend off.",
                typed=cut(call.args, 40),
                p=p,
                max=MAX_COUNT,
            ),
            error=Problem.BAD_ARGUMENT,
            suggestions=("recommend on", "recommend off"),
        )
    subscriber = call.ensure_subscriber()
    try:
        state = turn_on(call.db, subscriber, count)
    except NotEnoughLikes as exc:
        return call.reply(
            _not_enough(call, exc.state), error=Problem.BAD_ARGUMENT, suggestions=("help recommend",)
        )
    notes = [
        t.ngettext(
            "Recommendations are on: up to {n} paper per digest that your follows did not bring, chosen "
            "by what you liked, each with the reason.",
            "Recommendations are on: up to {n} papers per digest that your follows did not bring, chosen "
            "by what you liked, each with the reason.",
            count,
        )
    ]
    if not state.model:
        notes.append(
            t.gettext(
                "No papers of the last week are stored yet to tell your likes apart from the rest: "
                "the model is trained with your next like."
            )
        )
    notes.append(
        t.gettext(
            "{p}try recommended shows what the last {days} days would have brought.", p=p, days=PREVIEW_DAYS
        )
    )
    return call.reply(*notes, call.inactive_note(subscriber), suggestions=("try recommended",))


def _count(words: list[str]) -> int | None:
    """N of ``on``, ``on N`` or ``N`` (``on`` alone: the default); None for anything else or out of range."""
    if words[0] in _ON:
        words = words[1:]
    if not words:
        return DEFAULT_COUNT
    if len(words) != 1 or not words[0].isdecimal() or len(words[0]) > 3:
        return None
    count = int(words[0])
    return count if 1 <= count <= MAX_COUNT else None


def _setting_text(call: Call, state: TasteState) -> str:
    t = call.t
    if state.recommend is None:
        return t.gettext("Recommendations are off in {place}.", place=call.place)
    return t.ngettext(
        "Recommendations are on in {place}: up to {n} paper per digest.",
        "Recommendations are on in {place}: up to {n} papers per digest.",
        state.recommend,
        place=call.place,
    )


def _signals_text(call: Call, state: TasteState) -> str:
    t = call.t
    counts = t.gettext(
        "Liked: {likes}, disliked: {dislikes}, from your library: {seeds}.",
        likes=state.likes,
        dislikes=state.dislikes,
        seeds=state.seeds,
    )
    if state.model:
        model = t.gettext("The model is trained on them.")
    elif state.enough:
        model = t.gettext(_NO_MODEL_YET)
    else:
        model = _not_enough(call, state)
    return t.gettext("{counts} {model}", counts=counts, model=model)


def _not_enough(call: Call, state: TasteState) -> str:
    t, p = call.t, call.p
    return t.ngettext(
        "Recommendations need {n} liked paper first, and {place} has {have}. Like papers with the 👍 under "
        "each digest item or {p}like ARXIV_ID, or import a reference library (papertrail import library, "
        "or the manage page of an email subscription).",
        "Recommendations need {n} liked papers first, and {place} has {have}. Like papers with the 👍 under "
        "each digest item or {p}like ARXIV_ID, or import a reference library (papertrail import library, "
        "or the manage page of an email subscription).",
        state.needed,
        place=call.place,
        have=state.positives,
        p=p,
    )


def try_recommended(call: Call) -> Reply:
    """``try recommended``: what the chat's model would have recommended in the last days, nothing saved."""
    t = call.t
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    state = taste_state(call.db, subscriber)
    shown = state.recommend or DEFAULT_COUNT
    picks = preview(call.db, subscriber.id or 0, limit=shown, days=PREVIEW_DAYS, now=call.now)
    if picks is None:
        return call.reply(
            _not_enough(call, state)
            if not state.enough
            else t.gettext("No model yet: it is trained with your next like."),
            error=Problem.NOT_FOUND,
        )
    if not picks:
        return call.reply(
            t.gettext(
                "Nothing of the last {days} days that your follows did not bring scores high enough to "
                "recommend. Like more papers to sharpen the model.",
                days=PREVIEW_DAYS,
            )
        )
    listed = [
        t.gettext(
            "{id}v1 {title}\n    why: {reasons}",
            id=pick.arxiv_id,
            title=cut(pick.title, 150),
            reasons=cut(reasons_text(pick.reasons, t.language), 150),
        )
        for pick in picks
    ]
    head = t.ngettext(
        "Your model would have recommended this paper of the last {days} days:",
        "Your model would have recommended these {n} papers of the last {days} days, best first:",
        len(picks),
        days=PREVIEW_DAYS,
    )
    tail = (
        t.gettext("{p}recommend on puts such papers in your digests.", p=call.p)
        if state.recommend is None
        else ""
    )
    return call.reply(head, "\n".join(listed), tail)


__all__ = ["TRY_WORDS", "recommend", "try_recommended"]
