"""Hypothesis strategies for the text of chat commands."""

from __future__ import annotations

from hypothesis import strategies as st

from bot.commands_table import ALIASES, COMMANDS, HINTS

NAMES = [info.name for info in COMMANDS] + list(ALIASES)


NEAR_MISSES = [*HINTS, "folow", "unfolow", "statsu", "papertrail"]


ARGUMENTS = st.one_of(
    st.text(max_size=80),
    st.sampled_from(
        [
            "cat:cs.DC", 'au:"Zeng Li"', 'ti:"policy lag"', "cat:cs.LG AND (graph OR", "id:2411.17710",
            "cat:cs.* ANDNOT cat:cs.LG", "((((", '"', "NOT", "cat:cs.LGG", "数据", "now", "off", "on",
            "instant",
            "daily 08:00", "daily 8pm", "daily 25:61", "weekly mon 9", "weekly xyz 09:00", "weekdays 7.30",
            "Europe/Berlin", "Europe/Berln", "berlin", "UTC+2", "UTC+5:30", "PST", "1", "2", "0", "-1", "#3",
            "999999999999999999999", "follow", "2 3", "", "en", "zh", "中文", "zh-TW", "english", "fr",
        ]
    ),
)  # fmt: skip


OPTIONS = st.lists(
    st.sampled_from(["--new-only", "--instant", "—instant", "-new-only", "--bogus", "--"]), max_size=3
)


# Between the words: spaces, newlines, full-width space, and control characters that are stripped.
GAPS = st.sampled_from(
    [" ", " ", " ", "  ", "\n", "\t", "\r\n", " \x00 ", " \x1b[2J ", " \u202e", " \u200b ", "　"]
)


@st.composite
def command_text(draw: st.DrawFn) -> str:
    """Text shaped like a command: prefix, command word (or a near miss), arguments, options, odd gaps."""
    prefix = draw(st.sampled_from(["", "/", "/", "/", "/papertrail ", "／"]))
    word = draw(st.sampled_from(NAMES) if draw(st.integers(0, 4)) else st.sampled_from(NEAR_MISSES))
    word = draw(st.sampled_from([word, word, word.upper(), word + "@PaperTrailBot", word[:-1] or word]))
    parts = [prefix + word, draw(ARGUMENTS), *draw(OPTIONS)]
    return "".join(part + draw(GAPS) for part in parts).rstrip(" ")
