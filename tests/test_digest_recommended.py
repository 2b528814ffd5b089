"""Learned recommendations in digests: their section, order, cap, wording, escaping and counts.

Golden files of one digest with follows' matches and two recommendations for each channel and language
(``<channel>_<language>_recommended.*``); the goldens of digests without recommendations are those of
tests/test_digest_i18n.py and tests/test_render.py, unchanged. An end-to-end pass stores a recommendation's
Match row for a recorded paper, plans and sends the digest to the console, and reads the section back.
"""

from __future__ import annotations

import html
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from bot.commands import handle
from bot.commands_base import ChatContext
from core.config import Settings
from core.db import Database
from core.delivery.digests import cap_rows, send_due_digests
from core.delivery.render import MAX_SHARED_TERMS, Renderer, reason_text, reasons_text
from core.follows.manage import follow
from core.ledger import ledger_records
from core.ledger.ledger_records import RankedMatch
from core.models import Match
from core.overview import dashboard_records
from core.papers import paper_records
from core.reasons import CATEGORY, LIKED, SHARED, Reason, recommendation_hit
from core.values import DigestItem, Message
from notifiers.console.notifier import ConsoleNotifier
from notifiers.slack.blocks import build_payloads
from notifiers.telegram.format import split_message
from notifiers.webhook.payload import digest_payload, encode_payload
from tests.goldens import check_golden, dump_slack
from tests.hostile import guided_items, hostile_recommendation, recommended_items
from tests.ledger_rows import add_matches
from tests.support.digest_outputs import (
    ALLOWED_WORDS,
    ENGLISH_PHRASES,
    NEWSLETTERS,
    _values,
    console_output,
    receipt_for,
    slack_webhook_json,
    webhook_json,
)
from tests.support.digest_outputs import (
    _readable as _i18n_readable,
)
from tests.support.taste_day import day
from tests.support.telegram_digests import assert_well_formed
from tests.support.web import client_for

LANGUAGES = ("en", "zh")
CHANNELS = ("telegram", "slack", "slack-webhook", "email", "console", "webhook", "apprise")
HEADING = {"en": "Recommended for you", "zh": "为你推荐"}
NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def items(language: str) -> list[DigestItem]:
    """Four follows' matches (two new papers, two revisions) and two recommendations, mixed together."""
    followed = guided_items(language)
    better, worse = recommended_items()[1], recommended_items()[0]
    return [worse, *followed[:2], better, *followed[2:]]


def render(
    channel: str, language: str, chosen: list[DigestItem] | None = None, max_items: int = 50
) -> Message:
    recipient = "ada@example.org" if channel == "email" else "12345"
    chosen = items(language) if chosen is None else chosen
    followed = sum(1 for item in chosen if item.recommended is None)
    return Renderer(
        secret_key="test-key", public_url="https://papertrail.example", max_items=max_items
    ).render(
        channel,
        chosen,
        recipient,
        key="digest-recommended",
        newsletters=NEWSLETTERS,
        language=language,
        receipt=receipt_for(language, followed),
    )


# --- golden files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
async def test_golden_digests_with_recommendations_in_every_channel(language: str) -> None:
    tag = f"{language}_recommended"
    telegram = render("telegram", language)
    assert telegram.html is not None
    check_golden(f"telegram_{tag}.html", telegram.html)
    check_golden(f"slack_{tag}.json", dump_slack(build_payloads(render("slack", language))))
    check_golden(f"slack-webhook_{tag}.json", slack_webhook_json(render("slack-webhook", language)))
    email = render("email", language)
    assert email.html is not None
    check_golden(f"email_{tag}.html", email.html)
    check_golden(f"email_{tag}.txt", email.text)
    check_golden(f"console_{tag}.txt", await console_output(render("console", language)))
    check_golden(f"webhook_{tag}.json", webhook_json(render("webhook", language)))


# --- the section ----------------------------------------------------------------------------------------


def _readable(message: Message) -> str:
    """Every text of a message a reader may see, entities decoded."""
    texts = [message.subject, message.text, message.html or ""]
    if message.mrkdwn:
        texts += [json.dumps(payload.body(), ensure_ascii=False) for payload in build_payloads(message)]
    return html.unescape("\n".join(texts))


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("language", LANGUAGES)
def test_the_section_comes_after_the_follows_matches_best_score_first(channel: str, language: str) -> None:
    message = render(channel, language)
    order = [f"{item.arxiv_id}v{item.version}" for item in message.items]
    # New papers, revisions, then the recommendations by score (0.91 before 0.62), whatever the input order.
    assert order == [
        "2611.08864v1",
        "2611.09001v1",
        "2611.01234v2",
        "2610.07777v3",
        "2611.04444v1",
        "2611.05555v1",
    ]
    text = message.mrkdwn or message.html or message.text
    heading = html.unescape(text).index(HEADING[language])
    positions = [html.unescape(text).index(item.title) for item in message.items]
    assert positions == sorted(positions)
    assert positions[3] < heading < positions[4]


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_digest_without_recommendations_has_no_section(channel: str) -> None:
    for language in LANGUAGES:
        message = render(channel, language, guided_items(language))
        readable = _readable(message)
        assert HEADING[language] not in readable
        assert "recommended" not in readable.casefold() and "推荐" not in readable
    if channel == "webhook":
        payload = digest_payload(render(channel, "en", guided_items("en")), NOW)
        assert "recommended" not in payload["counts"]
        assert all("recommended" not in item for item in payload["items"])


@pytest.mark.parametrize("language", LANGUAGES)
def test_subject_counts_recommendations_apart(language: str) -> None:
    subject = render("email", language).subject
    assert (
        subject
        == {
            "en": "PaperTrail: 2 new papers, 2 revisions, 2 recommended papers (with Distributed weekly)",
            "zh": "PaperTrail：2 篇新论文、2 篇修订、2 篇推荐论文（含 Distributed weekly）",
        }[language]
    )


def test_only_recommendations_make_a_digest_of_one_section() -> None:
    message = render("console", "en", recommended_items())
    assert message.subject == "PaperTrail: 2 recommended papers"
    assert "New papers" not in message.text and "Revisions" not in message.text
    assert "Recommended for you (2)" in message.text
    assert "these papers matched your follows or are close to papers you liked" in message.text


# --- the cap --------------------------------------------------------------------------------------------


def test_recommendations_never_push_a_follows_match_out() -> None:
    # Four follows' matches and two recommendations under a cap of 3: the follows fill it.
    capped = render("webhook", "en", max_items=3)
    assert [item.recommended for item in capped.items] == [None, None, None]
    payload = digest_payload(capped, NOW)
    assert payload["counts"] == {"new": 2, "revisions": 1, "more": 3}
    assert "2 recommended papers" in payload["subject"]  # the subject counts the whole digest
    # A cap of 5 leaves room for the best recommendation only.
    roomier = render("console", "en", max_items=5)
    assert [item.arxiv_id for item in roomier.items][-2:] == ["2610.07777", "2611.04444"]
    assert "Recommended for you (1)" in roomier.text
    assert "…and 1 more not shown (digests list at most 5 items" in roomier.text


def _row(match_id: int, arxiv_id: str, version: int = 1, score: float | None = None) -> RankedMatch:
    reasons = (Reason(SHARED, "x"),) if score is not None else (Reason(SHARED, "x", follow=1),)
    return RankedMatch(match_id, 1, match_id, arxiv_id, version, reasons, 0, recommended=score)


def test_the_workers_cap_picks_what_the_renderer_shows() -> None:
    rows = [
        _row(1, "2611.00001", score=0.3),
        _row(2, "2611.00002"),
        _row(3, "2611.00003", score=0.9),
        _row(4, "2611.00004", version=2),
        _row(5, "2611.00005", score=0.6),
    ]
    shown, rest = cap_rows(rows, 4)
    # Both follows' matches, then the two best recommendations; each list in match order.
    assert [row.match_id for row in shown] == [2, 3, 4, 5]
    assert [row.match_id for row in rest] == [1]
    shown, rest = cap_rows(rows, 1)
    assert [row.match_id for row in shown] == [2]
    assert [row.match_id for row in rest] == [1, 3, 4, 5]


# --- wording --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("en", "close to 2306.03564, which you liked · shares: policy lag, reinforcement learning"),
        ("zh", "与你喜欢的 2306.03564 相近 · 共同术语：policy lag、reinforcement learning"),
    ],
)
def test_a_recommendations_reasons_read_as_one_phrase(language: str, expected: str) -> None:
    assert reasons_text(recommended_items()[1].reasons, language) == expected
    assert reason_text(Reason(LIKED, "2306.03564"), language) == expected.split(" · ")[0]


def test_shared_terms_are_capped_and_cut() -> None:
    terms = ["x" * 200] + [f"term {n}" for n in range(8)]
    worded = reasons_text(tuple(Reason(SHARED, term) for term in terms), "en")
    assert worded.count(", ") == MAX_SHARED_TERMS - 1 and "term 3" in worded and "term 4" not in worded
    assert "x" * 59 + "…" in worded or "x" * 58 + "…" in worded
    long = reasons_text((Reason(SHARED, "y" * 200),), "en")
    assert long.startswith("shares: yyy") and long.endswith("…") and len(long) < 80


@pytest.mark.parametrize("channel", ["telegram", "slack", "slack-webhook", "email", "console"])
def test_chinese_recommendations_keep_no_english_words(channel: str) -> None:
    message = render(channel, "zh", max_items=5)  # "…and 1 more" too
    values = _values(items("zh"))
    for text in _i18n_readable(message):
        stripped = re.sub(r"https://[^\s|>\"]+", " ", text)
        for value in values:
            stripped = stripped.replace(value, " ")
        for phrase in (*ENGLISH_PHRASES, "Recommended", "close to", "you liked", "shares", "Not matched"):
            assert phrase not in stripped, (phrase, stripped)
        words = set(re.findall(r"[A-Za-z]{2,}", stripped)) - ALLOWED_WORDS
        assert not words, (words, stripped)


# --- hostile terms --------------------------------------------------------------------------------------


def _hostile(channel: str) -> Message:
    return Renderer(public_url="https://papertrail.example").render(
        channel, [guided_items("en")[0], hostile_recommendation()], "12345"
    )


def test_hostile_terms_are_escaped_in_telegram() -> None:
    message = _hostile("telegram")
    assert message.html is not None
    for part in split_message(message):
        assert_well_formed(part.text)
    assert "<script>" not in message.html and "</blockquote><b>" not in message.html
    assert "&lt;script&gt;" in message.html and "&lt;i&gt;2306.03564&lt;/i&gt;" in message.html
    assert "\x1b" not in message.html and "\u202e" not in message.html


def test_hostile_terms_are_escaped_in_email() -> None:
    message = _hostile("email")
    assert message.html is not None
    assert "<script>" not in message.html and "<b>x" not in message.html
    assert "&lt;/blockquote&gt;&lt;b&gt;x" in message.html
    assert "\x1b" not in message.text and "\u202e" not in message.text


@pytest.mark.parametrize("channel", ["slack", "slack-webhook"])
def test_hostile_terms_cannot_mention_or_link_in_slack(channel: str) -> None:
    body = json.dumps([payload.body() for payload in build_payloads(_hostile(channel))])
    assert "<!channel>" not in body and "<https://evil.example|click>" not in body
    assert "&lt;!channel&gt; &lt;https://evil.example|click&gt;" in body
    assert "\\u001b" not in body and "\\u202e" not in body


async def test_hostile_terms_in_the_console_apprise_and_webhook_are_data() -> None:
    out = await console_output(_hostile("console"))
    assert "\x1b" not in out and "\u202e" not in out
    assert '<script>alert("t")</script>' in out  # plain text: shown as it is, never interpreted
    assert _hostile("apprise").text == _hostile("console").text  # Apprise sends the plain-text digest
    payload = digest_payload(_hostile("webhook"), NOW)
    recommended = payload["items"][1]
    assert recommended["recommended"] == 0.5
    assert [reason["field"] for reason in recommended["recommended_reasons"]] == [LIKED, *[SHARED] * 4]
    assert recommended["recommended_reasons"][4]["term"] == "evil[31m & done"
    assert b"\\u202e" not in encode_payload(payload) and b"\\u001b" not in encode_payload(payload)


def test_the_webhook_gives_the_score_and_the_reasons_as_data() -> None:
    payload = digest_payload(render("webhook", "zh"), NOW)
    assert payload["counts"] == {"new": 2, "revisions": 2, "more": 0, "recommended": 2}
    best = payload["items"][4]
    assert best["recommended"] == 0.91
    assert best["recommended_reasons"] == [
        {"field": "liked", "term": "2306.03564"},
        {"field": "shared", "term": "policy lag"},
        {"field": "shared", "term": "reinforcement learning"},
    ]
    # Machine fields stay English in every language, as for follows' reasons.
    assert best["reasons"] == [
        "close to 2306.03564, which you liked",
        "shares policy lag",
        "shares reinforcement learning",
    ]
    assert "recommended" not in payload["items"][0]


# --- the ledger, end to end -----------------------------------------------------------------------------


def _recommend(db: Database, subscriber_id: int, version_id: int, score: float, liked: str) -> None:
    reasons = [Reason(LIKED, liked), Reason(SHARED, "policy lag"), Reason(SHARED, "<b>rollouts</b>")]
    with db.session() as session:
        session.add(
            Match(
                subscriber_id=subscriber_id,
                version_id=version_id,
                follow_ids=[],
                reasons=[recommendation_hit(score, reasons)],
                created_at=NOW,
            )
        )


async def test_a_stored_recommendation_reaches_the_digest_and_the_counts(db: Database) -> None:
    papers = day()[:4]
    paper_records.save_versions(db, papers, now=NOW - timedelta(hours=1))
    result = follow(db, "console:ada", "cat:cs.LG", schedule="daily 08:00")
    sid, fid = result.subscriber.id, result.follow.id
    assert sid is not None and fid is not None
    ids = [paper_records.versions_of(db, paper.arxiv_id)[0].id or 0 for paper in papers]
    add_matches(db, sid, ids[:2], [Reason(CATEGORY, "cs.LG")], follow_id=fid, now=NOW)
    _recommend(db, sid, ids[2], 0.42, papers[0].arxiv_id)
    _recommend(db, sid, ids[3], 0.87, papers[1].arxiv_id)

    # Counted like any match, and told apart where a breakdown is shown.
    assert ledger_records.count_pending(db, sid) == 4
    assert ledger_records.count_pending_split(db, sid) == (4, 2)
    summary = dashboard_records.status(db, now=NOW)
    assert (summary.pending_matches, summary.pending_recommended) == (4, 2)
    reply = handle(db, Settings().chat(), ChatContext("console:ada"), "/status", now=NOW)
    assert "Follows: 1 · matches waiting: 4, 2 of them recommended" in reply.text
    with client_for(db) as client:
        assert '<div class="sub">2 of them recommended</div>' in client.get("/").text
        assert "其中 2 条为推荐" in client.get("/?lang=zh").text
    scores = [p.item.recommended for p in ledger_records.pending_matches(db, sid)]
    assert scores[:2] == [None, None] and sorted(scores[2:]) == [0.42, 0.87]  # type: ignore[type-var]

    out = io.StringIO()
    (report,) = await send_due_digests(db, {"console": ConsoleNotifier(out)}, Renderer(), now=NOW, force=True)
    assert report.sent and report.items == 4
    text = out.getvalue()
    section = text.index("Recommended for you (2)")
    at = [text.index(f"{paper.arxiv_id}v{paper.version}") for paper in papers]
    assert at[0] < section and at[1] < section
    assert section < at[3] < at[2]  # 0.87 before 0.42
    why = f"close to {papers[1].arxiv_id}, which you liked · shares: policy lag, <b>rollouts</b>"
    assert f"Recommended because: {why}" in text
    # The scan receipt counts what matched the follows: the two recommendations did not.
    assert "; 2 matched your follows." in text
    assert ledger_records.count_pending_split(db, sid) == (0, 0)
    assert dashboard_records.status(db, now=NOW).pending_recommended == 0
    reply = handle(db, Settings().chat(), ChatContext("console:ada"), "/status", now=NOW)
    assert "Follows: 1 · matches waiting: 0\n" in reply.text and "recommended" not in reply.text
