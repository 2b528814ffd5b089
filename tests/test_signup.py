"""Email sign-up with double opt-in: the CLI and the web form mail a signed link; nothing else is sent to
the address until it is followed. A real SMTP server (aiosmtpd) receives the mails."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.db import Database
from core.follows import subscriber_records
from core.follows.index import match_new
from core.models import SubscriberStatus, utcnow
from core.papers import paper_records
from core.people import newsletter_records, tokens
from core.people.signup import RESEND_AFTER
from core.values import PaperIn
from papertrail.cli.app import app
from papertrail.web.app import build_app
from tests.servers import SinkHandler
from tests.support.signup import (
    KEY,
    cli_env,
    context,
    smtp_fixture,  # noqa: F401  (fixtures)
    token_in,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient


def confirmed_address(token: str) -> str:
    """The address a confirmation token names (its subject also carries the pending sign-up's nonce)."""
    address, _nonce = tokens.split_confirm(tokens.verify(KEY, tokens.CONFIRM, token))
    return address


def paper(arxiv_id: str) -> PaperIn:
    return PaperIn(arxiv_id, 1, "Asynchronous rollouts", "An abstract.", ("Ada Lovelace",), ("cs.DC",))


def test_web_sign_up_confirms_before_anything_is_matched(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    sink, port = smtp
    client = TestClient(build_app(context(sqlite_store, port)), follow_redirects=False)
    form = {"address": "ada@example.org", "follows": 'cat:cs.DC\nau:"Zeng Li"', "schedule": "instant"}
    page = client.post("/subscribe", data=form)
    assert page.status_code == 200 and "Check your mail" in page.text
    (mail,) = sink.received
    assert (
        mail.rcpt_tos == ["ada@example.org"]
        and mail.message["Subject"] == "Confirm your PaperTrail subscription"
    )
    subscriber = subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org")
    assert subscriber is not None and subscriber.status == SubscriberStatus.UNCONFIRMED
    assert subscriber.id is not None and len(subscriber_records.follows_of(sqlite_store, subscriber.id)) == 2

    # Unconfirmed: a matching paper is not matched for it, so nothing can be sent.
    paper_records.save_versions(sqlite_store, [paper("2611.00001")])
    assert match_new(sqlite_store) == 0

    # The same form again within ten minutes: no second mail, and a page that says why and when.
    again = client.post("/subscribe", data=form)
    assert again.status_code == 429 and "A mail is already on its way" in again.text
    assert 0 < int(again.headers["Retry-After"]) <= 600 and len(sink.received) == 1

    token = token_in(sink)
    assert confirmed_address(token) == "email:ada@example.org"
    ask = client.get(f"/confirm/{token}")
    assert ask.status_code == 200 and "Confirm your subscription?" in ask.text
    # The page lists what the button confirms (the mail named none of it), escaped.
    assert "<code>cat:cs.DC</code>" in ask.text and "<code>au:&#34;Zeng Li&#34;</code>" in ask.text
    assert (
        subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org").status  # type: ignore[union-attr]
        == SubscriberStatus.UNCONFIRMED
    )
    done = client.post(f"/confirm/{token}")
    assert done.status_code == 200 and "Subscription confirmed" in done.text and "/manage/" in done.text
    assert (
        subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org").status  # type: ignore[union-attr]
        == SubscriberStatus.ACTIVE
    )
    paper_records.save_versions(sqlite_store, [paper("2611.00002")])
    assert match_new(sqlite_store) == 1


def test_a_subscribed_address_gets_its_manage_link_and_the_form_says_the_same(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    sink, port = smtp
    client = TestClient(build_app(context(sqlite_store, port)), follow_redirects=False)
    from core.follows.manage import follow

    follow(sqlite_store, "email:bob@example.org", "cat:cs.LG")  # operator-added: confirmed
    page = client.post("/subscribe", data={"address": "bob@example.org", "follows": "cat:cs.AI"})
    assert "Check your mail" in page.text
    (mail,) = sink.received
    assert mail.message["Subject"] == "Your PaperTrail subscription"
    assert "/manage/" in mail.message.get_body(preferencelist=("plain",)).get_content()  # type: ignore[union-attr]
    bob = subscriber_records.get_subscriber(sqlite_store, "email:bob@example.org")
    assert bob is not None and bob.id is not None and bob.status == SubscriberStatus.ACTIVE
    assert [f.query for f in subscriber_records.follows_of(sqlite_store, bob.id)] == [
        "cat:cs.LG"
    ]  # nothing changed


def test_bad_input_forged_links_and_a_server_without_mail(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    sink, port = smtp
    client = TestClient(build_app(context(sqlite_store, port)), follow_redirects=False)
    bad = client.post("/subscribe", data={"address": "ada@example.org", "follows": "ti:(graph"})
    assert bad.status_code == 400 and "position" in bad.text and "^" in bad.text and not sink.received
    assert client.post("/subscribe", data={"address": "not-an-address"}).status_code == 400
    forged = tokens.sign("another-key", tokens.CONFIRM, "email:ada@example.org")
    assert client.post(f"/confirm/{forged}").status_code == 400
    wrong_purpose = tokens.sign(KEY, tokens.MANAGE, "email:ada@example.org")
    assert client.post(f"/confirm/{wrong_purpose}").status_code == 400
    no_mail = TestClient(build_app(context(sqlite_store, port, smtp_host=None)), follow_redirects=False)
    page = no_mail.get("/subscribe")
    assert page.status_code == 404 and "PAPERTRAIL_SMTP_HOST" in page.text


def test_cli_subscribe_sends_the_link(
    sqlite_url: str,
    sqlite_store: Database,
    smtp: tuple[SinkHandler, int],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    sink, port = smtp
    cli_env(monkeypatch, sqlite_url, port, tmp_path)
    result = CliRunner().invoke(
        app, ["subscribe", "email:Carol@Example.org", "cat:cs.DC", "--schedule", "daily 07:00"]
    )
    assert result.exit_code == 0, result.stderr
    assert "confirmation link sent" in result.stdout
    assert confirmed_address(token_in(sink)) == "email:Carol@example.org"
    again = CliRunner().invoke(app, ["subscribe", "email:Carol@Example.org"])
    assert "less than 10 minutes ago" in again.stdout and len(sink.received) == 1
    bad = CliRunner().invoke(app, ["subscribe", "telegram:42", "cat:cs.DC"])
    assert bad.exit_code == 2 and "not an email address" in bad.stderr


# --- languages --------------------------------------------------------------------------------------------


def bodies(sink: SinkHandler, index: int = -1) -> tuple[str, str]:
    message = sink.received[index].message
    plain = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert plain is not None and html is not None
    return plain.get_content(), html.get_content()


async def test_the_page_language_words_the_confirmation_and_is_stored(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    from core.people import newsletters
    from core.people.signup import sign_up
    from papertrail.service.signup import mail_outcome

    sink, port = smtp
    ctx = context(sqlite_store, port)
    newsletters.create(
        sqlite_store,
        "dc-weekly",
        "Distributed <weekly>",
        ["cat:cs.DC"],
        schedule="daily 08:00",
        timezone="UTC",
    )
    outcome = sign_up(
        sqlite_store,
        "email:ada@example.org",
        ["cat:cs.DC"],
        timezone="Asia/Shanghai",
        schedule="daily 08:00",
        newsletter="dc-weekly",
        language="zh-CN",  # the page's language, in whatever form the caller has it
    )
    assert outcome.subscriber.language == "zh"
    assert await mail_outcome(ctx, outcome, language="zh")
    (mail,) = sink.received
    assert mail.message["Subject"] == "确认你的 PaperTrail 订阅"
    assert mail.message["Content-Language"] == "zh-Hans"
    plain, html = bodies(sink)
    assert "有人（希望是你本人）请 PaperTrail 向这个地址发送 arXiv 论文简报。" in plain
    assert "这次订阅包含 1 条关注。" in plain and "并加入 1 份通讯。" in plain
    assert "简报将按 daily 08:00（Asia/Shanghai）发送。" in plain
    assert '<html lang="zh-Hans">' in html and "查看并确认订阅</a>" in html
    # No submitted or stored free text reaches an unconfirmed address: not the follow, not the newsletter.
    for text in ("cat:cs.DC", "Distributed", "ada@example.org"):
        assert text not in plain and text not in html
    assert confirmed_address(token_in(sink)) == "email:ada@example.org"

    # A second sign-up before confirming, from an English page (past the resend pause): it replaces the
    # pending one (no follows, no newsletter now) and is worded in English.
    again = sign_up(
        sqlite_store,
        "email:ada@example.org",
        [],
        timezone="UTC",
        schedule="daily 08:00",
        language="en",
        now=utcnow() + RESEND_AFTER,
    )
    assert again.subscriber.language == "en"
    assert await mail_outcome(ctx, again, language="en")
    assert sink.received[-1].message["Subject"] == "Confirm your PaperTrail subscription"
    assert "The sign-up has 0 follows." in bodies(sink)[0] and "newsletter" not in bodies(sink)[0]
    assert newsletter_records.newsletters_of(sqlite_store, again.subscriber.id or 0) == []


async def test_a_known_address_gets_the_manage_mail_in_its_own_language(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    from core.follows.manage import follow
    from core.people.signup import sign_up
    from papertrail.service.signup import mail_outcome

    sink, port = smtp
    ctx = context(sqlite_store, port)
    follow(sqlite_store, "email:bob@example.org", "cat:cs.LG")
    bob = subscriber_records.get_subscriber(sqlite_store, "email:bob@example.org")
    assert bob is not None and bob.id is not None
    subscriber_records.update_subscriber(sqlite_store, bob.id, language="zh")

    # Someone signs Bob up from the English page: Bob's own language wins, and nothing about Bob changes.
    outcome = sign_up(
        sqlite_store,
        "email:bob@example.org",
        ["cat:cs.AI"],
        timezone="UTC",
        schedule="daily 08:00",
        language="en",
    )
    assert await mail_outcome(ctx, outcome, language="en")
    assert sink.received[-1].message["Subject"] == "你的 PaperTrail 订阅"
    plain, html = bodies(sink)
    assert "有人请 PaperTrail 订阅 bob@example.org，但这个地址已经订阅过了" in plain and "/manage/" in plain
    assert "<strong>bob@example.org</strong>" in html and "管理你的关注、发送时间或订阅" in html
    assert subscriber_records.get_subscriber(sqlite_store, "email:bob@example.org").language == "zh"  # type: ignore[union-attr]

    # A known address without a language of its own: the page's.
    follow(sqlite_store, "email:carol@example.org", "cat:cs.LG")
    outcome = sign_up(
        sqlite_store, "email:carol@example.org", [], timezone="UTC", schedule="daily 08:00", language="zh"
    )
    assert outcome.subscriber.language is None
    assert await mail_outcome(ctx, outcome, language="zh")
    assert sink.received[-1].message["Subject"] == "你的 PaperTrail 订阅"
    # No language anywhere: English.
    assert await mail_outcome(ctx, outcome)
    assert sink.received[-1].message["Subject"] == "Your PaperTrail subscription"
    assert sink.received[-1].message["Content-Language"] == "en"


def test_an_unknown_sign_up_language_is_refused(sqlite_store: Database) -> None:
    from core.people.signup import sign_up

    with pytest.raises(ValueError, match="en, zh"):
        sign_up(
            sqlite_store, "email:ada@example.org", [], timezone="UTC", schedule="daily 08:00", language="fr"
        )
    assert subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org") is None
    plain = sign_up(sqlite_store, "email:ada@example.org", [], timezone="UTC", schedule="daily 08:00")
    assert plain.subscriber.language is None
