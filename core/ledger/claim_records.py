"""Workers claiming digests (``SELECT ... FOR UPDATE SKIP LOCKED`` and a lease), and loading the items of
the digests they claimed; ``core.ledger.claim_records``. The ledger's rules are
core.ledger.ledger_records's docstring.

Talks to the database through the store's session (``db.session()``): ORM reads, Core guarded updates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Db
from core.ledger.ledger_items import follow_queries, items_of, slices, upvotes_of
from core.ledger.ledger_records import ClaimedDigest, RankedMatch, rowcount
from core.models import (
    Digest,
    DigestState,
    Match,
    Subscriber,
    Version,
)
from core.papers.revisions import changes_of
from core.reasons import reasons_from_data, recommended_score
from core.values import DigestItem


# Claiming digests, renewing their lease, and loading what they carry.
def claim_digests(
    db: Db,
    now: datetime,
    worker: str,
    *,
    limit: int,
    lease: timedelta,
    address: str | None = None,
    ignore_schedule: bool = False,
    exclude: Sequence[int] = (),
) -> list[ClaimedDigest]:
    """Take up to ``limit`` digests that are due (or whose holder's lease ran out) for ``worker``.

    ``ignore_schedule`` takes pending digests even while they back off (an operator's "send now");
    ``exclude`` skips digests this caller already tried in the same pass.
    """
    due = col(Digest.next_attempt_at) <= now
    if ignore_schedule:
        due = sa.true()
    claimable = sa.or_(
        sa.and_(col(Digest.state) == DigestState.PENDING, due),
        sa.and_(col(Digest.state) == DigestState.SENDING, col(Digest.lease_until) < now),
    )
    query = (
        sa.select(col(Digest.id))
        .where(claimable)
        .order_by(col(Digest.next_attempt_at), col(Digest.id))
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if address is not None:
        query = query.join(Subscriber, col(Subscriber.id) == col(Digest.subscriber_id)).where(
            col(Subscriber.address) == address
        )
    if exclude:
        query = query.where(col(Digest.id).not_in(list(exclude)))
    with db.session() as session:
        ids = [row[0] for row in session.execute(query)]
        if not ids:
            return []
        # The UPDATE repeats the claimable test and keeps only what it changed. SQLite has no row
        # locks and pysqlite runs the SELECT before its transaction takes the write lock, so two
        # workers can select the same digests; the second one's UPDATE then finds them claimed (the
        # write lock orders the two) and takes nothing: a claim is exclusive on every database.
        ids = list(
            session.execute(
                sa.update(Digest)
                .where(col(Digest.id).in_(ids), claimable)
                .values(
                    state=DigestState.SENDING,
                    worker=worker,
                    lease_until=now + lease,
                    attempts=Digest.attempts + 1,
                )
                .returning(col(Digest.id))
                .execution_options(synchronize_session=False)
            ).scalars()
        )
        if not ids:
            return []
        rows = session.execute(
            sa.select(
                col(Digest.id),
                col(Digest.subscriber_id),
                col(Subscriber.address),
                col(Digest.attempts),
                col(Digest.parts_sent),
                col(Subscriber.language),
                col(Digest.created_at),
                col(Subscriber.last_digest_at),
                col(Subscriber.created_at),
                col(Subscriber.timezone),
                col(Digest.item_count),
            )
            .join(Subscriber, col(Subscriber.id) == col(Digest.subscriber_id))
            .where(col(Digest.id).in_(ids))
            .order_by(col(Digest.id))
        ).all()
    return [ClaimedDigest(*row) for row in rows]


def renew_lease(
    db: Db, digest_id: int, *, worker: str, attempts: int, parts_sent: int, until: datetime
) -> bool:
    """Extend ``worker``'s claim on a digest it is still sending and record the parts delivered so far.

    Guarded: only the claim ``worker`` made at attempt ``attempts`` is renewed, so a worker whose lease
    ran out, and whose digest another worker has claimed since, gets False and must stop sending.
    """
    with db.session() as session:
        result = session.execute(
            sa.update(Digest)
            .where(
                col(Digest.id) == digest_id,
                col(Digest.state) == DigestState.SENDING,
                col(Digest.worker) == worker,
                col(Digest.attempts) == attempts,
            )
            .values(lease_until=until, parts_sent=parts_sent)
        )
        return rowcount(result) == 1


def renew_leases(db: Db, held: Mapping[int, int], *, worker: str, until: datetime) -> set[int]:
    """Extend ``worker``'s claims on a batch it still holds (digest id -> the claim's attempt number)
    until ``until``; returns the ids renewed.

    Guarded like :meth:`renew_lease`: a digest whose outcome is recorded, or whose lease ran out and
    that another worker (or a later attempt) claimed since, is left alone and not returned. One
    statement per attempt number in the batch (a retried digest's differs) and slice of ids.
    """
    by_attempt: dict[int, list[int]] = {}
    for digest_id, attempts in held.items():
        by_attempt.setdefault(attempts, []).append(digest_id)
    renewed: set[int] = set()
    with db.session() as session:
        for attempts, digest_ids in by_attempt.items():
            for ids in slices(digest_ids):
                renewed.update(
                    session.execute(
                        sa.update(Digest)
                        .where(
                            col(Digest.id).in_(ids),
                            col(Digest.state) == DigestState.SENDING,
                            col(Digest.worker) == worker,
                            col(Digest.attempts) == attempts,
                        )
                        .values(lease_until=until)
                        .returning(col(Digest.id))
                        .execution_options(synchronize_session=False)
                    ).scalars()
                )
    return renewed


def digest_items(db: Db, digest_id: int) -> list[DigestItem]:
    """The items of one digest, with what each revision changed and Hugging Face upvotes."""
    return digests_items(db, [digest_id]).get(digest_id, [])


def digests_items(db: Db, digest_ids: Sequence[int]) -> dict[int, list[DigestItem]]:
    """The items of several digests at once (a worker's claimed batch), keyed by digest id.

    A fixed number of statements whatever the batch holds (one per slice of ids, see ``IN_SLICE``):
    the matches with their versions, then the follows, upvotes and earlier versions they name.
    """
    with db.session() as session:
        rows: list[tuple[Match, Version]] = []
        for ids in slices(digest_ids):
            rows += session.exec(
                select(Match, Version)
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.digest_id).in_(ids))
            ).all()
        rows.sort(key=lambda row: row[0].id or 0)
        items = items_of(session, rows)
    grouped: dict[int, list[DigestItem]] = {digest_id: [] for digest_id in digest_ids}
    for (match, _), item in zip(rows, items, strict=True):
        grouped[match.digest_id or 0].append(item)
    return grouped


def digests_ranked(db: Db, digest_ids: Sequence[int]) -> dict[int, list[RankedMatch]]:
    """The matches of several digests as :class:`RankedMatch` rows, by digest id, each in match order.

    Plain column reads (no ORM objects, no version texts): one statement per slice of digest ids and
    one per slice of papers for the upvotes, whatever the batch holds. Match order is the order
    :meth:`digests_items` gives the same matches in, so ties in ranking break the same way.
    """
    rows: list[Any] = []  # Core rows: (match id, digest id, version id, paper, number, reasons)
    with db.session() as session:
        for ids in slices(digest_ids):
            rows += session.execute(
                sa.select(
                    col(Match.id),
                    col(Match.digest_id),
                    col(Match.version_id),
                    col(Version.paper_id),
                    col(Version.number),
                    col(Match.reasons),
                )
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.digest_id).in_(ids))
            ).all()
        upvotes = upvotes_of(session, {row[3] for row in rows})
    rows.sort(key=lambda row: int(row[0]))
    grouped: dict[int, list[RankedMatch]] = {digest_id: [] for digest_id in digest_ids}
    for match_id, digest_id, version_id, paper_id, number, reasons in rows:
        grouped[int(digest_id)].append(
            RankedMatch(
                match_id=int(match_id),
                digest_id=int(digest_id),
                version_id=int(version_id),
                arxiv_id=str(paper_id),
                version=int(number),
                reasons=reasons_from_data(reasons),
                upvotes=upvotes.get(paper_id, 0),
                recommended=recommended_score(reasons),
            )
        )
    return grouped


def match_items(db: Db, ranked: Sequence[RankedMatch]) -> dict[int, DigestItem]:
    """Full items for these matches (the ones digests show), keyed by match id.

    The same items :meth:`digests_items` builds for them, read as plain columns: the versions' texts,
    the follows that still exist, and what each revision changed (core.papers.revisions). Reasons and
    upvotes come from the ranked rows, not read again.
    """
    if not ranked:
        return {}
    by_id = {row.match_id: row for row in ranked}
    versions: list[sa.Row[Any]] = []
    with db.session() as session:
        for ids in slices(by_id):
            versions += session.execute(
                sa.select(
                    col(Match.id),
                    col(Match.follow_ids),
                    col(Version.title),
                    col(Version.authors),
                    col(Version.categories),
                    col(Version.abstract),
                    col(Version.comment),
                    col(Version.journal_ref),
                    col(Version.doi),
                )
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.id).in_(ids))
            ).all()
        changed = changes_of(session.connection(), [(row.arxiv_id, row.version) for row in ranked])
        queries = follow_queries(session, {fid for row in versions for fid in row.follow_ids or ()})
    items: dict[int, DigestItem] = {}
    for row in versions:
        match = by_id[int(row.id)]
        follow_ids = row.follow_ids or []
        items[match.match_id] = DigestItem(
            version_id=match.version_id,
            arxiv_id=match.arxiv_id,
            version=match.version,
            title=row.title,
            authors=tuple(row.authors),
            categories=tuple(row.categories),
            reasons=match.reasons,
            abstract=row.abstract,
            comment=row.comment,
            changes=changed[(match.arxiv_id, match.version)],
            upvotes=match.upvotes,
            journal_ref=row.journal_ref,
            doi=row.doi,
            follows=tuple((fid, queries[fid]) for fid in sorted(follow_ids) if fid in queries),
            recommended=match.recommended,
        )
    return items
