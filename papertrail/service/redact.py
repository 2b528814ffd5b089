"""Keep secrets out of log lines, whoever writes them.

Libraries log request URLs (httpx: ``POST https://api.telegram.org/bot<TOKEN>/sendMessage``) at INFO or
DEBUG. A filter on the root handlers replaces every configured secret, anything shaped like a Telegram
bot token in a URL, and the credentials inside any URL (a subscriber's ``webhook:https://h/x?token=X`` or
``apprise:mailto://user:pass@host``, see :mod:`core.people.masking`), before a record is written.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from core.config import SECRET_FIELDS, Settings
from core.people.masking import mask_text

MASK = "********"
# Attributes every LogRecord has; any other string attribute came through ``extra=`` (the ``subscriber``
# address among them) and is masked like the message.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# Telegram bot tokens in Bot API URLs: /bot123456:AA...xyz/
_BOT_TOKEN = re.compile(r"/bot\d+:[A-Za-z0-9_-]+")


class SecretRedactor(logging.Filter):
    """Rewrites records whose message contains a secret; never drops a record."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # Short values would mask innocent words; real secrets are long.
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask secrets in the formatted message (and drop the args it was formatted from)."""
        message = record.getMessage()
        masked = self.mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            # Tracebacks quote exception messages, which may quote URLs: format them here to mask them.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.mask(record.exc_text)
        for name, value in list(vars(record).items()):
            if name not in _STANDARD and isinstance(value, str):
                setattr(record, name, self.mask(value))
        return True

    def mask(self, text: str) -> str:
        """``text`` with every secret and bot token replaced by ``********``, URL credentials masked."""
        text = _BOT_TOKEN.sub(f"/bot{MASK}", text)
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        # Configured secrets first, so that they read as ``********`` wherever they sit in a URL.
        return mask_text(text)


def secrets_of(settings: Settings) -> list[str]:
    """The values of every secret setting that is set."""
    values = []
    for name in SECRET_FIELDS:
        value = getattr(settings, name)
        if value is not None:
            values.append(value.get_secret_value())
    return values


def install(settings: Settings) -> None:
    """Add a redactor for ``settings``' secrets to every handler of the root logger."""
    redactor = SecretRedactor(secrets_of(settings))
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, SecretRedactor)]:
            handler.removeFilter(old)
        handler.addFilter(redactor)
