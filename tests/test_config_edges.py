"""The per-edge settings (core/config_edges.py): each slice carries its knobs from Settings, and no secret
shows in a slice's repr."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields, is_dataclass

import pytest

from core.config import Settings

SECRETS = {
    "telegram_token": "123:tg-token-value",
    "secret_key": "signing-key-value",
    "smtp_password": "smtp-password-value",
    "llm_api_key": "llm-key-value",
    "slack_bot_token": "xoxb-bot-token-value",
    "slack_app_token": "xapp-app-token-value",
    "slack_signing_secret": "signing-secret-value",
    "telegram_webhook_secret": "webhook-secret-value",
}
SLICES = (
    "chat", "telegram", "telegram_bot", "slack", "slack_bot", "slack_webhook", "smtp", "webhook", "apprise",
    "llm", "http",
)  # fmt: skip


def configured() -> Settings:
    return Settings(
        telegram_token=SECRETS["telegram_token"],
        secret_key=SECRETS["secret_key"],
        smtp_password=SECRETS["smtp_password"],
        llm_api_key=SECRETS["llm_api_key"],
        slack_bot_token=SECRETS["slack_bot_token"],
        slack_app_token=SECRETS["slack_app_token"],
        slack_signing_secret=SECRETS["slack_signing_secret"],
        telegram_webhook_secret=SECRETS["telegram_webhook_secret"],
        llm_url="http://127.0.0.1:11434/v1",
        llm_model="qwen2.5:7b",
        smtp_host="mail.example.org",
        smtp_from="Ops <ops@example.org>",
        webhook_allow_hosts="Hooks.Internal, 127.0.0.1",
        telegram_group_per_minute=7,
        default_language="zh",
        arxiv_holidays="2026-12-25",
    )


@pytest.mark.parametrize("name", SLICES)
def test_slices_are_frozen_and_show_no_secret(name: str) -> None:
    part = getattr(configured(), name)()
    assert is_dataclass(part)
    shown = repr(part)
    assert not [value for value in SECRETS.values() if value in shown]
    with pytest.raises(FrozenInstanceError):
        setattr(part, fields(part)[0].name, None)


def test_slices_carry_the_settings() -> None:
    settings = configured()
    assert settings.telegram().group_per_minute == 7
    assert settings.telegram().api_url == settings.telegram_api_url
    assert settings.smtp().sender == "Ops <ops@example.org>"
    assert settings.smtp().host == "mail.example.org"
    assert settings.webhook().allowed_hosts == frozenset({"hooks.internal", "127.0.0.1"})
    assert settings.webhook().user_agent == settings.user_agent
    assert settings.apprise().public_url == settings.public_url
    assert settings.llm().model == "qwen2.5:7b"
    assert settings.http().max_bytes == settings.http_max_bytes
    bot = settings.telegram_bot()
    assert bot.commands == settings.chat() == settings.slack_bot().commands
    assert bot.commands.default_language == "zh"
    assert [str(day) for day in bot.commands.holiday_dates] == ["2026-12-25"]
    token = settings.slack().bot_token
    assert token is not None and token.get_secret_value() == SECRETS["slack_bot_token"]
