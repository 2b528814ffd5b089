"""Matches by query, then by subscriber: query_match; match.reasons as data (per follow: field, term);
the redundant index on match.subscriber_id dropped; follow.canonical indexed

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

``query_match`` holds one row per (version, distinct follow query) that matching found, until it is fanned
out to the followers' Match rows (core.follows.fanout); ``follow.canonical`` is indexed for that join.

Match rows written before this revision hold English phrases (``title: "policy lag"``, ``author Zeng
Li``, ``newsletter dc-weekly: category cs.DC``). They are read back by their fixed prefixes here, once;
the code never parses a reason again. Each becomes one hit ``{"reasons": [{"field", "term"}]}`` (with
``"newsletter"`` for a member's copy); the follow of an old reason is unknown (the old rows merged
reasons across follows), so converted hits name none. Rows are converted in pages of 2,000 by id.

``ix_match_subscriber_id`` goes: the unique (subscriber_id, version_id) index answers every look-up by
subscriber, and each index is paid by every inserted match.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# The English forms core.reasons gives each field, most specific prefix first.
_PREFIXES = (
    ("title: ", "title"),
    ("abstract: ", "abstract"),
    ("author ", "author"),
    ("category ", "category"),
    ("paper ", "paper"),
)
_NEWSLETTER = re.compile(r"newsletter ([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:: (.*))?$", re.DOTALL)
_PAGE = 2000


def _hit(text: str) -> dict[str, Any]:
    """One old English reason as a stored hit."""
    found = _NEWSLETTER.match(text)
    if found and found[2] is None:
        return {"newsletter": found[1], "reasons": []}
    hit: dict[str, Any] = {}
    if found:
        hit["newsletter"], text = found[1], found[2]
    for prefix, field in _PREFIXES:
        if text.startswith(prefix):
            hit["reasons"] = [{"field": field, "term": text[len(prefix) :]}]
            return hit
    # A phrase of no known kind: shown whole, as the old digests showed it.
    hit["reasons"] = [{"field": "paper", "term": text}]
    return hit


def _english(hit: dict[str, Any]) -> list[str]:
    """A stored hit as the old English reasons."""
    forms = {"title": "title: ", "abstract": "abstract: ", "author": "author ", "category": "category "}
    newsletter = hit.get("newsletter")
    if newsletter and not hit.get("reasons"):
        return [f"newsletter {newsletter}"]
    texts = [forms.get(r["field"], "paper ") + str(r["term"]) for r in hit.get("reasons") or []]
    return [f"newsletter {newsletter}: {t}" for t in texts] if newsletter else texts


def _convert(change: Callable[[list[Any]], list[Any]]) -> None:
    bind = op.get_bind()
    table = sa.table("match", sa.column("id", sa.Integer()), sa.column("reasons", sa.JSON()))
    last = 0
    while True:
        rows = bind.execute(
            sa.select(table.c.id, table.c.reasons).where(table.c.id > last).order_by(table.c.id).limit(_PAGE)
        ).all()
        if not rows:
            return
        updates = []
        for row_id, stored in rows:
            reasons = json.loads(stored) if isinstance(stored, str) else stored
            updates.append({"row_id": row_id, "new": change(reasons or [])})
        bind.execute(
            table.update().where(table.c.id == sa.bindparam("row_id")).values(reasons=sa.bindparam("new")),
            updates,
        )
        last = rows[-1][0]


def upgrade() -> None:
    op.create_table(
        "query_match",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("canonical", sa.Text(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["version.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("version_id", "canonical", name="uq_query_match_version_query"),
    )
    with op.batch_alter_table("follow", schema=None) as batch_op:
        batch_op.create_index("ix_follow_canonical", ["canonical"], unique=False)
    _convert(lambda old: [_hit(item) if isinstance(item, str) else item for item in old])
    with op.batch_alter_table("match", schema=None) as batch_op:
        batch_op.drop_index("ix_match_subscriber_id")


def downgrade() -> None:
    with op.batch_alter_table("match", schema=None) as batch_op:
        batch_op.create_index("ix_match_subscriber_id", ["subscriber_id"], unique=False)
    _convert(
        lambda new: [text for hit in new for text in (_english(hit) if isinstance(hit, dict) else [hit])]
    )
    with op.batch_alter_table("follow", schema=None) as batch_op:
        batch_op.drop_index("ix_follow_canonical")
    op.drop_table("query_match")
