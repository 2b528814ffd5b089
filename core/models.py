"""The SQLModel tables, the column types they share, and mapping a stored version back to a value.

Every timestamp is stored and returned as a timezone-aware UTC datetime on SQLite and PostgreSQL alike
(see :class:`UTCDateTime`); :func:`utc_field` and :func:`json_field` declare such columns on a table.
Lists (authors, categories, reasons) are JSON columns. The frozen values the tables map to (``PaperIn``,
``DigestItem``, ``Message``, …) are ``core.values``'s.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel

from core.values import AnnounceType, DigestItem, PaperIn

__all__ = [
    "CommunityPickRow",
    "DeliveryAlarm",
    "Digest",
    "DigestState",
    "Follow",
    "GuideRow",
    "HttpValidator",
    "LibraryLookup",
    "LibrarySeed",
    "LibraryTotal",
    "Match",
    "Newsletter",
    "NewsletterMember",
    "Paper",
    "QueryMatch",
    "RateSlot",
    "RecommendCursor",
    "RunState",
    "SignupQuota",
    "SlackReplay",
    "SourceRun",
    "Subscriber",
    "SubscriberStatus",
    "TasteModelRow",
    "UTCDateTime",
    "Version",
    "Vote",
    "json_field",
    "utc_field",
    "utcnow",
    "version_to_paper",
]


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


class SubscriberStatus(StrEnum):
    """Whether digests go out to a subscriber."""

    ACTIVE = "active"
    PAUSED = "paused"
    # The subscriber asked to stop (an unsubscribe link, one-click or the manage page). Follows are kept so
    # that the manage page can re-subscribe; only active subscribers are matched and planned.
    UNSUBSCRIBED = "unsubscribed"
    # Signed up for email by themselves (form or `papertrail subscribe`) and not yet confirmed through the
    # link in the confirmation mail: nothing is matched or sent until then.
    UNCONFIRMED = "unconfirmed"


class DigestState(StrEnum):
    """The life of one digest.

    ``pending``: planned (its matches claimed), waiting for its first or next attempt. ``sending``: a
    worker holds it until ``lease_until``. ``sent``: delivered; its matches are sent. ``failed``: the
    platform refused it for good; the subscriber is paused and the matches went back to pending. ``dead``:
    retryable failures exhausted the attempts; it keeps its matches until an operator retries it.
    """

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    DEAD = "dead"


class RunState(StrEnum):
    """How one source run ended."""

    RUNNING = "running"
    OK = "ok"
    EMPTY = "empty"
    NOT_MODIFIED = "not_modified"
    ERROR = "error"


class Paper(SQLModel, table=True):
    """One work, keyed by its arXiv id without version."""

    __tablename__ = "paper"
    __table_args__ = (
        # The paper browser's three orders, each served by one index walked backwards from a cursor
        # (core.overview.dashboard_records): no sort, and no OFFSET, over the whole library (migration 0018).
        sa.Index("ix_paper_browse_updated", "browse_key", "id"),
        sa.Index("ix_paper_browse_ingested", "news", "first_seen_at", "id"),
        sa.Index("ix_paper_browse_published", "published_key", "id"),
        # The papers whose search index entry is still to be written (core.papers.search_index): a backfill
        # and migration 0018 leave that to the indexer, which reads this index.
        sa.Index(
            "ix_paper_search_stale",
            "search_stale",
            sqlite_where=sa.text("search_stale = 1"),
            postgresql_where=sa.text("search_stale = true"),
        ),
    )

    id: str = Field(primary_key=True, max_length=64)
    latest_version: int = 1
    first_seen_at: datetime = utc_field(default_factory=utcnow)
    # What the library totals count, kept per paper so that a write knows when a paper starts to count
    # (core.papers.count_records): a stored version is AI-related, a stored version is v2 or later, a
    # community pick is stored. Each only ever turns true: versions and picks are never deleted.
    ai_related: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    revised: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    picked: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    # The browser's sort keys (core.papers.sort_keys), kept by every write like the flags above. ``news``: a
    # version of the paper was stored as news, or a community source picked it (it arrived as news, not
    # from a backfill). ``browse_key``: news first, then the newest version's arrival: the id of the
    # newest version (ids grow with arrival) plus NEWS_BIT for news; it is also the row id of the
    # paper's entry in SQLite's search index. ``published_key``: v1's announcement in Unix seconds (0
    # when v1 or its date is not stored, so such papers come last).
    news: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    browse_key: int = Field(default=0, sa_type=sa.BigInteger, sa_column_kwargs={"server_default": "0"})
    published_key: int = Field(default=0, sa_type=sa.BigInteger, sa_column_kwargs={"server_default": "0"})
    # Its search index entry is missing or out of date: the indexer will write it (core.papers.search_index).
    search_stale: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})


class Version(SQLModel, table=True):
    """One version of a paper with the metadata as of that version: the unit of news."""

    __tablename__ = "version"
    __table_args__ = (
        sa.UniqueConstraint("paper_id", "number", name="uq_version_paper_number"),
        # A gap fill asks for the newest announcement already stored as news on every page.
        sa.Index("ix_version_news_announced_at", "news", "announced_at"),
        # The 24-hour numbers and the chart read the news of a window: a range of this index, which holds
        # news only, so it skips the history a backfill stored in the same hours and a backfill does not
        # write to it (migration 0017). Queries say ``news = true`` (core.papers.paper_records.IS_NEWS)
        # to use it.
        sa.Index(
            "ix_version_news_first_seen_at",
            # news leads though every entry has it true: an equality and a range on one index is what
            # SQLite's planner picks over ix_version_news_announced_at without statistics.
            "news",
            "first_seen_at",
            sqlite_where=sa.text("news = 1"),
            postgresql_where=sa.text("news = true"),
        ),
        # The status page's "newest paper" of each source: the latest announcement among the news that
        # source stored, one probe of this index even for a source that stored none (news only, as above).
        sa.Index(
            "ix_version_news_source_announced_at",
            "news",
            "source",
            "announced_at",
            sqlite_where=sa.text("news = 1"),
            postgresql_where=sa.text("news = true"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    paper_id: str = Field(foreign_key="paper.id", index=True, max_length=64)
    number: int
    title: str
    abstract: str = Field(sa_type=sa.Text)
    authors: list[str] = json_field(default_factory=list)
    categories: list[str] = json_field(default_factory=list)
    comment: str | None = Field(default=None, sa_type=sa.Text)
    journal_ref: str | None = Field(default=None, sa_type=sa.Text)
    doi: str | None = Field(default=None, max_length=255)
    license: str | None = Field(default=None, max_length=255)
    announce_type: str = Field(max_length=16)
    source: str = Field(max_length=32)
    ai_related: bool = False
    announced_at: datetime | None = utc_field(default=None)
    first_seen_at: datetime = utc_field(default_factory=utcnow, index=True)
    # Set once the version has been run against the follows; NULL means "still to match".
    matched_at: datetime | None = utc_field(default=None, index=True)
    # False for history: versions stored by a backfill or announced before what PaperTrail had already
    # seen. History is never matched, never sent, and not counted as news on the status page.
    news: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})


class LibraryTotal(SQLModel, table=True):
    """The library totals, kept up to date by every write in its own transaction (core.papers.count_records).

    One row (``id`` 1), created by migration 0017 from the rows stored then. The status page, ``/metrics``
    and ``papertrail status`` read it instead of counting millions of rows on every load.
    """

    __tablename__ = "library_total"

    id: int = Field(default=1, primary_key=True)
    # Every paper, stubs known only from a community source included.
    papers: int = Field(default=0, sa_type=sa.BigInteger)
    # Every stored version, history included.
    versions: int = Field(default=0, sa_type=sa.BigInteger)
    # Papers with an AI-related stored version, with a stored v2 or later, with a community pick.
    ai_papers: int = Field(default=0, sa_type=sa.BigInteger)
    revised_papers: int = Field(default=0, sa_type=sa.BigInteger)
    community_papers: int = Field(default=0, sa_type=sa.BigInteger)
    # Versions stored as news: v1 (new papers) and v2 or later (revisions).
    news_new: int = Field(default=0, sa_type=sa.BigInteger)
    news_revisions: int = Field(default=0, sa_type=sa.BigInteger)


class CommunityPickRow(SQLModel, table=True):
    """A paper featured by a community source on one day (Hugging Face daily papers), with its signals."""

    __tablename__ = "community_pick"
    __table_args__ = (sa.UniqueConstraint("paper_id", "source", "day", name="uq_pick_paper_source_day"),)

    id: int | None = Field(default=None, primary_key=True)
    paper_id: str = Field(foreign_key="paper.id", index=True, max_length=64)
    source: str = Field(max_length=32)
    day: date = Field(index=True)
    title: str = Field(sa_type=sa.Text)
    summary: str = Field(sa_type=sa.Text)
    upvotes: int = 0
    comments: int = 0
    keywords: list[str] = json_field(default_factory=list)
    ai_summary: str | None = Field(default=None, sa_type=sa.Text)
    github_repo: str | None = Field(default=None, max_length=512)
    project_page: str | None = Field(default=None, max_length=512)
    first_seen_at: datetime = utc_field(default_factory=utcnow, index=True)


class Subscriber(SQLModel, table=True):
    """One place that receives digests, e.g. ``email:ada@example.org``."""

    __tablename__ = "subscriber"

    id: int | None = Field(default=None, primary_key=True)
    address: str = Field(unique=True, max_length=512)
    timezone: str = Field(default="UTC", max_length=64)
    schedule: str = Field(default="daily 08:00", max_length=64)
    status: str = Field(default=SubscriberStatus.ACTIVE, max_length=16)
    status_reason: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = utc_field(default_factory=utcnow)
    last_digest_at: datetime | None = utc_field(default=None)
    # Back-off after a retryable delivery failure: no attempt before this time.
    retry_at: datetime | None = utc_field(default=None)
    failures: int = 0
    # When the last sign-up mail (a confirmation link, or the manage link of a subscribed address) went out;
    # no second one goes to the address within core.people.signup.RESEND_AFTER.
    confirm_sent_at: datetime | None = utc_field(default=None)
    # The pending sign-up's nonce, signed into its confirmation link: a sign-up that replaces the pending
    # one draws a new nonce, so an older link can no longer confirm (core.people.signup).
    confirm_nonce: str | None = Field(default=None, max_length=64)
    # en or zh (core.languages.LANGUAGES); None until chosen, when the platform's language or the
    # default applies.
    language: str | None = Field(default=None, max_length=8)
    # When the delivery ledger paused this subscriber because the platform refused a digest for good
    # (None: not paused by a refusal; a reader's own pause, or blocking the bot, leaves it None). Such a
    # subscriber is still matched for a while and its matches are held for its resume (core.follows.fanout).
    refused_at: datetime | None = utc_field(default=None)
    # A one-line message with the scan receipt on an announcement day when nothing matched, so that
    # silence is never ambiguous (`digest heartbeat on|off`, the manage page). Off unless asked.
    heartbeat: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    # The nonce signed into the reader's private Atom feed link (core.people.tokens); None: no link made yet.
    # A new
    # nonce revokes the old link (migration 0019).
    feed_nonce: str | None = Field(default=None, max_length=64)
    # Learned recommendations per digest (`recommend on [N]`): None is off, the default.
    recommend: int | None = Field(default=None)


class Follow(SQLModel, table=True):
    """A stored query of a subscriber, in the follow language."""

    __tablename__ = "follow"
    __table_args__ = (sa.UniqueConstraint("subscriber_id", "canonical", name="uq_follow_subscriber_query"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscriber.id", index=True)
    query: str = Field(sa_type=sa.Text)
    # Text, not a bounded string: the normal form of a 1,000-character query can be longer than it.
    # Indexed: a query's matches (query_match) reach its followers through it.
    canonical: str = Field(sa_type=sa.Text, index=True)
    created_at: datetime = utc_field(default_factory=utcnow)
    # Per-follow options: revisions (v2+) as well as new papers; and delivery as soon as it matches
    # instead of waiting for the subscriber's scheduled digest.
    revisions: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    instant: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})


class QueryMatch(SQLModel, table=True):
    """One distinct follow query (its normal form) matched one version: matching's output, once per query.

    Matching writes these, so its cost follows the number of distinct queries, not of followers. Before
    digests are planned they are fanned out to the followers' Match rows
    (``match_records.expand_matches``), which applies each follow's options, and deleted: the
    table only holds what is waiting to be fanned out.
    """

    __tablename__ = "query_match"
    __table_args__ = (sa.UniqueConstraint("version_id", "canonical", name="uq_query_match_version_query"),)

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id")
    canonical: str = Field(sa_type=sa.Text)
    # core.reasons.Reason.as_data of each reason of the query: field and term.
    reasons: list[dict[str, Any]] = json_field(default_factory=list)


class Match(SQLModel, table=True):
    """The ledger: one subscriber, one version, the follows and reasons that matched."""

    __tablename__ = "match"
    __table_args__ = (sa.UniqueConstraint("subscriber_id", "version_id", name="uq_match_subscriber_version"),)

    id: int | None = Field(default=None, primary_key=True)
    # No index of its own: the unique (subscriber_id, version_id) index serves look-ups by subscriber, and
    # each index costs every one of a day's hundreds of thousands of inserted rows (migration 0013).
    subscriber_id: int = Field(foreign_key="subscriber.id")
    version_id: int = Field(foreign_key="version.id", index=True)
    follow_ids: list[int] = json_field(default_factory=list)
    # Why, per follow: [{"follow": id, "reasons": [{"field": …, "term": …}, …]}, …]; a member's copy of a
    # newsletter item has {"newsletter": name, …} instead of a follow
    # (core.reasons.reasons_from_data).
    reasons: list[dict[str, Any]] = json_field(default_factory=list)
    created_at: datetime = utc_field(default_factory=utcnow)
    # True when one of the matching follows asks for instant delivery.
    instant: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    digest_id: int | None = Field(default=None, foreign_key="digest.id", index=True)


class Newsletter(SQLModel, table=True):
    """A named newsletter an operator defines; its follows and schedule live on its own hidden subscriber.

    The subscriber (address ``newsletter:NAME``) is matched like any other, once per version whatever the
    number of members; each issue is fanned out to the active members (see core.people.newsletters).
    """

    __tablename__ = "newsletter"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=64)
    title: str = Field(max_length=200)
    subscriber_id: int = Field(foreign_key="subscriber.id", unique=True)
    created_at: datetime = utc_field(default_factory=utcnow)


class NewsletterMember(SQLModel, table=True):
    """One subscriber's membership of one newsletter: it receives the newsletter's issues while active."""

    __tablename__ = "newsletter_member"
    __table_args__ = (
        sa.UniqueConstraint("newsletter_id", "subscriber_id", name="uq_newsletter_member_pair"),
    )

    id: int | None = Field(default=None, primary_key=True)
    newsletter_id: int = Field(foreign_key="newsletter.id", index=True)
    subscriber_id: int = Field(foreign_key="subscriber.id", index=True)
    joined_at: datetime = utc_field(default_factory=utcnow)


class Digest(SQLModel, table=True):
    """The matches sent to one subscriber in one message (or one split message); sent once.

    The matches a digest holds point at it (``Match.digest_id``); it is the unit workers claim.
    """

    __tablename__ = "digest"
    # Workers look for the next due digest by state and time.
    __table_args__ = (sa.Index("ix_digest_state_next_attempt", "state", "next_attempt_at"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscriber.id", index=True)
    created_at: datetime = utc_field(default_factory=utcnow)
    sent_at: datetime | None = utc_field(default=None)
    state: str = Field(default=DigestState.PENDING, max_length=16)
    item_count: int = 0
    channel: str = Field(max_length=16)
    platform_id: str | None = Field(default=None, max_length=255)
    error: str | None = Field(default=None, sa_type=sa.Text)
    attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    next_attempt_at: datetime | None = utc_field(default=None)
    # The claim of one worker: nobody else takes the digest before lease_until.
    lease_until: datetime | None = utc_field(default=None)
    worker: str | None = Field(default=None, max_length=128)
    # Parts of a split digest the platform already accepted: a retry resumes after them.
    parts_sent: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class GuideRow(SQLModel, table=True):
    """A machine-generated reading guide of one version in one language; made once, never regenerated."""

    __tablename__ = "guide"
    __table_args__ = (sa.UniqueConstraint("version_id", "language", name="uq_guide_version_language"),)

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    language: str = Field(max_length=8)
    tldr: str = Field(sa_type=sa.Text)
    contributions: list[str] = json_field(default_factory=list)
    changes: str | None = Field(default=None, sa_type=sa.Text)
    model: str = Field(max_length=255)
    # The daily cap counts the guides made since a time.
    created_at: datetime = utc_field(default_factory=utcnow, index=True)


class GuideFailureRow(SQLModel, table=True):
    """One failed attempt at a guide. Failures count against the daily cap (they cost requests too), and a
    version the model keeps answering garbage for is given up (core.guides.service.GIVE_UP_AFTER)."""

    __tablename__ = "guide_failure"

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    language: str = Field(max_length=8)
    reason: str = Field(sa_type=sa.Text)
    # False when asking again cannot help (a malformed answer, a refused key): these lead to giving up.
    retryable: bool = True
    failed_at: datetime = utc_field(default_factory=utcnow, index=True)


class SourceRun(SQLModel, table=True):
    """One pass of one source: the raw material of the status page."""

    __tablename__ = "source_run"

    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(index=True, max_length=32)
    started_at: datetime = utc_field(default_factory=utcnow)
    finished_at: datetime | None = utc_field(default=None)
    state: str = Field(default=RunState.RUNNING, max_length=16)
    fetched: int = 0
    new_papers: int = 0
    revisions: int = 0
    duplicates: int = 0
    cursor: str | None = Field(default=None, max_length=255)
    note: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)


class HttpValidator(SQLModel, table=True):
    """ETag / Last-Modified remembered per URL for conditional GET."""

    __tablename__ = "http_validator"

    url: str = Field(primary_key=True, max_length=1024)
    etag: str | None = Field(default=None, max_length=512)
    last_modified: str | None = Field(default=None, max_length=128)
    updated_at: datetime = utc_field(default_factory=utcnow)


class RateSlot(SQLModel, table=True):
    """The next free send slot of one rate-limited key, shared by every process on the database.

    Written only by ``core.delivery.rate_limit.PostgresRateLimit`` (one atomic upsert per reservation);
    unused on
    SQLite, where one process sends and the limit is kept in memory.
    """

    __tablename__ = "rate_slot"

    key: str = Field(primary_key=True, max_length=255)
    next_at: datetime = utc_field()


class DeliveryAlarm(SQLModel, table=True):
    """A channel's platform refusing many recipients the same way: the operator's problem, not theirs.

    One row per (channel, kind), raised by core.delivery.alarm when a batch's refusals look server-wide
    (or the sender's setup failed) and cleared by a batch the channel delivered without that refusal.
    While raised (``cleared_at`` NULL) refusals of that kind on that channel are retried, never paused.
    """

    __tablename__ = "delivery_alarm"
    __table_args__ = (sa.UniqueConstraint("channel", "kind", name="uq_delivery_alarm_channel_kind"),)

    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=16)
    # How the platform said no (core.channel.DeliveryError.kind), e.g. "rcpt 550 5.7.1".
    kind: str = Field(max_length=64)
    first_seen: datetime = utc_field()
    last_seen: datetime = utc_field()
    # Distinct recipients refused this way in the batch that raised the alarm.
    recipients: int = 0
    # Deliveries held (retried later instead of pausing anyone) since the alarm was raised.
    held: int = 0
    # One refusal's error with the recipients' addresses and URL credentials masked (shown on the
    # status page).
    sample: str = Field(sa_type=sa.Text)
    cleared_at: datetime | None = utc_field(default=None)


class SignupQuota(SQLModel, table=True):
    """How many sign-ups one limit's key took in one clock hour (core.people.signup_limits).

    ``key`` is ``all`` (everyone) or a keyed hash of a client's IP address or network, never the address
    itself; ``hour`` counts hours since the epoch (UTC). Rows of past hours are deleted as new ones come.
    """

    __tablename__ = "signup_quota"

    key: str = Field(primary_key=True, max_length=80)
    hour: int = Field(primary_key=True, sa_type=sa.BigInteger)
    used: int = 0


class SlackReplay(SQLModel, table=True):
    """A signed Slack request already accepted, kept while its signature could still pass the timestamp check.

    Slack signs ``v0:{timestamp}:{body}``; a byte-identical copy posted again within the window carries a
    valid signature, so the one edge that verifies signatures (notifiers.slack.chat) refuses a signature seen
    before.
    In the database, so every web process refuses what another one accepted. Rows older than the window
    are deleted as new ones come (core.replay_records).
    """

    __tablename__ = "slack_replay"

    signature: str = Field(primary_key=True, max_length=80)
    # The request's own X-Slack-Request-Timestamp: what decides when the signature stops passing.
    signed_at: datetime = utc_field(index=True)


# The tables of learned recommendations. A reader's votes (Vote) and imported reference library (LibrarySeed)
# are the liked and disliked papers their taste model (TasteModelRow) is trained on; the recommendation pass
# scores new versions from RecommendCursor on. LibraryLookup remembers the arXiv ids an import asked the
# arXiv API for in vain, so that importing again does not ask again at once.


# A vote's value: a like or a dislike.
LIKE = 1
DISLIKE = -1


class Vote(SQLModel, table=True):
    """A reader's 👍 (+1) or 👎 (-1) on one version of a paper: a signal of the learned follows.

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
    """One entry of a reader's imported reference library, used as a liked paper.

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


def version_to_paper(version: Version) -> PaperIn:
    """Turn a stored version back into the value object the matcher reads."""
    return PaperIn(
        arxiv_id=version.paper_id,
        version=version.number,
        title=version.title,
        abstract=version.abstract,
        authors=tuple(version.authors),
        categories=tuple(version.categories),
        announce_type=AnnounceType(version.announce_type),
        announced_at=version.announced_at,
        comment=version.comment,
        journal_ref=version.journal_ref,
        doi=version.doi,
        license=version.license,
        source=version.source,
    )


def version_to_item(version: Any, **shown: Any) -> DigestItem:
    """A stored version as a reader sees it: the version's own fields from ``version`` (a ``Version`` or a
    row with its columns, ``paper_id`` and ``number`` among them), and what the caller adds (``reasons``,
    ``changes``, ``upvotes``, ``follows``, ``guide``, ``recommended``) as keywords."""
    return DigestItem(
        version_id=version.id if isinstance(version, Version) else version.version_id,
        arxiv_id=version.paper_id,
        version=version.number,
        title=version.title,
        authors=tuple(version.authors or ()),
        categories=tuple(version.categories or ()),
        abstract=version.abstract,
        comment=version.comment,
        journal_ref=version.journal_ref,
        doi=version.doi,
        **shown,
    )
