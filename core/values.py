"""Frozen value objects that cross the boundaries between ingest, core, notifiers and the shell.

They hold no database state; ``core.models`` maps them to and from SQLModel rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum

# An arXiv id without version: new style (0704.0001, 2411.17700) or old style (hep-th/9901001,
# math.GT/0309136). A regular-expression fragment without groups, for the parsers to embed.
ARXIV_ID_PATTERN = r"(?:\d{4}\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})"


class AnnounceType(StrEnum):
    """How arXiv announced a version (``arxiv:announce_type`` in the RSS feed)."""

    NEW = "new"
    CROSS = "cross"
    REPLACE = "replace"
    REPLACE_CROSS = "replace-cross"


@dataclass(frozen=True, slots=True)
class PaperIn:
    """One version of one paper as a source reported it.

    ``arxiv_id`` carries no version suffix (``2411.17700``, ``quant-ph/0201082``); ``version`` is the
    integer after the ``v``. ``categories`` lists the primary category first, as the source gave them.
    ``authors`` are display names with TeX accents already decoded and affiliations removed.
    """

    arxiv_id: str
    version: int
    title: str
    abstract: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    announce_type: AnnounceType = AnnounceType.NEW
    announced_at: datetime | None = None
    comment: str | None = None
    journal_ref: str | None = None
    doi: str | None = None
    license: str | None = None
    source: str = "arxiv-rss"

    @property
    def versioned_id(self) -> str:
        """The id with its version suffix, e.g. ``2411.17700v2``."""
        return f"{self.arxiv_id}v{self.version}"

    @property
    def is_revision(self) -> bool:
        """True for v2 and later: a revision of a known paper rather than a new paper."""
        return self.version > 1


@dataclass(frozen=True, slots=True)
class DigestItem:
    """One matched version as it appears in a digest."""

    arxiv_id: str
    version: int
    title: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    reasons: tuple[str, ...]
    abstract: str = ""
    comment: str | None = None

    @property
    def url(self) -> str:
        """The canonical abstract page, without version so it always shows the latest."""
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def is_revision(self) -> bool:
        """True for v2 and later."""
        return self.version > 1


@dataclass(frozen=True, slots=True)
class Message:
    """A rendered digest for one channel: what a notifier sends."""

    subject: str
    text: str
    html: str | None = None
    item_count: int = 0
    parts: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class SendResult:
    """What a notifier reports after the platform accepted a message."""

    platform_id: str | None = None


@dataclass(frozen=True, slots=True)
class CommunityPick:
    """A paper as a community source (Hugging Face daily papers) featured it on one day.

    It attaches to the arXiv paper ``arxiv_id`` (never a second paper); ``day`` is the daily list it was on.
    """

    arxiv_id: str
    day: date
    title: str
    summary: str
    authors: tuple[str, ...]
    upvotes: int = 0
    comments: int = 0
    published_at: datetime | None = None
    keywords: tuple[str, ...] = ()
    ai_summary: str | None = None
    github_repo: str | None = None
    project_page: str | None = None
    source: str = "hf-daily"
