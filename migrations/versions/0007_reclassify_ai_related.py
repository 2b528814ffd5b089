"""recompute version.ai_related with the rule of core.papers.classify (categories, then title and abstract cues)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

Until now only the categories decided (cs.AI, cs.LG, cs.CL, cs.CV, cs.NE, cs.MA, stat.ML). Now cs.IR and cs.RO
count too, and so does a title that names the field or a method, or an abstract that names a method
(docs/ai-related.md). Every stored version is re-read in id order, BATCH rows at a time (keyset pages, so
memory stays flat however large a backfilled store is), and only the rows whose value changes are written.

The rule is imported, not copied, like 0004 imports the follow grammar: whenever core.papers.classify changes what
counts, add a migration like this one, or stored versions keep the old answer.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

BATCH = 2000
# Say how far it got this often (rows), so a store of millions of versions does not look stuck.
PROGRESS_EVERY = 200_000

log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    from core.papers.classify import is_ai_related

    bind = op.get_bind()
    version = sa.table(
        "version",
        sa.column("id", sa.Integer),
        sa.column("categories", sa.JSON),
        sa.column("title", sa.String),
        sa.column("abstract", sa.Text),
        sa.column("ai_related", sa.Boolean),
    )
    page = (
        sa.select(version.c.id, version.c.categories, version.c.title, version.c.abstract, version.c.ai_related)
        .where(version.c.id > sa.bindparam("after"))
        .order_by(version.c.id)
        .limit(BATCH)
    )
    change = (
        sa.update(version)
        .where(version.c.id == sa.bindparam("version_id"))
        .values(ai_related=sa.bindparam("value"))
    )
    after, seen, changed = 0, 0, 0
    while rows := bind.execute(page, {"after": after}).all():
        # The versions of one paper usually share their text (a snapshot backfill stores the latest
        # metadata for each): classify each distinct text once.
        verdicts: dict[tuple[Any, ...], bool] = {}
        updates = []
        for version_id, categories, title, abstract, stored in rows:
            key = (tuple(categories or ()), title or "", abstract or "")
            value = verdicts.get(key)
            if value is None:
                value = verdicts[key] = is_ai_related(*key)
            if value != bool(stored):
                updates.append({"version_id": version_id, "value": value})
        if updates:
            bind.execute(change, updates)
        after = rows[-1][0]
        changed += len(updates)
        if (seen + len(rows)) // PROGRESS_EVERY > seen // PROGRESS_EVERY:
            log.info("0007: %d versions re-classified so far, %d changed", seen + len(rows), changed)
        seen += len(rows)
    log.info("0007: %d versions re-classified, %d changed", seen, changed)


def downgrade() -> None:
    pass  # the new values are valid for older code too: it only counts them
