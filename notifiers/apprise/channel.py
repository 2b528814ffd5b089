"""The Apprise channel's rules: ``apprise:<Apprise URL>``, the optional package it needs, its notifier."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from core.channel import Notifier, NotifierParts
from core.people.masking import mask_url

if TYPE_CHECKING:
    from core.config import Settings


class AppriseChannel:
    """Any of Apprise's services, by its URL (``ntfy://topic``, ``tgram://BOT:TOKEN/CHAT``)."""

    name = "apprise"
    example = "apprise:ntfy://topic"
    delivers = True
    vote_links = False
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """An Apprise URL: a scheme and ``://``."""
        if "://" not in target:
            raise ValueError(f"apprise target {target!r} must be an Apprise URL, e.g. apprise:ntfy://topic")
        return target

    def mask(self, target: str) -> str:
        """The URL with its credentials masked (Apprise URLs carry tokens in the host and path too)."""
        return mask_url(target.strip())

    def missing_setting(self, settings: Settings) -> str | None:
        """The optional apprise package (found without importing it)."""
        return (
            None if importlib.util.find_spec("apprise") is not None else "pip install 'papertrail[apprise]'"
        )

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The Apprise notifier."""
        from notifiers.apprise.notifier import AppriseNotifier

        return AppriseNotifier(settings.apprise())


APPRISE = AppriseChannel()
