"""Frozen value objects that cross the boundaries between ingest, core, notifiers and the shell.

They hold no database state; ``core.models`` maps them to and from SQLModel rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum

from core.reasons import Reason

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
class Guide:
    """An AI guide to one version (core.guides.prompt): plain one-line texts, cleaned and length-capped."""

    tldr: str
    contributions: tuple[str, ...] = ()
    changes: str | None = None


@dataclass(frozen=True, slots=True)
class DigestItem:
    """One version as a reader sees it: in a digest, a webhook's JSON, an Atom entry (:class:`FeedEntry`)
    and a chat's ``try`` reply. The fields a reply has no use for keep their defaults (a query feed's
    entries have no ``reasons``)."""

    arxiv_id: str
    version: int
    title: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    # Why it matched, as data (``core.reasons``); worded when the digest is rendered.
    reasons: tuple[Reason, ...]
    abstract: str = ""
    comment: str | None = None
    # What a revision changed against the newest earlier version PaperTrail stored, e.g.
    # ``("title", "journal-ref")``; empty for new papers and when no earlier version is stored.
    changes: tuple[str, ...] = ()
    # Hugging Face daily-papers upvotes (0 when the paper was not featured): breaks ties in a digest.
    upvotes: int = 0
    journal_ref: str | None = None
    doi: str | None = None
    # The follows that matched and still exist, as (follow id, query), by id: chat digests offer to
    # unfollow them.
    follows: tuple[tuple[int, str], ...] = ()
    # The stored version's id (None for items built outside the store, e.g. benchmarks).
    version_id: int | None = None
    # The machine-generated guide in the reader's language, when one was made in time.
    guide: Guide | None = None
    # A learned recommendation's score (``core.reasons.recommended_score`` of the stored
    # hit),
    # None for a match of the reader's follows. A digest shows recommendations in a section of their own,
    # after the follows' matches, best score first (core.delivery.render).
    recommended: float | None = None

    @property
    def url(self) -> str:
        """The canonical abstract page, without version so it always shows the latest."""
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def is_revision(self) -> bool:
        """True for v2 and later."""
        return self.version > 1


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One version as an Atom entry shows it: what a reader sees of it (``item``, as in a digest) and the
    entry's times, which only a feed says.

    ``arrived_at`` is when PaperTrail first stored the version and ``announced_at`` when arXiv announced it;
    ``sent_at`` (a subscriber's feed only) when the digest that carried it was sent; ``guide_made_at`` when
    ``item.guide`` was made (None without a guide).
    """

    item: DigestItem
    arrived_at: datetime
    announced_at: datetime | None = None
    sent_at: datetime | None = None
    guide_made_at: datetime | None = None

    @property
    def published_at(self) -> datetime:
        """When the version was published: arXiv's announcement, else its arrival."""
        return self.announced_at or self.arrived_at

    @property
    def updated_at(self) -> datetime:
        """When the entry last changed: its arrival (or its digest's sending), or its guide if later."""
        times = [self.sent_at or self.arrived_at]
        if self.guide_made_at is not None:
            times.append(self.guide_made_at)
        return max(times)


@dataclass(frozen=True, slots=True)
class VoteLinks:
    """The signed 👍 and 👎 links of one digest item for its recipient (``core.delivery.render``,
    ``/vote/TOKEN``)."""

    like: str
    dislike: str


def versioned_id(arxiv_id: str, version: int) -> str:
    """``2306.03564v2``: the key of an item's :class:`VoteLinks` in a message."""
    return f"{arxiv_id}v{version}"


@dataclass(frozen=True, slots=True)
class DigestRest:
    """The items of a digest that it will not show (past ``PAPERTRAIL_DIGEST_MAX_ITEMS``), summarised.

    A worker loads in full only the items a digest shows (core.delivery.digests.batch_items); the rest still
    count
    in the subject ("31 new papers, 15 revisions"), in "…and N more" and in which newsletters the digest
    names, so the renderer gets what it needs of them here instead of as items.
    """

    new: int = 0
    revisions: int = 0
    # Names of the newsletters any of them was copied from.
    newsletters: frozenset[str] = frozenset()
    # True when at least one of them is a match of the reader's own follows (not a newsletter's copy).
    own: bool = False
    # Learned recommendations among them (counted apart: ``new`` and ``revisions`` are follows' matches).
    recommended: int = 0

    @property
    def count(self) -> int:
        """How many items are summarised."""
        return self.new + self.revisions + self.recommended


@dataclass(frozen=True, slots=True)
class SourceScan:
    """What one source's runs stored in a receipt's window (core.delivery.receipts)."""

    # The stored source name, e.g. ``arxiv-rss``.
    source: str
    # Finished runs in the window.
    runs: int
    # New versions stored as news (new papers and revisions): what was run against the follows.
    new_versions: int
    # For a source on arXiv's calendar: the distinct mailings its runs stored something from; None for
    # other sources.
    announcements: int | None = None


@dataclass(frozen=True, slots=True)
class Outage:
    """A stretch of a receipt's window in which a source was failing or behind arXiv's calendar."""

    source: str
    # core.papers.health.Health: ``failing`` (runs ended in error) or ``stale`` (served an older mailing).
    state: str
    # From the first failed run of the streak (or when the calendar made the source stale), which may be
    # before the window; to the next run judged healthy, or None when none had come by the window's end.
    start: datetime
    end: datetime | None = None


@dataclass(frozen=True, slots=True)
class Receipt:
    """The scan receipt of one digest: what PaperTrail scanned for its reader between ``since`` (their
    previous digest, capped) and ``until`` (this digest's planning), and how many items matched.

    Computed from the stored source runs by core.delivery.receipts; worded by the renderer in the reader's
    language
    and ``timezone``, and sent as data in the webhook payload.
    """

    since: datetime
    until: datetime
    matched: int
    sources: tuple[SourceScan, ...] = ()
    outages: tuple[Outage, ...] = ()
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class Message:
    """A rendered digest for one channel: what a notifier sends.

    ``text`` is the plain-text digest, always present (terminals, text/plain parts, notification
    fallbacks). ``html`` (Telegram HTML or the email's HTML part) and ``mrkdwn`` (Slack) are present when
    the channel has a template in that format. Each of the three also comes as *blocks*: the same text cut
    between items (header, one block per item, footer), so that an adapter with a length limit can split
    a digest without ever cutting through a tag or an entity; see :func:`core.channel.pack_blocks`.

    ``key`` identifies the digest across retries (webhook receivers deduplicate on it); ``skip_parts``
    tells the adapter how many parts of a split digest an earlier attempt already delivered. ``language``
    is the one the message is worded in (``en`` or ``zh``, core.languages.LANGUAGES): adapters word what
    they add
    themselves (buttons, fallback texts) in it.
    """

    subject: str
    text: str
    html: str | None = None
    item_count: int = 0
    text_blocks: tuple[str, ...] = ()
    html_blocks: tuple[str, ...] = ()
    mrkdwn: str | None = None
    mrkdwn_blocks: tuple[str, ...] = ()
    items: tuple[DigestItem, ...] = ()
    key: str = ""
    skip_parts: int = 0
    # Signed links for this recipient (empty when PAPERTRAIL_SECRET_KEY is not set).
    unsubscribe_url: str = ""
    manage_url: str = ""
    language: str = "en"
    # PAPERTRAIL_PUBLIC_URL as the renderer had it (empty without one): adapters that build links of their
    # own from it (the webhook's bibtex_url, core.papers.citations.bibtex_url).
    public_url: str = ""
    # What PaperTrail scanned for the reader since their previous digest (None: not known, e.g. a digest
    # rendered outside the ledger); every channel shows it, the webhook payload as data.
    receipt: Receipt | None = None
    # A heartbeat: no items, sent on an arXiv announcement day when nothing matched (the reader asked).
    heartbeat: bool = False
    # The signed vote links of the shown items, by versioned id (empty: none made for this channel, or no
    # PAPERTRAIL_SECRET_KEY); the webhook payload's vote_urls.
    vote_links: Mapping[str, VoteLinks] = field(default_factory=dict)

    def votes_of(self, item: DigestItem) -> VoteLinks | None:
        """The vote links of ``item`` for this message's recipient, if it has any."""
        return self.vote_links.get(versioned_id(item.arxiv_id, item.version))


@dataclass(frozen=True, slots=True)
class SendResult:
    """What a notifier reports after the platform accepted a message.

    ``parts`` is how many messages the digest took; ``moved_to`` is a new address when the platform
    moved the recipient (a Telegram group upgraded to a supergroup), so the ledger can follow it.
    """

    platform_id: str | None = None
    parts: int = 1
    moved_to: str | None = None


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


@dataclass(frozen=True, slots=True)
class DayCounts:
    """What arrived on one calendar day (of the zone the store counted in, see
    ``dashboard_records.daily_counts``): new papers (v1), revisions (v2+) and the AI-related
    ones among them."""

    day: date
    new: int = 0
    revisions: int = 0
    ai_related: int = 0

    @property
    def total(self) -> int:
        """New papers plus revisions."""
        return self.new + self.revisions


@dataclass(frozen=True, slots=True)
class ResponseValidator:
    """What a response said for the next conditional GET of its URL: its ETag and Last-Modified.

    The HTTP client makes one from a response and sends it back as If-None-Match / If-Modified-Since; a
    source hands it on in its ``FetchResult``; only the store turns it into a row (``http_validator``)
    and back. ``updated_at`` is when the response arrived (None: the store uses the time it saves).
    """

    url: str
    etag: str | None = None
    last_modified: str | None = None
    updated_at: datetime | None = None
