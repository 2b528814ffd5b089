"""The commands about a whole subscription: ``digest``, ``timezone``, ``pause``, ``resume``, ``status``."""

from __future__ import annotations

import re
from datetime import timedelta

from bot.commands_base import PAUSED_BY_CHAT, Call, Problem, Reply, cut, plural
from bot.commands_status import (
    HEALTH_SOURCES,
    describe_schedule,
    duration,
    local_time,
    next_digest,
    source_line,
)
from core.delivery import split_address
from core.digests import resume as resume_subscriber
from core.models import Subscriber, SubscriberStatus
from core.schedule import parse_schedule
from core.timezones import lookup

_CLOCK = re.compile(r"^(\d{1,2})(?:[:.h](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?$", re.IGNORECASE)
_OFF = frozenset({"off", "pause", "stop", "none", "never"})
_ON = frozenset({"on", "resume", "start"})


def clock(text: str) -> str | None:
    """``8`` -> ``08:00``, ``8pm`` -> ``20:00``, ``7.30`` -> ``07:30``; None when it is not a time of day."""
    m = _CLOCK.match(text.strip())
    if not m:
        return None
    hours, minutes = int(m[1]), int(m[2] or 0)
    if m[3]:
        if not 1 <= hours <= 12:
            return None
        hours = hours % 12 + (12 if m[3].lower().startswith("p") else 0)
    return f"{hours:02d}:{minutes:02d}"


def next_text(call: Call, subscriber: Subscriber) -> str:
    """``the next Fri 29 Nov 08:00 CET (in 21 h), if anything matched``, or why there is none."""
    if subscriber.status != SubscriberStatus.ACTIVE:
        return "none while paused"
    when = next_digest(subscriber, call.now)
    if when is None:
        return "the schedule cannot be read"
    if when <= call.now:
        return "the next at the next delivery pass, if anything matched"
    shown = local_time(when, subscriber.timezone)
    return f"the next {shown} (in {duration(when - call.now)}), if anything matched"


def digest(call: Call) -> Reply:
    """``digest``: show the schedule; ``digest SCHEDULE|now|off|on``: change it, send now, pause, resume."""
    p = call.p
    words = call.args.split(" ") if call.args else []
    kind = words[0].casefold() if words else ""
    if not kind:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        return call.reply(
            f"Digests go out {describe_schedule(subscriber)}; {next_text(call, subscriber)}.",
            call.inactive_note(subscriber),
            f"Change it with {p}digest daily 08:00, {p}digest weekly mon 09:00 or {p}digest instant; "
            f"{p}digest now sends what is waiting, {p}digest off pauses.",
        )
    if kind == "now":
        return digest_now(call)
    if kind in _OFF:
        return pause(call)
    if kind in _ON:
        return resume(call)
    if kind == "instant":
        schedule = "instant"
    elif kind in ("daily", "weekdays") and len(words) >= 2:
        schedule = f"{kind} {clock(' '.join(words[1:])) or ' '.join(words[1:])}"
    elif kind == "weekly" and len(words) >= 3:
        schedule = f"weekly {words[1]} {clock(' '.join(words[2:])) or ' '.join(words[2:])}"
    else:
        return _bad_schedule(call, "")
    try:
        parsed = parse_schedule(schedule)
    except ValueError as exc:
        return _bad_schedule(call, str(exc).split(";", 1)[0])
    subscriber = call.ensure_subscriber()
    fields: dict[str, object] = {"schedule": parsed.text}
    if subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason == PAUSED_BY_CHAT:
        # Choosing a time after `digest off` means "on again, at this time".
        fields.update(status=SubscriberStatus.ACTIVE, status_reason=None)
    updated = call.store.update_subscriber(subscriber.id or 0, **fields)
    return call.reply(
        f"Digests now go out {describe_schedule(updated)}; {next_text(call, updated)}.",
        call.inactive_note(updated),
    )


def _bad_schedule(call: Call, why: str) -> Reply:
    p = call.p
    typed = cut(call.args, 60)
    said = f'Cannot use "{typed}": {why}. ' if why else f'Cannot read "{typed}". '
    return call.reply(
        said + f"Write {p}digest daily 08:00, {p}digest weekdays 07:30, {p}digest weekly mon 09:00, "
        f"{p}digest instant, {p}digest now or {p}digest off.",
        error=Problem.BAD_ARGUMENT,
        suggestions=("help digest",),
    )


def digest_now(call: Call) -> Reply:
    """``digest now``: put every waiting match in a digest that the next delivery pass sends."""
    p = call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if subscriber.status != SubscriberStatus.ACTIVE:
        return call.reply(f"Digests are paused; send {p}resume first.", error=Problem.BAD_ARGUMENT)
    waiting = call.store.count_pending(subscriber.id or 0)
    if not waiting:
        return call.reply(
            f"Nothing is waiting: every match has been sent. {p}try QUERY shows what a query would match."
        )
    # An open digest is due at once (next_attempt_at = now), whatever the schedule; dead-lettered ones
    # are put back in the queue, as `papertrail retry` does.
    channel = split_address(subscriber.address)[0]
    opened = call.store.open_digest(subscriber.id or 0, channel, instant_only=False, now=call.now)
    requeued = call.store.requeue_dead(address=subscriber.address, now=call.now)
    every = plural(waiting, "waiting match", "waiting matches")
    if opened is None and not requeued:
        return call.reply(f"A digest with the {every} is already on its way.")
    pass_every = duration(timedelta(seconds=call.settings.digest_check_seconds))
    return call.reply(f"The {every} will go out with the next delivery pass, within about {pass_every}.")


def timezone(call: Call) -> Reply:
    """``timezone``: show it; ``timezone Area/City``: change it, or suggest the closest names."""
    p = call.p
    if not call.args:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        return call.reply(
            f"{call.ctx.capital_place}'s timezone is {subscriber.timezone} "
            f"(now {local_time(call.now, subscriber.timezone, date=False)} there). "
            f"Change it with {p}timezone Area/City, e.g. {p}timezone Europe/Berlin."
        )
    found = lookup(call.args)
    typed = cut(call.args, 60)
    if found.zone is None and found.suggestions:
        offers = found.suggestions
        return call.reply(
            f'Unknown timezone "{typed}". Did you mean {" or ".join(offers)}?'
            + (f" ({found.note}.)" if found.note else ""),
            f"Send e.g. {p}timezone {offers[0]}.",
            error=Problem.BAD_ARGUMENT,
            suggestions=tuple(f"timezone {name}" for name in offers),
        )
    if found.zone is None:
        return call.reply(
            f'Unknown timezone "{typed}". Write an IANA name, Area/City, such as Europe/Berlin, '
            "America/New_York or Asia/Tokyo, or UTC.",
            error=Problem.BAD_ARGUMENT,
        )
    subscriber = call.ensure_subscriber()
    updated = call.store.update_subscriber(subscriber.id or 0, timezone=found.zone)
    return call.reply(
        f"Timezone set to {found.zone} (now {local_time(call.now, found.zone, date=False)} there). "
        f"Digests go out {describe_schedule(updated)}; {next_text(call, updated)}.",
        f"Note: {found.note}." if found.note else "",
    )


def pause(call: Call) -> Reply:
    """``pause`` (and ``digest off``): no digests, and no matching, until ``resume``."""
    p = call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if subscriber.status != SubscriberStatus.ACTIVE:
        return call.reply(f"Digests are already paused. {p}resume restarts them.")
    call.store.update_subscriber(
        subscriber.id or 0, status=SubscriberStatus.PAUSED, status_reason=PAUSED_BY_CHAT
    )
    count = len(call.store.follows_of(subscriber.id or 0))
    return call.reply(
        f"Paused: no digests, and no new papers collected, until {p}resume."
        + (" The follows are kept." if count else "")
    )


def resume(call: Call) -> Reply:
    """``resume``: re-activate a paused subscriber (by the chat or after a delivery failure)."""
    p = call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if subscriber.status == SubscriberStatus.ACTIVE:
        return call.reply(f"Digests are already on. {p}status shows when the next one goes out.")
    reason = subscriber.status_reason
    resumed = resume_subscriber(call.store, subscriber.address)
    why = f" (they were paused because: {cut(reason, 200)})" if reason and reason != PAUSED_BY_CHAT else ""
    return call.reply(
        f"Digests are on again{why}. They go out {describe_schedule(resumed)}; "
        f"{next_text(call, resumed)}. Papers announced from now on are collected."
    )


def status(call: Call) -> Reply:
    """``status``: the subscription, the next digest, and the sources' health in one line."""
    p = call.p
    subscriber = call.subscriber()
    sources = source_line(call.store, call.settings, call.now, HEALTH_SOURCES)
    if subscriber is None:
        return call.reply(
            f"{call.ctx.capital_place} has no subscription yet: send {p}start.",
            f"Sources — {sources}",
            error=Problem.NOT_SUBSCRIBED,
        )
    follows = len(call.store.follows_of(subscriber.id or 0))
    waiting = call.store.count_pending(subscriber.id or 0)
    active = subscriber.status == SubscriberStatus.ACTIVE
    state = str(subscriber.status)
    if subscriber.status == SubscriberStatus.PAUSED:
        by_chat = subscriber.status_reason == PAUSED_BY_CHAT
        state += (
            " by the chat"
            if by_chat
            else f" after a failed delivery: {cut(subscriber.status_reason or '', 200)}"
        )
    hint = f"{p}follows lists the follows"
    if waiting and active:
        hint += f"; {p}digest now sends what is waiting"
    if not active:
        hint += f"; {p}resume restarts digests"
    return call.reply(
        f"Subscription {subscriber.address}: {state}",
        f"Digest: {describe_schedule(subscriber)}; {next_text(call, subscriber)}",
        f"Follows: {follows} · matches waiting: {waiting}",
        f"Sources — {sources}",
        hint + ".",
    )


__all__ = ["clock", "digest", "digest_now", "next_text", "pause", "resume", "status", "timezone"]
