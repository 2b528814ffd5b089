"""AI guides reach every channel in each reader's language: the whole service path, real clients, fakes.

The recorded arXiv feed on loopback; the fake OpenAI-compatible endpoint; Telegram (python-telegram-bot
against the fake Bot API), Slack (slack_sdk against the fake Web API), email (smtplib to aiosmtpd) and a
signed webhook (httpx to a receiver). One English and one Chinese subscriber per channel follow the same
query: each gets its digest with the guides, in its language, marked as machine-generated.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config import Settings
from core.delivery.digests import send_due_digests
from core.follows import subscriber_records
from core.follows.manage import follow
from notifiers.webhook.payload import webhook_secret
from papertrail.service.context import build_context
from papertrail.service.runtime import Jobs
from tests.conftest import BIG_FEED
from tests.fakes.openai_api import DEFAULT_GUIDE, DEFAULT_GUIDE_ZH, FakeOpenAI, fake_openai
from tests.fakes.slack_api import FakeSlack, fake_slack
from tests.fakes.telegram_api import FakeTelegram, fake_telegram
from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.servers import Reply, SinkHandler, closed_port, feed_server, smtp_sink

QUERY = "cat:cs.OS"  # three papers of the recorded day
TOKEN = "123456:TEST-token"
SLACK_TOKEN = "xoxb-test"
KEY = "guides-channels-key-0123456789abcdef"
LABELS = {"en": "AI guide (machine-generated)", "zh": "AI 导读（机器生成）"}
TLDRS = {"en": DEFAULT_GUIDE["tldr"], "zh": DEFAULT_GUIDE_ZH["tldr"]}


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with fake_openai() as server:
        yield server


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with fake_telegram(TOKEN) as server:
        yield server


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack(token=SLACK_TOKEN) as server:
        yield server


@pytest.fixture
def mailbox() -> Iterator[tuple[SinkHandler, int]]:
    with smtp_sink() as sink:
        yield sink


@pytest.fixture
def receivers() -> Iterator[dict[str, WebhookReceiver]]:
    with webhook_receiver() as english, webhook_receiver() as chinese:
        for receiver in (english, chinese):
            receiver.secret = webhook_secret(KEY, receiver.url)
        yield {"en": english, "zh": chinese}


def _addresses(receivers: dict[str, WebhookReceiver]) -> dict[str, dict[str, str]]:
    return {
        language: {
            "telegram": f"telegram:{1000 + n}",
            "slack": f"slack:C0{language.upper()}",
            "email": f"email:{language}@example.org",
            "webhook": f"webhook:{receivers[language].url}",
        }
        for n, language in enumerate(("en", "zh"))
    }


def _only(text: str, language: str) -> bool:
    """The guide and its label in ``language`` are in ``text``, the other language's are not."""
    other = "zh" if language == "en" else "en"
    return (
        TLDRS[language] in text
        and LABELS[language] in text
        and TLDRS[other] not in text
        and LABELS[other] not in text
    )


async def test_every_channel_shows_each_reader_the_guides_in_their_language(
    tmp_path: Path,
    llm: FakeOpenAI,
    telegram: FakeTelegram,
    slack: FakeSlack,
    mailbox: tuple[SinkHandler, int],
    receivers: dict[str, WebhookReceiver],
) -> None:
    sink, smtp_port = mailbox
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/channels.db",
            arxiv_rss_url=feed.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            llm_url=llm.url,
            llm_model="fake-model",
            telegram_token=TOKEN,
            telegram_api_url=telegram.base_url,
            telegram_max_per_second=1000,
            telegram_chat_interval=0,
            slack_bot_token=SLACK_TOKEN,
            slack_api_url=slack.base_url,
            slack_channel_interval=0,
            smtp_host="127.0.0.1",
            smtp_port=smtp_port,
            secret_key=KEY,
            webhook_allow_hosts="127.0.0.1",
        )
        ctx = build_context(settings, console=io.StringIO())
        addresses = _addresses(receivers)
        try:
            for language, by_channel in addresses.items():
                for address in by_channel.values():
                    follow(ctx.db, address, QUERY)
                    subscriber = subscriber_records.get_subscriber(ctx.db, address)
                    assert subscriber is not None and subscriber.id is not None
                    subscriber_records.update_subscriber(ctx.db, subscriber.id, language=language)
            await Jobs(ctx).ingest("arxiv-rss")
            reports = await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, force=True)
        finally:
            await ctx.aclose()

    assert sorted(r.address for r in reports if r.sent) == sorted(
        a for by_channel in addresses.values() for a in by_channel.values()
    )
    # Four subscribers per language share one guide per version and language.
    assert 2 <= len(llm.requests) <= 6 and len(llm.requests) % 2 == 0
    for language, by_channel in addresses.items():
        chat = by_channel["telegram"].partition(":")[2]
        telegram_text = "\n".join(str(call.params["text"]) for call in telegram.sent(chat))
        assert _only(telegram_text, language), telegram_text[:500]

        channel = by_channel["slack"].partition(":")[2]
        slack_text = json.dumps(
            [c.params for c in slack.messages() if c.params.get("channel") == channel], ensure_ascii=False
        )
        assert _only(slack_text, language), slack_text[:500]

        mail = next(r.message for r in sink.received if r.rcpt_tos == [f"{language}@example.org"])
        parts = [mail.get_body(preferencelist=(kind,)) for kind in ("plain", "html")]
        assert all(part is not None and _only(part.get_content(), language) for part in parts)

        [delivery] = receivers[language].deliveries
        assert delivery.signature_valid and delivery.json["language"] == language
        guides = [item["guide"] for item in delivery.json["items"]]
        assert guides and all(g["tldr"] == TLDRS[language] and g["machine_generated"] for g in guides)
