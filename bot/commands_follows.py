"""The commands about follows: ``follow``, ``unfollow``, ``follows`` and ``try``."""

from __future__ import annotations

import re

from bot import commands_recommend
from bot.commands_base import Block, Call, FollowItem, Problem, Reply, cut
from bot.commands_status import describe_schedule
from core.channel import normalise_address
from core.db import Database
from core.delivery.render import reasons_text
from core.follows import subscribers
from core.follows.manage import follow as add_follow
from core.follows.query import QueryError, parse
from core.models import Follow, Subscriber
from core.papers.query_trial import try_query
from core.taste.recommend import PREVIEW_DAYS

FOLLOWS_PER_PAGE = 20
TRY_DAYS = PREVIEW_DAYS
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
    """What was expected where, the query with a caret under that spot (monospace), and what to do.

    The parser's words are said in the reply's language (:meth:`core.follows.query.QueryError.said`).
    """
    t = call.t
    return Reply(
        (
            Block(t.gettext("That query does not parse: {error}", error=exc.said(t))),
            Block(exc.excerpt(), monospace=True),
            Block(
                t.gettext(
                    "Fix it and send {p}{command} again; {p}help follow shows examples.",
                    p=call.p,
                    command=again,
                )
            ),
        ),
        call.name,
        Problem.BAD_QUERY,
        language=call.language,
    )


def follow(call: Call) -> Reply:
    """``follow QUERY [--new-only] [--instant]``: add a follow, or change the options of the same one."""
    t, p = call.t, call.p
    query, options, unknown = split_options(call.args)
    if unknown:
        return call.reply(
            t.gettext(
                'Unknown option "{option}". Options are --new-only and --instant, '
                "at the end: {p}follow cat:cs.DC --new-only",
                option=cut(unknown, 40),
                p=p,
            ),
            error=Problem.BAD_ARGUMENT,
        )
    if not query:
        return call.reply(
            t.gettext(
                'Say what to follow: {p}follow cat:cs.DC, {p}follow au:"Zeng Li" or {p}follow "policy lag". '
                "{p}help follow shows the query language.",
                p=p,
            ),
            error=Problem.BAD_ARGUMENT,
            suggestions=("help follow",),
        )
    try:
        result = add_follow(
            call.db,
            call.ctx.address,
            query,
            timezone=call.settings.default_timezone,
            schedule=call.settings.default_schedule,
            revisions="new_only" not in options,
            instant="instant" in options,
            language=call.platform_language(),
        )
    except QueryError as exc:
        return _query_error(call, exc, "follow")
    subscriber, stored = result.subscriber, result.follow
    listing = _lists_all(call, len(subscribers.follows_of(call.db, subscriber.id or 0)))
    shown = cut(stored.query)
    lines = (
        [t.gettext("{Place} is now subscribed.", Place=call.capital_place)]
        if result.subscriber_created
        else []
    )
    if result.outcome == "unchanged":
        what = _options_text(call, stored, subscriber)
        lines.append(
            t.gettext(
                "Already following: {query} ({options}). {listing}",
                query=shown,
                options=what,
                listing=listing,
            )
        )
    elif result.outcome == "updated":
        what = _options_text(call, stored, subscriber)
        lines += [
            t.gettext("Updated: {query}", query=shown),
            t.gettext("Now {options}. {listing}", options=what, listing=listing),
        ]
    else:
        lines += [
            t.gettext("Now following: {query}", query=shown),
            _options_sentence(call, stored, subscriber),
            t.gettext(
                "It sees papers announced from now on; {command} shows what it would have matched lately. "
                "{listing}",
                command=_command_with(call, "try", stored.query),
                listing=listing,
            ),
        ]
    lines.append(call.inactive_note(subscriber))
    return call.reply(*lines, suggestions=(f"try {stored.query}",) if result.outcome == "added" else ())


def _command_with(call: Call, command: str, query: str) -> str:
    """``/follow QUERY`` to copy, or words that say so when the query is too long to repeat."""
    if len(query) <= 80:
        return f"{call.p}{command} {query}"
    return call.t.gettext("{p}{command} with the same query", p=call.p, command=command)


def _lists_all(call: Call, count: int) -> str:
    if count == 1:
        return call.t.gettext("{p}follows lists it.", p=call.p)
    return call.t.gettext("{p}follows lists all {count}.", p=call.p, count=count)


def _options_text(call: Call, follow: Follow, subscriber: Subscriber) -> str:
    """``new papers only, sent at once``: what a follow sends and when, inside a sentence."""
    t = call.t
    kinds = t.gettext("new papers only") if not follow.revisions else t.gettext("new papers and revisions")
    if follow.instant:
        return t.gettext("{kinds}, sent at once", kinds=kinds)
    return t.gettext(
        "{kinds}, in the digest {schedule}", kinds=kinds, schedule=describe_schedule(subscriber, t)
    )


def _options_sentence(call: Call, follow: Follow, subscriber: Subscriber) -> str:
    """``New papers only, sent at once.``: :func:`_options_text` as a sentence of its own."""
    t = call.t
    schedule = describe_schedule(subscriber, t)
    if not follow.revisions:
        if follow.instant:
            return t.gettext("New papers only, sent at once.")
        return t.gettext("New papers only, in the digest {schedule}.", schedule=schedule)
    if follow.instant:
        return t.gettext("New papers and revisions, sent at once.")
    return t.gettext("New papers and revisions, in the digest {schedule}.", schedule=schedule)


def unfollow(call: Call) -> Reply:
    """``unfollow NUMBER|QUERY``: remove a follow by its number in ``follows`` or by its query."""
    t, p = call.t, call.p
    if not call.args:
        return call.reply(
            t.gettext(
                "Say which follow to remove: {p}unfollow 2 (its number in {p}follows) or {p}unfollow QUERY.",
                p=p,
            ),
            error=Problem.BAD_ARGUMENT,
            suggestions=("follows",),
        )
    subscriber = call.subscriber()
    follows = subscribers.follows_of(call.db, subscriber.id or 0) if subscriber else []
    if not follows:
        return call.reply(
            t.gettext(
                "{Place} follows nothing yet, so there is nothing to remove. {p}follow QUERY adds a follow.",
                Place=call.capital_place,
                p=p,
            ),
            error=Problem.NOT_FOUND,
        )
    number = _NUMBER.match(call.args)
    if number:
        index = int(number[1])
        if not 1 <= index <= len(follows):
            return call.reply(
                t.gettext(
                    "There is no follow number {number}: {place} has {count} follows, numbered 1 to {count}. "
                    "{p}follows lists them.",
                    number=index,
                    place=call.place,
                    count=len(follows),
                    p=p,
                )
                if len(follows) > 1
                else t.gettext(
                    "There is no follow number {number}: {place} has 1 follow, number 1. "
                    "{p}follows lists them.",
                    number=index,
                    place=call.place,
                    p=p,
                ),
                error=Problem.NOT_FOUND,
                suggestions=("follows",),
            )
        target = follows[index - 1]
    else:
        found = _find_follow(follows, call.args)
        if found is None:
            return call.reply(
                t.gettext(
                    "{Place} does not follow {query}. {p}follows lists what it follows; remove one by its "
                    "number, e.g. {p}unfollow 1.",
                    Place=call.capital_place,
                    query=cut(call.args),
                    p=p,
                ),
                error=Problem.NOT_FOUND,
                suggestions=("follows",),
            )
        target = found
    subscribers.remove_follow(call.db, target.id or 0)
    left = len(follows) - 1
    return call.reply(
        t.gettext("Stopped following: {query}", query=cut(target.query)),
        t.ngettext(
            "{n} follow left; {p}follows lists them.", "{n} follows left; {p}follows lists them.", left, p=p
        )
        if left
        else t.gettext("No follows left; {p}follow QUERY adds one.", p=p),
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


def follow_items(db: Database, address: str) -> tuple[FollowItem, ...]:
    """Every follow of ``address``, numbered as ``follows`` and ``unfollow NUMBER`` number them.

    For views that list follows outside a reply (Slack's App Home). Empty for an unknown address.
    """
    return tuple(
        FollowItem(number, row.query, not row.revisions, row.instant)
        for number, row in enumerate(subscribers.follows_at(db, normalise_address(address)), 1)
    )


def follows(call: Call) -> Reply:
    """``follows [PAGE]``: the follows, numbered, with their options, 20 to a page."""
    t, p = call.t, call.p
    items = follow_items(call.db, call.ctx.address)
    if not items:
        return call.reply(
            t.gettext(
                "{Place} follows nothing yet. Add a follow with {p}follow QUERY, e.g. {p}follow cat:cs.DC; "
                "{p}help follow shows the query language.",
                Place=call.capital_place,
                p=p,
            ),
            suggestions=("help follow",),
        )
    pages = (len(items) + FOLLOWS_PER_PAGE - 1) // FOLLOWS_PER_PAGE
    wanted = _NUMBER.match(call.args) if call.args else None
    page = min(max(int(wanted[1]), 1), pages) if wanted else 1
    shown = items[(page - 1) * FOLLOWS_PER_PAGE : page * FOLLOWS_PER_PAGE]
    if pages > 1:
        head = t.ngettext(
            "{Place} follows {n} query (page {page} of {pages}):",
            "{Place} follows {n} queries (page {page} of {pages}):",
            len(items),
            Place=call.capital_place,
            page=page,
            pages=pages,
        )
    else:
        head = t.ngettext(
            "{Place} follows {n} query:", "{Place} follows {n} queries:", len(items), Place=call.capital_place
        )
    lines = [
        " · ".join(part for part in (f"{item.number}. {cut(item.query)}", item.options(t)) if part)
        for item in shown
    ]
    how = t.gettext("Remove one with {p}unfollow NUMBER, add one with {p}follow QUERY.", p=p)
    if page < pages:
        how = t.gettext("{how} {p}follows {page} shows the next page.", how=how, p=p, page=page + 1)
    return call.reply(head, "\n".join(lines), how, follows=shown)


def try_(call: Call) -> Reply:
    """``try QUERY``: what the query would have matched in the last days, with reasons, nothing saved;
    ``try recommended``: what the chat's model would have recommended (bot.commands_recommend)."""
    t, p = call.t, call.p
    query, _, _ = split_options(call.args)
    if query.casefold() in commands_recommend.TRY_WORDS:
        return commands_recommend.try_recommended(call)
    if not query:
        return call.reply(
            t.gettext("Say which query to try, e.g. {p}try cat:cs.DC ti:scheduling.", p=p),
            error=Problem.BAD_ARGUMENT,
        )
    try:
        hits = try_query(call.db, query, days=TRY_DAYS, now=call.now)
    except QueryError as exc:
        return _query_error(call, exc, "try")
    shown_query = cut(query, 80)
    follow_it = _command_with(call, "follow", query)
    if not hits:
        return call.reply(
            t.gettext(
                "Nothing of the last {days} days matches {query}. It may still match new papers: "
                "follow it with {command}, or try a broader query.",
                days=TRY_DAYS,
                query=shown_query,
                command=follow_it,
            ),
            suggestions=(f"follow {query}",),
        )
    listed = [
        t.gettext(
            "{id}v{version} {title}\n    why: {reasons}",
            id=hit.arxiv_id,
            version=hit.version,
            title=cut(hit.title, 150),
            reasons=cut(reasons_text(hit.reasons, t.language), 150),
        )
        for hit in hits[:TRY_SHOWN]
    ]
    more = len(hits) - len(listed)
    if more:
        head = t.ngettext(
            "{query} would have matched {n} paper in the last {days} days; the newest {shown}:",
            "{query} would have matched {n} papers in the last {days} days; the newest {shown}:",
            len(hits),
            query=shown_query,
            days=TRY_DAYS,
            shown=len(listed),
        )
        tail = t.gettext("…and {more} more. Follow it with {command}.", more=more, command=follow_it)
    else:
        head = t.ngettext(
            "{query} would have matched {n} paper in the last {days} days:",
            "{query} would have matched {n} papers in the last {days} days:",
            len(hits),
            query=shown_query,
            days=TRY_DAYS,
        )
        tail = t.gettext("Follow it with {command}.", command=follow_it)
    return call.reply(head, "\n".join(listed), tail, suggestions=(f"follow {query}",))


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
