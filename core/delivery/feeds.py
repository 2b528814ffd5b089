"""Atom feeds: their limits, and the links to them (docs/feeds.md).

Two kinds of feed, both served by the web app (papertrail/web/feeds.py) from the store's reads
(core/delivery/feed_records.py):

* a **query feed**, public: ``/feeds?q=QUERY``, the newest papers and revisions a follow of ``QUERY``
  finds in the library (core.delivery.feed_links.query_feed_url);
* a **private feed** per subscriber, of what their sent digests carried, at a signed link that names the
  subscriber's address and a nonce stored with them (``Subscriber.feed_nonce``, core.people.tokens.FEED). The
  nonce is drawn on first use (:func:`private_feed_url`) and replaced on request
  (:func:`renew_private_feed`): the old link then stops working (:class:`FeedRevoked`), a new one is shown.

Other parts of PaperTrail that hand a reader their feed (the manage page, an OPML export) call
:func:`private_feed_url`; nothing else builds the link.
"""

from __future__ import annotations

import hmac
import secrets

from core.channel import normalise_address
from core.config import Settings
from core.db import Database
from core.delivery import feed_records
from core.delivery.feed_links import private_feed_path
from core.follows import subscriber_records
from core.follows.search_text import SearchQuery
from core.models import Subscriber
from core.people import tokens
from core.values import FeedEntry

# Entries in a subscriber's private feed: the items of their newest sent digests.
PRIVATE_FEED_ENTRIES = 100
# Entries in a query feed: the newest news versions the query matches.
QUERY_FEED_ENTRIES = 50
# Random bytes in a feed nonce (base64url: 22 characters; the column holds 64).
NONCE_BYTES = 16


class FeedRevoked(LookupError):
    """A genuinely signed private feed link whose nonce is no longer the subscriber's (a new link was made),
    or whose subscriber is gone."""


def new_nonce() -> str:
    """A fresh feed nonce."""
    return secrets.token_urlsafe(NONCE_BYTES)


def _key(settings: Settings) -> str:
    secret = settings.secret_key
    return secret.get_secret_value() if secret else ""


def private_feed_url(db: Database, settings: Settings, subscriber: Subscriber) -> str | None:
    """The absolute URL of ``subscriber``'s private feed (under ``PAPERTRAIL_PUBLIC_URL``), drawing its
    nonce on first use; None when ``PAPERTRAIL_SECRET_KEY`` is not set (no signed links at all).

    Calling it again returns the same URL until :func:`renew_private_feed` replaces the nonce.
    """
    key = _key(settings)
    if not key or subscriber.id is None:
        return None
    nonce = subscriber.feed_nonce or feed_records.feed_nonce(db, subscriber.id, new_nonce())
    return settings.public_url.rstrip("/") + private_feed_path(key, subscriber.address, nonce)


def renew_private_feed(db: Database, subscriber_id: int) -> None:
    """Revoke the subscriber's private feed link and make a new one (a new nonce)."""
    feed_records.replace_feed_nonce(db, subscriber_id, new_nonce())


def feed_subscriber(db: Database, key: str, token: str) -> Subscriber:
    """The subscriber whose private feed ``token`` opens.

    Raises :class:`core.people.tokens.InvalidToken` for a link that was never genuine (forged, altered, made
    for
    another purpose or key) and :class:`FeedRevoked` for a genuine one that no longer works.
    """
    address, nonce = tokens.split_feed(tokens.verify(key, tokens.FEED, token))
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None:
        try:
            subscriber = subscriber_records.get_subscriber(db, normalise_address(address))
        except ValueError:
            subscriber = None
    current = subscriber.feed_nonce if subscriber is not None else None
    # Compared in constant time, like the MAC: the answer's timing says nothing about the stored nonce.
    if subscriber is None or current is None or not hmac.compare_digest(current.encode(), nonce.encode()):
        raise FeedRevoked("this feed link was replaced by a newer one, or its subscription is gone")
    return subscriber


def query_feed(db: Database, search: SearchQuery, *, limit: int, language: str) -> list[FeedEntry]:
    """The public feed of a follow's query: the newest ``limit`` news versions ``search`` matches."""
    return feed_records.query_feed(db, search, limit=limit, language=language)


def sent_feed(db: Database, subscriber_id: int, *, limit: int, language: str) -> list[FeedEntry]:
    """The private feed of a subscriber: what it was sent, newest first, at most ``limit`` versions."""
    return feed_records.sent_feed(db, subscriber_id, limit=limit, language=language)
