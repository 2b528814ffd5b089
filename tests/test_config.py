"""Settings from the environment and papertrail.toml, and addresses."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from core.channel import normalise_address
from core.config import Settings, mask_url_password


def test_defaults() -> None:
    settings = Settings()
    assert settings.database_url == "sqlite:///./data/papertrail.db"
    assert settings.arxiv_feed_url == "https://rss.arxiv.org/rss/cs"
    assert settings.digest_max_items == 50
    assert "mailto:" in settings.user_agent


def test_environment_and_toml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    toml = tmp_path / "papertrail.toml"
    toml.write_text('arxiv_categories = "cs.LG, stat.ML"\nsmtp_host = "mail.example.org"\nsmtp_port = 2525\n')
    monkeypatch.setenv("PAPERTRAIL_CONFIG", str(toml))
    monkeypatch.setenv("PAPERTRAIL_SMTP_PORT", "587")
    monkeypatch.setenv("PAPERTRAIL_SMTP_STARTTLS", "true")
    settings = Settings()
    assert settings.category_list == ["cs.LG", "stat.ML"]
    assert settings.arxiv_feed_url == "https://rss.arxiv.org/rss/cs.LG+stat.ML"
    assert settings.smtp_host == "mail.example.org"
    assert settings.smtp_port == 587  # the environment wins over the file
    assert settings.smtp_starttls is True


def test_secrets_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_SMTP_PASSWORD", "hunter2")
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", "postgresql+psycopg://pt:s3cret@db/pt")
    shown = Settings().masked()
    assert shown["smtp_password"] == "********"
    assert shown["database_url"] == "postgresql+psycopg://pt:********@db/pt"
    assert "hunter2" not in repr(Settings())
    assert mask_url_password("sqlite:///x.db") == "sqlite:///x.db"


def test_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_DIGEST_MAX_ITEMS", "0")
    with pytest.raises(ValidationError, match="at least 1"):
        Settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PAPERTRAIL_ARXIV_RSS_URL", "file:///tmp/rss.xml"),
        ("PAPERTRAIL_ARXIV_RSS_URL", "rss.arxiv.org/rss/"),
        ("PAPERTRAIL_HF_API_URL", "ftp://huggingface.co/api/"),
        ("PAPERTRAIL_ARXIV_OAI_URL", "https://"),
        ("PAPERTRAIL_ARXIV_API_URL", "export.arxiv.org"),
        ("PAPERTRAIL_TELEGRAM_API_URL", "file:///dev/null"),
        ("PAPERTRAIL_SLACK_API_URL", "javascript:alert(1)"),
        ("PAPERTRAIL_PUBLIC_URL", "papertrail.example.org"),
    ],
)
def test_source_and_service_urls_must_be_http(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    # A file:// feed URL was retried for 14 s as a network error instead of refused at start-up.
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=f"{name} must be an http\\(s\\) URL"):
        Settings()


def test_http_urls_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", " HTTP://127.0.0.1:8000/rss/ ")
    assert Settings().arxiv_rss_url == "HTTP://127.0.0.1:8000/rss/"


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("email:Ada@Example.ORG", "email:Ada@example.org"),
        ("Telegram:12345", "telegram:12345"),
        ("slack:C0123", "slack:C0123"),
        ("console:me", "console:me"),
    ],
)
def test_addresses_normalise(address: str, expected: str) -> None:
    assert normalise_address(address) == expected


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("ada@example.org", "CHANNEL:TARGET"),
        ("fax:123", "unknown channel"),
        ("email:ada", "not an email address"),
        ("telegram:@ada", "must be a number"),
    ],
)
def test_bad_addresses_explain(address: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalise_address(address)
