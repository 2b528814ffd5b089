"""The sign-up form under hostile use (defects 7 and 8), through the web app and a real SMTP server.

7. The form must not be a mail relay: a client, its network and everyone together get an hourly number
   of sign-ups, counted in the database; a refused one stores and mails nothing. The confirmation mail
   carries no submitted text (the follows are on the link's page).
8. A confirmation confirms exactly what its link showed: a second sign-up for a pending address cannot
   change what the first link confirms; after the resend pause it replaces the sign-up and mails a new
   link, and the old link dies.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Iterator
from datetime import timedelta
from ipaddress import ip_address, ip_network
from typing import Any

import httpx
import pytest

from core.db import Database, make_engine
from core.follows import subscriber_records
from core.models import SubscriberStatus, utcnow
from core.people import tokens
from core.people.signup import RESEND_AFTER, confirm, sign_up
from papertrail.web.app import build_app
from tests.servers import SinkHandler, free_port, smtp_sink
from tests.support.signup import KEY, context, token_in

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

# Documentation and test ranges only (RFC 5737, RFC 3849): the requests never leave the test client.
CLIENT = "198.51.100.7"


@pytest.fixture
def smtp() -> Iterator[tuple[SinkHandler, int]]:
    with smtp_sink() as sink:
        yield sink


# "Now" for the apps: the middle of an hour, so that no count starts afresh during a test.
NOW = utcnow().replace(minute=20, second=0, microsecond=0)


def app_for(db: Database, port: int, **settings: Any) -> Any:
    return build_app(context(db, port, **settings), clock=lambda: NOW)


def client_at(app: Any, ip: str) -> TestClient:
    """A browser whose connection comes from ``ip``."""
    return TestClient(app, follow_redirects=False, client=(ip, 40000))


def form(address: str, follows: str = "cat:cs.DC", **extra: str) -> dict[str, str]:
    return {"address": address, "follows": follows, "schedule": "daily 08:00", **extra}


def plain_and_html(sink: SinkHandler, index: int = -1) -> str:
    message = sink.received[index].message
    parts = [message.get_body(preferencelist=(kind,)) for kind in ("plain", "html")]
    return "\n".join(part.get_content() for part in parts if part is not None)


# -- defect 7: limits ---------------------------------------------------------------------------------------


def test_one_client_sends_its_hourly_allowance_of_mails_and_no_more(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """The issue's attack: 100 different addresses from one client. Only the per-IP limit's worth of
    mails reach the SMTP server; the rest get a 429 page that says when to come back, and leave no row."""
    sink, port = smtp
    browser = client_at(app_for(sqlite_store, port), CLIENT)
    answers = [browser.post("/subscribe", data=form(f"victim{n}@example.org")) for n in range(100)]

    assert [a.status_code for a in answers[:5]] == [200] * 5
    assert len(sink.received) == 5  # PAPERTRAIL_SIGNUP_IP_PER_HOUR's default
    refused = answers[5:]
    assert {a.status_code for a in refused} == {429}
    assert all(0 < int(a.headers["Retry-After"]) <= 3600 for a in refused)
    assert "Too many sign-ups" in refused[0].text and "from one internet address" in refused[0].text
    assert "Nothing was recorded and no mail was sent" in refused[0].text
    assert subscriber_records.get_subscriber(sqlite_store, "email:victim5@example.org") is None
    assert subscriber_records.get_subscriber(sqlite_store, "email:victim99@example.org") is None

    # The page is in the reader's language.
    chinese = browser.post("/subscribe", data=form("victim100@example.org", language="zh"))
    assert chinese.status_code == 429 and "注册次数过多" in chinese.text
    # Another client is not held up by this one.
    other = client_at(browser.app, "203.0.113.9").post("/subscribe", data=form("ada@example.org"))
    assert other.status_code == 200 and len(sink.received) == 6


def test_neighbours_on_one_network_share_its_limit(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """A client that walks through its /24 (or its IPv6 /64) is still one network."""
    sink, port = smtp
    app = app_for(sqlite_store, port, signup_ip_per_hour=2, signup_network_per_hour=3)

    def sign_up_from(ip: str, n: int) -> int:
        return int(client_at(app, ip).post("/subscribe", data=form(f"n{n}@example.org")).status_code)

    assert [sign_up_from(f"198.51.100.{n}", n) for n in range(1, 6)] == [200, 200, 200, 429, 429]
    assert (
        "from one network"
        in client_at(app, "198.51.100.77").post("/subscribe", data=form("x@example.org")).text
    )
    assert sign_up_from("198.51.101.1", 6) == 200  # the next /24 is another network
    v6 = [sign_up_from(f"2001:db8:1:2::{n:x}", 10 + n) for n in (1, 0xFFFF, 0xABCD, 0x1234)]
    assert v6 == [200, 200, 200, 429]
    assert sign_up_from("2001:db8:1:3::1", 20) == 200  # the next /64
    # An IPv4 client seen through an IPv4-mapped IPv6 address is the same client.
    assert sign_up_from("::ffff:198.51.100.200", 21) == 429
    assert len(sink.received) == 3 + 1 + 3 + 1


def test_the_hourly_cap_holds_for_everyone_together(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    sink, port = smtp
    app = app_for(sqlite_store, port, signup_mails_per_hour=3)
    clients = ["192.0.2.1", "198.51.100.1", "203.0.113.1", "2001:db8::1", "2001:db8:ffff::1"]
    answers = [
        client_at(app, ip).post("/subscribe", data=form(f"u{n}@example.org")) for n, ip in enumerate(clients)
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert "from everyone together" in answers[3].text and len(sink.received) == 3


def test_the_counts_live_in_the_database(db: Database) -> None:
    """Two processes (two engines on one database) share one count, and the next hour starts afresh."""
    from core.people.signup_limits import Scope, quotas_for, take

    other = Database(make_engine(db.engine.url.render_as_string(hide_password=False)))
    quotas = quotas_for(ip_address(CLIENT), per_client=3, per_network=10, per_hour=10, secret=KEY)
    now = NOW.replace(minute=30)
    taken = [take(s, quotas, now) for s in (db, other, db, other)]
    other.engine.dispose()
    assert taken[:3] == [None, None, None]
    refusal = taken[3]
    assert refusal is not None and refusal.scope == Scope.CLIENT and refusal.retry_after == 30 * 60
    assert take(db, quotas, now + timedelta(hours=1)) is None


def test_concurrent_sign_ups_never_take_more_than_the_limit(pg_store: Database) -> None:
    """Sixteen threads, each its own connection, take 40 sign-ups at once against a limit of 25."""
    from core.people.signup_limits import quotas_for, take

    quotas = quotas_for(ip_address(CLIENT), per_client=25, per_network=100, per_hour=100, secret=KEY)
    now = utcnow()
    start = threading.Barrier(16)
    results: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        for _ in range(40 // 16 + 1):
            granted = take(pg_store, quotas, now) is None
            with lock:
                results.append(granted)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 25


def test_x_forwarded_for_is_read_only_from_a_trusted_proxy(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    _sink, port = smtp

    def burst(app: Any, peer: str) -> list[int]:
        browser = client_at(app, peer)
        return [
            browser.post(
                "/subscribe",
                data=form(f"p{n}-{peer}@example.org"),
                headers={"X-Forwarded-For": f"192.0.2.{n}"},
            ).status_code
            for n in range(1, 4)
        ]

    # Not behind a proxy: anyone may write the header, so the connection's peer is the client.
    assert burst(app_for(sqlite_store, port, signup_ip_per_hour=2), "203.0.113.5") == [200, 200, 429]
    # Behind a trusted proxy: the address it appended is the client, one per header here.
    proxied = app_for(sqlite_store, port, signup_ip_per_hour=2, trusted_proxies="127.0.0.1, 10.0.0.0/8")
    assert burst(proxied, "10.1.2.3") == [200, 200, 200]


def test_the_client_address_behind_proxies() -> None:
    from papertrail.web.client_address import client_ip

    proxies = [ip_network("127.0.0.1/32"), ip_network("10.0.0.0/8")]
    peer = "127.0.0.1"

    def client(peer: str, *headers: str) -> str:
        return str(client_ip(peer, headers, proxies))

    assert client("198.51.100.7", "192.0.2.1") == "198.51.100.7"  # the peer is no proxy: header ignored
    assert client(peer, "192.0.2.1") == "192.0.2.1"
    # What the client wrote itself (left of what the proxies appended) is never believed.
    assert client(peer, "6.6.6.6, 192.0.2.1") == "192.0.2.1"
    assert client(peer, "6.6.6.6", "192.0.2.1, 10.0.0.2") == "192.0.2.1"
    assert client(peer, "[2001:db8::5]:443") == "2001:db8::5"
    assert client(peer, "192.0.2.9:5000") == "192.0.2.9"
    assert client(peer, "::ffff:192.0.2.1") == "192.0.2.1"
    assert client(peer, "unknown") == peer  # not an address: the proxy itself is the client
    assert client(peer) == peer
    assert client_ip("testclient", ["192.0.2.1"], proxies) is None  # no IP peer (a Unix socket)


async def test_the_served_app_ignores_x_forwarded_for_unless_told(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """Through the real web server (uvicorn would believe the header from 127.0.0.1 on its own)."""
    from papertrail.service.runtime import web_role

    sink, port = smtp
    web_port = free_port()
    ctx = context(sqlite_store, port, web_port=web_port, signup_ip_per_hour=2)
    stop = asyncio.Event()
    serving = asyncio.create_task(web_role(ctx, stop))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{web_port}") as http:
            for _ in range(200):
                try:
                    await http.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            codes = [
                (
                    await http.post(
                        "/subscribe",
                        data=form(f"s{n}@example.org"),
                        headers={"X-Forwarded-For": f"192.0.2.{n}"},
                    )
                ).status_code
                for n in range(3)
            ]
    finally:
        stop.set()
        await serving
    assert codes == [200, 200, 429] and len(sink.received) == 2


def test_settings_name_what_is_wrong() -> None:
    from pydantic import ValidationError

    from core.config import Settings

    with pytest.raises(ValidationError, match=r"PAPERTRAIL_TRUSTED_PROXIES: 'proxy\.internal' is neither"):
        Settings(trusted_proxies="127.0.0.1, proxy.internal")
    with pytest.raises(ValidationError, match="PAPERTRAIL_SIGNUP_IP_PER_HOUR must be at least 1"):
        Settings(signup_ip_per_hour=0)
    assert [str(n) for n in Settings(trusted_proxies="10.0.0.0/8, ::1").trusted_proxy_networks] == [
        "10.0.0.0/8",
        "::1/128",
    ]


# -- defect 7: what the mail says ---------------------------------------------------------------------------

HOSTILE_FOLLOWS = 'ti:"https://win.example/prize"\nabs:"call +1 555 0100 now"\nti:"<script>alert(1)</script>"'


def test_the_confirmation_mail_carries_no_submitted_text(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    sink, port = smtp
    browser = client_at(app_for(sqlite_store, port), CLIENT)
    address = "victim+call-555-0100@example.org"  # a plus tag reaches the victim's own mailbox
    answer = browser.post("/subscribe", data=form(address, HOSTILE_FOLLOWS))
    assert answer.status_code == 200
    (mail,) = sink.received
    assert mail.rcpt_tos == [address]
    body = plain_and_html(sink)
    for text in ("win.example", "prize", "555", "0100", "call", "<script", "alert("):
        assert text not in body, text
    assert "The sign-up has 3 follows." in body and "daily 08:00 (UTC)" in body
    # The link's page shows them, escaped, before anything is confirmed.
    page = browser.get(f"/confirm/{token_in(sink)}")
    assert page.status_code == 200 and "Confirm your subscription?" in page.text
    assert "<code>ti:&#34;https://win.example/prize&#34;</code>" in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>alert" not in page.text


# -- defect 8: a link confirms what it showed ----------------------------------------------------------------


def test_a_second_sign_up_cannot_change_what_the_first_link_confirms(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """The issue's attack: within the resend pause, a stranger signs the pending address up again with
    other follows, schedule and language. Nothing changes, no mail goes out, and the owner's link confirms
    exactly what the owner asked for."""
    sink, port = smtp
    app = app_for(sqlite_store, port)
    owner = client_at(app, CLIENT)
    assert (
        owner.post("/subscribe", data=form("ada@example.org", "cat:cs.DC", language="en")).status_code == 200
    )
    attacker = client_at(app, "203.0.113.66")
    attack = attacker.post(
        "/subscribe",
        data={
            "address": "ada@example.org",
            "follows": 'au:"Spam Spammer"\nti:"buy now"',
            "schedule": "instant",
            "timezone": "Asia/Shanghai",
            "language": "zh",
        },
    )
    token = token_in(sink, 0)
    assert owner.post(f"/confirm/{token}").status_code == 200
    ada = subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org")
    assert ada is not None and ada.id is not None and ada.status == SubscriberStatus.ACTIVE
    assert [f.query for f in subscriber_records.follows_of(sqlite_store, ada.id)] == ["cat:cs.DC"]
    assert (ada.schedule, ada.timezone, ada.language) == ("daily 08:00", "UTC", "en")
    # The attacker was told, in the attacker's language, that nothing changed; no mail went out.
    assert attack.status_code == 429 and "邮件已在路上" in attack.text and len(sink.received) == 1


def test_a_later_sign_up_replaces_the_pending_one_and_kills_the_old_link(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """The normal re-try (the owner fixes a typo after the pause) and the same move by a stranger: a new
    mail with a new link goes to the address, and the first link no longer confirms anything."""
    sink, port = smtp
    owner = client_at(app_for(sqlite_store, port), CLIENT)
    assert (
        owner.post("/subscribe", data=form("ada@example.org", 'ti:"asynchronus rollouts"')).status_code == 200
    )
    first = token_in(sink)
    ada = subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org")
    assert ada is not None and ada.id is not None and ada.confirm_sent_at is not None
    # The pause runs out.
    subscriber_records.update_subscriber(
        sqlite_store, ada.id, confirm_sent_at=ada.confirm_sent_at - RESEND_AFTER
    )
    again = owner.post("/subscribe", data=form("ada@example.org", "cat:cs.DC\ncat:cs.LG", schedule="instant"))
    assert again.status_code == 200 and len(sink.received) == 2
    second = token_in(sink)

    for answer in (owner.get(f"/confirm/{first}"), owner.post(f"/confirm/{first}")):
        assert answer.status_code == 410 and "This link was replaced" in answer.text
    assert (
        subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org").status  # type: ignore[union-attr]
        == SubscriberStatus.UNCONFIRMED
    )
    assert second != first and "The sign-up has 2 follows." in plain_and_html(sink)
    page = owner.get(f"/confirm/{second}")
    assert "<code>cat:cs.DC</code>" in page.text and "asynchronus" not in page.text and "instant" in page.text
    assert owner.post(f"/confirm/{second}").status_code == 200
    assert [f.query for f in subscriber_records.follows_of(sqlite_store, ada.id)] == [
        "cat:cs.DC",
        "cat:cs.LG",
    ]
    done = subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org")
    assert done is not None and done.status == SubscriberStatus.ACTIVE and done.schedule == "instant"
    # Confirming again is harmless; the dead link stays dead for a confirmed address too (it changes nothing).
    assert owner.post(f"/confirm/{second}").status_code == 200
    assert owner.post(f"/confirm/{first}").status_code == 200
    assert [f.query for f in subscriber_records.follows_of(sqlite_store, ada.id)] == [
        "cat:cs.DC",
        "cat:cs.LG",
    ]


def test_a_link_of_an_older_release_confirms_nothing(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """Links mailed before the nonce existed name only the address: they cannot say what they confirm."""
    _sink, port = smtp
    browser = client_at(app_for(sqlite_store, port), CLIENT)
    browser.post("/subscribe", data=form("ada@example.org"))
    old_style = tokens.sign(KEY, tokens.CONFIRM, "email:ada@example.org")
    for answer in (browser.get(f"/confirm/{old_style}"), browser.post(f"/confirm/{old_style}")):
        assert answer.status_code == 400 and "from an older sign-up; sign up again" in answer.text
    assert (
        subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org").status  # type: ignore[union-attr]
        == SubscriberStatus.UNCONFIRMED
    )


def test_a_subscribed_address_is_throttled_in_the_same_words(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    """Manage-link mails are paced like confirmation mails, and the pages cannot tell the two apart."""
    from core.follows.manage import follow

    sink, port = smtp
    browser = client_at(app_for(sqlite_store, port), CLIENT)
    follow(sqlite_store, "email:bob@example.org", "cat:cs.LG")
    pages = []
    for address in ("bob@example.org", "ada@example.org"):
        assert browser.post("/subscribe", data=form(address)).status_code == 200
        pages.append(browser.post("/subscribe", data=form(address)))
    assert len(sink.received) == 2
    assert [p.status_code for p in pages] == [429, 429]
    assert pages[0].text == pages[1].text


def test_a_mail_that_failed_does_not_hold_up_the_next_try(
    sqlite_store: Database, smtp: tuple[SinkHandler, int]
) -> None:
    sink, port = smtp
    browser = client_at(app_for(sqlite_store, port), CLIENT)
    sink.refuse.add("ada@example.org")
    failed = browser.post("/subscribe", data=form("ada@example.org"))
    assert failed.status_code == 400 and "did not go out" in failed.text
    sink.refuse.clear()
    retry = browser.post("/subscribe", data=form("ada@example.org"))
    assert retry.status_code == 200 and len(sink.received) == 1


def race_confirm_and_replace(db: Database, address: str) -> None:
    """Sign ``address`` up, then confirm its link and replace its sign-up in two threads at once."""
    from core.people.signup import SignupChanged, confirm_token

    first = sign_up(db, address, ["cat:cs.DC"], timezone="UTC", schedule="daily 08:00")
    token = confirm_token(KEY, first.subscriber)
    later = utcnow() + RESEND_AFTER + timedelta(seconds=1)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def confirm_it() -> None:
        start.wait()
        try:
            confirm(db, KEY, token)
        except SignupChanged:
            pass  # the replacement came first
        except BaseException as exc:  # reported below
            errors.append(exc)

    def replace_it() -> None:
        start.wait()
        try:
            sign_up(db, address, ['au:"Spam"'], timezone="UTC", schedule="instant", now=later)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=confirm_it), threading.Thread(target=replace_it)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_confirming_and_replacing_at_once_never_mixes_the_two(pg_store: Database) -> None:
    """A confirmation racing a replacing sign-up: either the first sign-up is confirmed as it was (and
    the replacement finds a subscribed address), or it is replaced and stays unconfirmed. Never the
    first link confirming the second sign-up's follows."""
    for round_ in range(12):
        address = f"email:race{round_}@example.org"
        race_confirm_and_replace(pg_store, address)
        after = subscriber_records.get_subscriber(pg_store, address)
        assert after is not None and after.id is not None
        follows = [f.query for f in subscriber_records.follows_of(pg_store, after.id)]
        if after.status == SubscriberStatus.ACTIVE:
            assert follows == ["cat:cs.DC"] and after.schedule == "daily 08:00"
        else:
            assert after.status == SubscriberStatus.UNCONFIRMED and follows == ['au:"Spam"']


def test_the_cli_is_the_operator_and_is_not_counted(sqlite_store: Database) -> None:
    """Limits guard the public form; ``papertrail subscribe`` (core.people.signup.sign_up) takes no quota."""
    from core.people.signup import SignupState

    outcomes = [
        sign_up(sqlite_store, f"email:op{n}@example.org", [], timezone="UTC", schedule="instant")
        for n in range(8)
    ]
    assert {o.state for o in outcomes} == {SignupState.CONFIRM}
