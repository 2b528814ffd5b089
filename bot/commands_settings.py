"""The commands about a whole subscription: ``start``, ``digest``, ``timezone``, ``pause``, ``resume``,
``status``."""

from __future__ import annotations

import re
from datetime import timedelta

from bot.commands_base import PAUSED_BY_CHAT, Call, Problem, Reply, cut, reason_text, state_text
from bot.commands_status import (
    HEALTH_SOURCES,
    describe_schedule,
    duration,
    local_time,
    next_digest,
    source_line,
)
from core.delivery import queue
from core.delivery.digests import resume as resume_subscriber
from core.follows import subscribers
from core.follows.subscribers import SubscriberSettings
from core.languages import Alternatives, Refusal
from core.models import Subscriber, SubscriberStatus
from core.overview.screens import subscription_status
from core.schedule import parse_schedule
from core.timezones import TimezoneLookup, lookup

_CLOCK = re.compile(r"^(\d{1,2})(?:[:.h](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?$", re.IGNORECASE)
_OFF = frozenset({"off", "pause", "stop", "none", "never"})
# What a reply quotes back from the reader's input (a schedule, a city) is cut to this many characters.
QUOTED_CHARS = 60
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
    t = call.t
    if subscriber.status != SubscriberStatus.ACTIVE:
        return t.gettext("none while paused")
    when = next_digest(subscriber, call.now)
    if when is None:
        return t.gettext("the schedule cannot be read")
    if when <= call.now:
        return t.gettext("the next at the next delivery pass, if anything matched")
    return t.gettext(
        "the next {when} (in {wait}), if anything matched",
        when=local_time(when, subscriber.timezone, t),
        wait=duration(when - call.now, t),
    )


def digest(call: Call) -> Reply:
    """``digest``: show the schedule; ``digest SCHEDULE|now|off|on``: change it, send now, pause, resume."""
    t, p = call.t, call.p
    words = call.args.split(" ") if call.args else []
    kind = words[0].casefold() if words else ""
    if not kind:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        return call.reply(
            t.gettext(
                "Digests go out {schedule}; {next}.",
                schedule=describe_schedule(subscriber, t),
                next=next_text(call, subscriber),
            ),
            call.inactive_note(subscriber),
            t.gettext(
                "Change it with {p}digest daily 08:00, {p}digest weekly mon 09:00 or {p}digest instant; "
                "{p}digest now sends what is waiting, {p}digest off pauses.",
                p=p,
            ),
        )
    if kind == "now":
        return digest_now(call)
    if kind == "heartbeat":
        return heartbeat(call, " ".join(words[1:]).casefold())
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
    except Refusal as exc:  # parse_schedule says what is wrong as a phrase; its hint the reply gives itself
        return _bad_schedule(call, exc.problem.shortened(QUOTED_CHARS).said(t))
    subscriber = call.ensure_subscriber()
    # Choosing a time after `digest off` means "on again, at this time".
    updated = subscribers.set_schedule(call.db, subscriber.id or 0, parsed.text, lift_pause=PAUSED_BY_CHAT)
    return call.reply(
        t.gettext(
            "Digests now go out {schedule}; {next}.",
            schedule=describe_schedule(updated, t),
            next=next_text(call, updated),
        ),
        call.inactive_note(updated),
    )


def heartbeat(call: Call, choice: str) -> Reply:
    """``digest heartbeat``: show it; ``digest heartbeat on|off``: a one-line message with the scan
    receipt on arXiv announcement days when nothing matched, or none."""
    t, p = call.t, call.p
    what = t.gettext(
        "On arXiv announcement days when nothing matched, the heartbeat is a one-line message at the "
        "digest time saying what PaperTrail scanned, so that a quiet day is not mistaken for a broken one."
    )
    if not choice:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        state = (
            t.gettext("The heartbeat is on.") if subscriber.heartbeat else t.gettext("The heartbeat is off.")
        )
        return call.reply(
            state,
            what,
            t.gettext("{p}digest heartbeat on or {p}digest heartbeat off changes it.", p=p),
        )
    if choice not in _ON and choice not in _OFF:
        return call.reply(
            t.gettext(
                'Cannot read "{typed}". Write {p}digest heartbeat on or {p}digest heartbeat off.',
                typed=cut(choice, QUOTED_CHARS),
                p=p,
            ),
            error=Problem.BAD_ARGUMENT,
            suggestions=("digest heartbeat on", "digest heartbeat off"),
        )
    wanted = choice in _ON
    subscriber = call.ensure_subscriber()
    updated = subscribers.change_settings(call.db, subscriber.id or 0, SubscriberSettings(heartbeat=wanted))
    if not wanted:
        return call.reply(
            t.gettext("Heartbeat off: on a day when nothing matched, nothing is sent."),
        )
    notes = [what]
    if updated.schedule.strip().casefold() == "instant":
        notes.append(
            t.gettext(
                "Digests here are instant, which has no digest time: the heartbeat goes out only with a "
                "daily, weekdays or weekly schedule ({p}digest daily 08:00).",
                p=p,
            )
        )
    return call.reply(
        t.gettext("Heartbeat on; digests go out {schedule}.", schedule=describe_schedule(updated, t)),
        *notes,
        call.inactive_note(updated),
    )


def _bad_schedule(call: Call, why: str) -> Reply:
    t, p = call.t, call.p
    typed = cut(call.args, QUOTED_CHARS)
    said = (
        t.gettext('Cannot use "{typed}": {why}.', typed=typed, why=why)
        if why
        else t.gettext('Cannot read "{typed}".', typed=typed)
    )
    forms = t.gettext(
        "Write {p}digest daily 08:00, {p}digest weekdays 07:30, {p}digest weekly mon 09:00, "
        "{p}digest instant, {p}digest now or {p}digest off.",
        p=p,
    )
    return call.reply(
        t.gettext("{problem} {forms}", problem=said, forms=forms),
        error=Problem.BAD_ARGUMENT,
        suggestions=("help digest",),
    )


def digest_now(call: Call) -> Reply:
    """``digest now``: put every waiting match in a digest that the next delivery pass sends."""
    t, p = call.t, call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if subscriber.status != SubscriberStatus.ACTIVE:
        return call.reply(
            t.gettext("Digests are paused; send {p}resume first.", p=p), error=Problem.BAD_ARGUMENT
        )
    sent = queue.send_now(call.db, subscriber, now=call.now)
    waiting = sent.waiting
    if not waiting:
        return call.reply(
            t.gettext(
                "Nothing is waiting: every match has been sent. {p}try QUERY shows what a query would match.",
                p=p,
            )
        )
    if not sent.queued:
        return call.reply(
            t.ngettext(
                "A digest with the {n} waiting match is already on its way.",
                "A digest with the {n} waiting matches is already on its way.",
                waiting,
            )
        )
    pass_every = duration(timedelta(seconds=call.settings.digest_check_seconds), t)
    return call.reply(
        t.ngettext(
            "The {n} waiting match will go out with the next delivery pass, within about {wait}.",
            "The {n} waiting matches will go out with the next delivery pass, within about {wait}.",
            waiting,
            wait=pass_every,
        )
    )


def _timezone_note(call: Call, found: TimezoneLookup) -> str:
    """The lookup's note in the reply's language; empty when there is none."""
    return found.note.shortened(QUOTED_CHARS).said(call.t) if found.note else ""


def timezone(call: Call) -> Reply:
    """``timezone``: show it; ``timezone Area/City``: change it, or suggest the closest names."""
    t, p = call.t, call.p
    if not call.args:
        subscriber = call.subscriber()
        if subscriber is None:
            return call.not_subscribed()
        return call.reply(
            t.gettext(
                "{Place}'s timezone is {zone} (now {time} there). "
                "Change it with {p}timezone Area/City, e.g. {p}timezone Europe/Berlin.",
                Place=call.capital_place,
                zone=subscriber.timezone,
                time=local_time(call.now, subscriber.timezone, t, date=False),
                p=p,
            )
        )
    found = lookup(call.args)
    typed = cut(call.args, QUOTED_CHARS)
    note = _timezone_note(call, found)
    if found.zone is None and found.suggestions:
        offers = found.suggestions
        said = t.gettext(
            'Unknown timezone "{typed}". Did you mean {zones}?',
            typed=typed,
            zones=Alternatives(offers).said(t),
        )
        return call.reply(
            t.gettext("{sentence} ({note}.)", sentence=said, note=note) if note else said,
            t.gettext("Send e.g. {p}timezone {zone}.", p=p, zone=offers[0]),
            error=Problem.BAD_ARGUMENT,
            suggestions=tuple(f"timezone {name}" for name in offers),
        )
    if found.zone is None:
        return call.reply(
            t.gettext(
                'Unknown timezone "{typed}". Write an IANA name, Area/City, such as Europe/Berlin, '
                "America/New_York or Asia/Tokyo, or UTC.",
                typed=typed,
            ),
            error=Problem.BAD_ARGUMENT,
        )
    subscriber = call.ensure_subscriber()
    updated = subscribers.change_settings(
        call.db, subscriber.id or 0, SubscriberSettings(timezone=found.zone)
    )
    return call.reply(
        t.gettext(
            "Timezone set to {zone} (now {time} there). Digests go out {schedule}; {next}.",
            zone=found.zone,
            time=local_time(call.now, found.zone, t, date=False),
            schedule=describe_schedule(updated, t),
            next=next_text(call, updated),
        ),
        t.gettext("Note: {note}.", note=note) if note else "",
    )


def pause(call: Call) -> Reply:
    """``pause`` (and ``digest off``): no digests, and no matching, until ``resume``."""
    t, p = call.t, call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if subscriber.status != SubscriberStatus.ACTIVE:
        return call.reply(t.gettext("Digests are already paused. {p}resume restarts them.", p=p))
    subscribers.pause(call.db, subscriber.id or 0, PAUSED_BY_CHAT)
    if subscribers.follows_of(call.db, subscriber.id or 0):
        return call.reply(
            t.gettext(
                "Paused: no digests, and no new papers collected, until {p}resume. The follows are kept.", p=p
            )
        )
    return call.reply(t.gettext("Paused: no digests, and no new papers collected, until {p}resume.", p=p))


def resume(call: Call) -> Reply:
    """``resume``: re-activate a paused subscriber (by the chat or after a delivery failure)."""
    t, p = call.t, call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    if subscriber.status == SubscriberStatus.ACTIVE:
        return call.reply(
            t.gettext("Digests are already on. {p}status shows when the next one goes out.", p=p)
        )
    reason = subscriber.status_reason
    resumed = resume_subscriber(call.db, subscriber.address)
    schedule, next_one = describe_schedule(resumed, t), next_text(call, resumed)
    if reason and reason != PAUSED_BY_CHAT:
        return call.reply(
            t.gettext(
                "Digests are on again (they were paused because: {why}). They go out {schedule}; {next}. "
                "Papers announced from now on are collected.",
                why=reason_text(t, reason),
                schedule=schedule,
                next=next_one,
            )
        )
    return call.reply(
        t.gettext(
            "Digests are on again. They go out {schedule}; {next}. "
            "Papers announced from now on are collected.",
            schedule=schedule,
            next=next_one,
        )
    )


def status(call: Call) -> Reply:
    """``status``: the subscription, the next digest, and the sources' health in one line."""
    t, p = call.t, call.p
    subscriber = call.subscriber()
    sources = source_line(call.db, call.settings, call.now, HEALTH_SOURCES, t)
    if subscriber is None:
        return call.reply(
            t.gettext("{Place} has no subscription yet: send {p}start.", Place=call.capital_place, p=p),
            t.gettext("Sources — {sources}", sources=sources),
            error=Problem.NOT_SUBSCRIBED,
        )
    # Learned recommendations wait in the ledger like any match; the line says how many of the waiting
    # ones they are, and only when there are some.
    counts = subscription_status(call.db, subscriber.id or 0)
    follows, waiting, recommended = counts.follows, counts.waiting, counts.recommended
    active = subscriber.status == SubscriberStatus.ACTIVE
    state = state_text(t, subscriber.status)
    if subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason == PAUSED_BY_CHAT:
        state = t.gettext("paused by the chat")
    elif subscriber.status == SubscriberStatus.PAUSED:
        state = t.gettext(
            "paused after a failed delivery: {why}", why=reason_text(t, subscriber.status_reason)
        )
    hints = [t.gettext("{p}follows lists the follows", p=p)]
    if waiting and active:
        hints.append(t.gettext("{p}digest now sends what is waiting", p=p))
    if not active:
        hints.append(t.gettext("{p}resume restarts digests", p=p))
    return call.reply(
        t.gettext("Subscription {address}: {state}", address=subscriber.address, state=state),
        t.gettext(
            "Digest: {schedule}; {next}",
            schedule=describe_schedule(subscriber, t),
            next=next_text(call, subscriber),
        ),
        t.gettext(
            "Follows: {follows} · matches waiting: {waiting}, {recommended} of them recommended",
            follows=follows,
            waiting=waiting,
            recommended=recommended,
        )
        if recommended
        else t.gettext("Follows: {follows} · matches waiting: {waiting}", follows=follows, waiting=waiting),
        t.gettext("Sources — {sources}", sources=sources),
        t.gettext("{hints}.", hints=t.gettext("; ").join(hints)),
    )


__all__ = ["clock", "digest", "digest_now", "heartbeat", "next_text", "pause", "resume", "status", "timezone"]


def start(call: Call) -> Reply:
    """``start``: set the chat up with the default schedule (admins only in groups) and say what next."""
    t, p = call.t, call.p
    existing = call.subscriber()
    if existing is not None:
        count = len(subscribers.follows_of(call.db, existing.id or 0))
        note = call.inactive_note(existing)
        if _failed_delivery(existing) and call.ctx.can_change:
            # Telegram sends /start when someone unblocks the bot: the chat works again, so resume.
            note = t.gettext(
                "Digests were paused ({why}); they are on again.", why=reason_text(t, existing.status_reason)
            )
            existing = resume_subscriber(call.db, existing.address)
        return call.reply(
            t.ngettext(
                "Welcome back. {Place} follows {n} query; digests go out {schedule}.",
                "Welcome back. {Place} follows {n} queries; digests go out {schedule}.",
                count,
                Place=call.capital_place,
                schedule=describe_schedule(existing, t),
            ),
            note,
            t.gettext("{p}follows lists them, {p}follow QUERY adds one, {p}help shows all commands.", p=p),
        )
    if not call.ctx.can_change:
        return call.reply(
            t.gettext(
                "PaperTrail is not set up in {place} yet, and only its admins can set it up: "
                "ask one to send {p}start.",
                place=call.place,
                p=p,
            ),
            error=Problem.NOT_ALLOWED,
        )
    subscriber = call.ensure_subscriber()
    name = cut(call.ctx.chat_name, 60)
    schedule = describe_schedule(subscriber, t)
    welcome = (
        t.gettext(
            "Welcome to PaperTrail, {name}! New arXiv papers matching {place}'s follows will arrive in a "
            "digest {schedule}.",
            name=name,
            place=call.place,
            schedule=schedule,
        )
        if name
        else t.gettext(
            "Welcome to PaperTrail! New arXiv papers matching {place}'s follows will arrive in a digest "
            "{schedule}.",
            place=call.place,
            schedule=schedule,
        )
    )
    return call.reply(
        welcome,
        t.gettext(
            'Next, follow something: {p}follow cat:cs.DC or {p}follow au:"Zeng Li". '
            "{p}try QUERY shows what a query would have matched lately; {p}help lists all commands.",
            p=p,
        ),
        suggestions=("help follow", "try cat:cs.DC"),
    )


def _failed_delivery(subscriber: Subscriber) -> bool:
    """Paused by the ledger after a permanent delivery failure (not by the chat's own ``pause``)."""
    return subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason != PAUSED_BY_CHAT
