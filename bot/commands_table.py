"""The chat commands, in one table for every platform: each command's name, arguments, summary, help page,
other words, handler and flags.

A command exists when it has a row in :data:`COMMANDS`: the grammar (:func:`bot.commands.handle`) runs it
and checks who may, ``help`` lists and explains it, Telegram's command menu and Slack's slash command name
it from here. Texts use ``{p}`` for the platform's command prefix (``/`` on Telegram, ``/papertrail `` on
Slack), so that every example shows what the person actually types. Summaries and pages are English, marked
with ``N_`` and translated where they are shown (``t``: a :class:`core.languages.Translator`). Command
words and argument names (``QUERY``, ``Area/City``) are typed literally and stay as they are in every
language.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from bot import (
    commands_follows,
    commands_language,
    commands_newsletters,
    commands_recommend,
    commands_settings,
    commands_votes,
)
from bot.commands_base import Call, Problem, Reply, cut
from core.languages import N_, Translator, translator


@dataclass(frozen=True, slots=True)
class Command:
    """One chat command: what menus and help show, what runs it, and who may."""

    name: str
    usage: str
    """The arguments, e.g. ``QUERY [--new-only] [--instant]``; empty for none."""
    summary: str
    """One line, at most 60 characters: also the description in Telegram's command menu (English: translate
    with :meth:`summary_in`)."""
    page: str
    """The help page (``help NAME``), English, with ``{p}`` for the command prefix."""
    run: Callable[[Call], Reply]
    """The handler: runs the command and returns the reply (never sent unless it returns)."""
    changes: bool
    """Whether the command (with arguments, for those that :attr:`shows_without_arguments`) changes the
    subscription: in a group only admins may run it."""
    shows_without_arguments: bool = False
    """Without arguments it only shows the setting (``digest``, ``timezone``, ``language``, ``recommend``)
    or lists (``join``), which anyone may."""
    checks_rights_itself: bool = False
    """The handler decides who may (``start`` tells a member that only admins can set a chat up)."""
    vote: bool = False
    """Records or takes back a vote: a member is refused with the votes' own explanation."""
    aliases: tuple[str, ...] = ()
    """Other words that run it (``tz`` for ``timezone``, ``schedule`` as in the CLI)."""
    hints: tuple[str, ...] = ()
    """Words people try for it: never run, only suggested ("did you mean /follow?")."""

    def summary_in(self, t: Translator) -> str:
        """:attr:`summary` in ``t``'s language."""
        return t.gettext(self.summary)

    def changes_with(self, args: str) -> bool:
        """Whether running it with ``args`` changes the subscription, so that the grammar lets only those
        who may change it (a group's admins) run it."""
        if self.checks_rights_itself:
            return False
        return self.changes and not (self.shows_without_arguments and not args)


def help_(call: Call) -> Reply:
    """``help``: every command; ``help COMMAND``: one command with examples."""
    t, p = call.t, call.p
    topic = call.args.split(" ", 1)[0].removeprefix("/").casefold() if call.args else ""
    if not topic:
        return call.reply(overview(p, t))
    found = find(topic)
    if found is not None:
        return call.reply(page(found.name, p, t))
    guess = closest(topic)
    said = (
        t.gettext(
            'There is no command "{word}". Did you mean {p}help {command}?',
            word=cut(topic, 40),
            p=p,
            command=guess,
        )
        if guess
        else t.gettext('There is no command "{word}".', word=cut(topic, 40))
    )
    return call.reply(
        said,
        command_list(p, t),
        error=Problem.NOT_FOUND,
        suggestions=(f"help {guess}",) if guess else (),
    )


COMMANDS: tuple[Command, ...] = (
    Command(
        "start",
        "",
        N_("set up this chat for paper alerts"),
        page=N_(
            "{p}start sets this chat up with the default digest time and says what to do next. "
            "It changes nothing for a chat that is set up already."
        ),
        run=commands_settings.start,
        changes=True,
        checks_rights_itself=True,
    ),
    Command(
        "help",
        "[COMMAND]",
        N_("the commands, or one command in detail"),
        page=N_("{p}help lists the commands; {p}help COMMAND explains one, e.g. {p}help digest."),
        run=help_,
        changes=False,
        hints=("commands", "menu", "hi", "hello", "hey", "帮助"),
    ),
    Command(
        "follow",
        "QUERY [--new-only] [--instant]",
        N_("follow a topic, an author or a paper"),
        page=N_(
            "{p}follow QUERY [--new-only] [--instant]\n"
            "QUERY uses arXiv's search syntax:\n"
            "  cat:cs.DC — a category, primary or cross-list (cat:cs.* for all of cs)\n"
            '  au:"Zeng Li" — an author (au:Li for anyone with that surname)\n'
            '  ti:"policy lag", abs:rollout — a word or phrase in the title or abstract\n'
            '  diffusion, "policy lag" — in the title or the abstract\n'
            "  id:2411.17710 — one paper, to hear about its revisions\n"
            "  AND, OR, NOT, ANDNOT and ( ) combine terms; a space means AND\n"
            "Options, at the end: --new-only (no revisions), --instant (sent at once, not with the digest). "
            "Following the same query again changes its options.\n"
            "Examples:\n"
            "  {p}follow cat:cs.LG (graph OR network)\n"
            '  {p}follow au:"Yann LeCun" --new-only\n'
            "  {p}follow id:2411.17710 --instant\n"
            "Check a query first with {p}try QUERY."
        ),
        run=commands_follows.follow,
        changes=True,
        hints=("add", "subscribe", "sub", "watch", "track"),
    ),
    Command(
        "unfollow",
        "NUMBER|QUERY",
        N_("stop following something"),
        page=N_(
            "{p}unfollow NUMBER removes the follow with that number in {p}follows; "
            "{p}unfollow QUERY removes it by its query, in any spelling with the same meaning.\n"
            "Examples: {p}unfollow 2, {p}unfollow cat:cs.DC"
        ),
        run=commands_follows.unfollow,
        changes=True,
        hints=("remove", "delete", "del", "rm"),
    ),
    Command(
        "follows",
        "[PAGE]",
        N_("list this chat's follows, numbered"),
        page=N_(
            "{p}follows lists this chat's follows, numbered, with their options "
            "(new papers only, instant). Long lists come in pages: {p}follows 2."
        ),
        run=commands_follows.follows,
        changes=False,
        aliases=("list",),
        hints=("ls", "show"),
    ),
    Command(
        "try",
        "QUERY|recommended",
        N_("what a query would have matched lately"),
        page=N_(
            "{p}try QUERY shows which papers of the last 7 days the query would have matched, and why, "
            "without saving anything. Example: {p}try cat:cs.DC ti:scheduling\n"
            "{p}try recommended shows what your recommendations would have brought in the last 7 days "
            "({p}help recommend)."
        ),
        run=commands_follows.try_,
        changes=False,
        hints=("search", "test", "preview", "check"),
    ),
    Command(
        "digest",
        "daily HH:MM|weekly DAY HH:MM|instant|now|off|heartbeat on|off",
        N_("when digests go out, or send one now"),
        page=N_(
            "{p}digest shows when digests go out. Change it with:\n"
            "  {p}digest daily 08:00 — every day at that time\n"
            "  {p}digest weekdays 07:30 — Monday to Friday\n"
            "  {p}digest weekly mon 09:00 — once a week\n"
            "  {p}digest instant — each match as soon as it is found\n"
            "  {p}digest now — send what is waiting at the next delivery pass\n"
            "  {p}digest off — pause digests (the same as {p}pause)\n"
            "  {p}digest heartbeat on — on arXiv announcement days when nothing matched, a one-line message "
            "at the digest time saying what was scanned ({p}digest heartbeat off stops it)\n"
            "Times are in this chat's timezone: {p}timezone."
        ),
        run=commands_settings.digest,
        changes=True,
        shows_without_arguments=True,
        aliases=("schedule",),
        hints=("when", "send"),
    ),
    Command(
        "timezone",
        "Area/City",
        N_("the timezone of the digest time"),
        page=N_(
            "{p}timezone shows this chat's timezone; {p}timezone Area/City changes it. "
            "Use an IANA name (Europe/Berlin, America/New_York, Asia/Tokyo, UTC) or just the city (Berlin). "
            "UTC+2 works too, without daylight saving."
        ),
        run=commands_settings.timezone,
        changes=True,
        shows_without_arguments=True,
        aliases=("tz",),
        hints=("time", "zone"),
    ),
    Command(
        "pause",
        "",
        N_("stop digests until resume"),
        page=N_(
            "{p}pause stops digests until {p}resume. While paused, new papers are not collected; "
            "the follows are kept. {p}digest off does the same."
        ),
        run=commands_settings.pause,
        changes=True,
        hints=("stop", "mute", "unsubscribe"),
    ),
    Command(
        "resume",
        "",
        N_("restart digests"),
        page=N_(
            "{p}resume restarts digests after {p}pause, or after PaperTrail paused them because a delivery "
            "failed for good. Papers are collected again from then on."
        ),
        run=commands_settings.resume,
        changes=True,
        hints=("unmute", "continue", "restart"),
    ),
    Command(
        "status",
        "",
        N_("this subscription and the sources' health"),
        page=N_(
            "{p}status shows this subscription (status, digest schedule, timezone, follows, matches waiting, "
            "the next digest) and whether PaperTrail's sources are up to date."
        ),
        run=commands_settings.status,
        changes=False,
        hints=("info", "settings", "health"),
    ),
    Command(
        "join",
        "[NAME]",
        N_("list the newsletters, or join one"),
        page=N_(
            "{p}join lists the newsletters of this server; {p}join NAME makes this chat a member of one. "
            "Each issue then arrives in this chat's digests, and a paper this chat follows itself comes only "
            "once. Example: {p}join ml-weekly"
        ),
        run=commands_newsletters.join,
        changes=True,
        shows_without_arguments=True,
        hints=("newsletter", "newsletters"),
    ),
    Command(
        "leave",
        "NAME",
        N_("leave a newsletter"),
        page=N_("{p}leave NAME ends this chat's membership of a newsletter. Example: {p}leave ml-weekly"),
        run=commands_newsletters.leave,
        changes=True,
    ),
    Command(
        "language",
        "[en|zh]",
        N_("the language of replies, digests and guides"),
        page=N_(
            "{p}language shows the language PaperTrail uses in this chat; {p}language en or {p}language zh "
            "changes it (English, 中文). Replies, digests and AI reading guides follow it. "
            "Until it is chosen, PaperTrail uses the language of your Telegram or Slack settings."
        ),
        run=commands_language.language,
        changes=True,
        shows_without_arguments=True,
        aliases=("lang",),
        hints=("locale", "languages", "english", "chinese", "中文", "语言"),
    ),
    Command(
        "like",
        "ID",
        N_("say a paper was worth reading: more like it"),
        page=N_(
            "{p}like ID records that this chat liked a paper; from the votes PaperTrail learns which papers "
            "to recommend. ID is an arXiv id: 2306.03564 (the newest version PaperTrail stored), "
            "2306.03564v2 "
            "(that version), hep-th/9901001, or a link to arxiv.org. Voting again on the same version "
            "replaces "
            "the vote; {p}unvote ID takes it back. The 👍 button under a paper in a digest does the same.\n"
            "Example: {p}like 2306.03564"
        ),
        run=commands_votes.like,
        changes=True,
        vote=True,
        hints=("upvote", "thumbsup", "love", "vote"),
    ),
    Command(
        "dislike",
        "ID",
        N_("say a paper was not for you: fewer like it"),
        page=N_(
            "{p}dislike ID records that a paper was not for this chat, so PaperTrail recommends fewer like "
            "it. ID as for {p}like: 2306.03564, 2306.03564v2 or a link. {p}unvote ID takes it back; "
            "the 👎 button under a paper in a digest does the same.\nExample: {p}dislike 2306.03564"
        ),
        run=commands_votes.dislike,
        changes=True,
        vote=True,
        hints=("downvote", "thumbsdown", "hate"),
    ),
    Command(
        "unvote",
        "ID",
        N_("take back a vote on a paper"),
        page=N_(
            "{p}unvote ID takes back this chat's vote on a paper: on every version, or with 2306.03564v2 on "
            "that version only. Pressing a chosen 👍 or 👎 button again does the same.\n"
            "Example: {p}unvote 2306.03564"
        ),
        run=commands_votes.unvote,
        changes=True,
        vote=True,
        aliases=("unlike", "undislike"),
        hints=("undo",),
    ),
    Command(
        "likes",
        "",
        N_("the papers this chat voted on"),
        page=N_(
            "{p}likes lists this chat's votes, newest first (the newest 20), and how many papers it liked "
            "and "
            "disliked. In a group anyone may list them; only admins may vote."
        ),
        run=commands_votes.likes,
        changes=False,
        aliases=("votes",),
        hints=("liked", "disliked"),
    ),
    Command(
        "recommend",
        "[on [N]|off]",
        N_("papers like the ones you liked, in each digest"),
        page=N_(
            "{p}recommend shows whether learned recommendations are on, and what they are learned from.\n"
            "  {p}recommend on — up to 5 papers per digest that your follows did not bring, chosen by the "
            "papers you liked, each with its reason (the closest paper you liked, the terms they share)\n"
            "  {p}recommend on 10 — up to 10 (1 to 20)\n"
            "  {p}recommend off — no more recommendations; your likes are kept\n"
            "They need at least 3 liked papers: the 👍 under a digest item, {p}like ARXIV_ID, or a reference "
            "library imported from Zotero, Mendeley or JabRef. {p}try recommended shows what the last 7 days "
            "would have brought."
        ),
        run=commands_recommend.recommend,
        changes=True,
        shows_without_arguments=True,
    ),
)

BY_NAME = {command.name: command for command in COMMANDS}
ALIASES = {alias: command.name for command in COMMANDS for alias in command.aliases}
"""Other words accepted for a command, to the command's name."""
HINTS = {hint: command.name for command in COMMANDS for hint in command.hints}
"""Words people try for a command, to the command's name: never run, only suggested."""
VOTE_COMMANDS = frozenset(command.name for command in COMMANDS if command.vote)
"""The commands that record or take back a vote (an administrator's, in a group)."""


def find(word: str) -> Command | None:
    """The command a folded command word runs (its name or an alias); None for any other word."""
    return BY_NAME.get(ALIASES.get(word, word))


def closest(word: str) -> str | None:
    """The command meant by a word people try (``list``, ``stop``) or a typo of one (``folow``)."""
    if word in HINTS:
        return HINTS[word]
    names = [command.name for command in COMMANDS] + list(ALIASES)
    found = difflib.get_close_matches(word[:40], names, n=1, cutoff=0.6)
    return ALIASES.get(found[0], found[0]) if found else None


def command_list(p: str, t: Translator | None = None) -> str:
    """Every command on one line each, with its arguments and summary (in ``t``'s language)."""
    t = t or translator(None)
    return "\n".join(
        f"{p}{info.name}{' ' + info.usage if info.usage else ''} — {info.summary_in(t)}" for info in COMMANDS
    )


def overview(p: str, t: Translator | None = None) -> str:
    """The answer to ``help``: what PaperTrail does, every command, and an example to copy."""
    t = t or translator(None)
    return "\n".join(
        (
            t.gettext(
                "PaperTrail sends new arXiv papers and revisions that match this chat's follows, "
                "in a digest on your schedule."
            ),
            command_list(p, t),
            t.gettext('Example: {p}follow cat:cs.DC au:"Zeng Li"', p=p),
            t.gettext("{p}help follow shows the query language.", p=p),
        )
    )


def page(name: str, p: str, t: Translator | None = None) -> str:
    """The help page of one command (a name in :data:`COMMANDS`), in ``t``'s language."""
    return (t or translator(None)).gettext(BY_NAME[name].page, p=p)
