"""Self-service email sign-up with double opt-in.

Someone gives an address and follows (the web form, ``papertrail subscribe``); PaperTrail stores them as an
*unconfirmed* subscriber and mails a signed confirmation link. Until the link is followed nothing is
matched or sent to that address: an address typed by someone else never receives a digest. An address
that is already subscribed gets its manage link instead, so the form never reveals who is subscribed.
Addresses an operator adds with ``papertrail follow`` count as confirmed, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from core import newsletters, tokens
from core.delivery import normalise_address, split_address
from core.i18n import N_, Phrase, Refusal, check_language, normalize_language
from core.models import Subscriber, SubscriberStatus, utcnow
from core.query import parse
from core.schedule import parse_schedule, zone
from core.store import Store

# A second sign-up for the same unconfirmed address within this time sends no second mail: one form
# cannot be used to flood a stranger's mailbox.
RESEND_AFTER = timedelta(minutes=10)
# Follows one sign-up may carry.
MAX_FOLLOWS = 20


class SignupState(StrEnum):
    """What a sign-up led to, and so which mail (if any) goes out."""

    CONFIRM = "confirm"  # a confirmation mail is due
    THROTTLED = "throttled"  # one went out less than RESEND_AFTER ago: none now
    SUBSCRIBED = "subscribed"  # the address is subscribed already: its manage link is due


@dataclass(frozen=True, slots=True)
class SignupOutcome:
    """The subscriber the sign-up concerns and what to mail it."""

    subscriber: Subscriber
    state: SignupState
    follows_added: int = 0


def sign_up(
    store: Store,
    address: str,
    queries: Sequence[str],
    *,
    timezone: str,
    schedule: str,
    newsletter: str | None = None,
    now: datetime | None = None,
    language: str | None = None,
) -> SignupOutcome:
    """Record a sign-up; raises ValueError, LookupError (no such newsletter) or QueryError for bad input.

    Only email addresses sign up this way: chats subscribe themselves with their bot's ``/start``. With
    ``newsletter`` the address also becomes a member of that newsletter (follows may then be empty); like
    everything else it receives nothing before it confirms. An address that is subscribed already is not
    made a member: whoever typed it may not be its owner, and the owner gets the manage link instead.

    ``language`` (``en``, ``zh`` or a regional code such as ``zh-CN``; the page's language on the web form)
    becomes the new subscriber's language, in which its confirmation mail and digests are worded; a
    sign-up again before confirming replaces it, like the schedule. A subscribed address keeps its own.
    """
    now = now or utcnow()
    address = normalise_address(address)
    if split_address(address)[0] != "email":
        raise Refusal(
            Phrase(N_("{address} is not an email address"), address=address),
            Phrase(N_("sign up with email:ada@example.org")),
        )
    cleaned = [q.strip() for q in queries if q.strip()]
    if len(cleaned) > MAX_FOLLOWS:
        raise Refusal(
            Phrase(N_("at most {n} follows per sign-up"), n=MAX_FOLLOWS),
            Phrase(N_("add more later from the manage page")),
        )
    parsed = [(text, parse(text)) for text in cleaned]
    joined = newsletters.find(store, newsletter) if newsletter else None
    zone(timezone)
    parse_schedule(schedule)
    chosen = _language(language)

    existing = store.get_subscriber(address)
    if existing is not None and existing.status != SubscriberStatus.UNCONFIRMED:
        # Someone may be probing: say nothing here, mail the owner their manage link.
        return SignupOutcome(existing, SignupState.SUBSCRIBED)
    subscriber, created = store.ensure_subscriber(address, timezone=timezone, schedule=schedule)
    assert subscriber.id is not None
    spoken = {"language": chosen} if chosen is not None else {}
    if created or subscriber.status != SubscriberStatus.UNCONFIRMED:
        subscriber = store.update_subscriber(
            subscriber.id or 0,
            status=SubscriberStatus.UNCONFIRMED,
            status_reason="waiting for confirmation",
            **spoken,
        )
    else:
        subscriber = store.update_subscriber(
            subscriber.id or 0, timezone=timezone, schedule=schedule, **spoken
        )
    added = 0
    for text, query in parsed:
        _, outcome = store.add_follow(subscriber.id or 0, text, query.canonical())
        added += outcome == "added"
    if joined is not None:
        store.join_newsletter(joined.id or 0, subscriber.id or 0, now=now)
    last = subscriber.confirm_sent_at
    if last is not None and now - last < RESEND_AFTER:
        return SignupOutcome(subscriber, SignupState.THROTTLED, added)
    subscriber = store.update_subscriber(subscriber.id or 0, confirm_sent_at=now)
    return SignupOutcome(subscriber, SignupState.CONFIRM, added)


def _language(code: str | None) -> str | None:
    """One of core.i18n.LANGUAGES for a sign-up's language code, None for none; ValueError for others."""
    if code is None or not code.strip():
        return None
    return normalize_language(code) or check_language(code.strip())


def confirm(store: Store, key: str, token: str) -> Subscriber:
    """Activate the subscriber a confirmation token names; raises tokens.InvalidToken or LookupError.

    Confirming twice is harmless; a subscriber that unsubscribed or was paused stays as it is (the link
    confirms an address, it does not override a later decision).
    """
    address = tokens.verify(key, tokens.CONFIRM, token)
    subscriber = store.get_subscriber(address)
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"no sign-up for {address} any more; sign up again")
    if subscriber.status != SubscriberStatus.UNCONFIRMED:
        return subscriber
    return store.update_subscriber(subscriber.id, status=SubscriberStatus.ACTIVE, status_reason=None)
