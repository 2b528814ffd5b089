"""Hostile digest input shared by every channel's golden-file tests.

Markup injection for each channel (HTML, Telegram HTML, Slack mrkdwn and its special mentions), a script
tag, emoji, right-to-left text, control characters, a 10,000-character abstract, and a digest of 500 matches.
Also an ordinary digest whose items carry AI guides in English or Chinese (:func:`guided_items`), a
guide whose text attacks every channel (:data:`HOSTILE_GUIDE`), and scan receipts for the goldens: an
ordinary one with a recovered failure and a feed still behind (:func:`sample_receipt`) and one whose source
name attacks every channel (:func:`hostile_receipt`). And learned recommendations: two ordinary
ones (:func:`recommended_items`) and one whose shared terms attack every channel
(:func:`hostile_recommendation`).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from core.reasons import ABSTRACT, AUTHOR, CATEGORY, LIKED, PAPER, SHARED, TITLE, Reason
from core.values import DigestItem, Guide, Outage, Receipt, SourceScan

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
            reasons=(Reason(TITLE, "script"),),
            abstract="</p><img src=x onerror=alert(1)> plain & simple",
            comment="10 pages, <i>appendix</i>",
        ),
        DigestItem(
            arxiv_id="2611.00002",
            version=1,
            title="*bold* _it_ ~strike~ `code` <!channel> <@U123> <https://evil.example|click me> &amp;",
            authors=("<!here>", "Ève Dupont"),
            categories=("cs.CL",),
            reasons=(Reason(AUTHOR, "Eve Dupont"),),
            abstract=LONG_ABSTRACT,
            upvotes=42,
        ),
        DigestItem(
            arxiv_id="2611.00003",
            version=1,
            title="تعلم الآلة المتزامن \u202eevil\u202c 🚀🤖 混合专家模型 \x1b[31mred\x1b[0m\x00",
            authors=("محمد علي", "王小明", "🦀 Crab"),
            categories=("cs.DC",),
            reasons=(Reason(ABSTRACT, "rollout"),),
            abstract="Emoji 🧪 and RTL \u05e9\u05dc\u05d5\u05dd in the abstract.",
        ),
        DigestItem(
            arxiv_id="2611.00004",
            version=3,
            title="A revised title with [markdown](https://evil.example) and &lt;entities&gt;",
            authors=("Grace Hopper",),
            categories=("cs.PL",),
            reasons=(Reason(PAPER, "2611.00004"),),
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
            reasons=(Reason(CATEGORY, "cs.LG"),),
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
            reasons=(Reason(TITLE, "asynchronous"),),
            abstract=f"Abstract {n}. " * 20,
        )
        for n in range(10_000, 10_000 + count)
    ]


# Guides in the reader's language, as core.delivery.digests attaches them: plain one-line texts.
_GUIDES = {
    "en": (
        Guide(
            "Bounding policy lag lets asynchronous rollouts train as fast as synchronous ones.",
            (
                "A lag-aware importance weight for off-policy rollouts",
                "A bound on the bias that stale policies add",
                "Open-source trainer reaching 2.1x throughput",
                "A fourth contribution the digest leaves out",
            ),
        ),
        Guide(
            "The revision adds experiments at 512 GPUs and a journal reference.",
            ("Scaling results up to 512 GPUs",),
            "Adds the 512-GPU experiments and corrects the title's typo.",
        ),
    ),
    "zh": (
        Guide(
            "限制策略滞后后，异步 rollout 的训练速度可与同步方式持平。",
            (
                "提出面向异步 rollout 的滞后感知重要性权重",
                "给出陈旧策略所引入偏差的上界",
                "开源训练器，吞吐量提升 2.1 倍",
                "摘要只显示前三条贡献",
            ),
        ),
        Guide(
            "修订版新增 512 块 GPU 规模的实验，并补充了期刊信息。",
            ("扩展实验规模至 512 块 GPU",),
            "新增 512 块 GPU 的实验，并更正标题中的笔误。",
        ),
    ),
}


def guided_items(language: str = "en") -> list[DigestItem]:
    """An ordinary digest in which two of four items have a guide in ``language`` (``en`` or ``zh``).

    Two new papers (one with a guide of four contributions, of which digests show three; one without a
    guide and with a long author list) and two revisions (one with a guide that says what changed, one
    copied from a newsletter): every reason kind, every change label.
    """
    first, revised = _GUIDES[language]
    return [
        DigestItem(
            arxiv_id="2611.08864",
            version=1,
            title="Policy lag in asynchronous rollouts",
            authors=("Zeng Li", "Ada Lovelace"),
            categories=("cs.LG", "cs.DC"),
            reasons=(Reason(AUTHOR, "Zeng Li"), Reason(TITLE, '"policy lag"')),
            abstract="We measure policy lag in asynchronous reinforcement learning and bound its effect.",
            version_id=101,
            guide=first,
        ),
        DigestItem(
            arxiv_id="2611.09001",
            version=1,
            title="Mixture of experts at scale",
            authors=tuple(f"Author {n}" for n in range(12)),
            categories=("cs.CL",),
            reasons=(Reason(ABSTRACT, "experts"), Reason(CATEGORY, "cs.CL")),
            abstract="We train a mixture of experts.",
            version_id=102,
        ),
        DigestItem(
            arxiv_id="2611.01234",
            version=2,
            title="Asynchronous training at 512 GPUs",
            authors=("Grace Hopper",),
            categories=("cs.DC",),
            reasons=(Reason(PAPER, "2611.01234"),),
            abstract="A revised abstract.",
            changes=("title", "authors", "abstract", "comment", "journal-ref", "DOI"),
            journal_ref="J. Dist. Sys. 1 (2026)",
            version_id=103,
            guide=revised,
        ),
        DigestItem(
            arxiv_id="2610.07777",
            version=3,
            title="Gradient compression revisited",
            authors=("Barbara Liskov",),
            categories=("cs.DC",),
            reasons=(Reason(CATEGORY, "cs.DC", newsletter="dc-weekly"),),
            abstract="Revised again.",
            changes=("comment",),
            version_id=104,
        ),
    ]


# A guide whose every text attacks a channel: HTML and Telegram tags, Slack mentions and links, mrkdwn
# emphasis, a literal entity, markdown links, a bidi override and a terminal escape.
HOSTILE_GUIDE = Guide(
    '<script>alert("g")</script> & <!channel> *bold* <https://evil.example|click> \u202eevil\x1b[31m',
    ("<b>bold</b> [link](https://evil.example) &amp;", '</blockquote><a href="https://evil.example">x</a>'),
    "<@U123> _it_ ~strike~ `code` <!here> </i>",
)


def hostile_guided_items() -> list[DigestItem]:
    """A new paper and a revision that both carry :data:`HOSTILE_GUIDE`."""
    new, _, revision, _ = guided_items("en")
    return [
        dataclasses.replace(new, guide=HOSTILE_GUIDE),
        dataclasses.replace(revision, guide=HOSTILE_GUIDE),
    ]


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def sample_receipt(matched: int, timezone: str = "Europe/Berlin") -> Receipt:
    """Monday 07:00 to Tuesday 07:00 UTC (17 Nov 2026): arXiv's Monday-evening mailing and a gap fill;
    the feed failed after the announcement and recovered, then fell behind again and still is."""
    return Receipt(
        since=_utc("2026-11-16T07:00:00"),
        until=_utc("2026-11-17T07:00:00"),
        matched=matched,
        sources=(
            SourceScan("arxiv-rss", runs=47, new_versions=4512, announcements=1),
            SourceScan("arxiv-oai", runs=1, new_versions=12),
        ),
        outages=(
            Outage("arxiv-rss", "failing", _utc("2026-11-17T01:05:00"), _utc("2026-11-17T02:35:00")),
            Outage("arxiv-rss", "stale", _utc("2026-11-17T05:00:00"), None),
        ),
        timezone=timezone,
    )


# A source name is stored text (a backfill names its source): markup for every channel, a mention,
# a terminal escape.
HOSTILE_SOURCE = "<b>x</b> & *y* <!channel> <https://evil.example|z> \x1b[31mred"


def hostile_receipt(matched: int) -> Receipt:
    """A receipt naming a hostile source, in a timezone that does not exist (shown in UTC)."""
    return Receipt(
        since=_utc("2026-11-16T07:00:00"),
        until=_utc("2026-11-17T07:00:00"),
        matched=matched,
        sources=(SourceScan(HOSTILE_SOURCE, runs=2, new_versions=3),),
        outages=(Outage(HOSTILE_SOURCE, "failing", _utc("2026-11-10T01:05:00"), None),),
        timezone="Mars/Olympus",
    )


def recommended_items() -> list[DigestItem]:
    """Two learned recommendations, the better score second (a digest shows it first): one close to a
    liked paper with two shared terms, one with a shared term only. Their data is the same in every
    language (the words around it are translated)."""
    return [
        DigestItem(
            arxiv_id="2611.05555",
            version=1,
            title="Off-policy correction for stale actors",
            authors=("Hannah Arendt",),
            categories=("cs.LG",),
            reasons=(Reason(SHARED, "importance weighting"),),
            abstract="We correct stale actors with importance weights.",
            version_id=201,
            recommended=0.62,
        ),
        DigestItem(
            arxiv_id="2611.04444",
            version=1,
            title="Lag-aware asynchronous PPO",
            authors=("Emmy Noether", "Alan Turing"),
            categories=("cs.LG", "cs.AI"),
            reasons=(
                Reason(LIKED, "2306.03564"),
                Reason(SHARED, "policy lag"),
                Reason(SHARED, "reinforcement learning"),
            ),
            abstract="A PPO variant that bounds the lag between actors and learner.",
            version_id=202,
            recommended=0.91,
        ),
    ]


# Shared terms come from paper text: markup for every channel, a Slack mention and link, mrkdwn emphasis,
# a quote's end tag, a bidi override and a terminal escape.
HOSTILE_TERMS = (
    '<script>alert("t")</script>',
    "<!channel> <https://evil.example|click>",
    "*bold* _it_ </blockquote><b>x",
    "\u202eevil\x1b[31m & done",
)


def hostile_recommendation() -> DigestItem:
    """A recommendation whose liked id and shared terms attack every channel."""
    return DigestItem(
        arxiv_id="2611.06666",
        version=1,
        title="A paper recommended for hostile reasons",
        authors=("Ada Lovelace",),
        categories=("cs.LG",),
        reasons=(Reason(LIKED, "<i>2306.03564</i>"), *(Reason(SHARED, term) for term in HOSTILE_TERMS)),
        abstract="Plain.",
        version_id=301,
        recommended=0.5,
    )
