"""Digest -> Message for a channel, with Jinja2 over ``templates/``.

Plain-text templates are not escaped (they go to a terminal or a text/plain MIME part); HTML templates
are autoescaped, so titles, abstracts and author names can never inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import css_inline
import jinja2

from core.resources import resource_dir
from core.values import DigestItem, Message


def _autoescape(name: str | None) -> bool:
    return bool(name and name.endswith((".html.j2", ".html")))


@dataclass(frozen=True, slots=True)
class DigestView:
    """What every digest template receives."""

    new: tuple[DigestItem, ...]
    revisions: tuple[DigestItem, ...]
    more: int
    total: int
    subject: str
    public_url: str
    recipient: str


def digest_subject(new: int, revisions: int) -> str:
    """A subject line that carries the counts, e.g. ``PaperTrail: 3 new papers, 1 revision``."""
    parts = []
    if new:
        parts.append(f"{new} new paper{'s' if new != 1 else ''}")
    if revisions:
        parts.append(f"{revisions} revision{'s' if revisions != 1 else ''}")
    return "PaperTrail: " + (", ".join(parts) if parts else "no new matches")


class Renderer:
    """Renders digests for each channel from the templates folder."""

    def __init__(self, templates: Path | None = None, *, public_url: str = "", max_items: int = 50) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(templates or resource_dir("templates"))),
            autoescape=_autoescape,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self.public_url = public_url.rstrip("/")
        self.max_items = max_items

    def view(self, items: Sequence[DigestItem], recipient: str) -> DigestView:
        """Split items into new papers and revisions and apply the item cap (new papers come first)."""
        new_all = [item for item in items if not item.is_revision]
        rev_all = [item for item in items if item.is_revision]
        shown_new = new_all[: self.max_items]
        shown_rev = rev_all[: max(0, self.max_items - len(shown_new))]
        more = len(items) - len(shown_new) - len(shown_rev)
        return DigestView(
            new=tuple(shown_new),
            revisions=tuple(shown_rev),
            more=more,
            total=len(items),
            subject=digest_subject(len(new_all), len(rev_all)),
            public_url=self.public_url,
            recipient=recipient,
        )

    def render_text(self, view: DigestView) -> str:
        """The plain-text digest (console, and the text/plain part of email)."""
        return self.env.get_template("digest.txt.j2").render(d=view)

    def render_email(self, items: Sequence[DigestItem], recipient: str) -> Message:
        """A multipart-ready email digest: subject, plain text and HTML with the CSS inlined."""
        view = self.view(items, recipient)
        html = self.env.get_template("email.html.j2").render(d=view)
        return Message(
            subject=view.subject,
            text=self.render_text(view),
            html=css_inline.inline(html),
            item_count=len(items),
        )

    def render_console(self, items: Sequence[DigestItem], recipient: str) -> Message:
        """The plain-text digest only."""
        view = self.view(items, recipient)
        return Message(subject=view.subject, text=self.render_text(view), item_count=len(items))

    def render(self, channel: str, items: Sequence[DigestItem], recipient: str) -> Message:
        """Render for ``channel``; channels without templates of their own get the plain-text digest."""
        if channel == "email":
            return self.render_email(items, recipient)
        return self.render_console(items, recipient)
