"""The chat commands' names, one-line summaries and help pages, written once for every platform.

Texts use ``{p}`` for the platform's command prefix (``/`` on Telegram, ``/papertrail `` on Slack), so
that every example shows what the person actually types. Summaries and pages are English, marked with
``N_`` and translated where they are shown (``t``: a :class:`core.languages.Translator`). Command words
and
argument names (``QUERY``, ``Area/City``) are typed literally and stay as they are in every language.
Nothing here touches the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.languages import N_, Translator, translator


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A command as menus and help show it."""

    name: str
    usage: str
    """The arguments, e.g. ``QUERY [--new-only] [--instant]``; empty for none."""
    summary: str
    """One line, at most 60 characters: also the description in Telegram's command menu (English: translate
    with :meth:`summary_in`)."""
    changes: bool
    """Whether the command (with arguments, for ``digest``, ``timezone`` and ``language``) changes the
    subscription."""

    def summary_in(self, t: Translator) -> str:
        """:attr:`summary` in ``t``'s language."""
        return t.gettext(self.summary)


COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("start", "", N_("set up this chat for paper alerts"), True),
    CommandInfo("help", "[COMMAND]", N_("the commands, or one command in detail"), False),
    CommandInfo("follow", "QUERY [--new-only] [--instant]", N_("follow a topic, an author or a paper"), True),
    CommandInfo("unfollow", "NUMBER|QUERY", N_("stop following something"), True),
    CommandInfo("follows", "[PAGE]", N_("list this chat's follows, numbered"), False),
    CommandInfo("try", "QUERY|recommended", N_("what a query would have matched lately"), False),
    CommandInfo(
        "digest",
        "daily HH:MM|weekly DAY HH:MM|instant|now|off|heartbeat on|off",
        N_("when digests go out, or send one now"),
        True,
    ),
    CommandInfo("timezone", "Area/City", N_("the timezone of the digest time"), True),
    CommandInfo("pause", "", N_("stop digests until resume"), True),
    CommandInfo("resume", "", N_("restart digests"), True),
    CommandInfo("status", "", N_("this subscription and the sources' health"), False),
    CommandInfo("join", "[NAME]", N_("list the newsletters, or join one"), True),
    CommandInfo("leave", "NAME", N_("leave a newsletter"), True),
    CommandInfo("language", "[en|zh]", N_("the language of replies, digests and guides"), True),
    CommandInfo("like", "ID", N_("say a paper was worth reading: more like it"), True),
    CommandInfo("dislike", "ID", N_("say a paper was not for you: fewer like it"), True),
    CommandInfo("unvote", "ID", N_("take back a vote on a paper"), True),
    CommandInfo("likes", "", N_("the papers this chat voted on"), False),
    CommandInfo("recommend", "[on [N]|off]", N_("papers like the ones you liked, in each digest"), True),
)
BY_NAME = {info.name: info for info in COMMANDS}

ALIASES = {
    "schedule": "digest", "tz": "timezone", "list": "follows", "lang": "language",
    "votes": "likes", "unlike": "unvote", "undislike": "unvote",
}  # fmt: skip
"""Other words accepted for a command: ``schedule`` as in the CLI, three short forms, and other names for
the vote commands (``votes`` lists them, ``unlike`` takes one back)."""

HINTS = {
    "add": "follow", "subscribe": "follow", "sub": "follow", "watch": "follow", "track": "follow",
    "remove": "unfollow", "delete": "unfollow", "del": "unfollow", "rm": "unfollow",
    "ls": "follows", "show": "follows", "search": "try", "test": "try", "preview": "try", "check": "try",
    "stop": "pause", "mute": "pause", "unsubscribe": "pause", "unmute": "resume", "continue": "resume",
    "restart": "resume", "time": "timezone", "zone": "timezone", "when": "digest", "send": "digest",
    "info": "status", "settings": "status", "health": "status", "commands": "help", "menu": "help",
    "hi": "help", "hello": "help", "hey": "help", "newsletter": "join", "newsletters": "join",
    "locale": "language", "languages": "language", "english": "language", "chinese": "language",
    "中文": "language", "语言": "language", "帮助": "help",
    "upvote": "like", "thumbsup": "like", "love": "like", "downvote": "dislike", "thumbsdown": "dislike",
    "hate": "dislike", "vote": "like", "undo": "unvote", "liked": "likes", "disliked": "likes",
}  # fmt: skip
"""Words people try for a command: never run, only suggested ("did you mean /follow?")."""


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


_PAGES = {
    "start": N_(
        "{p}start sets this chat up with the default digest time and says what to do next. "
        "It changes nothing for a chat that is set up already."
    ),
    "help": N_("{p}help lists the commands; {p}help COMMAND explains one, e.g. {p}help digest."),
    "follow": N_(
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
    "unfollow": N_(
        "{p}unfollow NUMBER removes the follow with that number in {p}follows; "
        "{p}unfollow QUERY removes it by its query, in any spelling with the same meaning.\n"
        "Examples: {p}unfollow 2, {p}unfollow cat:cs.DC"
    ),
    "follows": N_(
        "{p}follows lists this chat's follows, numbered, with their options "
        "(new papers only, instant). Long lists come in pages: {p}follows 2."
    ),
    "try": N_(
        "{p}try QUERY shows which papers of the last 7 days the query would have matched, and why, "
        "without saving anything. Example: {p}try cat:cs.DC ti:scheduling\n"
        "{p}try recommended shows what your recommendations would have brought in the last 7 days "
        "({p}help recommend)."
    ),
    "digest": N_(
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
    "timezone": N_(
        "{p}timezone shows this chat's timezone; {p}timezone Area/City changes it. "
        "Use an IANA name (Europe/Berlin, America/New_York, Asia/Tokyo, UTC) or just the city (Berlin). "
        "UTC+2 works too, without daylight saving."
    ),
    "pause": N_(
        "{p}pause stops digests until {p}resume. While paused, new papers are not collected; "
        "the follows are kept. {p}digest off does the same."
    ),
    "resume": N_(
        "{p}resume restarts digests after {p}pause, or after PaperTrail paused them because a delivery "
        "failed for good. Papers are collected again from then on."
    ),
    "join": N_(
        "{p}join lists the newsletters of this server; {p}join NAME makes this chat a member of one. "
        "Each issue then arrives in this chat's digests, and a paper this chat follows itself comes only "
        "once. Example: {p}join ml-weekly"
    ),
    "leave": N_("{p}leave NAME ends this chat's membership of a newsletter. Example: {p}leave ml-weekly"),
    "status": N_(
        "{p}status shows this subscription (status, digest schedule, timezone, follows, matches waiting, "
        "the next digest) and whether PaperTrail's sources are up to date."
    ),
    "like": N_(
        "{p}like ID records that this chat liked a paper; from the votes PaperTrail learns which papers "
        "to recommend. ID is an arXiv id: 2306.03564 (the newest version PaperTrail stored), 2306.03564v2 "
        "(that version), hep-th/9901001, or a link to arxiv.org. Voting again on the same version replaces "
        "the vote; {p}unvote ID takes it back. The 👍 button under a paper in a digest does the same.\n"
        "Example: {p}like 2306.03564"
    ),
    "dislike": N_(
        "{p}dislike ID records that a paper was not for this chat, so PaperTrail recommends fewer like it. "
        "ID as for {p}like: 2306.03564, 2306.03564v2 or a link. {p}unvote ID takes it back; the 👎 button "
        "under a paper in a digest does the same.\nExample: {p}dislike 2306.03564"
    ),
    "unvote": N_(
        "{p}unvote ID takes back this chat's vote on a paper: on every version, or with 2306.03564v2 on "
        "that version only. Pressing a chosen 👍 or 👎 button again does the same.\n"
        "Example: {p}unvote 2306.03564"
    ),
    "likes": N_(
        "{p}likes lists this chat's votes, newest first (the newest 20), and how many papers it liked and "
        "disliked. In a group anyone may list them; only admins may vote."
    ),
    "recommend": N_(
        "{p}recommend shows whether learned recommendations are on, and what they are learned from.\n"
        "  {p}recommend on — up to 5 papers per digest that your follows did not bring, chosen by the "
        "papers you liked, each with its reason (the closest paper you liked, the terms they share)\n"
        "  {p}recommend on 10 — up to 10 (1 to 20)\n"
        "  {p}recommend off — no more recommendations; your likes are kept\n"
        "They need at least 3 liked papers: the 👍 under a digest item, {p}like ARXIV_ID, or a reference "
        "library imported from Zotero, Mendeley or JabRef. {p}try recommended shows what the last 7 days "
        "would have brought."
    ),
    "language": N_(
        "{p}language shows the language PaperTrail uses in this chat; {p}language en or {p}language zh "
        "changes it (English, 中文). Replies, digests and AI reading guides follow it. Until it is chosen, "
        "PaperTrail uses the language of your Telegram or Slack settings."
    ),
}


def page(name: str, p: str, t: Translator | None = None) -> str:
    """The help page of one command (a name from :data:`COMMANDS`), in ``t``'s language."""
    return (t or translator(None)).gettext(_PAGES[name], p=p)


__all__ = ["ALIASES", "BY_NAME", "COMMANDS", "HINTS", "CommandInfo", "command_list", "overview", "page"]
