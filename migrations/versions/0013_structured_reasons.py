"""match.reasons as data: each reason a JSON object (field, term, follow, newsletter), not English text

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

Rows written before this revision hold English phrases (``title: "policy lag"``, ``author Zeng Li``,
``newsletter dc-weekly: category cs.DC``). They are read back by their fixed prefixes here, once; the code
never parses a reason again. The follow of an old reason is unknown (the old rows merged reasons across
follows), so converted reasons carry none. Rows are converted in pages of 2,000 by id.
"""

from __future__ import annotations

import json
import re
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


def _structured(text: str) -> dict[str, Any]:
    found = _NEWSLETTER.match(text)
    if found and found[2] is None:
        return {"field": "newsletter", "term": found[1]}
    newsletter = None
    if found:
        newsletter, text = found[1], found[2]
    for prefix, field in _PREFIXES:
        if text.startswith(prefix):
            data: dict[str, Any] = {"field": field, "term": text[len(prefix) :]}
            break
    else:  # a phrase of no known kind: kept whole, as the old digests showed it
        data = {"field": "paper", "term": text}
    if newsletter is not None:
        data["newsletter"] = newsletter
    return data


def _english(data: dict[str, Any]) -> str:
    forms = {"title": "title: ", "abstract": "abstract: ", "author": "author ", "category": "category "}
    if data["field"] == "newsletter":
        return f"newsletter {data['term']}"
    text = forms.get(data["field"], "paper ") + str(data["term"])
    return f"newsletter {data['newsletter']}: {text}" if data.get("newsletter") else text


def _convert(change: Any) -> None:
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
            updates.append({"row_id": row_id, "new": [change(item) for item in reasons or []]})
        bind.execute(
            table.update().where(table.c.id == sa.bindparam("row_id")).values(reasons=sa.bindparam("new")),
            updates,
        )
        last = rows[-1][0]


def upgrade() -> None:
    _convert(lambda item: _structured(item) if isinstance(item, str) else item)


def downgrade() -> None:
    _convert(lambda item: _english(item) if isinstance(item, dict) else item)
