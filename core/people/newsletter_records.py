"""The newsletters' SQL: defining them, membership, and opening an issue with its fan-out to the members.

``newsletter_records.all_newsletters`` (:class:`NewsletterStore`): the store's ORM session
(``db.session()``), one transaction per method, with Core ``insert ... select`` for an issue's fan-out. A
newsletter's follows and schedule live on its own hidden subscriber (``newsletter:NAME``), so matching costs
the same whatever the number of members. An
*issue* takes that subscriber's unassigned matches into one digest recorded as ``sent`` on the channel
``newsletter`` (the record of the issue), and in the same transaction copies them, as instant matches,
to every active member that has no match for the version yet. From there the members' ordinary digests
deliver them: the ledger's rules (one match per subscriber and version, claimed once, sent once) hold per
member, each through their own channel with their own unsubscribe link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from core.db import Db
from core.follows.fanout import receives_matches
from core.models import (
    Digest,
    DigestState,
    Follow,
    Match,
    Newsletter,
    NewsletterMember,
    Subscriber,
    SubscriberStatus,
    UTCDateTime,
)
from core.reasons import hit_data, reasons_from_data

# The channel recorded on an issue's digest; no notifier serves it.
ISSUE_CHANNEL = "newsletter"
# Issue versions per copying statement: two bound values each, well below SQLite's parameter cap.
_COPY_CHUNK = 400
# Newsletter names per IN list when titles are read for a batch of digests.
_NAMES_SLICE = 5_000


@dataclass(frozen=True, slots=True)
class NewsletterInfo:
    """A newsletter as ``newsletter list`` and ``show`` print it."""

    newsletter: Newsletter
    subscriber: Subscriber
    follows: tuple[str, ...]
    members: int
    active_members: int
    last_issue_at: datetime | None
    last_issue_items: int
    issues: int


@dataclass(frozen=True, slots=True)
class Issue:
    """What opening one issue did: its digest, its items, and the copies made for the members."""

    newsletter: str
    digest_id: int
    items: int
    copies: int


# Newsletters and their issues.
def create_newsletter(
    db: Db,
    name: str,
    title: str,
    *,
    address: str,
    follows: Sequence[tuple[str, str]],
    timezone: str,
    schedule: str,
    now: datetime,
) -> Newsletter:
    """Create a newsletter, its hidden active subscriber and its follows (``(query, canonical)``).

    One transaction. Raises ValueError when the name is taken.
    """
    with db.session() as session:
        if session.exec(select(Newsletter).where(col(Newsletter.name) == name)).first() is not None:
            raise ValueError(f"a newsletter named {name!r} exists already; `papertrail newsletter list`")
        subscriber = session.exec(select(Subscriber).where(col(Subscriber.address) == address)).first()
        if subscriber is None:
            subscriber = Subscriber(address=address, timezone=timezone, schedule=schedule, created_at=now)
        subscriber.status, subscriber.timezone, subscriber.schedule = (
            SubscriberStatus.ACTIVE,
            timezone,
            schedule,
        )
        session.add(subscriber)
        session.flush()
        assert subscriber.id is not None
        known = set(session.exec(select(Follow.canonical).where(col(Follow.subscriber_id) == subscriber.id)))
        for query, canonical in follows:
            if canonical not in known:
                known.add(canonical)
                session.add(
                    Follow(subscriber_id=subscriber.id, query=query, canonical=canonical, created_at=now)
                )
        newsletter = Newsletter(name=name, title=title, subscriber_id=subscriber.id, created_at=now)
        session.add(newsletter)
        session.flush()
        return newsletter


def get_newsletter(db: Db, name: str) -> Newsletter | None:
    """The newsletter with this name, if any."""
    with db.session() as session:
        return session.exec(select(Newsletter).where(col(Newsletter.name) == name)).first()


def newsletter_titles(db: Db, names: Sequence[str]) -> dict[str, str]:
    """Name -> title of the newsletters among ``names`` that exist: one query for a worker's batch."""
    titles: dict[str, str] = {}
    with db.session() as session:
        # In slices like every IN list of the ledger (names come from items, so there are few).
        for start in range(0, len(names), _NAMES_SLICE):
            rows = session.execute(
                sa.select(col(Newsletter.name), col(Newsletter.title)).where(
                    col(Newsletter.name).in_(list(names[start : start + _NAMES_SLICE]))
                )
            )
            titles.update((str(name), str(title)) for name, title in rows)
    return titles


def all_newsletters(db: Db) -> list[Newsletter]:
    """Every newsletter, by name."""
    with db.session() as session:
        return list(session.exec(select(Newsletter).order_by(col(Newsletter.name))))


def newsletter_info(db: Db, newsletter_id: int) -> NewsletterInfo:
    """Follows, member counts and the last issue of one newsletter; LookupError when it is gone."""
    with db.session() as session:
        newsletter = session.get(Newsletter, newsletter_id)
        subscriber = session.get(Subscriber, newsletter.subscriber_id) if newsletter else None
        if newsletter is None or subscriber is None:
            raise LookupError(f"newsletter {newsletter_id} does not exist")
        follows = tuple(
            session.exec(
                select(Follow.query)
                .where(col(Follow.subscriber_id) == subscriber.id)
                .order_by(col(Follow.id))
            )
        )
        members = session.execute(
            sa.select(
                sa.func.count(),
                sa.func.sum(sa.case((col(Subscriber.status) == SubscriberStatus.ACTIVE, 1), else_=0)),
            )
            .select_from(NewsletterMember)
            .join(Subscriber, col(Subscriber.id) == col(NewsletterMember.subscriber_id))
            .where(col(NewsletterMember.newsletter_id) == newsletter_id)
        ).one()
        issues = session.exec(
            select(Digest)
            .where(col(Digest.subscriber_id) == subscriber.id, col(Digest.channel) == ISSUE_CHANNEL)
            .order_by(col(Digest.id).desc())
        ).all()
    last = issues[0] if issues else None
    return NewsletterInfo(
        newsletter=newsletter,
        subscriber=subscriber,
        follows=follows,
        members=int(members[0] or 0),
        active_members=int(members[1] or 0),
        last_issue_at=last.sent_at if last else None,
        last_issue_items=last.item_count if last else 0,
        issues=len(issues),
    )


def join_newsletter(db: Db, newsletter_id: int, subscriber_id: int, *, now: datetime) -> bool:
    """Make the subscriber a member; False when it was one already."""
    with db.session() as session:
        found = session.exec(
            select(NewsletterMember.id).where(
                col(NewsletterMember.newsletter_id) == newsletter_id,
                col(NewsletterMember.subscriber_id) == subscriber_id,
            )
        ).first()
        if found is not None:
            return False
        session.add(NewsletterMember(newsletter_id=newsletter_id, subscriber_id=subscriber_id, joined_at=now))
        return True


def leave_newsletter(db: Db, newsletter_id: int, subscriber_id: int) -> bool:
    """End a membership; False when there was none. Copies already made stay the member's matches."""
    with db.session() as session:
        result = session.execute(
            sa.delete(NewsletterMember).where(
                col(NewsletterMember.newsletter_id) == newsletter_id,
                col(NewsletterMember.subscriber_id) == subscriber_id,
            )
        )
        return int(getattr(result, "rowcount", 0)) > 0


def newsletters_of(db: Db, subscriber_id: int) -> list[Newsletter]:
    """The newsletters a subscriber is a member of, by name."""
    with db.session() as session:
        return list(
            session.exec(
                select(Newsletter)
                .join(NewsletterMember, col(NewsletterMember.newsletter_id) == col(Newsletter.id))
                .where(col(NewsletterMember.subscriber_id) == subscriber_id)
                .order_by(col(Newsletter.name))
            )
        )


def newsletters_to_issue(db: Db, address: str | None = None) -> list[tuple[Newsletter, Subscriber]]:
    """Newsletters whose active subscriber has matches in no issue yet (optionally one address)."""
    with db.session() as session:
        unassigned = select(Match.subscriber_id).where(col(Match.digest_id).is_(None)).distinct()
        query = (
            select(Newsletter, Subscriber)
            .join(Subscriber, col(Subscriber.id) == col(Newsletter.subscriber_id))
            .where(
                col(Subscriber.status) == SubscriberStatus.ACTIVE,
                col(Subscriber.id).in_(unassigned),
            )
            .order_by(col(Newsletter.id))
        )
        if address is not None:
            query = query.where(col(Subscriber.address) == address)
        return [(newsletter, subscriber) for newsletter, subscriber in session.exec(query).all()]


def open_issue(db: Db, newsletter_id: int, *, now: datetime) -> Issue | None:
    """Open one issue of a newsletter and copy it to its active members, in one transaction.

    The newsletter's subscriber row is locked (``SKIP LOCKED``: another planner holding it is opening
    this issue already). Its unassigned matches go into a digest recorded as sent on the channel
    ``newsletter``; then one ``INSERT ... SELECT`` (per 400 items) copies them to every active member
    without a match for the version (a paper the member follows personally is not sent twice), as
    instant matches that the members' next digests take. Returns None when there was nothing to issue.
    """
    with db.session() as session:
        newsletter = session.get(Newsletter, newsletter_id)
        if newsletter is None:
            return None
        locked = session.execute(
            sa.select(col(Subscriber.id))
            .where(col(Subscriber.id) == newsletter.subscriber_id)
            .with_for_update(skip_locked=True)
        ).scalar_one_or_none()
        if locked is None:
            return None
        issue_id = session.execute(
            sa.insert(Digest)
            .values(
                subscriber_id=newsletter.subscriber_id,
                created_at=now,
                sent_at=now,
                state=DigestState.SENT,
                channel=ISSUE_CHANNEL,
                item_count=0,
                attempts=0,
                parts_sent=0,
            )
            .returning(col(Digest.id))
        ).scalar_one()
        # The same guard as any digest: a match joins at most one issue, whoever plans.
        session.execute(
            sa.update(Match)
            # "+ 0": through the (subscriber, version) index, not every unassigned match (see
            # ledger_records.open_digests).
            .where(col(Match.subscriber_id) == newsletter.subscriber_id, (col(Match.digest_id) + 0).is_(None))
            .values(digest_id=issue_id)
        )
        rows = session.execute(
            sa.select(col(Match.version_id), col(Match.reasons))
            .where(col(Match.digest_id) == issue_id)
            .order_by(col(Match.id))
        ).all()
        if not rows:
            session.execute(sa.delete(Digest).where(col(Digest.id) == issue_id))
            return None
        session.execute(sa.update(Digest).where(col(Digest.id) == issue_id).values(item_count=len(rows)))
        session.execute(
            sa.update(Subscriber)
            .where(col(Subscriber.id) == newsletter.subscriber_id)
            .values(last_digest_at=now)
        )
        # A member's copy names the newsletter, not the follows of its hidden subscriber.
        name = newsletter.name
        items = [(int(vid), [hit_data(reasons_from_data(stored), newsletter=name)]) for vid, stored in rows]
        copies = sum(
            _copy_to_members(session, newsletter_id, items[start : start + _COPY_CHUNK], now)
            for start in range(0, len(items), _COPY_CHUNK)
        )
        return Issue(newsletter.name, issue_id, len(rows), copies)


def _copy_to_members(
    session: Session, newsletter_id: int, items: list[tuple[int, list[dict[str, Any]]]], now: datetime
) -> int:
    """Insert the issue's items for every active member lacking them; one statement; returns the rows."""
    # A CTE rather than a VALUES alias with column names, which SQLite does not accept.
    issue = (
        sa.values(sa.column("version_id", sa.Integer()), sa.column("reasons", sa.JSON()), name="issue")
        .data(items)
        .cte("issue")
    )
    member = sa.alias(NewsletterMember.__table__, "member")  # type: ignore[attr-defined]
    person = sa.alias(Subscriber.__table__, "person")  # type: ignore[attr-defined]
    held = sa.alias(Match.__table__, "held")  # type: ignore[attr-defined]
    source = (
        sa.select(
            member.c.subscriber_id,
            issue.c.version_id,
            sa.bindparam("no_follows", [], type_=sa.JSON()),
            issue.c.reasons,
            sa.bindparam("created", now, type_=UTCDateTime()),
            sa.true(),
        )
        .select_from(member.join(person, person.c.id == member.c.subscriber_id).join(issue, sa.true()))
        .where(
            member.c.newsletter_id == newsletter_id,
            # Like the fan-out: a member a delivery refusal paused gets the issue held for its resume.
            receives_matches(person.c.status, person.c.refused_at, now),
            ~sa.exists().where(
                held.c.subscriber_id == member.c.subscriber_id, held.c.version_id == issue.c.version_id
            ),
        )
    )
    columns = ["subscriber_id", "version_id", "follow_ids", "reasons", "created_at", "instant"]
    table = Match.__table__  # type: ignore[attr-defined]
    insert: Any
    # A concurrent issue of another newsletter may copy the same version to the same member between the
    # NOT EXISTS and the insert: the unique (subscriber, version) constraint keeps one and skips the other.
    if session.get_bind().dialect.name == "postgresql":
        insert = postgresql.insert(table).from_select(columns, source).on_conflict_do_nothing()
    else:
        insert = sqlite.insert(table).from_select(columns, source).on_conflict_do_nothing()
    # Counted rather than read from rowcount, which SQLite reports as -1 for an INSERT with a CTE.
    versions = [version_id for version_id, _ in items]
    count = sa.select(sa.func.count()).select_from(table).where(table.c.version_id.in_(versions))
    before = int(session.execute(count).scalar_one())
    session.execute(insert)
    return int(session.execute(count).scalar_one()) - before
