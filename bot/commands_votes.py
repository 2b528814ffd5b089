"""The vote commands: ``like``, ``dislike``, ``unvote``, ``likes``; and a digest's vote button.

A vote is the chat's: in a group or channel it teaches PaperTrail what the whole group reads, so like
``follow`` it takes an administrator there (the grammar checks ``ChatContext.can_change`` before these run;
:func:`press_vote` checks it for a digest's 👍 / 👎 button). ``likes`` only lists, so anyone may use it.

Every step goes through :mod:`core.taste.votes` (the one vote step every channel calls); this module only
reads
what the reader typed and words the outcome. Papers are named as :func:`core.taste.votes.read_paper_ref` reads
them: ``2306.03564`` (the newest stored version), ``2306.03564v2`` (that version), ``arXiv:…`` or an
arxiv.org link.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from bot.commands_base import Call, ChatContext, Problem, Reply, cut, reply_language, stored_language
from core.config_edges import ChatSettings
from core.db import Database
from core.follows import subscribers
from core.languages import N_, Translator, listing, translator
from core.models import DISLIKE, LIKE, Version, utcnow
from core.papers import status as papers
from core.taste.votes import VoteState, cast_vote, paper_name, read_paper_ref, undo_vote, vote_counts, votes

log = logging.getLogger(__name__)

LIKES_SHOWN = 20
"""Votes ``likes`` lists, newest first; the reply counts the rest."""
TITLE_CHARS = 70
"""A paper's title is cut to this many characters where a vote reply or ``likes`` shows it."""
_MARK = {LIKE: "👍", DISLIKE: "👎"}
NOT_ALLOWED = N_(
    "Only admins of {place} can vote for it: its votes teach PaperTrail what {place} reads. "
    "Anyone can use {p}likes, {p}follows, {p}status, {p}try and {p}help."
)
"""The refusal of a vote to a group member (the grammar's and the buttons')."""
SORRY = N_("Sorry, the vote was not recorded: something went wrong on PaperTrail's side. Try again later.")


def _paper(call: Call) -> tuple[str, int | None] | Reply:
    """The paper named by the first argument, or the reply saying what an id looks like."""
    t, p = call.t, call.p
    if not call.args:
        return call.reply(
            t.gettext(
                "Say which paper: {p}{command} 2306.03564, an arXiv id (add v2 for one version; without it, "
                "the newest version PaperTrail stored).",
                p=p,
                command=call.name,
            ),
            error=Problem.BAD_ARGUMENT,
        )
    typed = call.args.split(" ", 1)[0]
    ref = read_paper_ref(typed)
    if ref is None:
        return call.reply(
            t.gettext(
                '"{text}" is not an arXiv id. An id looks like 2306.03564 or 2306.03564v2 (hep-th/9901001 '
                "for papers before 2007); a link to arxiv.org/abs/… works too. "
                "Example: {p}{command} 2306.03564",
                text=cut(typed, 40),
                p=p,
                command=call.name,
            ),
            error=Problem.BAD_ARGUMENT,
        )
    return ref


def _stored(call: Call, arxiv_id: str, version: int | None) -> list[Version] | Reply:
    """The stored versions of the paper, or the reply saying PaperTrail does not have it (or that version)."""
    t, p = call.t, call.p
    stored = papers.versions_of(call.db, arxiv_id)
    if not stored:
        return call.reply(
            t.gettext(
                "PaperTrail has not stored {id}: votes go to papers it has collected from arXiv. "
                "{p}follow id:{id} watches it, so {place} hears when it is announced or revised.",
                id=arxiv_id,
                p=p,
                place=call.place,
            ),
            error=Problem.NOT_FOUND,
            suggestions=(f"follow id:{arxiv_id}",),
        )
    if version is not None and all(row.number != version for row in stored):
        return call.reply(
            t.gettext(
                "PaperTrail has no v{version} of {id}; it has stored {versions}. "
                "{p}{command} {id} votes on the newest.",
                version=version,
                id=arxiv_id,
                versions=listing(t, (f"v{row.number}" for row in stored)),
                p=p,
                command=call.name,
            ),
            error=Problem.NOT_FOUND,
            suggestions=(f"{call.name} {arxiv_id}",),
        )
    return stored


def like(call: Call) -> Reply:
    """``like ID``: the chat liked a paper (its newest stored version unless ``vNN`` says which)."""
    return _vote(call, LIKE)


def dislike(call: Call) -> Reply:
    """``dislike ID``: the paper was not for the chat."""
    return _vote(call, DISLIKE)


def _target(call: Call) -> tuple[int, str, int | None] | Reply:
    """(subscriber id, arXiv id, version or None) of a vote command, or the reply that says why not."""
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    ref = _paper(call)
    if isinstance(ref, Reply):
        return ref
    return (subscriber.id or 0, *ref)


def _vote(call: Call, value: int) -> Reply:
    t, p = call.t, call.p
    target = _target(call)
    if isinstance(target, Reply):
        return target
    subscriber_id, arxiv_id, version = target
    stored = _stored(call, arxiv_id, version)
    if isinstance(stored, Reply):
        return stored
    outcome = cast_vote(call.db, subscriber_id, arxiv_id, value, version=version, now=call.now)
    if outcome.state is VoteState.UNKNOWN_PAPER:  # removed between the two reads
        return call.reply(t.gettext("PaperTrail has not stored {id}.", id=arxiv_id), error=Problem.NOT_FOUND)
    name = paper_name(arxiv_id, outcome.version)
    title = cut(next((row.title for row in stored if row.number == outcome.version), ""), TITLE_CHARS)
    said = _said(t, value, outcome.state, name, title)
    return call.reply(
        said,
        t.gettext(
            "Votes teach PaperTrail what {place} reads; {p}likes lists them, {p}unvote {paper} takes this "
            "one back.",
            place=call.place,
            p=p,
            paper=name,
        ),
        suggestions=(f"unvote {name}",),
    )


def _said(t: Translator, value: int, state: VoteState, name: str, title: str) -> str:
    """The first line of a vote's reply: what was recorded, on which paper."""
    if state is VoteState.UNCHANGED:
        if value == LIKE:
            return t.gettext("👍 {paper} was liked already: {title}", paper=name, title=title)
        return t.gettext("👎 {paper} was disliked already: {title}", paper=name, title=title)
    if state is VoteState.CHANGED:
        if value == LIKE:
            return t.gettext("👍 Liked {paper} (it was 👎 before): {title}", paper=name, title=title)
        return t.gettext("👎 Disliked {paper} (it was 👍 before): {title}", paper=name, title=title)
    if value == LIKE:
        return t.gettext("👍 Liked {paper}: {title}", paper=name, title=title)
    return t.gettext("👎 Disliked {paper}: {title}", paper=name, title=title)


def unvote(call: Call) -> Reply:
    """``unvote ID``: take back the chat's vote on a paper (every version, or the one ``vNN`` names)."""
    t, p = call.t, call.p
    target = _target(call)
    if isinstance(target, Reply):
        return target
    subscriber_id, arxiv_id, version = target
    name = paper_name(arxiv_id, version)
    outcome = undo_vote(call.db, subscriber_id, arxiv_id, version=version)
    if outcome.state is VoteState.NOT_VOTED:
        return call.reply(
            t.gettext(
                "{Place} has no vote on {paper}. {p}likes lists its votes.",
                Place=call.capital_place,
                paper=name,
                p=p,
            ),
            error=Problem.NOT_FOUND,
            suggestions=("likes",),
        )
    return call.reply(
        t.gettext("Vote on {paper} taken back.", paper=name),
        t.gettext(
            "{p}like {paper} or {p}dislike {paper} votes again; {p}likes lists the votes.", paper=name, p=p
        ),
    )


def likes(call: Call) -> Reply:
    """``likes``: the chat's votes, newest first, with how many it liked and disliked."""
    t, p = call.t, call.p
    subscriber = call.subscriber()
    if subscriber is None:
        return call.not_subscribed()
    sid = subscriber.id or 0
    counts = vote_counts(call.db, sid)
    liked, disliked, seeds = counts.liked, counts.disliked, counts.seeds
    imported = (
        t.ngettext(
            "{n} paper imported from a library counts as liked too.",
            "{n} papers imported from a library count as liked too.",
            seeds,
        )
        if seeds
        else ""
    )
    if not liked and not disliked:
        return call.reply(
            t.gettext(
                "{Place} has not voted on any paper yet. Vote with {p}like ID or {p}dislike ID, or with the "
                "👍 and 👎 buttons under the papers of a digest.",
                Place=call.capital_place,
                p=p,
            ),
            imported,
            suggestions=("help like",),
        )
    shown = votes(call.db, sid, limit=LIKES_SHOWN)
    head = t.ngettext(
        "{Place} voted on {n} paper: 👍 {likes} · 👎 {dislikes}",
        "{Place} voted on {n} papers: 👍 {likes} · 👎 {dislikes}",
        liked + disliked,
        Place=call.capital_place,
        likes=liked,
        dislikes=disliked,
    )
    lines = [
        f"{_MARK.get(view.value, '?')} {view.arxiv_id}v{view.version} {cut(view.title, TITLE_CHARS)}"
        for view in shown
    ]
    more = liked + disliked - len(shown)
    older = t.ngettext("…and {n} older vote.", "…and {n} older votes.", more) if more > 0 else ""
    return call.reply(
        head,
        "\n".join(lines),
        older,
        imported,
        t.gettext("{p}unvote ID takes a vote back.", p=p),
    )


@dataclass(frozen=True, slots=True)
class Pressed:
    """What pressing a digest's 👍 or 👎 did.

    ``text`` is a short note for the presser (a Telegram toast, at most 200 characters), in ``language``.
    ``vote`` is the vote now on that version (:data:`LIKE`, :data:`DISLIKE`, 0 for none), None when
    nothing changed because the press was refused (``error`` says why).
    """

    text: str
    vote: int | None
    error: Problem | None = None
    language: str = "en"


def press_vote(
    db: Database,
    settings: ChatSettings,
    ctx: ChatContext,
    arxiv_id: str,
    version: int,
    value: int,
    *,
    chosen: bool = False,
    now: datetime | None = None,
) -> Pressed:
    """A digest's 👍 (``value`` :data:`LIKE`) or 👎 (:data:`DISLIKE`) pressed on ``arxiv_id`` v``version``.

    ``chosen``: the pressed button showed that it is the chat's vote ("👍 ✓"). A press does what the
    keyboard shows: on a chosen button it takes the vote on that version back, on any other it records
    ``value`` (replacing the other vote; a vote already there stays). So a paper liked with ``like`` before
    the digest came is not un-liked by its plain 👍. In a group only an administrator may
    (``ctx.can_change``). Never raises: a failure is logged and answered with an apology, as
    :func:`bot.commands.handle` does.
    """
    try:
        return _press(db, settings, ctx, arxiv_id, version, value, chosen, now or utcnow())
    except Exception:
        log.exception("vote button from %s on %s failed", ctx.address, paper_name(arxiv_id, version))
        language = stored_language(db, ctx.address, ctx.language, default=settings.default_language)
        return Pressed(translator(language).gettext(SORRY), None, Problem.INTERNAL, language)


def _press(
    db: Database,
    settings: ChatSettings,
    ctx: ChatContext,
    arxiv_id: str,
    version: int,
    value: int,
    chosen: bool,
    now: datetime,
) -> Pressed:
    language = reply_language(db, ctx, default=settings.default_language)
    t = translator(language)
    name = paper_name(arxiv_id, version)
    if not ctx.can_change:
        text = t.gettext(NOT_ALLOWED, place=ctx.place(t), p=ctx.prefix)
        return Pressed(text, None, Problem.NOT_ALLOWED, language)
    subscriber = subscribers.subscriber_by_address(db, ctx.address)
    if subscriber is None or subscriber.id is None:
        text = t.gettext(
            "{Place} has no subscription any more: {p}start sets it up again.",
            Place=ctx.place(t, capital=True),
            p=ctx.prefix,
        )
        return Pressed(text, None, Problem.NOT_SUBSCRIBED, language)
    row = papers.stored_version(db, arxiv_id, version)
    if row is None or row.id is None:
        return Pressed(
            t.gettext("PaperTrail has not stored {id}.", id=name), None, Problem.NOT_FOUND, language
        )
    if chosen:
        undo_vote(db, subscriber.id, arxiv_id, version=version)
        return Pressed(t.gettext("Vote on {paper} taken back.", paper=name), 0, None, language)
    cast_vote(db, subscriber.id, arxiv_id, value, version=version, now=now)
    if value == LIKE:
        text = t.gettext("👍 Liked {paper}. Press again to take it back.", paper=name)
    else:
        text = t.gettext("👎 Disliked {paper}. Press again to take it back.", paper=name)
    return Pressed(text, value, None, language)


__all__ = [
    "LIKES_SHOWN",
    "NOT_ALLOWED",
    "TITLE_CHARS",
    "Pressed",
    "dislike",
    "like",
    "likes",
    "press_vote",
    "unvote",
]
