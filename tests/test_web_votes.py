"""Votes from email digests: the signed 👍 / 👎 links of a digest sent through a real SMTP
server (aiosmtpd), the pages they open (GET asks, POST votes, undo), forged links, the Chinese pages and
the votes on the manage page; over the recorded arXiv day, on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re
import warnings
from dataclasses import replace
from datetime import timedelta
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

import markupsafe
import pytest
import sqlalchemy as sa

from core.config import Settings
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.models import DISLIKE, LIKE, Follow, utcnow
from core.papers import paper_records
from core.people import tokens
from core.taste import taste_records
from core.taste.taste_records import SeedIn
from core.taste.votes import cast_vote
from core.values import PaperIn
from papertrail.service.channels import CHANNELS
from papertrail.web.subscribers import MAX_VOTES_SHOWN
from tests.fakes.webhook_receiver import webhook_receiver
from tests.servers import smtp_sink
from tests.support.taste_day import day
from tests.support.web import KEY, client_for
from tests.support.web_headers import assert_secured

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

ADDRESS = "email:ada@example.org"
PUBLIC = "https://papertrail.test"
HOSTILE_TITLE = '<script>alert("vote")</script> & <b>bold</b> Rollouts'


def _papers() -> list[PaperIn]:
    """Ten cs.DC papers of the recorded day, the first with a hostile title."""
    papers = [p for p in day() if "cs.DC" in p.categories][:10]
    return [replace(papers[0], title=HOSTILE_TITLE), *papers[1:]]


def _subscriber(db: Database, language: str | None = None, address: str = ADDRESS) -> int:
    """Ada follows cs.DC since yesterday and the day's papers are stored and matched; returns her id."""
    follow(db, address, "cat:cs.DC", schedule="instant")
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=utcnow() - timedelta(days=1)))
    paper_records.save_versions(db, _papers())
    match_new(db)
    match_records.expand_matches(db)
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    if language:
        subscriber_records.update_subscriber(db, subscriber.id, language=language)
    return subscriber.id


def _path(url: str) -> str:
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == PUBLIC
    return parts.path


def _text_and_html(message: EmailMessage) -> tuple[str, str]:
    plain = message.get_body(preferencelist=("plain",))
    rich = message.get_body(preferencelist=("html",))
    assert plain is not None and rich is not None
    # SMTP carries CRLF line ends; compare text with plain newlines.
    return plain.get_content().replace("\r\n", "\n"), rich.get_content().replace("\r\n", "\n")


def _votes(db: Database, sid: int) -> list[tuple[str, int, int]]:
    return [(v.arxiv_id, v.version, v.value) for v in taste_records.votes_of(db, sid)]


async def test_the_mailed_links_ask_then_vote_then_undo(sqlite_store: Database) -> None:
    sid = _subscriber(sqlite_store)
    with smtp_sink() as (sink, port):
        settings = Settings(smtp_host="127.0.0.1", smtp_port=port, smtp_from="PaperTrail <a@papertrail.test>")
        notifiers = CHANNELS.build_notifiers(settings)
        try:
            (report,) = await send_due_digests(
                sqlite_store, notifiers, Renderer(secret_key=KEY, public_url=PUBLIC), force=True
            )
        finally:
            for notifier in notifiers.values():
                await notifier.aclose()
    assert report.sent and len(sink.received) == 1
    plain, rich = _text_and_html(sink.received[0].message)
    likes = re.findall(r"^  👍 Like: (\S+)$", plain, flags=re.M)
    dislikes = re.findall(r"^  👎 Dislike: (\S+)$", plain, flags=re.M)
    # Every paper of the digest has both links, in the text part and in the HTML part.
    assert len(likes) == len(dislikes) == len(_papers())
    for url in likes + dislikes:
        assert f'href="{url}"' in rich
        assert len(url) < 160  # one line in a mail client (docs/delivery.md, "Vote links")

    hostile = _papers()[0]
    like = next(_path(u) for u in likes if tokens.split_vote(_subject(u))[1] == hostile.arxiv_id)
    dislike = next(_path(u) for u in dislikes if tokens.split_vote(_subject(u))[1] == hostile.arxiv_id)
    client = client_for(sqlite_store)

    # A mail scanner's GET (and HEAD) records nothing; the page shows the paper, escaped, and one button.
    asked = client.get(like)
    assert asked.status_code == 200 and "Like this paper?" in asked.text
    assert markupsafe.escape(HOSTILE_TITLE) in asked.text and "<script>" not in asked.text
    assert f'data-paper="{hostile.arxiv_id}v{hostile.version}"' in asked.text
    assert asked.text.count("<button") == 1 and f'<form method="post" action="{like}">' in asked.text
    assert client.head(like).status_code == 200
    assert asked.headers["cache-control"] == "no-store"
    assert_secured(asked)
    assert _votes(sqlite_store, sid) == []

    # The button posts (no cookie, no CSRF token: the signed link is the authority).
    voted = client.post(like)
    assert voted.status_code == 200 and 'data-state="recorded"' in voted.text
    assert "You like this paper" in voted.text and f'action="{like}/undo"' in voted.text
    assert_secured(voted)
    assert _votes(sqlite_store, sid) == [(hostile.arxiv_id, hostile.version, LIKE)]
    assert 'data-state="unchanged"' in client.post(like).text
    assert 'data-current="1"' in client.get(dislike).text  # the page says what the vote is now
    changed = client.post(dislike)
    assert 'data-state="changed"' in changed.text and "You dislike this paper" in changed.text
    assert _votes(sqlite_store, sid) == [(hostile.arxiv_id, hostile.version, DISLIKE)]

    undone = client.post(f"{dislike}/undo")
    assert undone.status_code == 200 and 'data-state="undone"' in undone.text
    assert f'<form method="post" action="{dislike}">' in undone.text  # vote again
    assert _votes(sqlite_store, sid) == []
    assert 'data-state="not voted"' in client.post(f"{dislike}/undo").text
    # A vote link votes and undoes, nothing else: no page of it links the manage page.
    for page in (asked, voted, changed, undone):
        assert "/manage/" not in page.text and tokens.sign(KEY, tokens.MANAGE, ADDRESS) not in page.text
    # An undo link is no vote link: its GET is not a page that changes anything.
    assert client.get(f"{like}/undo").status_code in (404, 405)


# Where a page of a vote link may lead: the site's public pages, the paper on arXiv, the icons, and the
# vote link itself (its button, Undo, the language switch).
_PUBLIC_HREFS = re.compile(
    r"\?lang=[a-z]+|/|/papers|/papers/[^\s\"]+|https://arxiv\.org/[^\s\"]+|/favicon\.(svg|ico)"
)


async def test_a_webhook_vote_url_votes_and_opens_nothing_else(db: Database) -> None:
    """A vote URL of a webhook payload, followed in the real web app, votes and undoes; its pages link no
    manage page (whose export holds the webhook URL), and its token opens no other route."""
    with webhook_receiver() as receiver:
        address = f"webhook:{receiver.url}/hooks/PRIVATE7PATH"  # a secret path, as Slack's
        sid = _subscriber(db, address=address)
        notifiers = CHANNELS.build_notifiers(Settings(secret_key=KEY, webhook_allow_hosts="127.0.0.1"))
        try:
            (report,) = await send_due_digests(
                db, notifiers, Renderer(secret_key=KEY, public_url=PUBLIC), force=True
            )
        finally:
            for notifier in notifiers.values():
                await notifier.aclose()
        assert report.sent
        [delivery] = receiver.deliveries
    item = delivery.json["items"][0]
    like = _path(item["vote_urls"]["like"])
    token = like.rpartition("/")[2]
    client = client_for(db)
    manage = tokens.sign(KEY, tokens.MANAGE, address)
    unsubscribe = tokens.sign(KEY, tokens.UNSUBSCRIBE, address)

    asked = client.get(like)
    voted = client.post(like)
    undone = client.post(f"{like}/undo")
    assert [asked.status_code, voted.status_code, undone.status_code] == [200, 200, 200]
    assert 'data-state="recorded"' in voted.text and 'data-state="undone"' in undone.text
    assert _votes(db, sid) == []
    for page in (asked, voted, undone):
        assert "/manage/" not in page.text and "/unsubscribe/" not in page.text
        assert manage not in page.text and unsubscribe not in page.text
        assert "PRIVATE7PATH" not in page.text  # the masked address only
        for target in re.findall(r'(?:href|action)="([^"]*)"', page.text):
            target = html.unescape(target)
            assert target.startswith(like) or _PUBLIC_HREFS.fullmatch(target), target

    # The vote token opens no route behind the manage link, nor any other signed route.
    refused = [
        client.get(f"/manage/{token}"),
        client.post(f"/manage/{token}", data={"action": "unsubscribe"}),
        client.get(f"/manage/{token}/export.json"),
        client.get(f"/manage/{token}/feeds.opml"),
        client.get(f"/manage/{token}/papers.bib"),
        client.get(f"/manage/{token}/likes.bib"),
        client.post(f"/manage/{token}/library", files={"file": ("l.bib", b"@article{a, title={A}}")}),
        client.get(f"/unsubscribe/{token}"),
        client.post(f"/unsubscribe/{token}"),
        client.get(f"/leave/{token}"),
        client.get(f"/feeds/private/{token}"),
    ]
    for response in refused:
        assert response.status_code in (400, 404), response.request.url
        assert "PRIVATE7PATH" not in response.text and manage not in response.text
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.status == "active"


def _subject(url: str) -> str:
    return tokens.verify(KEY, tokens.VOTE, urlsplit(url).path.rpartition("/")[2])


def test_forged_and_broken_links_record_nothing(db: Database) -> None:
    sid = _subscriber(db)
    paper = _papers()[1]
    client = client_for(db)
    genuine = tokens.sign(KEY, tokens.VOTE, tokens.vote_subject(ADDRESS, paper.arxiv_id, paper.version, 1))
    forged = tokens.sign("another key", tokens.VOTE, tokens.vote_subject(ADDRESS, paper.arxiv_id, 1, 1))
    altered = genuine[:-2] + ("AA" if genuine[-2:] != "AA" else "BB")
    other_purpose = tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)
    # Genuinely signed, but not a vote's subject: no value, a value of 2, no version.
    malformed = [
        tokens.sign(KEY, tokens.VOTE, subject)
        for subject in (
            f"{ADDRESS}\x00{paper.arxiv_id}v1",
            f"{ADDRESS}\x00{paper.arxiv_id}v1\x002",
            f"{ADDRESS}\x00{paper.arxiv_id}\x001",
        )
    ]
    for token in (forged, altered, other_purpose, "garbage", "%3Cscript%3E.x", *malformed):
        for response in (
            client.get(f"/vote/{token}"),
            client.post(f"/vote/{token}"),
            client.post(f"/vote/{token}/undo"),
        ):
            assert response.status_code == 400, token
            assert "This link is not valid" in response.text or "damaged" in response.text
            assert "most recent digest" in response.text and "<script>" not in response.text
            assert_secured(response)
    assert _votes(db, sid) == []

    # A vote token opens neither the manage nor the unsubscribe page.
    assert client.get(f"/manage/{genuine}").status_code == 400
    assert client.get(f"/unsubscribe/{genuine}").status_code == 400
    # Someone PaperTrail does not know; a paper (or version) it no longer stores.
    nobody = tokens.sign(KEY, tokens.VOTE, tokens.vote_subject("email:x@example.org", paper.arxiv_id, 1, 1))
    assert client.post(f"/vote/{nobody}").status_code == 404
    for arxiv_id, version in (("2999.99999", 1), (paper.arxiv_id, 9)):
        token = tokens.sign(KEY, tokens.VOTE, tokens.vote_subject(ADDRESS, arxiv_id, version, 1))
        for response in (client.get(f"/vote/{token}"), client.post(f"/vote/{token}")):
            assert response.status_code == 404
            assert "Paper not stored" in response.text and f"arXiv:{arxiv_id}v{version}" in response.text
    assert _votes(db, sid) == []
    # Without a secret key there are no links at all.
    keyless = client_for(db, secret_key=None)
    assert keyless.post(f"/vote/{genuine}").status_code == 404
    assert _votes(db, sid) == []
    assert client.post(f"/vote/{genuine}").status_code == 200
    assert _votes(db, sid) == [(paper.arxiv_id, paper.version, LIKE)]


def test_the_pages_speak_the_readers_language(sqlite_store: Database) -> None:
    sid = _subscriber(sqlite_store, language="zh")
    paper = _papers()[2]
    path = "/vote/" + tokens.sign(
        KEY, tokens.VOTE, tokens.vote_subject(ADDRESS, paper.arxiv_id, paper.version, -1)
    )
    client = client_for(sqlite_store)
    asked = client.get(path)
    assert asked.headers["content-language"] == "zh-Hans"
    assert "不喜欢这篇论文吗？" in asked.text and "在你点击按钮之前，不会有任何变化。" in asked.text
    voted = client.post(path)
    assert "你不喜欢这篇论文" in voted.text and "已记录投票。" in voted.text and "撤销" in voted.text
    assert "已撤销投票" in client.post(f"{path}/undo").text
    # The reader's own choice wins over the stored language.
    assert "Dislike this paper?" in client.get(f"{path}?lang=en").text
    # A broken link: the browser's language (nothing says whose link it was).
    broken = TestClient(client.app).get(f"{path}x", headers={"Accept-Language": "zh-CN"})
    assert broken.status_code == 400 and "此链接无效" in broken.text
    assert _votes(sqlite_store, sid) == []


def test_the_manage_page_lists_counts_and_undoes_votes(db: Database) -> None:
    sid = _subscriber(db)
    papers = _papers()
    for paper in papers[:3]:
        cast_vote(db, sid, paper.arxiv_id, LIKE, version=paper.version, now=utcnow() - timedelta(hours=1))
    cast_vote(db, sid, papers[3].arxiv_id, DISLIKE, now=utcnow())
    taste_records.add_seeds(db, sid, [SeedIn("doi:10.1000/x", None, "A seeded paper", "Its abstract")])
    path = "/manage/" + tokens.sign(KEY, tokens.MANAGE, ADDRESS)
    client = client_for(db)

    page = client.get(path).text
    assert 'data-vote-counts="3 1 1"' in page
    assert "3 likes" in page and "1 dislike" in page and "1 paper from your library" in page
    listed = re.findall(r'<li data-vote="([^"]+)" data-value="(-?1)">', page)
    assert listed[0] == (f"{papers[3].arxiv_id}v{papers[3].version}", "-1")  # newest first
    assert sorted(listed[1:]) == sorted((f"{p.arxiv_id}v{p.version}", "1") for p in papers[:3])
    assert markupsafe.escape(HOSTILE_TITLE) in page and "<script>" not in page

    def unvote(paper: PaperIn) -> Any:
        return client.post(path, data={"action": "unvote", "paper": paper.arxiv_id, "version": paper.version})

    done = unvote(papers[0])
    assert done.status_code == 303 and done.headers["location"] == f"{path}?done=unvoted"
    after = client.get(done.headers["location"]).text
    assert "Vote undone." in after and 'data-vote-counts="2 1 1"' in after
    assert papers[0].arxiv_id not in {arxiv_id for arxiv_id, _, _ in _votes(db, sid)}
    again = unvote(papers[0])
    assert again.status_code == 400 and "not on your list" in html.unescape(again.text)
    broken = client.post(path, data={"action": "unvote", "paper": papers[1].arxiv_id, "version": "x"})
    assert broken.status_code == 400
    assert len(_votes(db, sid)) == 3


def test_the_manage_page_lists_the_newest_votes_only(sqlite_store: Database) -> None:
    sid = _subscriber(sqlite_store)
    others = day()[: MAX_VOTES_SHOWN + 5]
    paper_records.save_versions(sqlite_store, others)
    for paper in others:
        cast_vote(sqlite_store, sid, paper.arxiv_id, LIKE)
    page = client_for(sqlite_store).get("/manage/" + tokens.sign(KEY, tokens.MANAGE, ADDRESS)).text
    assert page.count("<li data-vote=") == MAX_VOTES_SHOWN
    assert f"The newest {MAX_VOTES_SHOWN} votes are listed." in page
    assert f'data-vote-counts="{len(others)} 0 0"' in page


def test_a_subscriber_without_votes_is_told_how_to_vote(sqlite_store: Database) -> None:
    _subscriber(sqlite_store)
    page = client_for(sqlite_store).get("/manage/" + tokens.sign(KEY, tokens.MANAGE, ADDRESS)).text
    assert 'data-vote-counts="0 0 0"' in page and "No votes yet." in page


@pytest.mark.parametrize("channel", ["telegram", "slack", "console"])
def test_only_mail_and_webhooks_carry_vote_links(channel: str) -> None:
    """Chats vote with their own buttons; a console or chat digest prints no vote link."""
    from tests.support.real_items import real_items

    renderer = Renderer(secret_key=KEY, public_url=PUBLIC)
    message = renderer.render(channel, real_items()[:3], "x")
    assert "/vote/" not in message.text + (message.html or "") + (message.mrkdwn or "")
    assert not message.vote_links
    assert len(renderer.render("email", real_items()[:3], "a@example.org").vote_links) == 3
    assert not Renderer(public_url=PUBLIC).render("email", real_items()[:3], "a@example.org").vote_links
