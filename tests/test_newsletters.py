"""Newsletters: defined once, matched once per version, issued on their schedule, and fanned out to every
active member through the member's own digests (own channel, own unsubscribe link), never twice.

The notifiers are scripted implementations of our Notifier protocol (as in test_ledger.py); what is under
test is the ledger and the fan-out around them, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import ClassVar

import pytest
import sqlalchemy as sa
from sqlmodel import col
from typer.testing import CliRunner

from bot.commands import handle
from bot.commands_base import ChatContext, Problem
from core.channel import Notifier
from core.config import Settings
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import Digest, DigestState, Match, SubscriberStatus, utcnow
from core.papers import paper_records
from core.people import newsletter_records, newsletters, tokens
from core.people.signup import confirm, confirm_token, sign_up
from core.reasons import CATEGORY, NEWSLETTER, TITLE, Reason
from core.values import DigestItem, Message, PaperIn, SendResult
from notifiers.email.message import list_unsubscribe_headers
from papertrail.cli.app import app
from tests.cli_helpers import invoke
from tests.servers import SinkHandler
from tests.support.cli_output import one_line, unbalanced
from tests.support.signup import KEY, cli_env, context, smtp_fixture, token_in  # noqa: F401  (smtp is a fixture)

NAME = "dc-weekly"


@dataclass
class Recorder:
    """Accepts every message and records it per recipient."""

    channel: ClassVar[str] = "console"
    max_length: ClassVar[int | None] = None
    sent: list[tuple[str, Message]] = field(default_factory=list)

    async def send(self, address: str, message: Message) -> SendResult:
        self.sent.append((address, message))
        return SendResult(platform_id=f"{self.channel}-{len(self.sent)}")

    async def aclose(self) -> None:
        pass


@dataclass
class MailRecorder(Recorder):
    channel: ClassVar[str] = "email"


def paper(arxiv_id: str) -> PaperIn:
    return PaperIn(arxiv_id, 1, "Asynchronous rollouts", "An abstract.", ("Ada Lovelace",), ("cs.DC",))


def member(db: Database, address: str, status: SubscriberStatus = SubscriberStatus.ACTIVE) -> None:
    subscriber, _ = subscriber_records.ensure_subscriber(db, address, timezone="UTC", schedule="daily 08:00")
    subscriber_records.update_subscriber(db, subscriber.id or 0, status=status)
    newsletters.join(db, NAME, subscriber)


def ids(message: Message) -> list[str]:
    return sorted(item.arxiv_id for item in message.items)


async def test_an_issue_reaches_every_active_member_once(db: Database) -> None:
    newsletters.create(
        db, NAME, "Distributed weekly", ["cat:cs.DC"], schedule="weekly sun 03:00", timezone="UTC"
    )
    member(db, "console:ada")
    member(db, "console:bob")
    member(db, "console:gone", SubscriberStatus.UNSUBSCRIBED)
    # Carol follows the same papers herself and gets them instantly: the issue must not repeat them.
    follow(db, "console:carol", "cat:cs.DC", schedule="instant")
    member(db, "console:carol")
    # Email members sign up the self-service way: one confirms, one does not.
    for address in ("email:dora@example.org", "email:eve@example.org"):
        sign_up(db, address, [], timezone="UTC", schedule="daily 08:00", newsletter=NAME)
    pending = subscriber_records.get_subscriber(db, "email:dora@example.org")
    assert pending is not None
    confirm(db, KEY, confirm_token(KEY, pending))

    paper_records.save_versions(db, [paper(f"2611.0000{n}") for n in range(3)])
    assert match_new(db) == 3  # one query, cat:cs.DC, on three papers ...
    assert match_records.expand_matches(db) == 6  # ... for the newsletter and for Carol's own follow
    letter = subscriber_records.get_subscriber(db, "newsletter:dc-weekly")
    assert letter is not None and letter.status == SubscriberStatus.ACTIVE
    with db.session() as session:
        per_version = session.execute(
            sa.select(col(Match.version_id), sa.func.count())
            .where(col(Match.subscriber_id) == letter.id)
            .group_by(col(Match.version_id))
        ).all()
    assert sorted(count for _, count in per_version) == [1, 1, 1]  # matched once, whatever the members

    console, mail = Recorder(), MailRecorder()
    notifiers: dict[str, Notifier] = {"console": console, "email": mail}
    renderer = Renderer(public_url="https://papertrail.example", secret_key=KEY)
    first = await send_due_digests(db, notifiers, renderer)
    # Before Sunday's slot only Carol's own instant digest goes out; the newsletter waits for its schedule.
    assert [(r.address, r.items) for r in first] == [("console:carol", 3)]

    sunday = utcnow() + timedelta(days=8)
    second = await send_due_digests(db, notifiers, renderer, now=sunday)
    assert sorted((r.address, r.items, r.sent) for r in second) == [
        ("console:ada", 3, True),
        ("console:bob", 3, True),
        ("email:dora@example.org", 3, True),
    ]
    by_address = {address: message for address, message in console.sent + mail.sent}
    assert set(by_address) == {"ada", "bob", "carol", "dora@example.org"}
    assert ids(by_address["ada"]) == ids(by_address["bob"]) == ids(by_address["dora@example.org"])
    assert ids(by_address["ada"]) == ["2611.00000", "2611.00001", "2611.00002"]
    item = by_address["ada"].items[0]
    assert item.reasons and all(r.startswith("newsletter dc-weekly: ") for r in item.reasons)
    assert item.follows == ()  # no unfollow button for a follow that is the newsletter's
    # Each member's digest carries its own signed link, which leaves this newsletter (the digest is the
    # issue only), and is titled with the newsletter.
    dora = by_address["dora@example.org"]
    assert dora.subject == "Distributed weekly: 3 new papers"
    token = re.search(r"/leave/([^/?\s\"]+)", dora.unsubscribe_url)
    assert token and tokens.verify(KEY, tokens.LEAVE, token[1]) == f"email:dora@example.org\0{NAME}"

    (issue,) = [d for d in ledger_records.digests_of(db, letter.id or 0)]
    assert (issue.state, issue.channel, issue.item_count) == (DigestState.SENT, "newsletter", 3)
    shown = newsletters.info(db, NAME)
    assert (shown.members, shown.active_members, shown.issues, shown.last_issue_items) == (6, 4, 1, 3)

    # Nothing more: the issue is closed and every copy is sent.
    assert await send_due_digests(db, notifiers, renderer, now=sunday + timedelta(days=7), force=True) == []
    for address in ("email:eve@example.org", "console:gone"):
        found = subscriber_records.get_subscriber(db, address)
        assert found is not None and ledger_records.digests_of(db, found.id or 0) == []
    with db.session() as session:
        unsent = session.execute(
            sa.select(sa.func.count()).select_from(Match).where(col(Match.digest_id).is_(None))
        )
        assert unsent.scalar_one() == 0
        sent = session.execute(
            sa.select(sa.func.count()).select_from(Digest).where(col(Digest.state) == DigestState.SENT)
        )
        assert sent.scalar_one() == 5  # Carol's, Ada's, Bob's, Dora's and the issue record


async def test_a_member_on_an_unconfigured_channel_keeps_the_copies_until_it_can_be_served(
    db: Database,
) -> None:
    newsletters.create(db, NAME, "Distributed", ["cat:cs.DC"], schedule="instant", timezone="UTC")
    member(db, "console:ada")
    member(db, "email:far@example.org")
    paper_records.save_versions(db, [paper("2611.00001")])
    match_new(db)
    console = Recorder()
    (report,) = await send_due_digests(db, {"console": console}, Renderer())
    assert (report.address, report.items) == ("console:ada", 1)
    far = subscriber_records.get_subscriber(db, "email:far@example.org")
    assert far is not None and len(ledger_records.pending_matches(db, far.id or 0)) == 1  # kept, not lost
    mail = MailRecorder()
    (later,) = await send_due_digests(db, {"console": console, "email": mail}, Renderer())
    assert (later.address, later.items, len(mail.sent)) == ("email:far@example.org", 1, 1)


def test_cli_create_list_show_and_subscribe(
    sqlite_url: str,
    sqlite_store: Database,
    smtp: tuple[SinkHandler, int],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    sink, port = smtp
    cli_env(monkeypatch, sqlite_url, port, tmp_path)
    runner = CliRunner()
    created = runner.invoke(
        app,
        [
            "newsletter", "create", NAME, "--title", "Distributed weekly", "--follow", "cat:cs.DC",
            "--follow", 'au:"Zeng Li"', "--schedule", "weekly mon 09:00", "--timezone", "Europe/Berlin",
        ],
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    assert "newsletter dc-weekly (Distributed weekly): 2 follows, schedule weekly mon 09:00" in created.stdout
    again = runner.invoke(app, ["newsletter", "create", NAME, "--title", "X", "--follow", "cat:cs.AI"])
    assert again.exit_code == 2 and "exists already" in again.stderr
    bad = runner.invoke(app, ["newsletter", "create", "Bad_Name", "--title", "X", "--follow", "cat:cs.AI"])
    assert bad.exit_code == 2 and "lowercase letters, digits and dashes" in bad.stderr
    broken = runner.invoke(app, ["newsletter", "create", "x", "--title", "X", "--follow", "ti:(graph"])
    assert broken.exit_code == 2 and "^" in broken.stderr

    joined = runner.invoke(app, ["subscribe", "email:ada@example.org", "--newsletter", NAME])
    assert joined.exit_code == 0, joined.stderr
    mail = sink.received[-1].message.get_body(preferencelist=("plain",))
    # The mail names no newsletter nor follow (no submitted text to an unconfirmed address) ...
    assert mail is not None and "It joins 1 newsletter." in mail.get_content()
    assert "Distributed weekly" not in mail.get_content()
    unknown = runner.invoke(app, ["subscribe", "email:bob@example.org", "--newsletter", "nope"])
    assert unknown.exit_code == 1 and "no newsletter named 'nope'" in unknown.stderr  # not found: 1

    listed = runner.invoke(app, ["newsletter", "list"])
    assert listed.exit_code == 0
    assert "dc-weekly" in listed.stdout and "0 active of 1" in listed.stdout and "cat:cs.DC" in listed.stdout
    shown = runner.invoke(app, ["newsletter", "show", NAME])
    assert shown.exit_code == 0
    assert "members: 1 (0 active)" in shown.stdout and "last issue: none yet" in shown.stdout
    assert '2. au:"Zeng Li"' in shown.stdout and "weekly mon 09:00 (Europe/Berlin)" in shown.stdout
    missing = runner.invoke(app, ["newsletter", "show", "nope"])
    assert missing.exit_code == 1 and "newsletters: dc-weekly" in missing.stderr


def test_cli_adds_and_removes_members(db_url: str, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """`newsletter add|remove NAME ADDRESS`: confirmed subscribers only, idempotent, the exit
    codes of README's scheme, and the member then gets the issue through its own channel."""
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", db_url)

    def run(*args: str) -> tuple[int, str, str]:
        code, out, err = invoke(*args)
        assert unbalanced(one_line(err)) == [], err
        return code, one_line(out), one_line(err)

    code, _, err = run("newsletter", "add", NAME, "console:ada")
    assert code == 1 and "no newsletter named 'dc-weekly'; newsletters: none yet; create one with:" in err
    newsletters.create(
        db, NAME, "Distributed weekly", ["cat:cs.DC"], schedule="weekly sun 03:00", timezone="UTC"
    )
    code, _, err = run("newsletter", "add", "nope", "console:ada")
    assert code == 1 and "newsletters: dc-weekly; `papertrail newsletter list` shows them" in err
    code, _, err = run("newsletter", "add", NAME, "console:ada")
    assert (
        code == 1 and "no subscriber console:ada; create it with: papertrail follow console:ada QUERY" in err
    )
    code, _, err = run("newsletter", "add", NAME, "email:Zed@Example.ORG")  # normalised as `follow` does
    assert code == 1 and "papertrail subscribe email:Zed@example.org --newsletter dc-weekly" in err
    code, _, err = run("newsletter", "add", NAME, "telegram:ada")
    assert code == 2 and "must be a number" in err
    code, _, err = run("newsletter", "add", NAME, "newsletter:dc-weekly")
    assert code == 2 and "a newsletter cannot be a member of a newsletter" in err

    # A pending sign-up has not shown it owns the address; an unsubscribed one asked for nothing more.
    sign_up(db, "email:eve@example.org", ["cat:cs.AI"], timezone="UTC", schedule="daily 08:00")
    code, _, err = run("newsletter", "add", NAME, "email:eve@example.org")
    assert code == 1 and "has not confirmed its sign-up; it must follow the link in its confirmation" in err
    gone, _ = subscriber_records.ensure_subscriber(db, "console:gone", timezone="UTC", schedule="daily 08:00")
    subscriber_records.update_subscriber(db, gone.id or 0, status=SubscriberStatus.UNSUBSCRIBED)
    code, _, err = run("newsletter", "add", NAME, "console:gone")
    assert code == 1 and "console:gone unsubscribed" in err
    for refused in ("email:eve@example.org", "console:gone"):
        who = subscriber_records.get_subscriber(db, refused)
        assert who is not None and newsletter_records.newsletters_of(db, who.id or 0) == []

    follow(db, "console:ada", "cat:cs.AI")  # confirmed: an operator's follow
    code, out, _ = run("newsletter", "add", NAME.upper(), "CONSOLE:ada")
    assert code == 0 and out == (
        "console:ada joined dc-weekly (Distributed weekly): it gets each issue from the next one on"
    )
    code, out, _ = run("newsletter", "add", NAME, "console:ada")
    assert code == 0 and out == "console:ada is a member of dc-weekly already; nothing changed"
    code, out, _ = run("newsletter", "list")
    assert code == 0 and "1 active of 1" in out

    paper_records.save_versions(db, [paper("2611.00001")])
    assert match_new(db) == 1
    code, out, err = run("digest", "--now")
    assert code == 0, err
    assert "--- digest for console:ada ---" in out and "newsletter dc-weekly: category cs.DC" in out
    assert "sent 1 item to console:ada" in out

    code, out, _ = run("newsletter", "remove", NAME, "console:ada")
    assert code == 0 and out.startswith(
        "console:ada left dc-weekly (Distributed weekly); it stays subscribed"
    )
    code, out, _ = run("newsletter", "remove", NAME, "console:ada")
    assert code == 0 and out == "console:ada is not a member of dc-weekly; nothing changed"
    ada = subscriber_records.get_subscriber(db, "console:ada")
    assert ada is not None and ada.status == SubscriberStatus.ACTIVE  # subscribed still, follows kept
    assert [f.query for f in subscriber_records.follows_of(db, ada.id or 0)] == ["cat:cs.AI"]
    paper_records.save_versions(db, [paper("2611.00002")])
    assert match_new(db) == 1
    code, out, _ = run("digest", "--now")
    assert code == 0 and "console:ada" not in out  # the next issue is nobody's: no member left
    code, _, err = run("newsletter", "remove", NAME, "console:nobody")
    assert code == 1 and "no subscriber console:nobody" in err


def test_join_and_leave_from_a_chat(sqlite_store: Database) -> None:
    settings = Settings()
    chat = ChatContext("telegram:42")
    assert "no newsletters yet" in handle(sqlite_store, settings.chat(), chat, "/join").text
    newsletters.create(
        sqlite_store, NAME, "Distributed weekly", ["cat:cs.DC"], schedule="daily 08:00", timezone="UTC"
    )
    listing = handle(sqlite_store, settings.chat(), chat, "/join")
    assert (
        listing.ok
        and "dc-weekly — Distributed weekly" in listing.text
        and "join dc-weekly" in listing.suggestions
    )

    joined = handle(sqlite_store, settings.chat(), chat, "/join dc-weekly")
    assert joined.ok and joined.text.startswith("This chat joined Distributed weekly (dc-weekly)")
    subscriber = subscriber_records.get_subscriber(sqlite_store, "telegram:42")
    assert subscriber is not None
    assert [n.name for n in newsletter_records.newsletters_of(sqlite_store, subscriber.id or 0)] == [NAME]
    assert "already" in handle(sqlite_store, settings.chat(), chat, "/join DC-Weekly").text

    typo = handle(sqlite_store, settings.chat(), chat, "/join dc-weekli")
    assert typo.error == Problem.NOT_FOUND and "Did you mean /join dc-weekly?" in typo.text
    group = ChatContext("telegram:-100200", is_group=True, can_change=False)
    assert handle(sqlite_store, settings.chat(), group, "/join dc-weekly").error == Problem.NOT_ALLOWED
    assert handle(sqlite_store, settings.chat(), group, "/join").ok  # listing is for anyone

    left = handle(sqlite_store, settings.chat(), chat, "/leave dc-weekly")
    assert left.ok and "left Distributed weekly" in left.text
    assert newsletter_records.newsletters_of(sqlite_store, subscriber.id or 0) == []
    assert handle(sqlite_store, settings.chat(), chat, "/leave dc-weekly").error == Problem.NOT_FOUND
    assert "/join" in handle(sqlite_store, settings.chat(), chat, "/help").text


def test_the_form_offers_the_newsletters(sqlite_store: Database, smtp: tuple[SinkHandler, int]) -> None:
    from starlette.testclient import TestClient

    from papertrail.web.app import build_app

    sink, port = smtp
    client = TestClient(build_app(context(sqlite_store, port)), follow_redirects=False)
    assert 'name="newsletter"' not in client.get("/subscribe").text  # none defined: no select
    newsletters.create(
        sqlite_store, NAME, "Distributed <weekly>", ["cat:cs.DC"], schedule="instant", timezone="UTC"
    )
    page = client.get("/subscribe").text
    assert '<option value="dc-weekly">Distributed &lt;weekly&gt;</option>' in page
    wrong = client.post("/subscribe", data={"address": "ada@example.org", "newsletter": "nope"})
    assert wrong.status_code == 400 and "no newsletter named" in wrong.text and not sink.received
    done = client.post("/subscribe", data={"address": "ada@example.org", "follows": "", "newsletter": NAME})
    assert done.status_code == 200 and "Check your mail" in done.text
    ada = subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org")
    assert ada is not None and ada.status == SubscriberStatus.UNCONFIRMED
    assert [n.name for n in newsletter_records.newsletters_of(sqlite_store, ada.id or 0)] == [NAME]
    paper_records.save_versions(sqlite_store, [paper("2611.00001")])
    match_new(sqlite_store)
    # Unconfirmed: the issue opens, and Ada gets no copy.
    assert newsletters.open_due_issues(sqlite_store, now=utcnow(), due=lambda *_: True)[0].copies == 0
    client.post(f"/confirm/{token_in(sink)}")
    paper_records.save_versions(sqlite_store, [paper("2611.00002")])
    match_new(sqlite_store)
    assert newsletters.open_due_issues(sqlite_store, now=utcnow(), due=lambda *_: True)[0].copies == 1


# -- the member's digest: titled with the newsletter, and a link that leaves only it ----------------------


async def test_an_issue_only_digest_is_titled_and_leaves_only_the_newsletter(db: Database) -> None:
    newsletters.create(db, NAME, "Distributed <weekly>", ["cat:cs.DC"], schedule="instant", timezone="UTC")
    member(db, "email:ada@example.org")
    # Carol also follows cs.LG herself: her digest mixes her own match with the issue.
    follow(db, "email:carol@example.org", "cat:cs.LG", schedule="instant")
    member(db, "email:carol@example.org")
    lg = PaperIn("2611.00009", 1, "Learning", "An abstract.", ("Bo Li",), ("cs.LG",))
    paper_records.save_versions(db, [paper("2611.00001"), paper("2611.00002"), lg])
    match_new(db)
    mail = MailRecorder()
    renderer = Renderer(public_url="https://papertrail.example", secret_key=KEY)
    await send_due_digests(db, {"email": mail}, renderer)
    sent = dict(mail.sent)

    ada = sent["ada@example.org"]
    assert ada.subject == "Distributed <weekly>: 2 new papers"
    assert ada.unsubscribe_url.startswith("https://papertrail.example/leave/")
    token = ada.unsubscribe_url.rpartition("/")[2]
    subject = tokens.verify(KEY, tokens.LEAVE, token)
    assert tokens.split_leave(subject) == ("email:ada@example.org", NAME)
    with pytest.raises(tokens.InvalidToken):
        tokens.verify(KEY, tokens.UNSUBSCRIBE, token)  # a leave link cannot unsubscribe the address
    assert f"Leave Distributed <weekly>: {ada.unsubscribe_url}" in ada.text
    assert ada.html is not None and ">Leave Distributed &lt;weekly&gt;</a>" in ada.html
    assert "/manage/" in ada.manage_url  # the manage page still reaches everything
    headers = list_unsubscribe_headers(ada.unsubscribe_url, "")
    assert headers == {
        "List-Unsubscribe": f"<{ada.unsubscribe_url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }

    carol = sent["carol@example.org"]
    assert carol.subject == "PaperTrail: 3 new papers (with Distributed <weekly>)"
    assert "/unsubscribe/" in carol.unsubscribe_url and "Unsubscribe: https://" in carol.text


def test_several_newsletters_in_one_digest_keep_the_whole_address_link() -> None:
    def item(arxiv_id: str, reason: Reason) -> DigestItem:
        return DigestItem(arxiv_id, 1, "T", ("A",), ("cs.DC",), (reason,))

    renderer = Renderer(public_url="https://p.example", secret_key=KEY)
    items = [
        item("2611.00001", Reason(CATEGORY, "cs.DC", newsletter="dc-weekly")),
        item("2611.00002", Reason(NEWSLETTER, "ml")),
    ]
    view = renderer.view(items, "ada", "console:ada", {"dc-weekly": "DC", "ml": "ML"})
    assert view.subject == "PaperTrail: 2 new papers (with DC, ML)"
    assert "/unsubscribe/" in view.unsubscribe_url and view.unsubscribe_label == "Unsubscribe"
    # A title that is not known (the newsletter was deleted) falls back to the name.
    alone = renderer.view(items[:1], "ada", "console:ada")
    assert alone.subject == "dc-weekly: 1 new paper" and "/leave/" in alone.unsubscribe_url
    # A reason that merely mentions a newsletter is the reader's own match.
    own = renderer.view(
        [item("2611.00003", Reason(TITLE, '"newsletter dc-weekly: x"'))], "ada", "console:ada"
    )
    assert own.subject == "PaperTrail: 1 new paper" and "/unsubscribe/" in own.unsubscribe_url
    # Without a secret key there is no link of either kind.
    assert Renderer().view(items[:1], "ada", "console:ada").unsubscribe_url == ""


def test_the_leave_link_asks_then_leaves_one_newsletter_only(sqlite_store: Database) -> None:
    from tests.support.web import client_for

    address = "email:ada@example.org"
    newsletters.create(
        sqlite_store, NAME, "Distributed <weekly>", ["cat:cs.DC"], schedule="instant", timezone="UTC"
    )
    newsletters.create(sqlite_store, "other", "Other", ["cat:cs.LG"], schedule="instant", timezone="UTC")
    follow(sqlite_store, address, "cat:cs.AI")
    subscriber = subscriber_records.get_subscriber(sqlite_store, address)
    assert subscriber is not None and subscriber.id is not None
    for name in (NAME, "other"):
        newsletters.join(sqlite_store, name, subscriber)

    def names() -> list[str]:
        return [n.name for n in newsletter_records.newsletters_of(sqlite_store, subscriber.id or 0)]

    client = client_for(sqlite_store, secret_key=KEY)
    token = tokens.sign(KEY, tokens.LEAVE, tokens.leave_subject(address, NAME))
    page = client.get(f"/leave/{token}")
    assert page.status_code == 200 and "Leave Distributed &lt;weekly&gt;?" in page.text
    assert f'action="/leave/{token}"' in page.text and 'value="One-Click"' in page.text
    assert page.headers["cache-control"] == "no-store"
    assert names() == [NAME, "other"]  # a mail scanner's GET changes nothing

    done = client.post(
        f"/leave/{token}",
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert done.status_code == 200 and "You left Distributed &lt;weekly&gt;" in done.text
    assert names() == ["other"]  # only that newsletter
    after = subscriber_records.get_subscriber(sqlite_store, address)
    assert after is not None and after.status == SubscriberStatus.ACTIVE
    assert len(subscriber_records.follows_of(sqlite_store, subscriber.id)) == 1  # own follows kept
    assert re.search(r'href="/manage/[^"]+"', done.text)
    again = client.post(f"/leave/{token}", data={"List-Unsubscribe": "One-Click"})
    assert again.status_code == 200 and "Not a member of" in again.text

    # Forged, altered, wrong-purpose or malformed tokens change nothing.
    other = tokens.leave_subject(address, "other")
    forged = tokens.sign("another key", tokens.LEAVE, other)
    good = tokens.sign(KEY, tokens.LEAVE, other)
    altered = good[:-2] + ("AA" if good[-2:] != "AA" else "BB")
    unsubscribe = tokens.sign(KEY, tokens.UNSUBSCRIBE, other)
    no_name = tokens.sign(KEY, tokens.LEAVE, address)
    for bad in (forged, altered, unsubscribe, no_name, "garbage"):
        for response in (client.get(f"/leave/{bad}"), client.post(f"/leave/{bad}", data={"x": "y"})):
            assert response.status_code == 400 and "This link is not valid" in response.text, bad
    assert client.post(f"/unsubscribe/{good}", data={}).status_code == 400  # cannot unsubscribe everything
    assert names() == ["other"]
    gone = tokens.sign(KEY, tokens.LEAVE, tokens.leave_subject(address, "no-such"))
    assert client.get(f"/leave/{gone}").status_code == 404
    nobody = tokens.sign(KEY, tokens.LEAVE, tokens.leave_subject("email:nobody@example.org", NAME))
    assert client.post(f"/leave/{nobody}", data={}).status_code == 404
    assert client_for(sqlite_store, secret_key=None).get(f"/leave/{good}").status_code == 404
    assert client.post(f"/leave/{good}", data={}).status_code == 200 and names() == []
