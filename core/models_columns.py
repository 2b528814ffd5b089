"""The column types every table module of ``core.models`` shares: aware UTC timestamps and JSON lists.

Every timestamp is stored and returned as a timezone-aware UTC datetime on SQLite and PostgreSQL alike
(see :class:`UTCDateTime`); :func:`utc_field` and :func:`json_field` declare such columns on a table.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A DateTime that refuses naive values and always hands back aware UTC datetimes.

    SQLite has no time zones and returns naive values; PostgreSQL returns the session's zone. Converting
    at this one boundary means no other code has to care which database it runs on.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} would be ambiguous; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        # SQLite stores text; keep it naive-UTC so string comparison orders correctly.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_field(**kwargs: Any) -> Any:
    """A :class:`UTCDateTime` column; ``kwargs`` go to ``sqlmodel.Field``."""
    return Field(sa_type=UTCDateTime, **kwargs)


def json_field(**kwargs: Any) -> Any:
    """A JSON column (lists of authors, categories, reasons); ``kwargs`` go to ``sqlmodel.Field``."""
    return Field(sa_type=sa.JSON, **kwargs)
