"""Slack notifiers: the real slack_sdk clients (AsyncWebClient, AsyncWebhookClient) against a fake Slack.

Covers the Block Kit layout (exact shape, golden files for hostile input and a 500-item digest), escaping,
splitting at 50 blocks, every failure the adapters translate, skip_parts / delivered_parts, the per-channel
rate limit, and the incoming-webhook adapter with its errors and its secret URL.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from core.channel import DeliveryError
from core.config import Settings
from core.delivery.render import Renderer
from core.reasons import AUTHOR, PAPER, TITLE, Reason
from core.values import DigestItem, Message, Receipt
from notifiers.slack.blocks import SlackPayload, build_payloads
from notifiers.slack.notifier import SlackNotifier
from notifiers.slack.webhook import SlackWebhookNotifier
from tests.fakes.slack_api import (
    NORMAL,
    FakeSlack,
    Reply,
    api_error,
    fake_slack,
    hook_error,
    http_error,
    rate_limited,
)
from tests.goldens import check_golden
from tests.goldens import dump_slack as dump
from tests.hostile import hostile_items, hostile_receipt, many_items, sample_receipt
from tests.servers import closed_port

TOKEN = "xoxb-test-token-0123456789"
CHANNEL = "C0123ABC"


def digest(
    items: Sequence[DigestItem],
    *,
    max_items: int = 50,
    skip_parts: int = 0,
    public_url: str = "",
    receipt: Receipt | None = None,
) -> Message:
    message = Renderer(max_items=max_items, public_url=public_url).render(
        "slack", items, CHANNEL, receipt=receipt
    )
    return dataclasses.replace(message, skip_parts=skip_parts)


def sections(payloads: Sequence[SlackPayload]) -> list[str]:
    return [b["text"]["text"] for p in payloads for b in p.blocks if b["type"] == "section"]


def mrkdwn_texts(payload: SlackPayload) -> list[dict[str, Any]]:
    texts = [b["text"] for b in payload.blocks if b["type"] == "section"]
    return texts + [e for b in payload.blocks if b["type"] == "context" for e in b["elements"]]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack(token=TOKEN) as fake:
        yield fake


def bot(slack: FakeSlack, interval: float = 0.0) -> SlackNotifier:
    """The notifier as the shell builds it: its own client from the settings."""
    return SlackNotifier(
        Settings(slack_bot_token=TOKEN, slack_api_url=slack.base_url, slack_channel_interval=interval).slack()
    )


ITEMS = [
    DigestItem(
        "2611.00042",
        1,
        "Asynchronous rollouts & policy lag",
        ("Zeng Li", "Ada Lovelace"),
        ("cs.LG", "cs.DC"),
        (Reason(AUTHOR, "Zeng Li"),),
        abstract="We  study\nrollouts.",
    ),
    DigestItem(
        "2611.00007",
        2,
        "Revised paper",
        ("Grace Hopper",),
        ("cs.PL",),
        (Reason(PAPER, "2611.00007"),),
        changes=("title",),
    ),
]


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text, "verbatim": True}]}


def _votes(paper: str) -> dict[str, Any]:
    """The 👍 / 👎 under a paper the bot posts; the Slack app answers them (tests/test_slack_votes.py)."""
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": label, "emoji": True},
                "action_id": action,
                "value": paper,
            }
            for label, action in (("👍", "papertrail_like"), ("👎", "papertrail_dislike"))
        ],
    }


async def test_a_normal_digest_is_one_block_kit_message(slack: FakeSlack) -> None:
    notifier = bot(slack)
    result = await notifier.send(CHANNEL, digest(ITEMS))
    await notifier.aclose()

    [call] = slack.messages()
    assert call.headers["Authorization"] == f"Bearer {TOKEN}"
    assert result.platform_id == "1700000000.000001" and result.parts == 1
    assert call.params == {
        "channel": CHANNEL,
        "text": "PaperTrail: 1 new paper, 1 revision",
        "unfurl_links": False,
        "unfurl_media": False,
        "blocks": [
            {
                "type": "header",
                "text": {"type": "plain_text", "text": "PaperTrail: 1 new paper, 1 revision", "emoji": True},
            },
            {"type": "divider"},
            _section("*New papers (1)*"),
            _section(
                "*<https://arxiv.org/abs/2611.00042|Asynchronous rollouts &amp; policy lag>*\n"
                "<https://arxiv.org/abs/2611.00042v1|2611.00042v1>\nWe study rollouts."
            ),
            _context("Zeng Li, Ada Lovelace · cs.LG cs.DC\nWhy: author Zeng Li"),
            _votes("2611.00042v1"),
            {"type": "divider"},
            _section("*Revisions (1)*"),
            _section(
                "*<https://arxiv.org/abs/2611.00007|Revised paper>*\n"
                "<https://arxiv.org/abs/2611.00007v2|2611.00007v2> · changed: title"
            ),
            _context("Grace Hopper · cs.PL\nWhy: paper 2611.00007"),
            _votes("2611.00007v2"),
            {"type": "divider"},
            _context("These papers matched your PaperTrail follows."),
        ],
    }


def test_manage_link_and_more_in_the_footer() -> None:
    renderer = Renderer(max_items=1, secret_key="k" * 32, public_url="https://pt.example")
    [payload] = build_payloads(renderer.render("slack", ITEMS, CHANNEL))
    footer = payload.blocks[-1]["elements"][0]["text"]
    assert footer.startswith("…and 1 more not shown")
    assert "<https://pt.example/manage/" in footer and footer.endswith("|Manage your follows>")


async def test_hostile_digest_golden_and_escaped(slack: FakeSlack) -> None:
    message = digest(hostile_items(), public_url="https://papertrail.example", receipt=hostile_receipt(5))
    payloads = build_payloads(message, vote_buttons=True)  # as the bot posts it
    check_golden("slack_hostile.json", dump(payloads))

    notifier = bot(slack)
    await notifier.send(CHANNEL, message)
    await notifier.aclose()
    [call] = slack.messages()
    assert call.params["blocks"] == json.loads(json.dumps(list(payloads[0].blocks)))

    everything = json.dumps(call.params, ensure_ascii=False)
    for raw in (
        "<!channel>",
        "<@U123>",
        "<https://evil.example|click me>",
        "<!here>",
        "<script>",
        "<Lovelace>",
    ):
        assert raw not in everything
    for escaped in (
        "&lt;!channel&gt;",
        "&lt;@U123&gt;",
        "&lt;https://evil.example|click me&gt;",
        "&lt;!here&gt;",
    ):
        assert escaped in everything
    assert "&amp;amp;" in everything  # a literal "&amp;" in a title stays literal
    assert "\x1b" not in everything and "\x00" not in everything
    # Slack must not auto-link "@channel"-like words in any text: every mrkdwn object is verbatim.
    assert all(text["verbatim"] is True for text in mrkdwn_texts(payloads[0]))


async def test_500_items_split_at_50_blocks_never_inside_an_item(slack: FakeSlack) -> None:
    message = digest(many_items(500), max_items=500, receipt=sample_receipt(500))
    payloads = build_payloads(message, vote_buttons=True)  # as the bot posts it
    check_golden("slack_many.json", dump(payloads))

    assert len(payloads) > 10
    for number, payload in enumerate(payloads, start=1):
        assert len(payload.blocks) <= 50
        assert payload.blocks[0]["text"]["text"].endswith(f"({number}/{len(payloads)})")
        assert payload.text.endswith(f"(part {number} of {len(payloads)})")
        kinds = [b["type"] for b in payload.blocks]
        # Every paper's section is followed by its context and its vote buttons in the same message.
        for i, block in enumerate(payload.blocks):
            if block["type"] == "section" and block["text"]["text"].startswith("*<"):
                assert kinds[i + 1 : i + 3] == ["context", "actions"]
        assert kinds[-1] != "divider"  # a divider or heading never ends a message on its own
    assert all(len(text) <= 3000 for text in sections(payloads))
    titles = [t for t in sections(payloads) if t.startswith("*<https://arxiv.org/abs/")]
    assert len(titles) == 500 and len(set(titles)) == 500
    assert all("&lt;scale&gt;" in t and "&amp; " in t for t in titles)

    notifier = bot(slack)
    result = await notifier.send(CHANNEL, message)
    await notifier.aclose()
    assert result.parts == len(payloads) and len(slack.messages()) == len(payloads)


def test_oversized_sections_are_cut_without_breaking_entities() -> None:
    huge = DigestItem(
        "2611.00099", 1, "&" * 5000, ("<" * 4000,), ("cs.LG",), (Reason(TITLE, "r"),), abstract="> " * 3000
    )
    [payload] = build_payloads(digest([huge]))
    for text in mrkdwn_texts(payload):
        assert len(text["text"]) <= 3000
        tail = text["text"].rsplit(";", 1)[-1]
        assert "&" not in tail  # no entity cut in half
    header = build_payloads(Message(subject="S" * 400, text="x"))[0].blocks[0]
    assert len(header["text"]["text"]) == 150 and header["text"]["text"].endswith("S…")


def test_a_message_without_the_slack_template_falls_back_to_its_text() -> None:
    message = Message(subject="PaperTrail: 1 new paper", text="Title <!channel>\n" + "line\n" * 2000)
    payloads = build_payloads(message)
    texts = sections(payloads)
    assert texts[0].startswith("Title &lt;!channel&gt;") and all(len(t) <= 3000 for t in texts)


# --- failures ------------------------------------------------------------------------------------------


async def test_short_rate_limit_is_waited_out_and_the_same_part_resent(slack: FakeSlack) -> None:
    slack.script(rate_limited(1))
    notifier = bot(slack)
    result = await notifier.send(CHANNEL, digest(ITEMS))
    await notifier.aclose()
    first, second = slack.messages()
    assert first.params == second.params
    assert second.time - first.time >= 0.95  # Retry-After: 1 honoured
    assert result.platform_id == "1700000000.000001"


async def test_long_rate_limit_hands_back_with_retry_after_and_delivered_parts(slack: FakeSlack) -> None:
    message = digest(many_items(30), max_items=30)
    assert len(build_payloads(message)) == 2
    slack.script(NORMAL, rate_limited(120))
    notifier = bot(slack)
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, message)
    await notifier.aclose()
    assert caught.value.retryable and caught.value.retry_after == 120
    assert caught.value.delivered_parts == 1
    assert "rate-limited" in str(caught.value)


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        ("not_in_channel", "/invite @PaperTrail"),
        ("channel_not_found", "check the id"),
        ("account_inactive", "PAPERTRAIL_SLACK_BOT_TOKEN"),
        ("invalid_auth", "PAPERTRAIL_SLACK_BOT_TOKEN"),
        ("token_revoked", "PAPERTRAIL_SLACK_BOT_TOKEN"),
        ("is_archived", "unarchive"),
        ("msg_too_long", "bug"),
    ],
)
async def test_permanent_errors(slack: FakeSlack, error: str, hint: str) -> None:
    slack.script(api_error(error))
    notifier = bot(slack)
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, digest(ITEMS))
    await notifier.aclose()
    assert not caught.value.retryable
    assert error in str(caught.value) and hint in str(caught.value) and CHANNEL in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert len(slack.messages()) == 1  # no retry of a permanent failure
    # The bot's token or PaperTrail's layout is the operator's problem (a delivery alarm, nobody paused);
    # the channel's own refusals are judged per recipient.
    assert caught.value.kind == error
    assert caught.value.operator == (hint in ("PAPERTRAIL_SLACK_BOT_TOKEN", "bug"))


async def test_a_wrong_token_is_reported_by_the_fake_as_slack_does(slack: FakeSlack) -> None:
    notifier = SlackNotifier(Settings(slack_bot_token="xoxb-wrong", slack_api_url=slack.base_url).slack())
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, digest(ITEMS))
    await notifier.aclose()
    assert not caught.value.retryable and "invalid_auth" in str(caught.value)
    assert "xoxb-wrong" not in str(caught.value)


@pytest.mark.parametrize(
    "reply",
    [api_error("internal_error"), http_error(500), http_error(503, ""), api_error("fatal_error")],
    ids=["internal_error", "500", "503", "fatal_error"],
)
async def test_transient_errors_are_retryable(slack: FakeSlack, reply: Reply) -> None:
    message = digest(many_items(30), max_items=30)
    slack.script(NORMAL, reply)
    notifier = bot(slack)
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, message)
    await notifier.aclose()
    assert caught.value.retryable and caught.value.retry_after is None
    assert caught.value.delivered_parts == 1
    # slack_sdk's own retry handlers are off: one request per part, no silent re-send.
    assert len(slack.messages()) == 2


@pytest.mark.net
async def test_network_errors_are_retryable() -> None:
    closed = f"http://127.0.0.1:{closed_port()}/api/"
    notifier = SlackNotifier(Settings(slack_bot_token=TOKEN, slack_api_url=closed).slack())
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, digest(ITEMS))
    await notifier.aclose()
    assert caught.value.retryable and "ClientConnectorError" in str(caught.value)
    assert TOKEN not in str(caught.value)


async def test_a_timeout_is_retryable(slack: FakeSlack) -> None:
    slack.script(Reply(200, {"ok": True, "ts": "1.1"}, delay=0.6))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as session:
        client = AsyncWebClient(token=TOKEN, base_url=slack.base_url, session=session, retry_handlers=[])
        notifier = SlackNotifier(Settings(slack_channel_interval=0).slack(), client=client)
        with pytest.raises(DeliveryError) as caught:
            await notifier.send(CHANNEL, digest(ITEMS))
    assert caught.value.retryable and "TimeoutError" in str(caught.value)


async def test_missing_token_is_retryable_and_names_the_setting(slack: FakeSlack) -> None:
    notifier = SlackNotifier(Settings(slack_api_url=slack.base_url).slack())
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, digest(ITEMS))
    assert caught.value.retryable and "PAPERTRAIL_SLACK_BOT_TOKEN" in str(caught.value)
    assert slack.calls == []


async def test_skip_parts_and_delivered_parts_count_the_skipped(slack: FakeSlack) -> None:
    items = many_items(60)
    # 16 papers a message with their vote buttons (three blocks each), 24 without.
    assert len(build_payloads(digest(items, max_items=60), vote_buttons=True)) == 4
    assert len(build_payloads(digest(items, max_items=60))) == 3
    notifier = bot(slack)

    result = await notifier.send(CHANNEL, digest(items, max_items=60, skip_parts=3))
    [call] = slack.messages()
    assert call.params["blocks"][0]["text"]["text"].endswith("(4/4)")
    assert result.parts == 4 and result.platform_id == "1700000000.000001"

    slack.script(NORMAL, api_error("internal_error"))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(CHANNEL, digest(items, max_items=60, skip_parts=2))
    await notifier.aclose()
    assert caught.value.delivered_parts == 3
    assert [c.params["blocks"][0]["text"]["text"][-5:] for c in slack.messages()[1:]] == ["(3/4)", "(4/4)"]


async def test_injected_client_is_used_and_left_open(slack: FakeSlack) -> None:
    client = AsyncWebClient(token=TOKEN, base_url=slack.base_url)
    notifier = SlackNotifier(Settings(slack_channel_interval=0).slack(), client=client)
    result = await notifier.send("U0123ABC", digest(ITEMS))
    await notifier.aclose()
    assert result.platform_id and slack.messages()[0].params["channel"] == "U0123ABC"
    assert (await client.chat_postMessage(channel=CHANNEL, text="still usable"))["ok"]


async def test_aclose_closes_the_session_the_notifier_opened(slack: FakeSlack) -> None:
    notifier = bot(slack)
    await notifier.send(CHANNEL, digest(ITEMS))
    session = notifier._session  # white-box: the session is the resource aclose() must release
    assert session is not None and not session.closed
    await notifier.aclose()
    assert session.closed


@pytest.mark.net
async def test_one_message_per_second_per_channel_provokes_no_429() -> None:
    message = digest(many_items(60), max_items=60)
    with fake_slack(token=TOKEN, enforce_interval=1.0) as slack:
        # The fake does enforce it: two immediate posts to one channel get a 429.
        raw = AsyncWebClient(token=TOKEN, base_url=slack.base_url, retry_handlers=[])
        await raw.chat_postMessage(channel="C0OTHER", text="a")
        with pytest.raises(Exception, match="ratelimited"):
            await raw.chat_postMessage(channel="C0OTHER", text="b")
        assert slack.rate_limited == 1

        notifier = bot(slack, interval=1.0)
        result = await notifier.send(CHANNEL, message)
        await notifier.aclose()
        assert result.parts == 4
        assert slack.rate_limited == 1  # none from the notifier
        assert len([c for c in slack.messages() if c.params["channel"] == CHANNEL]) == 4


# --- incoming webhooks ---------------------------------------------------------------------------------


def hook(**settings: Any) -> SlackWebhookNotifier:
    return SlackWebhookNotifier(
        Settings(webhook_allow_hosts="127.0.0.1", slack_channel_interval=0, **settings).slack_webhook()
    )


async def test_webhook_posts_the_same_block_kit(slack: FakeSlack) -> None:
    message = digest(hostile_items())
    notifier = hook()
    result = await notifier.send(slack.webhook_url, message)
    await notifier.aclose()
    [call] = slack.messages()
    assert call.method == "webhook" and "Authorization" not in call.headers
    assert call.params == json.loads(json.dumps(build_payloads(message)[0].body()))
    assert result.platform_id is None and result.parts == 1
    # No vote buttons: a click would reach the app from a channel that is no slack: subscriber.
    assert "actions" not in {block["type"] for block in call.params["blocks"]}


@pytest.mark.parametrize(
    ("reply", "retryable", "words"),
    [
        (hook_error(404, "no_service"), False, "no longer exists"),
        (hook_error(403, "action_prohibited"), False, "new incoming webhook"),
        (hook_error(410, "channel_is_archived"), False, "archived"),
        (hook_error(400, "invalid_blocks"), False, "bug"),
        (hook_error(500, "rollup_error"), True, "retry"),
        (http_error(502), True, "retry"),
        (hook_error(429, "rate_limited", retry_after=60), True, "rate-limited"),
    ],
    ids=["404", "403", "410", "400", "500", "502", "429"],
)
async def test_webhook_errors(slack: FakeSlack, reply: Reply, retryable: bool, words: str) -> None:
    message = digest(many_items(30), max_items=30)
    slack.script(NORMAL, reply)
    notifier = hook()
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(slack.webhook_url, message)
    await notifier.aclose()
    error = caught.value
    assert error.retryable is retryable and words in str(error)
    assert error.delivered_parts == 1
    assert error.retry_after == (60 if reply.status == 429 else None)
    assert "fakeWebhookSecret" not in str(error) and "127.0.0.1" in str(error)


async def test_webhook_short_rate_limit_is_waited_out(slack: FakeSlack) -> None:
    slack.script(hook_error(429, "rate_limited", retry_after=0))
    notifier = hook()
    await notifier.send(slack.webhook_url, digest(ITEMS))
    await notifier.aclose()
    assert len(slack.messages()) == 2


@pytest.mark.net
async def test_webhook_url_never_logged_nor_in_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://127.0.0.1:{closed_port()}/services/T0001/B0001/fakeWebhookSecret"
    notifier = hook()
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(url, digest(ITEMS))
    await notifier.aclose()
    assert caught.value.retryable and caught.value.__cause__ is None
    assert "fakeWebhookSecret" not in str(caught.value)

    with fake_slack() as slack:
        notifier = hook()
        await notifier.send(slack.webhook_url, digest(ITEMS))
        await notifier.aclose()
    assert "fakeWebhookSecret" not in caplog.text


async def test_webhook_refuses_hosts_that_are_not_slack() -> None:
    notifier = SlackWebhookNotifier(Settings().slack_webhook())
    for url in ("https://evil.example/services/x", "http://hooks.slack.com/services/x", "http://127.0.0.1/x"):
        with pytest.raises(DeliveryError) as caught:
            await notifier.send(url, digest(ITEMS))
        assert not caught.value.retryable and "hooks.slack.com" in str(caught.value)
    await notifier.aclose()
