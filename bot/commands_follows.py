"""The commands about follows: ``follow``, ``unfollow``, ``follows`` and ``try``."""

from __future__ import annotations

import re

from bot.commands_base import Block, Call, FollowItem, Problem, Reply, cut, plural
from bot.commands_status import describe_schedule
from core.delivery import normalise_address
from core.follows import follow as add_follow
from core.follows import try_query
from core.models import Follow, Subscriber
from core.query import QueryError, parse
from core.store import Store

FOLLOWS_PER_PAGE = 20
TRY_DAYS = 7
TRY_SHOWN = 5

# Phones turn "--" into a dash (– or —), so one or two of any dash introduce an option.
_OPTION = re.compile(r"^[-–—]{1,2}([A-Za-z][A-Za-z_-]*)$")
_OPTION_NAMES = {"new-only": "new_only", "newonly": "new_only", "new_only": "new_only", "instant": "instant"}
_NUMBER = re.compile(r"^#?([+-]?[0-9]{1,18})\.?$")


def split_options(args: str) -> tuple[str, frozenset[str], str | None]:
    """(query, options, unknown option) of ``QUERY --new-only --instant``; options come at the end.

    A query cannot end in such a word anyway: the follow language refuses a leading '-'.
    """
    words = args.split(" ") if args else []
    options: set[str] = set()
    while words and (m := _OPTION.match(words[-1])):
        option = _OPTION_NAMES.get(m[1].casefold())
        if option is None:
            return "", frozenset(options), words[-1]
        options.add(option)
        words.pop()
    return " ".join(words), frozenset(options), None


def _query_error(call: Call, exc: QueryError, again: str) -> Reply:
    """What was expected where, the query with a caret under that spot (monospace), and what to do."""
    return Reply(
        (
            Block(f"That query does not parse: {exc}"),
            Block(exc.excerpt(), monospace=True),
            Block(f"Fix it and send {call.p}{again} again; {call.p}help follow shows examples."),
        ),
        call.name,
        Problem.BAD_QUERY,
    )


def follow(call: Call) -> Reply:
    """``follow QUERY [--new-only] [--instant]``: add a follow, or change the options of the same one."""
    p = call.p
    query, options, unknown = split_options(call.args)
    if unknown:
        return call.reply(
            f'Unknown option "{cut(unknown, 40)}". Options are --new-only and --instant, '
            f"at the end: {p}follow cat:cs.DC --new-only",
            error=Problem.BAD_ARGUMENT,
        )
    if not query:
        return call.reply(
            f'Say what to follow: {p}follow cat:cs.DC, {p}follow au:"Zeng Li" or {p}follow "policy lag". '
            f"{p}help follow shows the query language.",
            error=Problem.BAD_ARGUMENT,
            suggestions=("help follow",),
        )
    try:
        result = add_follow(
            call.store,
            call.ctx.address,
            query,
            timezone=call.settings.default_timezone,
            schedule=call.settings.default_schedule,
            revisions="new_only" not in options,
            instant="instant" in options,
        )
    except QueryError as exc:
        return _query_error(call, exc, "follow")
    subscriber, stored = result.subscriber, result.follow
    listing = _lists_all(call, len(call.store.follows_of(subscriber.id or 0)))
    shown, what = cut(stored.query), _options_text(stored, subscriber)
    lines = [f"{call.ctx.capital_place} is now subscribed."] if result.subscriber_created else []
    if result.outcome == "unchanged":
        lines.append(f"Already following: {shown} ({what}). {listing}")
    elif result.outcome == "updated":
        lines += [f"Updated: {shown}", f"Now {what}. {listing}"]
    else:
        lines += [
            f"Now following: {shown}",
            f"{what[0].upper()}{what[1:]}.",
            f"It sees papers announced from now on; {_command_with(call, 'try', stored.query)} shows what "
            f"it would have matched lately. {listing}",
        ]
    lines.append(call.inactive_note(subscriber))
    return call.reply(*lines, suggestions=(f"try {stored.query}",) if result.outcome == "added" else ())


def _command_with(call: Call, command: str, query: str) -> str:
    """``/follow QUERY`` to copy, or words that say so when the query is too long to repeat."""
    if len(query) <= 80:
        return f"{call.p}{command} {query}"
    return f"{call.p}{command} with the same query"


def _lists_all(call: Call, count: int) -> str:
    return f"{call.p}follows lists it." if count == 1 else f"{call.p}follows lists all {count}."


def _options_text(follow: Follow, subscriber: Subscriber) -> str:
    kinds = "new papers only" if not follow.revisions else "new papers and revisions"
    when = "sent at once" if follow.instant else f"in the digest {describe_schedule(subscriber)}"
    return f"{kinds}, {when}"


def unfollow(call: Call) -> Reply:
    """``unfollow NUMBER|QUERY``: remove a follow by its number in ``follows`` or by its query."""
    p = call.p
    if not call.args:
        return call.reply(
            f"Say which follow to remove: {p}unfollow 2 (its number in {p}follows) or {p}unfollow QUERY.",
            error=Problem.BAD_ARGUMENT,
            suggestions=("follows",),
        )
    subscriber = call.subscriber()
    follows = call.store.follows_of(subscriber.id or 0) if subscriber else []
    if not follows:
        return call.reply(
            f"{call.ctx.capital_place} follows nothing yet, so there is nothing to remove. "
            f"{p}follow QUERY adds a follow.",
            error=Problem.NOT_FOUND,
        )
    number = _NUMBER.match(call.args)
    if number:
        index = int(number[1])
        if not 1 <= index <= len(follows):
            return call.reply(
                f"There is no follow number {index}: {call.ctx.place} has "
                f"{plural(len(follows), 'follow', 'follows')}"
                + (f", numbered 1 to {len(follows)}. " if len(follows) > 1 else ", number 1. ")
                + f"{p}follows lists them.",
                error=Problem.NOT_FOUND,
                suggestions=("follows",),
            )
        target = follows[index - 1]
    else:
        found = _find_follow(follows, call.args)
        if found is None:
            return call.reply(
                f"{call.ctx.capital_place} does not follow {cut(call.args)}. "
                f"{p}follows lists what it follows; remove one by its number, e.g. {p}unfollow 1.",
                error=Problem.NOT_FOUND,
                suggestions=("follows",),
            )
        target = found
    call.store.remove_follow(target.id or 0)
    left = len(follows) - 1
    return call.reply(
        f"Stopped following: {cut(target.query)}",
        f"{plural(left, 'follow', 'follows')} left; {p}follows lists them."
        if left
        else f"No follows left; {p}follow QUERY adds one.",
    )


def _find_follow(follows: list[Follow], text: str) -> Follow | None:
    """The follow with ``text``'s normal form, or (for one that no longer parses) with its text."""
    try:
        canonical: str | None = parse(text).canonical()
    except QueryError:
        canonical = None
    typed = " ".join(text.split())
    for row in follows:
        if row.canonical == canonical or " ".join(row.query.split()) == typed:
            return row
    return None


def follow_items(store: Store, address: str) -> tuple[FollowItem, ...]:
    """Every follow of ``address``, numbered as ``follows`` and ``unfollow NUMBER`` number them.

    For views that list follows outside a reply (Slack's App Home). Empty for an unknown address.
    """
    subscriber = store.get_subscriber(normalise_address(address))
    if subscriber is None or subscriber.id is None:
        return ()
    return tuple(
        FollowItem(number, row.query, not row.revisions, row.instant)
        for number, row in enumerate(store.follows_of(subscriber.id), 1)
    )


def follows(call: Call) -> Reply:
    """``follows [PAGE]``: the follows, numbered, with their options, 20 to a page."""
    p = call.p
    items = follow_items(call.store, call.ctx.address)
    if not items:
        return call.reply(
            f"{call.ctx.capital_place} follows nothing yet. Add a follow with {p}follow QUERY, "
            f"e.g. {p}follow cat:cs.DC; {p}help follow shows the query language.",
            suggestions=("help follow",),
        )
    pages = (len(items) + FOLLOWS_PER_PAGE - 1) // FOLLOWS_PER_PAGE
    wanted = _NUMBER.match(call.args) if call.args else None
    page = min(max(int(wanted[1]), 1), pages) if wanted else 1
    shown = items[(page - 1) * FOLLOWS_PER_PAGE : page * FOLLOWS_PER_PAGE]
    head = f"{call.ctx.capital_place} follows {plural(len(items), 'query', 'queries')}"
    head += f" (page {page} of {pages}):" if pages > 1 else ":"
    lines = [
        f"{item.number}. {cut(item.query)}" + (f" · {item.options}" if item.options else "") for item in shown
    ]
    more = f" {p}follows {page + 1} shows the next page." if page < pages else ""
    return call.reply(
        head,
        "\n".join(lines),
        f"Remove one with {p}unfollow NUMBER, add one with {p}follow QUERY.{more}",
        follows=shown,
    )


def try_(call: Call) -> Reply:
    """``try QUERY``: what the query would have matched in the last days, with reasons, nothing saved."""
    p = call.p
    query, _, _ = split_options(call.args)
    if not query:
        return call.reply(
            f"Say which query to try, e.g. {p}try cat:cs.DC ti:scheduling.", error=Problem.BAD_ARGUMENT
        )
    try:
        hits = try_query(call.store, query, days=TRY_DAYS, now=call.now)
    except QueryError as exc:
        return _query_error(call, exc, "try")
    shown_query = cut(query, 80)
    if not hits:
        return call.reply(
            f"Nothing of the last {TRY_DAYS} days matches {shown_query}. It may still match new papers: "
            f"follow it with {_command_with(call, 'follow', query)}, or try a broader query.",
            suggestions=(f"follow {query}",),
        )
    listed = [
        f"{hit.arxiv_id}v{hit.version} {cut(hit.title, 150)}\n    why: {cut('; '.join(hit.reasons), 150)}"
        for hit in hits[:TRY_SHOWN]
    ]
    more = len(hits) - len(listed)
    head = (
        f"{shown_query} would have matched {plural(len(hits), 'paper', 'papers')} in the last {TRY_DAYS} days"
    )
    return call.reply(
        head + (f"; the newest {len(listed)}:" if more else ":"),
        "\n".join(listed),
        (f"…and {more} more. " if more else "") + f"Follow it with {_command_with(call, 'follow', query)}.",
        suggestions=(f"follow {query}",),
    )


__all__ = [
    "FOLLOWS_PER_PAGE",
    "TRY_DAYS",
    "TRY_SHOWN",
    "follow",
    "follow_items",
    "follows",
    "split_options",
    "try_",
]
