"""The SQL of AI guides: which versions still need one, storing one, and counting for the daily cap.

``core.guides.guide_records`` (:class:`GuideStore`): the store's ORM session (``db.session()``), one
transaction per method. One guide per version and language, enforced by a
unique constraint: two processes making the same guide at once store it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Db
from core.guides.prompt import GuideSubject
from core.languages import DEFAULT_LANGUAGE, LANGUAGES, check_language
from core.models import (
    CommunityPickRow,
    GuideFailureRow,
    GuideRow,
    Match,
    Subscriber,
    SubscriberStatus,
    Version,
)
from core.papers.revisions import changes_of
from core.values import Guide

_IN_SLICE = 5000


# Guides.
def guides_for(db: Db, version_ids: Sequence[int], language: str) -> dict[int, Guide]:
    """The stored guides of these versions in ``language``, keyed by version id."""
    ids = list(version_ids)
    rows: list[GuideRow] = []
    with db.session() as session:
        # In slices: a worker's batch can name tens of thousands of versions, more than SQLite binds.
        for start in range(0, len(ids), _IN_SLICE):
            rows += session.exec(
                select(GuideRow).where(
                    col(GuideRow.version_id).in_(ids[start : start + _IN_SLICE]),
                    col(GuideRow.language) == language,
                )
            ).all()
    return {row.version_id: Guide(row.tldr, tuple(row.contributions), row.changes) for row in rows}


def save_guide(db: Db, version_id: int, language: str, guide: Guide, *, model: str, now: datetime) -> bool:
    """Store a guide; False when this version already has one in this language (it is kept)."""
    check_language(language)
    row = GuideRow(
        version_id=version_id,
        language=language,
        tldr=guide.tldr,
        contributions=list(guide.contributions),
        changes=guide.changes,
        model=model[:255],
        created_at=now,
    )
    try:
        with db.session() as session:
            session.add(row)
    except sa.exc.IntegrityError:
        return False  # made at the same time by another process: one guide per version and language
    return True


def record_guide_failure(
    db: Db, version_id: int, language: str, reason: str, *, retryable: bool, now: datetime
) -> None:
    """Remember a failed attempt: it counts against the daily cap; garbage answers lead to giving up."""
    with db.session() as session:
        session.add(
            GuideFailureRow(
                version_id=version_id,
                language=language,
                reason=reason[:2000],
                retryable=retryable,
                failed_at=now,
            )
        )


def count_failures_since(db: Db, since: datetime) -> int:
    """Failed guide attempts (any language) at or after ``since``."""
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.count())
                .select_from(GuideFailureRow)
                .where(col(GuideFailureRow.failed_at) >= since)
            ).scalar_one()
        )


def count_made_since(db: Db, since: datetime) -> int:
    """Guides made (any language) at or after ``since``: what the daily cap counts."""
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.count()).select_from(GuideRow).where(col(GuideRow.created_at) >= since)
            ).scalar_one()
        )


def count_guided_versions_since(db: Db, since: datetime) -> int:
    """Versions that got their first guide (in any language) at or after ``since``: "AI guides: +N".

    The window's guides through the index on ``created_at``, less the versions that already had one
    before it (through the index on ``version_id``): what it reads is the window's guides, not every
    guide ever made (a grouping of the whole table, as this was counted before the maintained totals).
    """
    earlier = sa.orm.aliased(GuideRow)
    with db.session() as session:
        return int(
            session.execute(
                sa.select(sa.func.count(sa.distinct(col(GuideRow.version_id)))).where(
                    col(GuideRow.created_at) >= since,
                    ~sa.exists().where(
                        col(earlier.version_id) == col(GuideRow.version_id),
                        col(earlier.created_at) < since,
                    ),
                )
            ).scalar_one()
        )


def languages_in_use(db: Db, default_language: str = DEFAULT_LANGUAGE) -> list[str]:
    """``default_language`` (the operator's, what readers without a language read) first, then every
    other language an active subscriber chose, in LANGUAGES order."""
    check_language(default_language)
    with db.session() as session:
        chosen = session.execute(
            sa.select(col(Subscriber.language))
            .where(col(Subscriber.status) == SubscriberStatus.ACTIVE, col(Subscriber.language).is_not(None))
            .distinct()
        ).scalars()
        wanted = {default_language, *chosen}
    # The default first: the daily cap is shared, and most readers never choose a language.
    others = [code for code in LANGUAGES if code in wanted and code != default_language]
    return [default_language, *others]


def versions_needing_guides(
    db: Db,
    language: str,
    limit: int,
    *,
    since: datetime | None = None,
    give_up_after: int = 0,
    default_language: str = DEFAULT_LANGUAGE,
) -> list[GuideSubject]:
    """News versions that matched a follow or were picked by a community source, with no guide yet.

    Newest first; ``since`` leaves out versions first seen before it (no guides for old news);
    ``give_up_after`` (when positive) leaves out versions with that many failures that asking again
    cannot help (the model answered garbage) in this language. A subscriber without a language reads
    ``default_language`` (the operator's).
    """
    check_language(language)
    check_language(default_language)
    if limit <= 0:
        return []
    # Guides are made in the language of the readers they are for: a version matched only for English
    # readers gets no Chinese guide. Community picks are for the status page: every language in use.
    matched = sa.exists().where(
        col(Match.version_id) == col(Version.id),
        col(Match.subscriber_id) == col(Subscriber.id),
        sa.func.coalesce(col(Subscriber.language), default_language) == language,
    )
    picked = sa.and_(
        sa.exists().where(col(CommunityPickRow.paper_id) == col(Version.paper_id)),
        sa.literal(language in languages_in_use(db, default_language)),
    )
    guided = sa.exists().where(
        col(GuideRow.version_id) == col(Version.id), col(GuideRow.language) == language
    )
    query = select(Version).where(col(Version.news).is_(True), sa.or_(matched, picked), sa.not_(guided))
    if give_up_after > 0:
        hopeless = (
            sa.select(sa.func.count())
            .select_from(GuideFailureRow)
            .where(
                col(GuideFailureRow.version_id) == col(Version.id),
                col(GuideFailureRow.language) == language,
                col(GuideFailureRow.retryable).is_(False),
            )
            .scalar_subquery()
        )
        query = query.where(hopeless < give_up_after)
    if since is not None:
        query = query.where(col(Version.first_seen_at) >= since)
    with db.session() as session:
        versions = list(session.exec(query.order_by(col(Version.id).desc()).limit(limit)))
        changed = changes_of(session.connection(), [(v.paper_id, v.number) for v in versions])
    return [
        GuideSubject(
            version_id=v.id or 0,
            paper_id=v.paper_id,
            number=v.number,
            title=v.title,
            abstract=v.abstract,
            changed=changed[(v.paper_id, v.number)],
        )
        for v in versions
    ]
