"""Builds the process-wide objects once from Settings: store, renderer, notifiers, HTTP client, sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TextIO

from core.channel import Notifier, NotifierParts
from core.config import Settings
from core.db import Database
from core.delivery.digests import DeliveryPolicy
from core.delivery.rate_limit import rate_limit_for
from core.delivery.render import Renderer
from core.follows.index import FollowIndex
from core.papers.sources import CommunitySource, PagedSource, Source
from ingest.arxiv_api import ArxivApiSource
from ingest.arxiv_oai import ArxivOaiSource
from ingest.arxiv_rss import ArxivRssSource
from ingest.hf_daily import HfDailySource
from ingest.http import HttpClient, Politeness
from ingest.llm import ChatClient
from papertrail.service import channels
from papertrail.service.store_context import open_store

if TYPE_CHECKING:
    from notifiers.slack.chat import SlackBot
    from notifiers.telegram.chat import TelegramBot

__all__ = ["AppContext", "build_context", "delivery_policy"]


@dataclass
class AppContext:
    """Everything a command or the runtime needs, built once and passed down."""

    settings: Settings
    db: Database
    renderer: Renderer
    notifiers: dict[str, Notifier]
    http: HttpClient
    sources: dict[str, Source] = field(default_factory=dict)
    community: dict[str, CommunitySource] = field(default_factory=dict)
    paged: dict[str, PagedSource] = field(default_factory=dict)
    api: ArxivApiSource | None = None
    # Per source: no request before this time (a server's Retry-After longer than one run sits out).
    not_before: dict[str, datetime] = field(default_factory=dict)
    # One follow index for the life of the process, updated incrementally before each matching pass.
    follows: FollowIndex = field(default_factory=FollowIndex)
    policy: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    # The AI-guide model (one client per process); None without PAPERTRAIL_LLM_URL: no guides.
    guide_model: ChatClient | None = None

    notifiers_open: bool = True
    # The Telegram bot, built on first use (bots role; the web role serves its webhook route).
    _telegram_bot: TelegramBot | None = field(default=None, repr=False)
    # The Slack app, built on first use (web role in HTTP mode, bots role in Socket Mode).
    _slack_bot: SlackBot | None = field(default=None, repr=False)

    def telegram_bot(self) -> TelegramBot | None:
        """This process's one Telegram bot; None without PAPERTRAIL_TELEGRAM_TOKEN."""
        if self._telegram_bot is None and self.settings.telegram_token is not None:
            from notifiers.telegram.chat import TelegramBot  # python-telegram-bot's ext only where a bot runs
            from notifiers.telegram.notifier import TelegramNotifier

            # Replies go through the digests' limiter: one chat's limits hold for both.
            notifier = self.notifiers.get("telegram")
            limiter = notifier.limiter if isinstance(notifier, TelegramNotifier) else None
            self._telegram_bot = TelegramBot(self.settings.telegram_bot(), self.db, limiter=limiter)
        return self._telegram_bot

    def slack_bot(self) -> SlackBot:
        """This process's one Slack app (the caller checks that the settings serve it: ``serves_http``,
        ``uses_socket_mode``); raises ``SlackSetupError`` without PAPERTRAIL_SLACK_BOT_TOKEN."""
        if self._slack_bot is None:
            from notifiers.slack.chat import SlackBot  # slack_bolt only where the Slack app runs
            from notifiers.slack.notifier import SlackNotifier

            # The app's own posts go through the digests' limiter: one channel's limit holds for both.
            notifier = self.notifiers.get("slack")
            limiter = notifier.limiter if isinstance(notifier, SlackNotifier) else None
            self._slack_bot = SlackBot(self.settings.slack_bot(), self.db, limiter=limiter)
        return self._slack_bot

    async def close_notifiers(self) -> None:
        """Close the notifiers' connections (in the event loop that used them); safe to call twice."""
        if self.notifiers_open:
            self.notifiers_open = False
            for notifier in self.notifiers.values():
                await notifier.aclose()

    async def aclose(self) -> None:
        """Release network, notifier and database resources."""
        await self.http.aclose()
        if self.guide_model is not None:
            await self.guide_model.aclose()
        await self.close_notifiers()
        if self._telegram_bot is not None:
            await self._telegram_bot.stop()
        self.db.engine.dispose()


def delivery_policy(settings: Settings) -> DeliveryPolicy:
    """The ledger's attempts, lease and worker width, and arXiv's calendar (heartbeats, receipts), from
    settings."""
    return DeliveryPolicy(
        max_attempts=settings.delivery_max_attempts,
        lease=timedelta(seconds=settings.delivery_lease_seconds),
        batch=settings.worker_batch,
        concurrency=settings.worker_concurrency,
        alarm_recipients=settings.delivery_alarm_recipients,
        holidays=settings.holiday_dates,
        stale_grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )


def build_context(settings: Settings, *, console: TextIO | None = None) -> AppContext:
    """Connect to the database, apply migrations and wire every adapter this build has."""
    db = open_store(settings)
    engine = db.engine
    polite = settings.http()
    politeness = Politeness(
        intervals={"arxiv.org": polite.arxiv_min_interval},
        retries=polite.retries,
        backoff=polite.backoff,
        max_retry_wait=polite.max_retry_wait,
    )
    http = HttpClient(
        polite.user_agent,
        polite.timeout,
        politeness=politeness,
        deadline=polite.deadline,
        max_bytes=polite.max_bytes,
    )
    sources: dict[str, Source] = {"arxiv-rss": ArxivRssSource(http, settings.arxiv_feed_url)}
    community: dict[str, CommunitySource] = {"hf-daily": HfDailySource(http, settings.hf_api_url)}
    paged: dict[str, PagedSource] = {
        "arxiv-oai": ArxivOaiSource(http, settings.arxiv_oai_url, settings.arxiv_oai_set)
    }
    return AppContext(
        settings=settings,
        db=db,
        renderer=Renderer(
            public_url=settings.public_url,
            max_items=settings.digest_max_items,
            secret_key=settings.secret_key.get_secret_value() if settings.secret_key else "",
            default_language=settings.default_language,
        ),
        # On PostgreSQL the notifiers' rate limits are shared by every process on the database.
        notifiers=channels.install().build_notifiers(
            settings,
            NotifierParts(
                console=console, slots=rate_limit_for(engine, shared=settings.rate_limit == "shared")
            ),
        ),
        http=http,
        sources=sources,
        community=community,
        paged=paged,
        api=ArxivApiSource(http, settings.arxiv_api_url),
        policy=delivery_policy(settings),
        guide_model=ChatClient(settings.llm()) if settings.llm_url else None,
    )
