"""The settings each edge receives: small frozen slices of :class:`core.config.Settings`.

``Settings`` stays the one place that reads ``PAPERTRAIL_*`` and ``papertrail.toml``, with its defaults and
validation; each method such as ``settings.telegram()`` copies the few values one adapter needs into one
of the classes below, and the shell passes only that to the adapter. An adapter therefore cannot come to
depend on a knob that is not its own, and its tests build it from exactly what it reads.

Secrets stay ``SecretStr``, whose repr is masked, so printing or logging one of these shows no secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from pydantic import SecretStr


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """What the chat commands (bot/commands*.py) read: the defaults a new subscription gets, the
    language of readers who chose none, the digest pass and arXiv's calendar (for ``/status``)."""

    default_language: str
    default_timezone: str
    default_schedule: str
    digest_check_seconds: int
    holiday_dates: frozenset[date]
    arxiv_stale_grace_hours: float


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """The Telegram notifier: the bot token, the Bot API server and Telegram's rate limits."""

    token: SecretStr | None
    api_url: str
    max_per_second: float
    chat_interval: float
    group_per_minute: int


@dataclass(frozen=True, slots=True)
class TelegramBotSettings:
    """The Telegram bot: token and Bot API server, polling or webhook mode with its URL and secret, and
    the secret key the webhook secret is derived from when none is configured; ``commands`` for the
    commands it answers."""

    token: SecretStr | None
    api_url: str
    mode: str
    public_url: str
    webhook_secret: SecretStr | None
    secret_key: SecretStr | None
    commands: ChatSettings


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """The Slack notifier: the bot token, the Web API base URL and the per-channel interval."""

    bot_token: SecretStr | None
    api_url: str
    channel_interval: float


@dataclass(frozen=True, slots=True)
class SlackBotSettings:
    """The Slack app: the bot token and Web API base URL, the app-level token (Socket Mode), the signing
    secret (HTTP events); ``commands`` for the commands it answers."""

    bot_token: SecretStr | None
    api_url: str
    app_token: SecretStr | None
    signing_secret: SecretStr | None
    commands: ChatSettings


@dataclass(frozen=True, slots=True)
class SlackWebhookSettings:
    """The Slack incoming-webhook notifier: the per-channel interval, the request timeout and the hosts
    allowed besides Slack's (``PAPERTRAIL_WEBHOOK_ALLOW_HOSTS``, lower-cased)."""

    channel_interval: float
    timeout: float
    allowed_hosts: frozenset[str]


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """The email notifier: the SMTP server and login, the From header, and the unsubscribe mailbox."""

    host: str | None
    port: int
    user: str | None
    password: SecretStr | None
    sender: str
    starttls: bool
    timeout: float
    unsubscribe_mailto: str


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """The signed-webhook notifier: who is calling, the key bodies are signed with (shared by design
    with the unsubscribe links), the hosts exempt from the private-address check and the timeout."""

    user_agent: str
    secret_key: SecretStr | None
    allowed_hosts: frozenset[str]
    timeout: float


@dataclass(frozen=True, slots=True)
class AppriseSettings:
    """The Apprise notifier: the timeout, the hosts exempt from the private-address check, and the
    service's public URL (Apprise shows it as the sending app)."""

    timeout: float
    allowed_hosts: frozenset[str]
    public_url: str


@dataclass(frozen=True, slots=True)
class LlmSettings:
    """The AI guides' chat-completions client: endpoint (None: guides off), model, key and timeout."""

    url: str | None
    model: str
    api_key: SecretStr | None
    timeout: float
    user_agent: str


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """The sources' polite HTTP client: User-Agent, timeouts, body cap, arXiv's interval and retries."""

    user_agent: str
    timeout: float
    deadline: float
    max_bytes: int
    arxiv_min_interval: float
    retries: int
    backoff: float
    max_retry_wait: float
