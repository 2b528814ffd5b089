"""The console channel's rules: ``console:<name>``, printed on standard output; nothing to configure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.channel import Notifier, NotifierParts
from core.people.masking import mask_text

if TYPE_CHECKING:
    from core.config import Settings


class ConsoleChannel:
    """Digests printed to the console (or the stream the shell passes): for trying PaperTrail out."""

    name = "console"
    example = "console:NAME"
    delivers = True
    vote_links = False
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """Any name."""
        return target

    def mask(self, target: str) -> str:
        """A name; any URL in it masked leniently."""
        return mask_text(target)

    def missing_setting(self, settings: Settings) -> str | None:
        """Nothing: the console needs no configuration."""
        return None

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The console notifier, writing to the shell's stream."""
        from notifiers.console.notifier import ConsoleNotifier

        return ConsoleNotifier(parts.console)


CONSOLE = ConsoleChannel()
