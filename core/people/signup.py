"""Self-service email sign-up with double opt-in.

Someone gives an address and follows (the web form, ``papertrail subscribe``); PaperTrail stores them as a
*pending* sign-up of an unconfirmed subscriber and mails a signed confirmation link. Until the link's page
is confirmed nothing is matched or sent to that address: an address typed by someone else never receives a
digest. An address that is already subscribed gets its manage link instead, so the form never reveals who
is subscribed. Addresses an operator adds with ``papertrail follow`` count as confirmed, as before.

A link confirms exactly the sign-up it was mailed for: its token signs the address together
with the pending sign-up's *nonce*, a random value drawn each time a sign-up is recorded. A second sign-up
for a pending address either changes nothing (within :data:`RESEND_AFTER` of the last mail to it: refused,
so the owner's link still confirms what it showed) or *replaces* the pending sign-up, draws a new nonce and
mails a new link; the older link then no longer confirms anything. So nobody can alter what a link confirms
without a new mail reaching the address's owner, who sees the follows on the confirmation page first.

The limits per client and per hour that keep the form from being a mail relay are in
:mod:`core.people.signup_limits`; the mails carry no text anyone submitted (:mod:`papertrail.service.signup`).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from core.channel import channel_of, normalise_address
from core.db import Database
from core.follows import subscriber_records
from core.follows.query import parse
from core.languages import N_, Phrase, Refusal, check_language, normalize_language
from core.models import Newsletter, Subscriber, SubscriberStatus, utcnow
from core.people import newsletters, signup_records, tokens
from core.people.signup_records import Claim, PendingContent, PendingView
from core.schedule import parse_schedule, zone

# No second sign-up mail (confirmation or manage link) goes to one address within this time, and a
# pending sign-up cannot be replaced within it: one form cannot flood a stranger's mailbox, nor change
# what the owner's fresh link confirms.
RESEND_AFTER = timedelta(minutes=10)
# Follows one sign-up may carry.
MAX_FOLLOWS = 20

__all__ = [
    "MAX_FOLLOWS",
    "RESEND_AFTER",
    "SignupChanged",
    "SignupOutcome",
    "SignupRequest",
    "SignupState",
    "confirm",
    "confirm_token",
    "mail_not_sent",
    "pending_sign_up",
    "prepare",
    "record",
    "sign_up",
]


class SignupState(StrEnum):
    """What a sign-up led to, and so which mail (if any) goes out."""

    CONFIRM = "confirm"  # a pending sign-up was recorded: its confirmation mail is due
    THROTTLED = "throttled"  # a sign-up mail went to the address less than RESEND_AFTER ago: nothing changed
    SUBSCRIBED = "subscribed"  # the address is subscribed already: its manage link is due


class SignupChanged(LookupError):
    """The link's sign-up was replaced by a later one (whose mail has the link that confirms it now)."""

    def __init__(self) -> None:
        super().__init__(
            "this link belongs to a sign-up that a later one replaced; use the newest mail's link"
        )


@dataclass(frozen=True, slots=True)
class SignupRequest:
    """A sign-up that passed every check, not yet recorded (see :func:`prepare`)."""

    address: str
    follows: tuple[tuple[str, str], ...]  # (query as written, its normal form), one per normal form
    newsletter: Newsletter | None
    timezone: str
    schedule: str  # the schedule's normal spelling (``daily 08:00``)
    language: str | None


@dataclass(frozen=True, slots=True)
class SignupOutcome:
    """The subscriber the sign-up concerns and what to mail it.

    ``follows`` and ``newsletters`` count what the pending sign-up holds (for the confirmation mail, which
    names no follow: see :mod:`papertrail.service.signup`); ``sent_at`` is when its mail was claimed.
    """

    subscriber: Subscriber
    state: SignupState
    follows: int = 0
    newsletters: int = 0
    sent_at: datetime | None = None


def prepare(
    db: Database,
    address: str,
    queries: Sequence[str],
    *,
    timezone: str,
    schedule: str,
    newsletter: str | None = None,
    language: str | None = None,
) -> SignupRequest:
    """Check a sign-up without recording it; raises ValueError (a Refusal), LookupError (no such newsletter)
    or QueryError for bad input. Reads the newsletters, writes nothing.

    Only email addresses sign up this way: chats subscribe themselves with their bot's ``/start``. With
    ``newsletter`` the address also becomes a member of that newsletter (follows may then be empty).
    ``language`` (``en``, ``zh`` or a regional code such as ``zh-CN``; the page's language on the web form)
    becomes the pending sign-up's language, in which its confirmation mail and digests are worded.
    """
    address = normalise_address(address)
    if not channel_of(address).confirms_by_mail:
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
    follows: dict[str, str] = {}
    for text in cleaned:
        follows.setdefault(parse(text).canonical(), text)
    joined = newsletters.find(db, newsletter) if newsletter else None
    zone(timezone)
    spelled = parse_schedule(schedule).text
    return SignupRequest(
        address,
        tuple((text, canonical) for canonical, text in follows.items()),
        joined,
        timezone,
        spelled,
        _language(language),
    )


def record(db: Database, request: SignupRequest, *, now: datetime | None = None) -> SignupOutcome:
    """Record a checked sign-up (one transaction) and say which mail is due.

    A new address becomes a pending sign-up. A pending address's sign-up is *replaced* (follows, newsletter,
    schedule, timezone and language become this request's, a new nonce is drawn, a new mail is due) unless
    a sign-up mail went to it less than :data:`RESEND_AFTER` ago: then nothing changes (THROTTLED), and the
    link in that mail still confirms what it showed. An address that is subscribed already is not changed
    at all (whoever typed it may not be its owner); its owner gets the manage link, at most once per
    :data:`RESEND_AFTER`.
    """
    now = now or utcnow()
    joined = request.newsletter
    content = PendingContent(
        follows=request.follows,
        newsletter_id=joined.id if joined is not None else None,
        timezone=request.timezone,
        schedule=request.schedule,
        language=request.language,
    )
    claim, subscriber = signup_records.record(
        db, request.address, content, nonce=secrets.token_urlsafe(16), now=now, resend_after=RESEND_AFTER
    )
    if claim == Claim.THROTTLED:
        return SignupOutcome(subscriber, SignupState.THROTTLED)
    if claim == Claim.SUBSCRIBED:
        return SignupOutcome(subscriber, SignupState.SUBSCRIBED, sent_at=now)
    return SignupOutcome(
        subscriber,
        SignupState.CONFIRM,
        follows=len(request.follows),
        newsletters=int(joined is not None),
        sent_at=now,
    )


def sign_up(
    db: Database,
    address: str,
    queries: Sequence[str],
    *,
    timezone: str,
    schedule: str,
    newsletter: str | None = None,
    now: datetime | None = None,
    language: str | None = None,
) -> SignupOutcome:
    """Check and record a sign-up (:func:`prepare`, then :func:`record`); the errors are prepare's."""
    request = prepare(
        db,
        address,
        queries,
        timezone=timezone,
        schedule=schedule,
        newsletter=newsletter,
        language=language,
    )
    return record(db, request, now=now)


def mail_not_sent(db: Database, outcome: SignupOutcome) -> None:
    """The outcome's mail did not go out: let the next sign-up of the address mail it at once (its pending
    sign-up stays as recorded; the new sign-up replaces it)."""
    if outcome.sent_at is not None and outcome.subscriber.id is not None:
        signup_records.release(db, outcome.subscriber.id, outcome.sent_at)


def _language(code: str | None) -> str | None:
    """One of core.languages.LANGUAGES for a sign-up's language code, None for none; ValueError for
    others."""
    if code is None or not code.strip():
        return None
    return normalize_language(code) or check_language(code.strip())


def confirm_token(key: str, subscriber: Subscriber) -> str:
    """The signed token of the link that confirms ``subscriber``'s pending sign-up (and no later one)."""
    if not subscriber.confirm_nonce:
        raise ValueError(f"{subscriber.address} has no pending sign-up to confirm")
    return tokens.sign(
        key, tokens.CONFIRM, tokens.confirm_subject(subscriber.address, subscriber.confirm_nonce)
    )


def _verify(key: str, token: str) -> tuple[str, str]:
    return tokens.split_confirm(tokens.verify(key, tokens.CONFIRM, token))


def pending_sign_up(db: Database, key: str, token: str) -> tuple[Subscriber, PendingView | None]:
    """What a confirmation link would confirm, for its page: the address's subscriber and the pending
    sign-up the link was mailed for.

    The view is None when the address is no longer waiting for confirmation (confirmed already, or
    unsubscribed since): the link then confirms nothing new. Raises tokens.InvalidToken, LookupError (no
    such address) or :class:`SignupChanged` (a later sign-up replaced this one).
    """
    address, nonce = _verify(key, token)
    view = signup_records.pending(db, address, nonce)
    if view is not None:
        return view.subscriber, view
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None:
        raise LookupError(f"no sign-up for {address} any more; sign up again")
    if subscriber.status == SubscriberStatus.UNCONFIRMED:
        raise SignupChanged()
    return subscriber, None


def confirm(db: Database, key: str, token: str) -> Subscriber:
    """Activate the pending sign-up a confirmation token names; raises tokens.InvalidToken, LookupError,
    or :class:`SignupChanged` when a later sign-up replaced the one the link was mailed for.

    The activation is conditional on the link's nonce in the database, so it confirms exactly the sign-up
    the link's page showed, even against a sign-up recorded at the same moment. Confirming twice is
    harmless; a subscriber that unsubscribed or was paused stays as it is (the link confirms an address, it
    does not override a later decision).
    """
    address, nonce = _verify(key, token)
    activated = signup_records.activate(db, address, nonce)
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"no sign-up for {address} any more; sign up again")
    if not activated and subscriber.status == SubscriberStatus.UNCONFIRMED:
        raise SignupChanged()
    return subscriber
