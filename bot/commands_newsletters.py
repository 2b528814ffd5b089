"""The newsletter commands: ``join`` (list the newsletters, or join one) and ``leave``.

A chat that joins a newsletter receives each of its issues in its own digests, through its own channel;
the newsletter's follows stay the operator's (they are not listed by ``follows``).
"""

from __future__ import annotations

import difflib

from bot.commands_base import Call, Problem, Reply, cut
from bot.commands_status import describe_schedule
from core import newsletters
from core.models import Newsletter

_SHOWN = 10
"""Newsletters named in one reply."""


def join(call: Call) -> Reply:
    """``join``: list the newsletters; ``join NAME``: make this chat a member of one."""
    p = call.p
    if not call.args:
        return _listing(call)
    newsletter = _find(call)
    if isinstance(newsletter, Reply):
        return newsletter
    subscriber = call.ensure_subscriber()
    added = newsletters.join(call.store, newsletter.name, subscriber, now=call.now)
    info = call.store.newsletter_info(newsletter.id or 0)
    when = describe_schedule(info.subscriber)
    shown = f"{cut(newsletter.title, 80)} ({newsletter.name})"
    said = (
        f"{call.ctx.capital_place} joined {shown}: each issue arrives here as it comes out, {when}."
        if added
        else f"{call.ctx.capital_place} is a member of {shown} already."
    )
    return call.reply(said, call.inactive_note(subscriber), f"{p}leave {newsletter.name} stops them.")


def leave(call: Call) -> Reply:
    """``leave NAME``: end this chat's membership of a newsletter."""
    p = call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if not call.args:
        joined = call.store.newsletters_of(subscriber.id or 0)
        names = ", ".join(n.name for n in joined[:_SHOWN]) or "none"
        return call.reply(
            f"Send {p}leave NAME. {call.ctx.capital_place}'s newsletters: {names}.",
            error=Problem.BAD_ARGUMENT,
        )
    newsletter = _find(call)
    if isinstance(newsletter, Reply):
        return newsletter
    if not newsletters.leave(call.store, newsletter.name, subscriber):
        return call.reply(
            f"{call.ctx.capital_place} is not a member of {newsletter.name}. {p}join lists the newsletters.",
            error=Problem.NOT_FOUND,
        )
    return call.reply(
        f"{call.ctx.capital_place} left {cut(newsletter.title, 80)} ({newsletter.name}); "
        "issues already on their way still arrive.",
        f"{p}join {newsletter.name} joins again.",
    )


def _listing(call: Call) -> Reply:
    p = call.p
    every = call.store.newsletters()
    if not every:
        return call.reply("This PaperTrail server has no newsletters yet; its operator can create them.")
    lines = [f"{n.name} — {cut(n.title, 80)}" for n in every[:_SHOWN]]
    more = f"… and {len(every) - _SHOWN} more." if len(every) > _SHOWN else ""
    return call.reply(
        "Newsletters on this server:",
        "\n".join(lines),
        more,
        f"Send {p}join NAME, e.g. {p}join {every[0].name}.",
        suggestions=tuple(f"join {n.name}" for n in every[:3]),
    )


def _find(call: Call) -> Newsletter | Reply:
    """The newsletter named by the first argument, or the reply saying there is none (with a guess)."""
    p = call.p
    name = call.args.split(" ", 1)[0].casefold()
    found = call.store.get_newsletter(name)
    if found is not None:
        return found
    names = [n.name for n in call.store.newsletters()]
    guess = difflib.get_close_matches(name[:64], names, n=1, cutoff=0.6)
    hint = f" Did you mean {p}{call.name} {guess[0]}?" if guess else f" {p}join lists them."
    return call.reply(
        f'There is no newsletter "{cut(name, 40)}".{hint}',
        error=Problem.NOT_FOUND,
        suggestions=(f"{call.name} {guess[0]}",) if guess else (),
    )
