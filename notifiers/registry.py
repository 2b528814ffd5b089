"""The notifier registry: which adapter serves which address scheme."""

from __future__ import annotations

from typing import TextIO

from core.config import Settings
from core.delivery import Notifier
from notifiers.console import ConsoleNotifier
from notifiers.email import EmailNotifier


def build_notifiers(settings: Settings, *, console: TextIO | None = None) -> dict[str, Notifier]:
    """Every notifier this build has, keyed by channel. Later channels register here."""
    notifiers: list[Notifier] = [ConsoleNotifier(console), EmailNotifier(settings)]
    return {notifier.channel: notifier for notifier in notifiers}
