"""Newsletters: an operator's named set of follows on a schedule, sent to every member.

A newsletter is a hidden active subscriber (``newsletter:NAME``) holding the follows and the schedule,
plus a list of members. New versions are matched once for it, like any subscriber. When its schedule is
due, :func:`issue_due` opens an *issue*: its matches are recorded as one sent digest on the channel
``newsletter`` and copied to each active member (skipping papers the member already has), as instant
matches, so the members' ordinary digests deliver them through their own channels with their own
unsubscribe links. An unconfirmed, paused or unsubscribed member gets no copies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from core.channel import NEWSLETTER_CHANNEL, NEWSLETTER_NAME, normalise_address
from core.db import Database, Db
from core.follows import match_records
from core.follows.query import parse
from core.languages import N_, Listed, Phrase, Worded
from core.models import Newsletter, Subscriber, utcnow
from core.people import newsletter_records
from core.people.newsletter_records import Issue, NewsletterInfo
from core.schedule import parse_schedule, zone

log = logging.getLogger(__name__)

MAX_TITLE = 200


def address_of(name: str) -> str:
    """The hidden subscriber's address of the newsletter ``name``: ``newsletter:NAME``."""
    return f"{NEWSLETTER_CHANNEL}:{name}"


def check_name(name: str) -> str:
    """The name if it is a slug (lowercase letters, digits, dashes); ValueError with a hint otherwise."""
    if not NEWSLETTER_NAME.match(name):
        raise ValueError(
            f"newsletter name {name!r} must be lowercase letters, digits and dashes (at most 64 characters, "
            "not starting or ending with a dash), e.g. ml-weekly"
        )
    return name


def create(
    db: Database,
    name: str,
    title: str,
    queries: Sequence[str],
    *,
    schedule: str,
    timezone: str,
    now: datetime | None = None,
) -> Newsletter:
    """Define a newsletter; raises ValueError (name, title, schedule, timezone) or QueryError (a follow)."""
    check_name(name)
    title = " ".join(title.split())
    if not title or len(title) > MAX_TITLE:
        raise ValueError(f"a newsletter needs a title of 1 to {MAX_TITLE} characters")
    cleaned = [q.strip() for q in queries if q.strip()]
    if not cleaned:
        raise ValueError("a newsletter needs at least one follow: --follow 'cat:cs.LG'")
    parsed = [(text, parse(text).canonical()) for text in cleaned]
    zone(timezone)
    schedule = parse_schedule(schedule).text
    return newsletter_records.create_newsletter(
        db,
        name,
        title,
        address=normalise_address(address_of(name)),
        follows=parsed,
        timezone=timezone,
        schedule=schedule,
        now=now or utcnow(),
    )


class UnknownNewsletter(Worded, LookupError):
    """No newsletter has that name (a LookupError worded for readers)."""


def find(db: Database, name: str) -> Newsletter:
    """The newsletter called ``name``; LookupError naming the existing ones otherwise."""
    found = newsletter_records.get_newsletter(db, name.strip().casefold())
    if found is None:
        names: Listed | Phrase = Listed(n.name for n in newsletter_records.all_newsletters(db)) or Phrase(
            N_("none yet")
        )
        raise UnknownNewsletter(
            Phrase(N_("no newsletter named '{name}'"), name=name),
            Phrase(N_("newsletters: {names}"), names=names),
        )
    return found


def all_newsletters(db: Database) -> list[Newsletter]:
    """Every newsletter, by name."""
    return newsletter_records.all_newsletters(db)


def all_infos(db: Database) -> list[NewsletterInfo]:
    """What ``newsletter list`` prints: every newsletter with its schedule, members and follows."""
    return [newsletter_records.newsletter_info(db, n.id or 0) for n in newsletter_records.all_newsletters(db)]


def named(db: Database, name: str) -> Newsletter | None:
    """The newsletter called ``name`` (already lowercase), None when there is none."""
    return newsletter_records.get_newsletter(db, name)


def newsletters_of(db: Database, subscriber_id: int) -> list[Newsletter]:
    """The newsletters the subscriber is a member of, by name."""
    return newsletter_records.newsletters_of(db, subscriber_id)


def leave_membership(db: Database, newsletter_id: int, subscriber_id: int) -> bool:
    """End the subscriber's membership of the newsletter (by their ids); False when there was none."""
    return newsletter_records.leave_newsletter(db, newsletter_id, subscriber_id)


def info(db: Database, name: str) -> NewsletterInfo:
    """What ``newsletter show`` prints about one newsletter."""
    newsletter = find(db, name)
    return newsletter_records.newsletter_info(db, newsletter.id or 0)


def join(db: Database, name: str, subscriber: Subscriber, *, now: datetime | None = None) -> bool:
    """Make ``subscriber`` a member of the newsletter ``name``; False when it was one already.

    Membership alone sends nothing: only active members get copies of an issue, so an address still
    waiting for its confirmation gets the newsletter once it confirms.
    """
    newsletter = find(db, name)
    if subscriber.address.startswith(f"{NEWSLETTER_CHANNEL}:"):
        raise ValueError("a newsletter cannot be a member of a newsletter")
    return newsletter_records.join_newsletter(db, newsletter.id or 0, subscriber.id or 0, now=now or utcnow())


def leave(db: Database, name: str, subscriber: Subscriber) -> bool:
    """End the membership; False when there was none."""
    newsletter = find(db, name)
    return newsletter_records.leave_newsletter(db, newsletter.id or 0, subscriber.id or 0)


def open_due_issues(
    db: Database,
    *,
    now: datetime,
    due: Callable[[Subscriber, datetime], bool],
    force: bool = False,
    address: str | None = None,
) -> list[Issue]:
    """Fan out what matching found, then open an issue for every newsletter that is due (``due``) and has
    matches (:func:`issue_due`); returns them."""
    # A newsletter's matches are its hidden subscriber's Match rows.
    match_records.expand_matches(db, now=now)
    return issue_due(db, now=now, due=due, force=force, address=address)


def issue_due(
    db: Db,
    *,
    now: datetime,
    due: Callable[[Subscriber, datetime], bool],
    force: bool = False,
    address: str | None = None,
) -> list[Issue]:
    """Open an issue for every newsletter that is due (``due``) and has matches in the ledger; returns them.

    The planner runs this in its first transaction, after the pass's fan-out and before it plans anyone,
    so that the members' copies go into the digests it plans. With ``address`` only that newsletter is
    considered (a member's address opens none).
    """
    issues: list[Issue] = []
    for newsletter, subscriber in newsletter_records.newsletters_to_issue(db, address):
        if not (force or due(subscriber, now)):
            continue
        issue = newsletter_records.open_issue(db, newsletter.id or 0, now=now)
        if issue is not None:
            log.info(
                "newsletter %s: issue of %d item(s), %d copies for its members",
                issue.newsletter,
                issue.items,
                issue.copies,
                extra={"subscriber": subscriber.address, "digest": issue.digest_id},
            )
            issues.append(issue)
    return issues


__all__ = ["address_of", "check_name", "create", "find", "info", "join", "leave"]
