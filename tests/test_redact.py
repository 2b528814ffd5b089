"""Secrets never reach a log line, even when a library logs the URL that carries them."""

from __future__ import annotations

import logging

import pytest

from core.config import Settings
from papertrail.service import redact


def test_configured_secrets_and_bot_tokens_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(
        telegram_token="123456:ABCdef_secret-token",
        smtp_password="hunter2-password",
    )
    redactor = redact.SecretRedactor(redact.secrets_of(settings))
    caplog.handler.addFilter(redactor)
    log = logging.getLogger("httpx")
    log.warning("HTTP Request: POST %s", "https://api.example/bot987:OTHERtoken/sendMessage")
    log.warning("login with %s failed", "hunter2-password")
    try:
        raise RuntimeError("https://api.telegram.org/bot123456:ABCdef_secret-token/getMe")
    except RuntimeError:
        log.exception("boom")
    text = caplog.text
    assert "OTHERtoken" not in text and "hunter2-password" not in text and "ABCdef_secret-token" not in text
    assert "/bot********/sendMessage" in text and "login with ******** failed" in text
    assert text.count("********") >= 3
