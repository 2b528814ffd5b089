"""Digest -> Message for a channel, with Jinja2 over ``templates/``.

A channel has up to three templates, one per format: ``<channel>.txt.j2`` (plain text; a channel without
one gets ``digest.txt.j2``), ``<channel>.html.j2`` (Telegram HTML, the email's HTML part) and
``<channel>.mrkdwn.j2`` (Slack). Every printed value is escaped for the template's format: not at all in
plain text (it goes to a terminal or a text/plain part, after control characters are stripped), HTML
entities in ``.html.j2``, and ``&``, ``<``, ``>`` in ``.mrkdwn.j2``. So titles, abstracts and author names
can never inject markup into any channel.

Templates print ``{{ cut }}`` between items; the renderer splits each output there into blocks so that
adapters with a length limit split a digest only between items (:func:`core.delivery.pack_blocks`).
Inside one block a template may print ``{{ part }}`` to separate fields an adapter lays out itself (the
Slack section and its context line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import jinja2
import markupsafe

from core import tokens
from core.i18n import DEFAULT_LANGUAGE, install_jinja, translator
from core.resources import resource_dir
from core.text_safety import strip_control
from core.values import DigestItem, Message

# Digests are for skimming: long author lists are cut here; the abstract page has them all.
MAX_AUTHORS_SHOWN = 8
# Abstracts in chat digests are cut to this many characters (at a word boundary); the paper page has all.
ABSTRACT_CHARS = 600

# Record and unit separators: strip_control removes both from every printed value, so only a template's
# own {{ cut }} and {{ part }} can produce them.
CUT = "\x1e"
PART = "\x1f"

# Which reason comes first in a digest: watched papers and followed authors, then title hits, then
# abstract hits, then categories; Hugging Face upvotes break ties.
_REASON_RANK = (("paper ", 0), ("author ", 0), ("title:", 1), ("abstract:", 2), ("category ", 3))

# A newsletter's copy of a match carries reasons prefixed with ``newsletter NAME: `` (core.store_newsletters).
_NEWSLETTER_REASON = re.compile(r"newsletter ([a-z0-9](?:[a-z0-9-]*[a-z0-9])?): ")


def _autoescape(name: str | None) -> bool:
    return bool(name and name.endswith((".html.j2", ".html")))


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def newsletter_of(item: DigestItem) -> str | None:
    """The name of the newsletter ``item`` is a copy from, or None for a match of the reader's own follows."""
    found = _NEWSLETTER_REASON.match(item.reasons[0]) if item.reasons else None
    return found[1] if found else None


def newsletter_names(items: Sequence[DigestItem]) -> set[str]:
    """The names of the newsletters any of ``items`` comes from."""
    return {name for item in items if (name := newsletter_of(item)) is not None}


def item_rank(item: DigestItem) -> tuple[int, int, str, int]:
    """Sort key of an item inside a digest section (best reason, more upvotes, then arXiv id)."""
    best = min(
        (rank for reason in item.reasons for prefix, rank in _REASON_RANK if reason.startswith(prefix)),
        default=len(_REASON_RANK),
    )
    return (best, -item.upvotes, item.arxiv_id, item.version)


def shorten(text: str, limit: int = ABSTRACT_CHARS) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


def short_authors(authors: Sequence[str]) -> str:
    """``A, B, C`` or, past :data:`MAX_AUTHORS_SHOWN` names, ``A, ..., H, et al. (20 authors)``.

    A filter rather than a template macro: a macro defined in a plain-text template would hand its output
    to HTML templates as already-safe markup, unescaped.
    """
    shown = ", ".join(authors[:MAX_AUTHORS_SHOWN])
    return shown if len(authors) <= MAX_AUTHORS_SHOWN else f"{shown}, et al. ({len(authors)} authors)"


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: object) -> object:
    # Every value a template prints passes here first: no terminal escapes or NULs reach any channel.
    # Markup (a macro's output, cut, part) was built from values that already passed here; re-wrapping
    # it as str would escape it twice.
    if isinstance(value, markupsafe.Markup):
        return value
    if isinstance(value, str):
        value = strip_control(value)
        if context.name and context.name.endswith(".mrkdwn.j2"):
            return escape_mrkdwn(value)
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
    unsubscribe_url: str = ""
    manage_url: str = ""
    # What the unsubscribe link says: "Leave <newsletter title>" when it leaves one newsletter only.
    unsubscribe_label: str = "Unsubscribe"


def digest_subject(
    new: int,
    revisions: int,
    *,
    label: str = "PaperTrail",
    including: Sequence[str] = (),
    language: str | None = None,
) -> str:
    """A subject line that carries the counts, e.g. ``PaperTrail: 3 new papers, 1 revision``.

    ``label`` replaces "PaperTrail" (a newsletter's title when the digest is that newsletter's issue);
    ``including`` names newsletters whose issues share the digest with the reader's own matches;
    ``language`` is the reader's (English for None).
    """
    t = translator(language)
    parts = []
    if new:
        parts.append(t.ngettext("{n} new paper", "{n} new papers", new))
    if revisions:
        parts.append(t.ngettext("{n} revision", "{n} revisions", revisions))
    # The list separator is a translated message too: Chinese separates with "、" or "，".
    counts = t.gettext(", ").join(parts) if parts else t.gettext("no new matches")
    subject = t.gettext("{label}: {counts}", label=label, counts=counts)
    if including:
        subject += t.gettext(" (with {newsletters})", newsletters=t.gettext(", ").join(including))
    return subject


class Renderer:
    """Renders digests for each channel from the templates folder."""

    def __init__(
        self,
        templates: Path | None = None,
        *,
        public_url: str = "",
        max_items: int = 50,
        secret_key: str = "",
    ) -> None:
        self.templates = str(templates or resource_dir("templates"))
        self._envs: dict[str, jinja2.Environment] = {}
        self.env = self.environment(DEFAULT_LANGUAGE)
        self.public_url = public_url.rstrip("/")
        self.max_items = max_items
        self.secret_key = secret_key

    def environment(self, language: str | None) -> jinja2.Environment:
        """The template environment of ``language`` (English for None): templates translate through it."""
        language = translator(language).language
        env = self._envs.get(language)
        if env is None:
            env = jinja2.Environment(
                loader=jinja2.FileSystemLoader(self.templates),
                autoescape=_autoescape,
                undefined=jinja2.StrictUndefined,
                trim_blocks=True,
                lstrip_blocks=True,
                keep_trailing_newline=True,
                finalize=_finalize,
                extensions=["jinja2.ext.i18n"],
            )
            env.filters["short_authors"] = short_authors
            env.filters["shorten"] = shorten
            env.globals["cut"] = markupsafe.Markup(CUT)
            env.globals["part"] = markupsafe.Markup(PART)
            install_jinja(env, language, _finalize)
            self._envs[language] = env
        return env

    def leave_link(self, address: str, newsletter: str) -> str:
        """The signed URL that takes ``address`` out of one newsletter; empty without a secret key."""
        if not self.secret_key:
            return ""
        token = tokens.sign(self.secret_key, tokens.LEAVE, tokens.leave_subject(address, newsletter))
        return f"{self.public_url}/leave/{token}"

    def links(self, address: str) -> tuple[str, str]:
        """Signed unsubscribe and manage URLs for a subscriber address; empty without a secret key."""
        if not self.secret_key:
            return "", ""
        unsubscribe = tokens.sign(self.secret_key, tokens.UNSUBSCRIBE, address)
        manage = tokens.sign(self.secret_key, tokens.MANAGE, address)
        return f"{self.public_url}/unsubscribe/{unsubscribe}", f"{self.public_url}/manage/{manage}"

    def view(
        self,
        items: Sequence[DigestItem],
        recipient: str,
        address: str = "",
        newsletters: Mapping[str, str] | None = None,
        language: str | None = None,
    ) -> DigestView:
        """Split items into new papers and revisions, order each by relevance, apply the cap.

        New papers come first; the cap keeps the best-ranked items (see :func:`item_rank`). ``newsletters``
        maps the names of the newsletters the items were copied from to their titles: a digest that is one
        newsletter's issue only is titled with it and its unsubscribe link leaves that newsletter only; a
        digest mixing the reader's own matches (or several newsletters) keeps the whole-address link.
        ``language`` words the subject and the link labels (English for None).
        """
        t = translator(language)
        new_all = sorted((item for item in items if not item.is_revision), key=item_rank)
        rev_all = sorted((item for item in items if item.is_revision), key=item_rank)
        shown_new = new_all[: self.max_items]
        shown_rev = rev_all[: max(0, self.max_items - len(shown_new))]
        more = len(items) - len(shown_new) - len(shown_rev)
        unsubscribe, manage = self.links(address) if address else ("", "")
        titles = dict(newsletters or {})
        names = sorted(newsletter_names(items))
        label, including, leave = "PaperTrail", [titles.get(n, n) for n in names], ""
        if len(names) == 1 and all(newsletter_of(item) for item in items):
            label, including = including[0], []
            leave = self.leave_link(address, names[0]) if address else ""
        return DigestView(
            new=tuple(shown_new),
            revisions=tuple(shown_rev),
            more=more,
            total=len(items),
            subject=digest_subject(
                len(new_all), len(rev_all), label=label, including=including, language=language
            ),
            public_url=self.public_url,
            recipient=recipient,
            unsubscribe_url=leave or unsubscribe,
            manage_url=manage,
            unsubscribe_label=t.gettext("Leave {newsletter}", newsletter=label)
            if leave
            else t.gettext("Unsubscribe"),
        )

    def render(
        self,
        channel: str,
        items: Sequence[DigestItem],
        recipient: str,
        *,
        address: str = "",
        key: str = "",
        newsletters: Mapping[str, str] | None = None,
        language: str | None = None,
    ) -> Message:
        """Render a digest for ``channel`` in every format the channel has a template for.

        ``recipient`` is the target shown in the footer; ``address`` the full subscriber address the
        signed links are made for (default ``channel:recipient``); ``key`` the digest's idempotency key;
        ``newsletters`` the titles of the newsletters the items were copied from (see :meth:`view`);
        ``language`` the reader's language (English for None).
        """
        view = self.view(items, recipient, address or f"{channel}:{recipient}", newsletters, language)
        env = self.environment(language)
        text_blocks = _blocks(_first(env, f"{channel}.txt.j2", "digest.txt.j2").render(d=view))
        html_template = _first(env, f"{channel}.html.j2")
        html_blocks = _blocks(html_template.render(d=view)) if html_template else ()
        mrkdwn_template = _first(env, f"{channel}.mrkdwn.j2")
        mrkdwn_blocks = _blocks(mrkdwn_template.render(d=view)) if mrkdwn_template else ()
        return Message(
            subject=view.subject,
            text="".join(text_blocks),
            html="".join(html_blocks) if html_template else None,
            item_count=len(items),
            text_blocks=text_blocks,
            html_blocks=html_blocks,
            mrkdwn="".join(mrkdwn_blocks) if mrkdwn_template else None,
            mrkdwn_blocks=mrkdwn_blocks,
            items=view.new + view.revisions,
            key=key,
            unsubscribe_url=view.unsubscribe_url,
            manage_url=view.manage_url,
        )

    def render_mail(
        self, name: str, subject: str, *, language: str | None = None, **values: object
    ) -> Message:
        """A one-off mail (not a digest) from ``<name>.txt.j2`` and ``<name>.html.j2``, escaped like digests.

        The templates see ``subject``, ``public_url`` and ``values``; they are worded in ``language``.
        """
        context = {"subject": subject, "public_url": self.public_url, **values}
        env = self.environment(language)
        text = env.get_template(f"{name}.txt.j2").render(context)
        html_template = _first(env, f"{name}.html.j2")
        html = html_template.render(context) if html_template else None
        return Message(subject=subject, text=text, html=html, text_blocks=(text,))


@overload
def _first(env: jinja2.Environment, name: str, fallback: str) -> jinja2.Template: ...
@overload
def _first(env: jinja2.Environment, name: str) -> jinja2.Template | None: ...
def _first(env: jinja2.Environment, name: str, fallback: str | None = None) -> jinja2.Template | None:
    try:
        return env.get_template(name)
    except jinja2.TemplateNotFound:
        return env.get_template(fallback) if fallback else None


def _blocks(rendered: str) -> tuple[str, ...]:
    """Cut a rendered template at its ``{{ cut }}`` marks, dropping empty pieces."""
    return tuple(block for block in rendered.split(CUT) if block)
