"""Log lines: JSON (one object per line, context fields) or text, and no secret in either."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config import Settings
from papertrail.service.logs import NOISY_LOGGERS, configure_logging
from tests.servers import closed_port
from tests.support.service_process import ServiceProcess, service_env

TOKEN = "123456:AAsecret-telegram-token_xyz"
PASSWORD = "hunter2-smtp-password"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the root logger's level, handlers and filters back as they were."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    filters = {h: list(h.filters) for h in handlers}
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    for name, noisy_level in noisy.items():
        logging.getLogger(name).setLevel(noisy_level)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler, kept in filters.items():
        handler.filters[:] = kept
    root.setLevel(level)


def emit_everything(log: logging.Logger) -> None:
    """A line with context, a secret in the arguments, a bot URL, and a traceback quoting the token."""
    log.info("ingested %d papers", 3, extra={"source": "arxiv-rss"})
    log.warning(
        "delivery to %s failed",
        "telegram:42",
        extra={"subscriber": "telegram:42", "digest": 7, "color_message": "x"},
    )
    log.info("login with %s", PASSWORD)
    log.info("POST https://api.telegram.org/bot%s/sendMessage", TOKEN)
    try:
        raise RuntimeError(f"https://api.telegram.org/bot{TOKEN}/getMe\nsecond line {PASSWORD}")
    except RuntimeError:
        log.exception("send crashed", extra={"subscriber": "telegram:42"})


def test_json_lines_carry_time_level_logger_message_and_context(restore_logging: None) -> None:
    stream = io.StringIO()
    settings = Settings(log_format="json", telegram_token=TOKEN, smtp_password=PASSWORD)
    configure_logging(settings, stream=stream)
    emit_everything(logging.getLogger("papertrail.test"))
    text = stream.getvalue()
    lines = text.splitlines()
    assert len(lines) == 5  # the traceback's newlines are escaped inside its line
    entries = [json.loads(line) for line in lines]
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= entry.keys()
        assert entry["time"].endswith("+00:00") and entry["logger"] == "papertrail.test"
    assert entries[0]["source"] == "arxiv-rss" and entries[0]["message"] == "ingested 3 papers"
    assert entries[1]["subscriber"] == "telegram:42" and entries[1]["digest"] == 7
    assert entries[1]["level"] == "WARNING" and "color_message" not in entries[1]
    assert entries[2]["message"] == "login with ********"
    assert entries[3]["message"] == "POST https://api.telegram.org/bot********/sendMessage"
    assert "RuntimeError" in entries[4]["exception"] and entries[4]["subscriber"] == "telegram:42"
    assert TOKEN not in text and "AAsecret" not in text and PASSWORD not in text


def test_text_lines_are_masked_too(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(Settings(telegram_token=TOKEN, smtp_password=PASSWORD), stream=stream)
    emit_everything(logging.getLogger("papertrail.test"))
    text = stream.getvalue()
    assert " INFO papertrail.test: ingested 3 papers" in text and "Traceback" in text
    assert TOKEN not in text and "AAsecret" not in text and PASSWORD not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_configuring_twice_keeps_one_handler_and_debug_with_verbose(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(None, stream=io.StringIO())
    configure_logging(Settings(log_format="json"), verbose=True, stream=stream)
    logging.getLogger("papertrail.test").debug("details")
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == ["details"]
    assert logging.getLogger("httpx").level == logging.DEBUG


@pytest.mark.net
def test_the_service_writes_only_json_lines_and_never_the_token(tmp_path: Path) -> None:
    # The token sits in the feed URL, so the ingest failure (a refused connection) quotes it.
    env = service_env(
        tmp_path,
        database_url=f"sqlite:///{tmp_path}/logs.db",
        arxiv_rss_url=f"http://127.0.0.1:{closed_port()}/{TOKEN}/rss/",
        hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
        arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
        http_backoff="0.01",
        telegram_token=TOKEN,
        log_format="json",
    )
    service = ServiceProcess(["run", "--role", "scheduler,bots"], env)
    try:
        service.wait_for_line("source arxiv-rss failed")
        assert service.stop() == 0, service.output
    finally:
        service.kill()
    entries = [json.loads(line) for line in service.lines]  # every line is one JSON object
    failure = next(
        e for e in entries if e["logger"] == "core.papers.pipeline" and e.get("source") == "arxiv-rss"
    )
    assert failure["level"] == "WARNING" and "/********/rss/" in failure["message"]
    assert any(e.get("role") == "bots" for e in entries)
    assert TOKEN not in service.output and "AAsecret" not in service.output
