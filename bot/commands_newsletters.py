"""The newsletter commands: ``join`` (list the newsletters, or join one) and ``leave``.

A chat that joins a newsletter receives each of its issues in its own digests, through its own channel;
the newsletter's follows stay the operator's (they are not listed by ``follows``).
"""

from __future__ import annotations

import difflib

from bot.commands_base import Call, Problem, Reply, cut
from bot.commands_status import describe_schedule
from core.languages import listing
from core.models import Newsletter
from core.people import newsletters

_SHOWN = 10
"""Newsletters named in one reply."""


def join(call: Call) -> Reply:
    """``join``: list the newsletters; ``join NAME``: make this chat a member of one."""
    t, p = call.t, call.p
    if not call.args:
        return _listing(call)
    newsletter = _find(call)
    if isinstance(newsletter, Reply):
        return newsletter
    subscriber = call.ensure_subscriber()
    added = newsletters.join(call.db, newsletter.name, subscriber, now=call.now)
    info = newsletters.info(call.db, newsletter.name)
    title, name = cut(newsletter.title, 80), newsletter.name
    said = (
        t.gettext(
            "{Place} joined {title} ({name}): each issue arrives here as it comes out, {schedule}.",
            Place=call.capital_place,
            title=title,
            name=name,
            schedule=describe_schedule(info.subscriber, t),
        )
        if added
        else t.gettext(
            "{Place} is a member of {title} ({name}) already.",
            Place=call.capital_place,
            title=title,
            name=name,
        )
    )
    return call.reply(
        said, call.inactive_note(subscriber), t.gettext("{p}leave {name} stops them.", p=p, name=name)
    )


def leave(call: Call) -> Reply:
    """``leave NAME``: end this chat's membership of a newsletter."""
    t, p = call.t, call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if not call.args:
        joined = newsletters.newsletters_of(call.db, subscriber.id or 0)
        names = listing(t, (n.name for n in joined[:_SHOWN])) or t.gettext("none")
        return call.reply(
            t.gettext(
                "Send {p}leave NAME. {Place}'s newsletters: {names}.",
                p=p,
                Place=call.capital_place,
                names=names,
            ),
            error=Problem.BAD_ARGUMENT,
        )
    newsletter = _find(call)
    if isinstance(newsletter, Reply):
        return newsletter
    if not newsletters.leave(call.db, newsletter.name, subscriber):
        return call.reply(
            t.gettext(
                "{Place} is not a member of {name}. {p}join lists the newsletters.",
                Place=call.capital_place,
                name=newsletter.name,
                p=p,
            ),
            error=Problem.NOT_FOUND,
        )
    return call.reply(
        t.gettext(
            "{Place} left {title} ({name}); issues already on their way still arrive.",
            Place=call.capital_place,
            title=cut(newsletter.title, 80),
            name=newsletter.name,
        ),
        t.gettext("{p}join {name} joins again.", p=p, name=newsletter.name),
    )


def _listing(call: Call) -> Reply:
    t, p = call.t, call.p
    every = newsletters.all_newsletters(call.db)
    if not every:
        return call.reply(
            t.gettext("This PaperTrail server has no newsletters yet; its operator can create them.")
        )
    lines = [f"{n.name} — {cut(n.title, 80)}" for n in every[:_SHOWN]]
    more = t.gettext("… and {more} more.", more=len(every) - _SHOWN) if len(every) > _SHOWN else ""
    return call.reply(
        t.gettext("Newsletters on this server:"),
        "\n".join(lines),
        more,
        t.gettext("Send {p}join NAME, e.g. {p}join {name}.", p=p, name=every[0].name),
        suggestions=tuple(f"join {n.name}" for n in every[:3]),
    )


def _find(call: Call) -> Newsletter | Reply:
    """The newsletter named by the first argument, or the reply saying there is none (with a guess)."""
    t, p = call.t, call.p
    name = call.args.split(" ", 1)[0].casefold()
    found = newsletters.named(call.db, name)
    if found is not None:
        return found
    names = [n.name for n in newsletters.all_newsletters(call.db)]
    guess = difflib.get_close_matches(name[:64], names, n=1, cutoff=0.6)
    said = (
        t.gettext(
            'There is no newsletter "{name}". Did you mean {p}{command} {guess}?',
            name=cut(name, 40),
            p=p,
            command=call.name,
            guess=guess[0],
        )
        if guess
        else t.gettext('There is no newsletter "{name}". {p}join lists them.', name=cut(name, 40), p=p)
    )
    return call.reply(
        said,
        error=Problem.NOT_FOUND,
        suggestions=(f"{call.name} {guess[0]}",) if guess else (),
    )
