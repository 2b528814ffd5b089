"""Hostile digest input shared by every channel's golden-file tests.

Markup injection for each channel (HTML, Telegram HTML, Slack mrkdwn and its special mentions), a script
tag, emoji, right-to-left text, control characters, a 10,000-character abstract, and a digest of 500 matches.
"""

from __future__ import annotations

from core.values import DigestItem

LONG_ABSTRACT = ("We study asynchronous rollouts under policy lag. " * 205)[:10_000]


def hostile_items() -> list[DigestItem]:
    """Five items, each attacking a different way; two are revisions with recorded changes."""
    return [
        DigestItem(
            arxiv_id="2611.00001",
            version=1,
            title='<script>alert("x")</script> & <b>bold</b> <a href="https://evil.example">click</a>',
            authors=("Ada <Lovelace>", 'Bob "Tables" O\'Brien', "Zeng & Li"),
            categories=("cs.LG", "cs.AI"),
            reasons=("title: script",),
            abstract="</p><img src=x onerror=alert(1)> plain & simple",
            comment="10 pages, <i>appendix</i>",
        ),
        DigestItem(
            arxiv_id="2611.00002",
            version=1,
            title="*bold* _it_ ~strike~ `code` <!channel> <@U123> <https://evil.example|click me> &amp;",
            authors=("<!here>", "Ève Dupont"),
            categories=("cs.CL",),
            reasons=("author Eve Dupont",),
            abstract=LONG_ABSTRACT,
            upvotes=42,
        ),
        DigestItem(
            arxiv_id="2611.00003",
            version=1,
            title="تعلم الآلة المتزامن \u202eevil\u202c 🚀🤖 混合专家模型 \x1b[31mred\x1b[0m\x00",
            authors=("محمد علي", "王小明", "🦀 Crab"),
            categories=("cs.DC",),
            reasons=("abstract: rollout",),
            abstract="Emoji 🧪 and RTL \u05e9\u05dc\u05d5\u05dd in the abstract.",
        ),
        DigestItem(
            arxiv_id="2611.00004",
            version=3,
            title="A revised title with [markdown](https://evil.example) and &lt;entities&gt;",
            authors=("Grace Hopper",),
            categories=("cs.PL",),
            reasons=("paper 2611.00004",),
            abstract="Revised.",
            changes=("title", "comment", "journal-ref"),
            journal_ref="J. Evil 1 (2026) <1-2>",
            doi="10.1000/xyz<123>",
        ),
        DigestItem(
            arxiv_id="2611.00005",
            version=2,
            title="Plain revision",
            authors=tuple(f"Author {n}" for n in range(30)),
            categories=("cs.LG",),
            reasons=("category cs.LG",),
            abstract="Nothing special.",
            changes=("authors",),
        ),
    ]


def many_items(count: int = 500) -> list[DigestItem]:
    """``count`` ordinary matches, for the cap and for splitting into several messages."""
    return [
        DigestItem(
            arxiv_id=f"2611.{n:05d}",
            version=1 + n % 3 // 2,
            title=f"Paper number {n} on asynchronous training & <scale>",
            authors=(f"Author {n}", "Second Author"),
            categories=("cs.LG",),
            reasons=("title: asynchronous",),
            abstract=f"Abstract {n}. " * 20,
        )
        for n in range(10_000, 10_000 + count)
    ]
