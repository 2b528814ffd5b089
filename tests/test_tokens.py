"""Signed tokens have one spelling: a token with junk, padding, whitespace or altered spare bits is refused,
by :func:`core.people.tokens.verify` and by every web route that takes one."""

from __future__ import annotations

import base64
import warnings

import pytest

from core.db import Database
from core.follows import subscriber_records
from core.follows.manage import follow
from core.models import SubscriberStatus
from core.people import tokens
from tests.support.token_clients import KEY, _spare_bits_variant, client_for, variants

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client

ADDRESS = "email:ada@example.org"


def test_the_genuine_token_verifies_and_every_variant_is_refused() -> None:
    for address in (ADDRESS, "email:b@example.org", "email:ab@example.org", "email:abc@example.org"):
        token = tokens.sign(KEY, tokens.UNSUBSCRIBE, address)
        assert tokens.verify(KEY, tokens.UNSUBSCRIBE, token) == address
        for variant in variants(token):
            assert variant != token
            with pytest.raises(tokens.InvalidToken):
                tokens.verify(KEY, tokens.UNSUBSCRIBE, variant)


def test_a_spare_bits_variant_is_the_same_bytes_to_a_lenient_decoder() -> None:
    """The test above is not vacuous: the MAC variant carries the very same MAC bytes."""
    mac = tokens.sign(KEY, tokens.MANAGE, ADDRESS).partition(".")[2]
    variant = _spare_bits_variant(mac)
    assert variant is not None
    assert base64.urlsafe_b64decode(variant + "=") == base64.urlsafe_b64decode(mac + "=")


def status_of(db: Database) -> str:
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None
    return subscriber.status


def test_web_routes_refuse_variants_and_take_the_genuine_token(sqlite_store: Database) -> None:
    follow(sqlite_store, ADDRESS, "cat:cs.DC")
    subscriber = subscriber_records.get_subscriber(sqlite_store, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    subscriber_records.update_subscriber(
        sqlite_store, subscriber.id, status=SubscriberStatus.UNCONFIRMED, confirm_nonce="the-pending-sign-up"
    )
    client = client_for(sqlite_store)

    confirm = tokens.sign(KEY, tokens.CONFIRM, tokens.confirm_subject(ADDRESS, "the-pending-sign-up"))
    for variant in variants(confirm):
        path = "/confirm/" + variant.replace(" ", "%20").replace("\n", "%0A")
        assert client.post(path).status_code == 400, variant
    assert status_of(sqlite_store) == SubscriberStatus.UNCONFIRMED
    assert client.post(f"/confirm/{confirm}").status_code == 200
    assert status_of(sqlite_store) == SubscriberStatus.ACTIVE

    manage = tokens.sign(KEY, tokens.MANAGE, ADDRESS)
    for variant in variants(manage):
        path = "/manage/" + variant.replace(" ", "%20").replace("\n", "%0A")
        assert client.get(path).status_code == 400, variant
    assert client.get(f"/manage/{manage}").status_code == 200

    unsubscribe = tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)
    for variant in variants(unsubscribe):
        path = "/unsubscribe/" + variant.replace(" ", "%20").replace("\n", "%0A")
        assert client.get(path).status_code == 400, variant
        response = client.post(path, data={"List-Unsubscribe": "One-Click"})
        assert response.status_code == 400, variant
    assert status_of(sqlite_store) == SubscriberStatus.ACTIVE
    done = client.post(f"/unsubscribe/{unsubscribe}", data={"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200
    assert status_of(sqlite_store) == SubscriberStatus.UNSUBSCRIBED


def test_a_vote_token_names_one_version_and_value() -> None:
    """Vote tokens: ``ADDRESS NUL ID vN NUL VALUE``; old-style ids (and a 'v' inside one) read back whole."""
    cases = (("2306.03564", 2, 1), ("solv-int/9901001", 1, -1), ("2411.17700", 12, -1))
    for arxiv_id, version, value in cases:
        token = tokens.sign(KEY, tokens.VOTE, tokens.vote_subject(ADDRESS, arxiv_id, version, value))
        subject = tokens.verify(KEY, tokens.VOTE, token)
        assert tokens.split_vote(subject) == (ADDRESS, arxiv_id, version, value)
        for variant in variants(token):
            with pytest.raises(tokens.InvalidToken):
                tokens.verify(KEY, tokens.VOTE, variant)
        # The purpose is inside the MAC: a vote token is no token of any other kind.
        for purpose in (tokens.MANAGE, tokens.UNSUBSCRIBE, tokens.FEED, tokens.LEAVE, tokens.CONFIRM):
            with pytest.raises(tokens.InvalidToken):
                tokens.verify(KEY, purpose, token)
    for value, version in ((0, 1), (2, 1), (1, 0)):
        with pytest.raises(ValueError):
            tokens.vote_subject(ADDRESS, "2306.03564", version, value)
    for subject in (
        f"{ADDRESS}\x002306.03564v2",  # no value
        f"{ADDRESS}\x002306.03564\x001",  # no version
        f"{ADDRESS}\x002306.03564v0\x001",
        f"{ADDRESS}\x002306.03564v2\x00+1",
        f"{ADDRESS}\x002306.03564v2\x001\x001",
        "\x002306.03564v2\x001",  # no address
        ADDRESS,
    ):
        with pytest.raises(tokens.InvalidToken):
            tokens.split_vote(subject)
