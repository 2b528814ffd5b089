"""The tables of learned recommendations (issue 17): votes, imported library entries, trained models.

A reader's 👍/👎 votes (:class:`Vote`) and imported reference library (:class:`LibrarySeed`) are the
liked and disliked papers their taste model (:class:`TasteModelRow`) is trained on; the recommendation
pass scores new versions from :class:`RecommendCursor` on. :class:`LibraryLookup` remembers the arXiv ids
an import asked the arXiv API for in vain, so that importing again does not ask again at once. Import them
from ``core.models``, which registers every table on ``SQLModel.metadata``.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from core.models_columns import utc_field, utcnow


class Vote(SQLModel, table=True):
    """A reader's 👍 (+1) or 👎 (-1) on one version of a paper: a signal of the learned follows (issue 17).

    One vote per subscriber and version; voting again replaces it, and an undo deletes it.
    """

    __tablename__ = "vote"
    __table_args__ = (sa.UniqueConstraint("subscriber_id", "version_id", name="uq_vote_subscriber_version"),)

    id: int | None = Field(default=None, primary_key=True)
    # No index of its own: the unique (subscriber_id, version_id) index serves look-ups by subscriber.
    subscriber_id: int = Field(foreign_key="subscriber.id")
    version_id: int = Field(foreign_key="version.id", index=True)
    value: int
    created_at: datetime = utc_field(default_factory=utcnow)


class LibrarySeed(SQLModel, table=True):
    """One entry of a reader's imported reference library, used as a liked paper (issue 17).

    An entry that resolved to a stored paper points at its version; the others keep the title and abstract
    the file gave. ``key`` (the arXiv id, else ``doi:…``, else ``title:…`` normalised) keeps a re-import
    from adding an entry twice.
    """

    __tablename__ = "library_seed"
    __table_args__ = (sa.UniqueConstraint("subscriber_id", "key", name="uq_library_seed_subscriber_key"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscriber.id")
    key: str = Field(max_length=300)
    version_id: int | None = Field(default=None, foreign_key="version.id", index=True)
    title: str = Field(default="", sa_type=sa.Text)
    abstract: str = Field(default="", sa_type=sa.Text)
    created_at: datetime = utc_field(default_factory=utcnow)


class TasteModelRow(SQLModel, table=True):
    """A subscriber's trained recommendation model (``core.taste.model``), in its compact binary form."""

    __tablename__ = "taste_model"

    subscriber_id: int = Field(foreign_key="subscriber.id", primary_key=True)
    data: bytes = Field(sa_type=sa.LargeBinary)
    positives: int = 0
    negatives: int = 0
    trained_at: datetime = utc_field(default_factory=utcnow)


class RecommendCursor(SQLModel, table=True):
    """How far the recommendation pass has scored: every version with a greater id is still to score.

    One row (id 1): the pass vectorises each new version once for all subscribers' models.
    """

    __tablename__ = "recommend_cursor"

    id: int = Field(default=1, primary_key=True)
    through_version_id: int = 0
    ran_at: datetime | None = utc_field(default=None)


class LibraryLookup(SQLModel, table=True):
    """An arXiv id a library import asked the arXiv API for and did not get, and until when not to ask again.

    ``outcome`` is ``not-found`` (arXiv answered without it) or ``failed`` (the API could not be reached);
    ``core.taste.library_import`` says how long each is remembered. Shared by every process on the
    database, as arXiv's politeness budget is; a row whose ``retry_at`` has passed counts for nothing.
    """

    __tablename__ = "library_lookup"

    arxiv_id: str = Field(primary_key=True, max_length=64)
    outcome: str = Field(max_length=16)
    looked_up_at: datetime = utc_field(default_factory=utcnow)
    retry_at: datetime = utc_field(index=True)
