"""Digest -> Message for a channel, with Jinja2 over ``templates/``.

Plain-text templates are not escaped (they go to a terminal or a text/plain MIME part); HTML templates
are autoescaped, so titles, abstracts and author names can never inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import css_inline
import jinja2
import markupsafe

from core.resources import resource_dir
from core.text_safety import strip_control
from core.values import DigestItem, Message

# Digests are for skimming: long author lists are cut here; the abstract page has them all.
MAX_AUTHORS_SHOWN = 8


def _autoescape(name: str | None) -> bool:
    return bool(name and name.endswith((".html.j2", ".html")))


def short_authors(authors: Sequence[str]) -> str:
    """``A, B, C`` or, past :data:`MAX_AUTHORS_SHOWN` names, ``A, ..., H, et al. (20 authors)``.

    A filter rather than a template macro: a macro defined in a plain-text template would hand its output
    to HTML templates as already-safe markup, unescaped.
    """
    shown = ", ".join(authors[:MAX_AUTHORS_SHOWN])
    return shown if len(authors) <= MAX_AUTHORS_SHOWN else f"{shown}, et al. ({len(authors)} authors)"


def _finalize(value: object) -> object:
    # Every value a template prints passes here first: no terminal escapes or NULs reach any channel.
    # Markup (a macro's output) was built from values that already passed here; re-wrapping it as str
    # would escape it twice.
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return strip_control(value)
    return value


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
            finalize=_finalize,
        )
        self.env.filters["short_authors"] = short_authors
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

    def render(self, channel: str, items: Sequence[DigestItem], recipient: str) -> Message:
        """Render for ``channel`` from ``<channel>.txt.j2`` and, when it exists, ``<channel>.html.j2``.

        A channel without a text template of its own gets ``digest.txt.j2``, the plain-text digest.
        """
        view = self.view(items, recipient)
        text = self._first(f"{channel}.txt.j2", "digest.txt.j2").render(d=view)
        html_template = self._first(f"{channel}.html.j2")
        html = css_inline.inline(html_template.render(d=view)) if html_template else None
        return Message(subject=view.subject, text=text, html=html, item_count=len(items))

    @overload
    def _first(self, name: str, fallback: str) -> jinja2.Template: ...
    @overload
    def _first(self, name: str) -> jinja2.Template | None: ...
    def _first(self, name: str, fallback: str | None = None) -> jinja2.Template | None:
        try:
            return self.env.get_template(name)
        except jinja2.TemplateNotFound:
            return self.env.get_template(fallback) if fallback else None
