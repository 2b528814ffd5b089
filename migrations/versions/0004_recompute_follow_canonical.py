"""recompute the normal form of stored follows (the follow language grew: plurals, aliases, names)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Unfollow-by-text and duplicate detection compare normal forms; follows stored under an older grammar
would otherwise not be found. A follow that no longer parses keeps its old form (the matcher skips it
and logs why). If two follows of one subscriber now share a form, the older one stays and the newer is
removed: they would match exactly the same papers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from core.follows.query import QueryError, parse

    bind = op.get_bind()
    follow = sa.table(
        "follow",
        sa.column("id", sa.Integer),
        sa.column("subscriber_id", sa.Integer),
        sa.column("query", sa.Text),
        sa.column("canonical", sa.Text),
    )
    seen: set[tuple[int, str]] = set()
    rows = bind.execute(sa.select(follow.c.id, follow.c.subscriber_id, follow.c.query).order_by(follow.c.id))
    for follow_id, subscriber_id, query in rows.fetchall():
        try:
            canonical = parse(query).canonical()
        except QueryError:
            continue
        if (subscriber_id, canonical) in seen:
            bind.execute(sa.delete(follow).where(follow.c.id == follow_id))
            continue
        seen.add((subscriber_id, canonical))
        bind.execute(sa.update(follow).where(follow.c.id == follow_id).values(canonical=canonical))


def downgrade() -> None:
    pass  # the old normal form cannot be recomputed; the new one is a valid value for older code too
