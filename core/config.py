"""Settings: read once from the environment (``PAPERTRAIL_*``) and an optional ``papertrail.toml``.

Build a :class:`Settings` in the shell; nothing reads the environment elsewhere. The shell passes each
adapter only its own slice (``settings.telegram()``, ``settings.smtp()`` …, core/config_edges.py).
Environment variables win over the TOML file, which wins over the defaults.
"""

from __future__ import annotations

import os
from datetime import date
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from core.config_edges import (
    AppriseSettings,
    ChatSettings,
    HttpSettings,
    LlmSettings,
    SlackBotSettings,
    SlackSettings,
    SlackWebhookSettings,
    SmtpSettings,
    TelegramBotSettings,
    TelegramSettings,
    WebhookSettings,
)
from core.languages import LANGUAGES
from core.timezones import zone_named

DEFAULT_DATABASE_URL = "sqlite:///./data/papertrail.db"


def parse_holidays(text: str) -> frozenset[date]:
    """Read ``PAPERTRAIL_ARXIV_HOLIDAYS``: comma-separated ISO dates of mailings arXiv skips."""
    days: set[date] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            days.add(date.fromisoformat(part))
        except ValueError as exc:
            raise ValueError(f"PAPERTRAIL_ARXIV_HOLIDAYS: {part!r} is not a date like 2026-12-25") from exc
    return frozenset(days)


# Field names whose values never leave the process unmasked.
SECRET_FIELDS = frozenset(
    {
        "smtp_password",
        "telegram_token",
        "slack_bot_token",
        "slack_app_token",
        "secret_key",
        "slack_signing_secret",
        "telegram_webhook_secret",
        "llm_api_key",
        "metrics_token",
    }
)


def _toml_path() -> Path:
    """The TOML file to read: ``PAPERTRAIL_CONFIG`` or ``./papertrail.toml``."""
    return Path(os.environ.get("PAPERTRAIL_CONFIG", "papertrail.toml"))


class Settings(BaseSettings):
    """Every knob PaperTrail has. The names are a public contract: other tools set them."""

    model_config = SettingsConfigDict(env_prefix="PAPERTRAIL_", extra="ignore", frozen=True)

    database_url: str = DEFAULT_DATABASE_URL

    arxiv_rss_url: str = "https://rss.arxiv.org/rss/"
    # Comma-separated archives or categories; the feed request joins them with "+".
    arxiv_categories: str = "cs"

    hf_api_url: str = "https://huggingface.co/api/"
    arxiv_oai_url: str = "https://oaipmh.arxiv.org/oai"
    arxiv_api_url: str = "https://export.arxiv.org/api/query"
    # The OAI-PMH set harvested by the gap filler (arXiv sets are archives: cs, math, physics:hep-th ...).
    arxiv_oai_set: str = "cs"

    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_user: str | None = None
    smtp_password: SecretStr | None = None
    smtp_from: str = "PaperTrail <papertrail@localhost>"
    smtp_starttls: bool = False
    smtp_timeout: float = 30.0

    # Where unsubscribe mail goes (the mailto: half of List-Unsubscribe); empty: the https link only.
    unsubscribe_mailto: str = ""

    # Telegram: the bot token from @BotFather, and the Bot API server (a self-hosted one, or a test fake).
    telegram_token: SecretStr | None = None
    telegram_api_url: str = "https://api.telegram.org"
    # Telegram's published limits: 30 messages/s overall, 1/s per chat, 20/min per group. On PostgreSQL
    # every worker shares them (PAPERTRAIL_RATE_LIMIT); on SQLite, or with "local", they apply per process.
    telegram_max_per_second: float = 30.0
    telegram_chat_interval: float = 1.0
    telegram_group_per_minute: int = 20

    # Slack: a bot token (xoxb-…) for chat.postMessage, the Web API base URL, and the app-level token
    # (xapp-…) that switches the bot to Socket Mode.
    slack_bot_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    slack_app_token: SecretStr | None = None
    slack_channel_interval: float = 1.0
    # Verifies that requests to the Slack endpoint (slash commands, events) come from Slack.
    slack_signing_secret: SecretStr | None = None
    # Telegram webhook mode (when PAPERTRAIL_PUBLIC_URL is public): the secret_token Telegram echoes in
    # X-Telegram-Bot-Api-Secret-Token. Unset: derived from PAPERTRAIL_SECRET_KEY; neither: long polling.
    telegram_webhook_secret: SecretStr | None = None
    # "polling" (default, works behind NAT) or "webhook" (needs a public HTTPS PAPERTRAIL_PUBLIC_URL).
    telegram_mode: str = "polling"

    # Signs unsubscribe and manage links (HMAC-SHA256) and webhook bodies. Without it no links are made.
    secret_key: SecretStr | None = None

    # Webhook targets that resolve to loopback, private or link-local addresses are refused (SSRF), except
    # the hosts listed here (comma-separated, e.g. "127.0.0.1" in tests, "hooks.internal" on a LAN).
    webhook_allow_hosts: str = ""
    webhook_timeout: float = 10.0

    # The ledger: attempts before a digest is dead-lettered, how long a worker's claim lasts before
    # another worker may take the digest over, and how many digests one worker sends at once.
    delivery_max_attempts: int = 8
    delivery_lease_seconds: float = 300.0
    worker_batch: int = 50
    worker_concurrency: int = 20
    # Distinct recipients refused the same way in one claimed batch (and at least half of the channel's
    # outcomes in it) that make the refusal the server's: digests held, a delivery alarm raised, nobody
    # paused (core.delivery.alarm). A channel with fewer active subscribers needs all of them refused.
    delivery_alarm_recipients: int = 5
    # "shared": on PostgreSQL the platforms' rate limits are kept for all workers together (table
    # rate_slot); "local": each process keeps them on its own. SQLite is always local (one sender).
    rate_limit: str = "shared"

    public_url: str = "http://localhost:8080"

    # Sign-up (the /subscribe form, docs/delivery.md#email-sign-up-double-opt-in): valid sign-ups accepted
    # per clock hour from one client IP, from one network (IPv4 /24, IPv6 /64), and from everyone together.
    # Every sign-up sends at most one mail, so the last is also the cap on sign-up mails per hour. Counted
    # in the database: every web process and restart shares them.
    signup_ip_per_hour: int = 5
    signup_network_per_hour: int = 20
    signup_mails_per_hour: int = 200
    # The reverse proxies in front of the web server (comma-separated IPs or CIDR networks). Only a request
    # arriving from one of them has its X-Forwarded-For read for the client's address; empty: the header is
    # ignored and the connection's peer is the client (anyone can write that header).
    trusted_proxies: str = ""
    digest_max_items: int = 50

    # The web server of `papertrail run` (status page, health, metrics, unsubscribe, bot webhooks).
    web_host: str = "127.0.0.1"
    web_port: int = 8080
    # When set, /metrics answers only requests with "Authorization: Bearer <token>" (401 otherwise): its
    # numbers (subscribers, follows, queue) are the operator's, not the public's.
    metrics_token: SecretStr | None = None
    # "text" (human-readable lines) or "json" (one object per line, for log collectors).
    log_format: str = "text"

    # Polite HTTP: who we are, and how long we wait.
    contact_email: str = "papertrail-operator@example.org"
    http_timeout: float = 30.0
    # Seconds one whole request may take, body included (the timeout above bounds each read only, so a
    # server trickling a byte a second would never trip it), and the largest response body in bytes,
    # enforced while it downloads. arXiv's largest daily feed is about 2.8 MB.
    http_deadline: float = 300.0
    http_max_bytes: int = 64 * 1024 * 1024
    # Seconds between two requests to any *.arxiv.org host (arXiv asks robots for 3 s).
    arxiv_min_interval: float = 3.0
    # Extra attempts after a failed request, the first back-off in seconds (doubling), and the longest
    # Retry-After one run sits out.
    http_retries: int = 3
    http_backoff: float = 2.0
    http_max_retry_wait: float = 300.0

    # Mailing dates (YYYY-MM-DD, comma-separated) on which arXiv announces nothing, so that a silent
    # feed on those days reads "quiet", not "stale".
    arxiv_holidays: str = ""
    # How long after the 20:00 America/New_York announcement a feed may still serve the previous mailing.
    arxiv_stale_grace_hours: float = 4.0

    # AI guides (docs/guides.md): any OpenAI-compatible chat-completions endpoint, e.g.
    # "https://api.openai.com/v1" or a local vLLM / llama.cpp / Ollama server ("http://127.0.0.1:11434/v1").
    # Unset: no guides are made at all. The daily limit counts guides made in the last 24 hours.
    llm_url: str | None = None
    llm_model: str = ""
    llm_api_key: SecretStr | None = None
    llm_daily_limit: int = 200
    llm_concurrency: int = 4
    llm_timeout: float = 60.0

    ingest_interval_minutes: int = 30
    digest_check_seconds: int = 60
    default_schedule: str = "daily 08:00"
    default_timezone: str = "UTC"
    # The IANA zone every time on the web pages is shown in, and whose midnights cut the status page's
    # 30-day chart into days (docs/status-page.md). Digests keep each subscriber's own zone; the command
    # line stays UTC.
    display_timezone: str = "UTC"
    # The language of readers who chose none (docs/i18n.md): their digests, mails, chat replies when the
    # platform names no language PaperTrail speaks, and web pages when the browser names none. en or zh.
    default_language: str = "en"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order of precedence: explicit arguments, environment, ``papertrail.toml``."""
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=_toml_path()),
        )

    @field_validator("arxiv_categories")
    @classmethod
    def _categories_not_empty(cls, value: str) -> str:
        if not [part for part in value.split(",") if part.strip()]:
            raise ValueError("PAPERTRAIL_ARXIV_CATEGORIES is empty; give e.g. 'cs' or 'cs.LG,stat.ML'")
        return value

    @field_validator("arxiv_holidays")
    @classmethod
    def _holidays_are_dates(cls, value: str) -> str:
        parse_holidays(value)
        return value

    @property
    def holiday_dates(self) -> frozenset[date]:
        """The configured arXiv holidays as dates."""
        return parse_holidays(self.arxiv_holidays)

    @field_validator("display_timezone")
    @classmethod
    def _known_display_timezone(cls, value: str) -> str:
        name = value.strip() or "UTC"  # an empty variable means "not set"
        try:
            zone_named(name)
        except ValueError as err:
            raise ValueError(f"PAPERTRAIL_DISPLAY_TIMEZONE: {err}") from None
        return name

    @field_validator("telegram_mode")
    @classmethod
    def _known_telegram_mode(cls, value: str) -> str:
        if value.lower() not in ("polling", "webhook"):
            raise ValueError("PAPERTRAIL_TELEGRAM_MODE must be 'polling' or 'webhook'")
        return value.lower()

    @field_validator("rate_limit")
    @classmethod
    def _known_rate_limit(cls, value: str) -> str:
        if value.lower() not in ("shared", "local"):
            raise ValueError("PAPERTRAIL_RATE_LIMIT must be 'shared' or 'local'")
        return value.lower()

    @field_validator("log_format")
    @classmethod
    def _known_log_format(cls, value: str) -> str:
        if value.lower() not in ("text", "json"):
            raise ValueError("PAPERTRAIL_LOG_FORMAT must be 'text' or 'json'")
        return value.lower()

    @field_validator("default_language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        language = value.strip().lower()
        if language not in LANGUAGES:
            raise ValueError(
                f"PAPERTRAIL_DEFAULT_LANGUAGE must be one of {', '.join(LANGUAGES)} (the language of readers "
                f"who chose none), not {value!r}"
            )
        return language

    @field_validator("digest_max_items")
    @classmethod
    def _positive_cap(cls, value: int) -> int:
        if value < 1:
            raise ValueError("PAPERTRAIL_DIGEST_MAX_ITEMS must be at least 1")
        return value

    @field_validator("delivery_alarm_recipients")
    @classmethod
    def _alarm_needs_two(cls, value: int) -> int:
        if value < 2:
            raise ValueError(
                "PAPERTRAIL_DELIVERY_ALARM_RECIPIENTS must be at least 2: one refused recipient cannot tell "
                "the server's refusal from the recipient's"
            )
        return value

    @field_validator("signup_ip_per_hour", "signup_network_per_hour", "signup_mails_per_hour")
    @classmethod
    def _signup_limit_positive(cls, value: int, info: ValidationInfo) -> int:
        if value < 1:
            name = f"PAPERTRAIL_{(info.field_name or '').upper()}"
            raise ValueError(f"{name} must be at least 1 (sign-ups per hour)")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_networks(cls, value: str) -> str:
        parse_networks(value)
        return value

    @property
    def trusted_proxy_networks(self) -> tuple[IPv4Network | IPv6Network, ...]:
        """The networks of :attr:`trusted_proxies`."""
        return parse_networks(self.trusted_proxies)

    @field_validator("llm_daily_limit")
    @classmethod
    def _limit_not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError("PAPERTRAIL_LLM_DAILY_LIMIT must be 0 (no guides) or more")
        return value

    @field_validator("llm_concurrency")
    @classmethod
    def _concurrency_positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("PAPERTRAIL_LLM_CONCURRENCY must be at least 1")
        return value

    @field_validator("http_deadline")
    @classmethod
    def _deadline_positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("PAPERTRAIL_HTTP_DEADLINE must be more than 0 seconds")
        return value

    @field_validator("http_max_bytes")
    @classmethod
    def _max_bytes_positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("PAPERTRAIL_HTTP_MAX_BYTES must be at least 1")
        return value

    @field_validator(
        "arxiv_rss_url",
        "hf_api_url",
        "arxiv_oai_url",
        "arxiv_api_url",
        "telegram_api_url",
        "slack_api_url",
        "public_url",
    )
    @classmethod
    def _http_url(cls, value: str, info: ValidationInfo) -> str:
        # A file:// or mistyped URL used to fail only when fetched, after 14 s of retries as a network
        # error: refuse it when the settings are read, as PAPERTRAIL_LLM_URL is.
        scheme, sep, rest = value.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.split("/")[0]:
            name = f"PAPERTRAIL_{(info.field_name or '').upper()}"
            raise ValueError(f"{name} must be an http(s) URL such as https://host/path, not {value!r}")
        return value.strip()

    @field_validator("llm_url")
    @classmethod
    def _http_endpoint(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None  # an empty variable means "not set"
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                "PAPERTRAIL_LLM_URL must be an http(s) URL up to /v1, e.g. http://127.0.0.1:11434/v1"
            )
        return value

    @model_validator(mode="after")
    def _model_named(self) -> Settings:
        if self.llm_url and not self.llm_model.strip():
            raise ValueError(
                "PAPERTRAIL_LLM_URL is set but PAPERTRAIL_LLM_MODEL is empty: name the model the endpoint"
                " serves (e.g. gpt-4o-mini, qwen2.5:7b), or unset PAPERTRAIL_LLM_URL to turn AI guides off"
            )
        return self

    @property
    def webhook_allowed_hosts(self) -> frozenset[str]:
        """Hosts exempt from the private-address check, lower-cased."""
        return frozenset(h.strip().lower() for h in self.webhook_allow_hosts.split(",") if h.strip())

    @property
    def category_list(self) -> list[str]:
        """The configured archives/categories, trimmed, in order."""
        return [part.strip() for part in self.arxiv_categories.split(",") if part.strip()]

    @property
    def arxiv_feed_url(self) -> str:
        """The full feed URL: base URL plus the categories joined with ``+``."""
        base = self.arxiv_rss_url if self.arxiv_rss_url.endswith("/") else self.arxiv_rss_url + "/"
        return base + "+".join(self.category_list)

    @property
    def user_agent(self) -> str:
        """A descriptive User-Agent with a contact address, as arXiv asks of robots."""
        return f"PaperTrail/0.1 (paper alerts; mailto:{self.contact_email})"

    # The per-edge settings (core/config_edges.py): the shell passes each adapter only its own.

    def chat(self) -> ChatSettings:
        """What the chat commands read."""
        return ChatSettings(
            default_language=self.default_language,
            default_timezone=self.default_timezone,
            default_schedule=self.default_schedule,
            digest_check_seconds=self.digest_check_seconds,
            holiday_dates=self.holiday_dates,
            arxiv_stale_grace_hours=self.arxiv_stale_grace_hours,
        )

    def telegram(self) -> TelegramSettings:
        """The Telegram notifier's settings."""
        return TelegramSettings(
            token=self.telegram_token,
            api_url=self.telegram_api_url,
            max_per_second=self.telegram_max_per_second,
            chat_interval=self.telegram_chat_interval,
            group_per_minute=self.telegram_group_per_minute,
        )

    def telegram_bot(self) -> TelegramBotSettings:
        """The Telegram bot's settings (with the commands')."""
        return TelegramBotSettings(
            token=self.telegram_token,
            api_url=self.telegram_api_url,
            mode=self.telegram_mode,
            public_url=self.public_url,
            webhook_secret=self.telegram_webhook_secret,
            secret_key=self.secret_key,
            commands=self.chat(),
        )

    def slack(self) -> SlackSettings:
        """The Slack notifier's settings."""
        return SlackSettings(
            bot_token=self.slack_bot_token,
            api_url=self.slack_api_url,
            channel_interval=self.slack_channel_interval,
        )

    def slack_bot(self) -> SlackBotSettings:
        """The Slack app's settings (with the commands')."""
        return SlackBotSettings(
            bot_token=self.slack_bot_token,
            api_url=self.slack_api_url,
            app_token=self.slack_app_token,
            signing_secret=self.slack_signing_secret,
            commands=self.chat(),
        )

    def slack_webhook(self) -> SlackWebhookSettings:
        """The Slack incoming-webhook notifier's settings."""
        return SlackWebhookSettings(
            channel_interval=self.slack_channel_interval,
            timeout=self.webhook_timeout,
            allowed_hosts=self.webhook_allowed_hosts,
        )

    def smtp(self) -> SmtpSettings:
        """The email notifier's settings."""
        return SmtpSettings(
            host=self.smtp_host,
            port=self.smtp_port,
            user=self.smtp_user,
            password=self.smtp_password,
            sender=self.smtp_from,
            starttls=self.smtp_starttls,
            timeout=self.smtp_timeout,
            unsubscribe_mailto=self.unsubscribe_mailto,
        )

    def webhook(self) -> WebhookSettings:
        """The signed-webhook notifier's settings."""
        return WebhookSettings(
            user_agent=self.user_agent,
            secret_key=self.secret_key,
            allowed_hosts=self.webhook_allowed_hosts,
            timeout=self.webhook_timeout,
        )

    def apprise(self) -> AppriseSettings:
        """The Apprise notifier's settings."""
        return AppriseSettings(
            timeout=self.webhook_timeout, allowed_hosts=self.webhook_allowed_hosts, public_url=self.public_url
        )

    def llm(self) -> LlmSettings:
        """The AI guides' client settings."""
        return LlmSettings(
            url=self.llm_url,
            model=self.llm_model,
            api_key=self.llm_api_key,
            timeout=self.llm_timeout,
            user_agent=self.user_agent,
        )

    def http(self) -> HttpSettings:
        """The sources' HTTP client settings."""
        return HttpSettings(
            user_agent=self.user_agent,
            timeout=self.http_timeout,
            deadline=self.http_deadline,
            max_bytes=self.http_max_bytes,
            arxiv_min_interval=self.arxiv_min_interval,
            retries=self.http_retries,
            backoff=self.http_backoff,
            max_retry_wait=self.http_max_retry_wait,
        )

    def masked(self) -> dict[str, Any]:
        """The effective settings with every secret replaced by ``********``."""
        shown: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name in SECRET_FIELDS:
                shown[name] = "********" if value else None
            elif name == "database_url":
                shown[name] = mask_url_password(value)
            else:
                shown[name] = value
        return shown


def mask_url_password(url: str) -> str:
    """Hide the password in a URL such as ``postgresql://user:secret@host/db``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, at, host = rest.rpartition("@")
    user, colon, _password = credentials.partition(":")
    return f"{scheme}://{user}{':********' if colon else ''}{at}{host}"


def parse_networks(text: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """Comma-separated IP addresses or CIDR networks (``127.0.0.1, 10.0.0.0/8, ::1``) as networks.

    ValueError naming the entry that is neither, with the forms that are accepted.
    """
    networks = []
    for part in text.split(","):
        entry = part.strip()
        if not entry:
            continue
        try:
            networks.append(ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(
                f"PAPERTRAIL_TRUSTED_PROXIES: {entry!r} is neither an IP address nor a network; give e.g."
                " '127.0.0.1' or '10.0.0.0/8', comma-separated"
            ) from None
    return tuple(networks)
