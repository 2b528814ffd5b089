"""Log lines for people (``text``) or for log collectors (``json``, one object per line), secrets masked.

``PAPERTRAIL_LOG_FORMAT=json`` writes each record as one JSON object: ``time`` (ISO-8601, UTC),
``level``, ``logger``, ``message``, ``exception`` when there is one, and any of the context fields a
call passes through ``extra=`` (``source``, ``subscriber``, ``digest``, ``worker``, ``role``, ``channel``,
``alarm``). Both
formats run every record through :class:`papertrail.service.redact.SecretRedactor` and mask the finished line
(or every JSON value) once more, so a secret reaches no line whatever field carries it.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from core.config import Settings
from papertrail.service.redact import SecretRedactor, secrets_of

# Context a log call may attach with ``extra=``; other extras (uvicorn's colour codes) are not written.
CONTEXT_FIELDS = ("source", "subscriber", "digest", "worker", "role", "channel", "alarm")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Per-request, per-job and per-migration chatter hides what matters; --verbose brings it back.
# uvicorn.access would also write every request's query string (unsubscribe tokens) to the log.
NOISY_LOGGERS = ("httpx", "alembic", "apscheduler", "uvicorn.access")


class TextFormatter(logging.Formatter):
    """The classic one-line format, with the whole line (traceback included) masked."""

    def __init__(self, redactor: SecretRedactor) -> None:
        super().__init__(TEXT_FORMAT)
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The formatted line with every secret replaced by ``********``."""
        return self.redactor.mask(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, every string value masked before it is encoded."""

    def __init__(self, redactor: SecretRedactor) -> None:
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (newlines inside values are escaped by the encoder)."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value if isinstance(value, int | float | bool) else str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        masked = {key: self.redactor.mask(v) if isinstance(v, str) else v for key, v in entry.items()}
        return json.dumps(masked, ensure_ascii=False)


class _PapertrailHandler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure_logging` installs, told apart from handlers others installed."""


def configure_logging(
    settings: Settings | None, verbose: bool = False, *, stream: TextIO | None = None
) -> None:
    """Set up the root logger: level, format (``settings.log_format``) and the secret filter.

    ``settings`` may be None when the settings are invalid (the command reports that itself): text
    format, nothing to mask yet. Calling it again replaces what an earlier call installed. Like
    :func:`logging.basicConfig`, it leaves the root logger's handlers and level alone when someone else
    (an embedding application, pytest) configured them, unless ``stream`` is given; their handlers still
    get the secret filter.
    """
    redactor = SecretRedactor(secrets_of(settings) if settings is not None else [])
    root = logging.getLogger()
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)
    for old in [h for h in root.handlers if isinstance(h, _PapertrailHandler)]:
        root.removeHandler(old)
    if stream is not None or not root.handlers:
        handler = _PapertrailHandler(stream or sys.stderr)
        json_format = settings is not None and settings.log_format == "json"
        handler.setFormatter(JsonFormatter(redactor) if json_format else TextFormatter(redactor))
        root.addHandler(handler)
        root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for each in root.handlers:
        for old_filter in [f for f in each.filters if isinstance(f, SecretRedactor)]:
            each.removeFilter(old_filter)
        each.addFilter(redactor)
