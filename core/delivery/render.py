"""Digest -> Message for a channel, with Jinja2 over ``templates/``.

A channel has up to three templates, one per format: ``<channel>.txt.j2`` (plain text; a channel without
one gets ``digest.txt.j2``), ``<channel>.html.j2`` (Telegram HTML, the email's HTML part) and
``<channel>.mrkdwn.j2`` (Slack). Every printed value is escaped for the template's format: not at all in
plain text (it goes to a terminal or a text/plain part, after control characters are stripped), HTML
entities in ``.html.j2``, and ``&``, ``<``, ``>`` in ``.mrkdwn.j2``. So titles, abstracts and author names
can never inject markup into any channel.

Each item links its paper's BibTeX entry on this PaperTrail (``DigestView.bibtex_url``,
``core.papers.citations.bibtex_url``) when the renderer has a public URL; without one (tests, benchmarks)
there is
no such link.

Each item of an email digest (and of a webhook's payload) carries two signed vote links, 👍 and 👎
(``DigestView.votes_of``, :meth:`Renderer.vote_links`): ``/vote/TOKEN`` with a token of purpose
``vote`` for the recipient, the version and the value (``core.people.tokens.vote_subject``). Chat channels
vote with buttons of their own instead (:attr:`core.channel.Channel.vote_links`). Without a secret key there
are none.

Templates print ``{{ cut }}`` between items; the renderer splits each output there into blocks so that
adapters with a length limit split a digest only between items (:func:`core.channel.pack_blocks`).
Inside one block a template may print ``{{ part }}`` to separate fields an adapter lays out itself (the
Slack section and its context line).

Languages: a digest is worded in its reader's language; a reader who chose none gets the renderer's
``default_language`` (the operator's ``PAPERTRAIL_DEFAULT_LANGUAGE``). Each language has its own environment
(:meth:`Renderer.environment`) whose ``_()`` and ``{% trans %}`` translate the templates' words (catalog
``locale/<language>/LC_MESSAGES/digest.po``), and whose filters word the stored parts of an item in that
language: the reasons' fixed words (``title:``, ``author``, ``category`` …, see :func:`reason_text`), the
labels of what a revision changed (:data:`CHANGE_LABELS`) and the author list's "et al.". The values
themselves (titles, names, the matched words, guide texts) are never translated and never part of a message
id: they are filled in as escaped values.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import overload

import jinja2
import markupsafe

from core.channel import channels
from core.delivery.ranking import (
    item_rank,
    item_recommendation_rank,
    newsletter_names,
    newsletter_of,
    shown,
    shown_recommended,
    split_recommended,
)
from core.delivery.receipt_text import ReceiptText, word_receipt
from core.escaping import strip_control
from core.languages import (
    DEFAULT_LANGUAGE,
    LANGUAGE_TAGS,
    N_,
    install_jinja,
    listing,
    reader_language,
    translator,
)
from core.papers.citations import bibtex_url
from core.people import tokens
from core.reasons import ABSTRACT, AUTHOR, CATEGORY, LIKED, NEWSLETTER, PAPER, SHARED, TITLE, Reason
from core.resources import resource_dir
from core.values import DigestItem, DigestRest, Message, Receipt, VoteLinks, versioned_id

# Digests are for skimming: long author lists are cut here; the abstract page has them all.
MAX_AUTHORS_SHOWN = 8
# Abstracts in chat digests are cut to this many characters (at a word boundary); the paper page has all.
ABSTRACT_CHARS = 600


# Record and unit separators: strip_control removes both from every printed value, so only a template's
# own {{ cut }} and {{ part }} can produce them.
CUT = "\x1e"
PART = "\x1f"

# How each field of a reason (core.reasons) reads in a digest: the fixed words are translated, the
# matched
# term is shown as stored.
REASON_FORMS = {
    TITLE: N_("title: {value}"),
    ABSTRACT: N_("abstract: {value}"),
    AUTHOR: N_("author {value}"),
    CATEGORY: N_("category {value}"),
    PAPER: N_("paper {value}"),
    LIKED: N_("close to {value}, which you liked"),
    SHARED: N_("shares: {value}"),
}
# A recommendation's shared terms come from paper text, not from a query the reader wrote: its reasons name
# at most this many of them, each cut to this many characters (the pass that writes them keeps fewer).
MAX_SHARED_TERMS = 5
SHARED_TERM_CHARS = 60

# What a revision changed, as core.papers.revisions names it (English, also in the webhook JSON), and how a
# digest words it; one label per name of its CHANGE_NAMES (tests/test_revisions.py checks they agree).
CHANGE_LABELS = {
    "title": N_("title"),
    "authors": N_("authors"),
    "abstract": N_("abstract"),
    "categories": N_("categories"),
    "comment": N_("comment"),
    "journal-ref": N_("journal-ref"),
    "DOI": N_("DOI"),
    "license": N_("license"),
}


def _autoescape(name: str | None) -> bool:
    return bool(name and name.endswith((".html.j2", ".html")))


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shorten(text: str, limit: int = ABSTRACT_CHARS) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


def short_authors(authors: Sequence[str], language: str | None = None) -> str:
    """``A, B, C`` or, past :data:`MAX_AUTHORS_SHOWN` names, ``A, ..., H, et al. (20 authors)``.

    The "et al." is worded in ``language`` (English for None); names are joined with a comma whatever the
    language (they are names, mostly in Latin script, not a sentence). A filter rather than a template
    macro: a macro defined in a plain-text template would hand its output to HTML templates as
    already-safe markup, unescaped.
    """
    shown = ", ".join(authors[:MAX_AUTHORS_SHOWN])
    if len(authors) <= MAX_AUTHORS_SHOWN:
        return shown
    return translator(language).gettext("{shown}, et al. ({n} authors)", shown=shown, n=len(authors))


def reason_text(reason: Reason, language: str | None = None) -> str:
    """One reason as a digest in ``language`` words it: the fixed words translated, the term not.

    ``category cs.DC`` copied from newsletter ``dc-weekly`` reads ``通讯 dc-weekly：分类 cs.DC`` in Chinese.
    """
    t = translator(language)
    if reason.field == NEWSLETTER:
        return t.gettext("newsletter {name}", name=reason.term)
    text = t.gettext(REASON_FORMS[reason.field], value=reason.term)
    if reason.newsletter is not None:
        return t.gettext("newsletter {name}: {reason}", name=reason.newsletter, reason=text)
    return text


def reasons_text(reasons: Sequence[Reason], language: str | None = None) -> str:
    """All reasons of an item, each worded by :func:`reason_text`, in one line.

    A learned recommendation's reasons read as one phrase: each liked paper it is close to, then its shared
    terms in one list (at most :data:`MAX_SHARED_TERMS`), e.g. ``close to 2306.03564, which you liked ·
    shares: policy lag, reinforcement learning`` (``…、…`` in Chinese, see
    :func:`core.languages.listing`).
    """
    t = translator(language)
    worded = [reason_text(r, language) for r in reasons if r.field not in (LIKED, SHARED)]
    liked = [reason_text(r, language) for r in reasons if r.field == LIKED]
    shared = [shorten(r.term, SHARED_TERM_CHARS) for r in reasons if r.field == SHARED]
    if liked or shared:
        if shared:
            terms = listing(t, shared[:MAX_SHARED_TERMS])
            liked.append(t.gettext(REASON_FORMS[SHARED], value=terms))
        worded.append(t.gettext(" · ").join(liked))
    return t.gettext("; ").join(worded)


def changes_text(changes: Sequence[str], language: str | None = None) -> str:
    """What a revision changed (``title, journal-ref``), the labels of :data:`CHANGE_LABELS` translated."""
    t = translator(language)
    return listing(t, (t.gettext(CHANGE_LABELS[c]) if c in CHANGE_LABELS else c for c in changes))


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: wide (CJK) characters take two, for underlining a heading."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


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


def _translation_value(context: jinja2.runtime.Context, value: object) -> object:
    # The values of a translated sentence (``_("Why: %(reasons)s", reasons=…)``). HTML templates get the
    # sentence as Markup with every value entity-escaped (core.languages.install_jinja does that part);
    # in the
    # other formats the sentence comes back as a plain string and passes _finalize when printed, which
    # escapes the whole of it for mrkdwn. Escaping the values here as well would escape them twice.
    return (
        strip_control(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value
    )


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
    # The scan receipt worded in the reader's language and timezone (None: not known); a heartbeat has
    # no items and its receipt's summary is its message (core.delivery.receipts).
    receipt: ReceiptText | None = None
    heartbeat: bool = False
    # The shown items' signed vote links, by versioned id (empty: this channel has none, or no secret key).
    votes: Mapping[str, VoteLinks] = field(default_factory=dict)

    def votes_of(self, item: DigestItem) -> VoteLinks | None:
        """The item's 👍 / 👎 links for this recipient, or None (the templates then print none)."""
        return self.votes.get(versioned_id(item.arxiv_id, item.version))

    # Learned recommendations, best score first: a section after the follows' matches.
    recommended: tuple[DigestItem, ...] = ()

    @property
    def shown(self) -> int:
        """How many items the digest lists."""
        return len(self.new) + len(self.revisions) + len(self.recommended)

    def bibtex_url(self, item: DigestItem) -> str:
        """Where PaperTrail serves the item's BibTeX entry; empty when the renderer has no public URL."""
        return bibtex_url(self.public_url, item.arxiv_id) if self.public_url else ""


def digest_subject(
    new: int,
    revisions: int,
    *,
    label: str = "PaperTrail",
    including: Sequence[str] = (),
    language: str | None = None,
    recommended: int = 0,
) -> str:
    """A subject line that carries the counts, e.g. ``PaperTrail: 3 new papers, 1 revision``.

    ``label`` replaces "PaperTrail" (a newsletter's title when the digest is that newsletter's issue);
    ``including`` names newsletters whose issues share the digest with the reader's own matches;
    ``language`` is the reader's (English for None). ``new`` and ``revisions`` count the follows' matches;
    ``recommended`` the learned recommendations, named last (``…, 2 recommended papers``).
    """
    t = translator(language)
    parts = []
    if new:
        parts.append(t.ngettext("{n} new paper", "{n} new papers", new))
    if revisions:
        parts.append(t.ngettext("{n} revision", "{n} revisions", revisions))
    if recommended:
        parts.append(t.ngettext("{n} recommended paper", "{n} recommended papers", recommended))
    # Listed in the reader's language: Chinese enumerates with "、" (core.languages.listing).
    counts = listing(t, parts) if parts else t.gettext("no new matches")
    subject = t.gettext("{label}: {counts}", label=label, counts=counts)
    if including:
        subject += t.gettext(" (with {newsletters})", newsletters=listing(t, including))
    return subject


class Renderer:
    """Renders digests for each channel from the templates folder.

    ``default_language`` is the language of readers who chose none (``Settings.default_language``): every
    method given ``language=None`` words its output in it.
    """

    def __init__(
        self,
        templates: Path | None = None,
        *,
        public_url: str = "",
        max_items: int = 50,
        secret_key: str = "",
        default_language: str = DEFAULT_LANGUAGE,
    ) -> None:
        self.templates = str(templates or resource_dir("templates"))
        self.default_language = reader_language(default=default_language)
        self._envs: dict[str, jinja2.Environment] = {}
        self.env = self.environment(None)
        self.public_url = public_url.rstrip("/")
        self.max_items = max_items
        self.secret_key = secret_key

    def language_of(self, language: str | None) -> str:
        """The language a reader of ``language`` reads: it, when PaperTrail speaks it, else the default."""
        return reader_language(language, default=self.default_language)

    def environment(self, language: str | None) -> jinja2.Environment:
        """The template environment of ``language`` (the default language for None): templates translate
        through it."""
        language = self.language_of(language)
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
            env.filters.update(_language_filters(language))
            env.filters["shorten"] = shorten
            env.filters["width"] = display_width
            env.globals["cut"] = markupsafe.Markup(CUT)
            env.globals["part"] = markupsafe.Markup(PART)
            env.globals["html_lang"] = LANGUAGE_TAGS[language]
            install_jinja(env, language, _translation_value)
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

    def vote_links(self, address: str, items: Iterable[DigestItem]) -> dict[str, VoteLinks]:
        """The signed 👍 and 👎 URLs of each of ``items`` for ``address``, by versioned id; empty without a
        secret key."""
        if not self.secret_key or not address:
            return {}
        links = {}
        for item in items:
            like, dislike = (
                tokens.sign(
                    self.secret_key,
                    tokens.VOTE,
                    tokens.vote_subject(address, item.arxiv_id, item.version, value),
                )
                for value in (1, -1)
            )
            links[versioned_id(item.arxiv_id, item.version)] = VoteLinks(
                f"{self.public_url}/vote/{like}", f"{self.public_url}/vote/{dislike}"
            )
        return links

    def view(
        self,
        items: Sequence[DigestItem],
        recipient: str,
        address: str = "",
        newsletters: Mapping[str, str] | None = None,
        language: str | None = None,
        rest: DigestRest | None = None,
        receipt: Receipt | None = None,
        heartbeat: bool = False,
        votes: bool = False,
    ) -> DigestView:
        """Split items into new papers, revisions and recommendations, order each, apply the cap.

        New papers come first; the cap keeps the best-ranked items (see :func:`item_rank`,
        :func:`core.delivery.ranking.shown`).
        Learned recommendations (``item.recommended`` set) are a section of their own after the follows'
        matches, best score first, and only fill the room the follows' matches leave under the cap
        (:func:`shown_recommended`): a recommendation never pushes a follow's match out.
        ``newsletters`` maps the names of the newsletters the items were copied from to their titles: a
        digest that is one newsletter's issue only is titled with it and its unsubscribe link leaves that
        newsletter only; a digest mixing the reader's own matches (or several newsletters) keeps the
        whole-address link. ``language`` words the subject and the link labels (the default for None).
        ``rest`` summarises items of the digest left out of ``items`` because the cap would not show them
        (a worker loads only the shown ones): they count in the subject, the total and "and N more".
        ``receipt`` is worded in ``language`` for the templates; ``heartbeat`` marks a heartbeat (no items);
        ``votes`` asks for the shown items' signed vote links (:meth:`vote_links`).
        """
        language = self.language_of(language)
        t = translator(language)
        rest = rest or DigestRest()
        followed, rec_all = split_recommended(items)
        new_all = [item for item in followed if not item.is_revision]
        rev_all = [item for item in followed if item.is_revision]
        shown_new, shown_rev = shown(new_all, rev_all, item_rank, self.max_items)
        room = self.max_items - len(shown_new) - len(shown_rev)
        shown_rec = shown_recommended(rec_all, item_recommendation_rank, room)
        total = len(items) + rest.count
        more = total - len(shown_new) - len(shown_rev) - len(shown_rec)
        unsubscribe, manage = self.links(address) if address else ("", "")
        titles = dict(newsletters or {})
        names = sorted(newsletter_names(items) | rest.newsletters)
        label, including, leave = "PaperTrail", [titles.get(n, n) for n in names], ""
        if len(names) == 1 and not rest.own and all(newsletter_of(item) for item in items):
            label, including = including[0], []
            leave = self.leave_link(address, names[0]) if address else ""
        return DigestView(
            new=tuple(shown_new),
            revisions=tuple(shown_rev),
            more=more,
            total=total,
            subject=digest_subject(
                len(new_all) + rest.new,
                len(rev_all) + rest.revisions,
                label=label,
                including=including,
                language=language,
                recommended=len(rec_all) + rest.recommended,
            ),
            public_url=self.public_url,
            recipient=recipient,
            unsubscribe_url=leave or unsubscribe,
            manage_url=manage,
            unsubscribe_label=t.gettext("Leave {newsletter}", newsletter=label)
            if leave
            else t.gettext("Unsubscribe"),
            receipt=word_receipt(receipt, t, heartbeat=heartbeat) if receipt else None,
            heartbeat=heartbeat,
            votes=self.vote_links(address, [*shown_new, *shown_rev, *shown_rec]) if votes and address else {},
            recommended=tuple(shown_rec),
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
        rest: DigestRest | None = None,
        receipt: Receipt | None = None,
        heartbeat: bool = False,
    ) -> Message:
        """Render a digest for ``channel`` in every format the channel has a template for.

        ``recipient`` is the target shown in the footer; ``address`` the full subscriber address the
        signed links are made for (default ``channel:recipient``); ``key`` the digest's idempotency key;
        ``newsletters`` the titles of the newsletters the items were copied from (see :meth:`view`);
        ``language`` the reader's language (the default language for None); ``rest`` the digest's items not
        given because they would not be shown (see :meth:`view`); ``receipt`` the digest's scan receipt
        (shown in every format, and carried on the message for the webhook's payload); ``heartbeat`` a
        heartbeat's message (no items: the receipt and a footer saying how to turn it off).
        """
        language = self.language_of(language)
        view = self.view(
            items,
            recipient,
            address or f"{channel}:{recipient}",
            newsletters,
            language,
            rest,
            receipt=receipt,
            heartbeat=heartbeat,
            votes=_vote_links(channel),
        )
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
            item_count=view.total,
            text_blocks=text_blocks,
            html_blocks=html_blocks,
            mrkdwn="".join(mrkdwn_blocks) if mrkdwn_template else None,
            mrkdwn_blocks=mrkdwn_blocks,
            items=view.new + view.revisions + view.recommended,
            key=key,
            unsubscribe_url=view.unsubscribe_url,
            manage_url=view.manage_url,
            public_url=self.public_url,
            language=language,
            receipt=receipt,
            heartbeat=heartbeat,
            vote_links=view.votes,
        )

    def render_mail(
        self, name: str, subject: str, *, language: str | None = None, **values: object
    ) -> Message:
        """A one-off mail (not a digest) from ``<name>.txt.j2`` and ``<name>.html.j2``, escaped like digests.

        The templates see ``subject``, ``public_url`` and ``values``; they are worded in ``language`` (the
        default language for None).
        """
        language = self.language_of(language)
        context = {"subject": subject, "public_url": self.public_url, **values}
        env = self.environment(language)
        text = env.get_template(f"{name}.txt.j2").render(context)
        html_template = _first(env, f"{name}.html.j2")
        html = html_template.render(context) if html_template else None
        return Message(
            subject=subject,
            text=text,
            html=html,
            text_blocks=(text,),
            language=language,
        )


def _language_filters(language: str) -> dict[str, Callable[..., str]]:
    """The filters that word an item's stored parts in ``language`` (see the module docstring)."""
    return {
        "short_authors": partial(short_authors, language=language),
        "reasons": partial(reasons_text, language=language),
        "changes": partial(changes_text, language=language),
    }


@overload
def _first(env: jinja2.Environment, name: str, fallback: str) -> jinja2.Template: ...
@overload
def _first(env: jinja2.Environment, name: str) -> jinja2.Template | None: ...
def _first(env: jinja2.Environment, name: str, fallback: str | None = None) -> jinja2.Template | None:
    try:
        return env.get_template(name)
    except jinja2.TemplateNotFound:
        return env.get_template(fallback) if fallback else None


def _vote_links(channel: str) -> bool:
    """Whether the registered channel's digests carry signed vote links per item."""
    found = channels().find(channel)
    return found is not None and found.vote_links


def _blocks(rendered: str) -> tuple[str, ...]:
    """Cut a rendered template at its ``{{ cut }}`` marks, dropping empty pieces."""
    return tuple(block for block in rendered.split(CUT) if block)
