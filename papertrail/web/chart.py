"""Daily counts -> an SVG bar chart, rendered on the server so that the status page needs no JavaScript.

Pure: no database, no I/O. Every piece of text that goes into the SVG is XML-escaped here, so the chart is
safe to inline into an HTML page whatever the caller passes as a title. The chart is accessible: it has a
``<title>`` and a ``<desc>`` that states the totals in words, and every day's bar carries its own
``<title>`` (a tooltip in every browser, read by screen readers).

Each day shows new papers (bottom) and revisions (top) as one stacked bar, and the AI-related ones among
both as a line with a dot per day.

Its words are English unless the caller passes :class:`ChartWords` of its own (the status page passes the
reader's language); the chart itself knows no language.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from core.english import counted
from core.values import DayCounts

# Colours with enough contrast on white and on the page's dark background; text says what each is too.
NEW_COLOUR = "#2f6fb3"
REVISION_COLOUR = "#9cc3e6"
AI_COLOUR = "#c2410c"
GRID_COLOUR = "#8884"
TEXT_COLOUR = "currentColor"


@dataclass(frozen=True, slots=True)
class _Frame:
    """The plot area inside the SVG, in user units."""

    width: int
    height: int
    left: int = 44
    right: int = 8
    top: int = 30
    bottom: int = 26

    @property
    def plot_width(self) -> float:
        return float(self.width - self.left - self.right)

    @property
    def plot_height(self) -> float:
        return float(self.height - self.top - self.bottom)

    @property
    def baseline(self) -> float:
        return float(self.height - self.bottom)


def nice_ceiling(value: int) -> tuple[int, int]:
    """A round axis maximum at or above ``value`` and its tick step (steps of 1, 2 or 5 times 10^k)."""
    if value <= 0:
        return 1, 1
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            step = factor * magnitude
            # About four ticks: the step is the smallest round number with at most four of them.
            if step * 4 >= value:
                ticks = -(-value // step)
                return step * ticks, step
        magnitude *= 10


def _n(value: float) -> str:
    """A coordinate with at most one decimal, without a trailing ``.0``."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def describe(days: Sequence[DayCounts]) -> str:
    """The chart in one sentence: the period, the totals and the busiest day (English, UTC days: the status
    page words its own, in its language and display zone, through :class:`ChartWords`)."""
    if not days:
        return "No days to show."
    new = sum(d.new for d in days)
    revisions = sum(d.revisions for d in days)
    ai = sum(d.ai_related for d in days)
    text = (
        f"From {days[0].day.isoformat()} to {days[-1].day.isoformat()} (UTC): "
        f"{counted(new, 'new paper', grouped=True)}, {counted(revisions, 'revision', grouped=True)}, "
        f"{ai:,} of them AI-related."
    )
    busiest = max(days, key=lambda d: (d.total, d.day))
    if busiest.total:
        text += f" Busiest day {busiest.day.isoformat()} with {busiest.total:,}."
    else:
        text += " Nothing arrived in this period."
    return text


def day_tip(day: DayCounts) -> str:
    """A day's bar tooltip: ``2026-11-01: 3 new papers, 1 revision, 2 AI-related``."""
    return (
        f"{day.day.isoformat()}: {counted(day.new, 'new paper', grouped=True)}, "
        f"{counted(day.revisions, 'revision', grouped=True)}, "
        f"{day.ai_related:,} AI-related"
    )


@dataclass(frozen=True, slots=True)
class ChartWords:
    """Every word the chart shows: the legend, the empty-period note, the description and the tooltips."""

    new: str = "new papers"
    revisions: str = "revisions"
    ai: str = "AI-related"
    nothing: str = "nothing arrived in this period"
    describe: Callable[[Sequence[DayCounts]], str] = describe
    tip: Callable[[DayCounts], str] = day_tip


def daily_chart(
    days: Sequence[DayCounts],
    *,
    title: str = "New papers and revisions per day",
    id_prefix: str = "chart",
    width: int = 720,
    height: int = 240,
    words: ChartWords | None = None,
) -> str:
    """An inline SVG of ``days`` (oldest first): stacked bars of new papers and revisions, an AI line.

    ``title`` and every label are escaped; ``id_prefix`` keeps the element ids unique on a page; ``words``
    are the chart's words (English when None).
    """
    words = words or ChartWords()
    frame = _Frame(width, height)
    top, step = nice_ceiling(max((d.total for d in days), default=0))
    ids = escape(id_prefix, quote=True)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-labelledby="{ids}-title {ids}-desc" class="chart" '
        f'preserveAspectRatio="xMidYMid meet" font-family="system-ui, sans-serif" font-size="11">',
        f'<title id="{ids}-title">{escape(title)}</title>',
        f'<desc id="{ids}-desc">{escape(words.describe(days))}</desc>',
    ]
    parts += _axis(frame, top, step)
    parts += _legend(frame, words)
    if days:
        parts += _bars(frame, days, top, words.tip)
        parts += _ai_line(frame, days, top)
        parts += _day_labels(frame, days)
    if not any(d.total for d in days):
        parts.append(
            f'<text x="{_n(frame.left + frame.plot_width / 2)}" y="{_n(frame.top + frame.plot_height / 2)}" '
            f'text-anchor="middle" fill="{TEXT_COLOUR}">{escape(words.nothing)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _y(frame: _Frame, value: float, top: int) -> float:
    return frame.baseline - frame.plot_height * value / top


def _axis(frame: _Frame, top: int, step: int) -> list[str]:
    parts = []
    for tick in range(0, top + 1, step):
        y = _n(_y(frame, tick, top))
        parts.append(
            f'<line x1="{frame.left}" x2="{frame.width - frame.right}" y1="{y}" y2="{y}" '
            f'stroke="{GRID_COLOUR}" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{frame.left - 6}" y="{y}" text-anchor="end" dominant-baseline="middle" '
            f'fill="{TEXT_COLOUR}">{tick:,}</text>'
        )
    return parts


def _text_width(text: str) -> int:
    """About how wide ``text`` is at the chart's font size: CJK characters are square, Latin ones narrow."""
    return sum(11 if ord(char) >= 0x2E80 else 7 for char in text)


def _legend(frame: _Frame, words: ChartWords) -> list[str]:
    entries = (
        ("rect", NEW_COLOUR, words.new),
        ("rect", REVISION_COLOUR, words.revisions),
        ("line", AI_COLOUR, words.ai),
    )
    parts = []
    x = frame.left
    for shape, colour, label in entries:
        if shape == "rect":
            parts.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{colour}"/>')
        else:
            parts.append(
                f'<line x1="{x}" x2="{x + 12}" y1="14" y2="14" stroke="{colour}" stroke-width="2.5"/>'
            )
        parts.append(f'<text x="{x + 16}" y="18" fill="{TEXT_COLOUR}">{escape(label)}</text>')
        x += 24 + _text_width(label)
    return parts


def _slot(frame: _Frame, count: int) -> float:
    return frame.plot_width / max(count, 1)


def _bars(
    frame: _Frame, days: Sequence[DayCounts], top: int, tip_of: Callable[[DayCounts], str] = day_tip
) -> list[str]:
    slot = _slot(frame, len(days))
    bar = max(slot * 0.7, 1.0)
    parts = []
    for index, day in enumerate(days):
        x = frame.left + index * slot + (slot - bar) / 2
        tip = escape(tip_of(day))
        parts.append(f"<g><title>{tip}</title>")
        new_top = _y(frame, day.new, top)
        if day.new:
            parts.append(
                f'<rect x="{_n(x)}" y="{_n(new_top)}" width="{_n(bar)}" '
                f'height="{_n(frame.baseline - new_top)}" fill="{NEW_COLOUR}" class="bar-new"/>'
            )
        if day.revisions:
            rev_top = _y(frame, day.total, top)
            parts.append(
                f'<rect x="{_n(x)}" y="{_n(rev_top)}" width="{_n(bar)}" '
                f'height="{_n(new_top - rev_top)}" fill="{REVISION_COLOUR}" class="bar-revisions"/>'
            )
        if not day.total:
            # A hairline at zero: an empty day is visibly "nothing", not a gap in the data.
            parts.append(
                f'<rect x="{_n(x)}" y="{_n(frame.baseline - 1)}" width="{_n(bar)}" height="1" '
                f'fill="{GRID_COLOUR}" class="bar-empty"/>'
            )
        parts.append("</g>")
    return parts


def _ai_line(frame: _Frame, days: Sequence[DayCounts], top: int) -> list[str]:
    slot = _slot(frame, len(days))
    points = [
        (frame.left + index * slot + slot / 2, _y(frame, day.ai_related, top))
        for index, day in enumerate(days)
    ]
    path = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
    parts = [f'<polyline points="{path}" fill="none" stroke="{AI_COLOUR}" stroke-width="2" class="line-ai"/>']
    parts += [f'<circle cx="{_n(x)}" cy="{_n(y)}" r="2.5" fill="{AI_COLOUR}"/>' for x, y in points]
    return parts


def _day_labels(frame: _Frame, days: Sequence[DayCounts]) -> list[str]:
    slot = _slot(frame, len(days))
    last = len(days) - 1
    # Every seventh day counted back from the newest, so the newest day always has its label.
    shown = [index for index in range(last, -1, -7)]
    parts = []
    for index in sorted(shown):
        x = _n(frame.left + index * slot + slot / 2)
        label = escape(days[index].day.strftime("%m-%d"))
        parts.append(
            f'<text x="{x}" y="{frame.height - 8}" text-anchor="middle" fill="{TEXT_COLOUR}">{label}</text>'
        )
    return parts
