"""Webhook formatting: the digest as a JSON document (schema ``papertrail.digest/1``), its exact bytes, and
the HMAC signature over them.

Format: JSON (see docs/webhooks.md). Limit: none; PAPERTRAIL_DIGEST_MAX_ITEMS caps digests. Every text value
has its control characters stripped, like every rendered channel: the receiver escapes it for its own
output. The body is signed with HMAC-SHA256 under a secret derived from ``PAPERTRAIL_SECRET_KEY`` and the
webhook URL (:func:`webhook_secret`), so that each receiver holds its own secret and none of them can forge
the unsubscribe and manage links that the master key signs. ``sign_body`` and ``verify_signature`` are the
one implementation of the signature scheme; receivers, tests and docs use them. Posting it is
notifiers/webhook/notifier.py's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from core.delivery.receipt_text import source_name
from core.escaping import one_line, strip_control
from core.papers.citations import bibtex_url
from core.values import DigestItem, Message, Receipt, VoteLinks

SCHEMA = "papertrail.digest/1"
# Receivers reject signatures older (or newer) than this many seconds: a captured request cannot be
# replayed later.
DEFAULT_TOLERANCE = 300.0

_SECRET_LABEL = b"papertrail.webhook/1\0"
# Digest keys go into a header: printable ASCII without separators, or a content hash replaces them.
_SAFE_KEY = re.compile(r"[A-Za-z0-9._:@+=-]{1,200}")


# --- signatures --------------------------------------------------------------------------------------


def webhook_secret(secret_key: str, url: str) -> str:
    """The signing secret for one webhook URL: hex HMAC-SHA256 of the URL under ``PAPERTRAIL_SECRET_KEY``.

    Give this value (never the master key) to the receiver at ``url``; it is all it needs to verify.
    """
    if not secret_key:
        raise ValueError("webhook signing needs PAPERTRAIL_SECRET_KEY; set it to a long random string")
    return hmac.new(secret_key.encode(), _SECRET_LABEL + url.encode(), hashlib.sha256).hexdigest()


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign_body(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``X-PaperTrail-Signature`` value for ``body``: ``t=<unix seconds>,v1=<hex HMAC-SHA256>``.

    The MAC covers ``f"{t}."`` followed by the exact body bytes, so neither can change unnoticed.
    """
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_mac(secret, t, body)}"


def verify_signature(
    secret: str,
    header: str | None,
    body: bytes,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> bool:
    """True when ``header`` is a valid signature of ``body`` made within ``tolerance`` seconds of now.

    Any ``v1=`` entry may match (room for a second secret during a rotation); a malformed header, an
    altered body, another secret or a stale or future timestamp gives False.
    """
    if not header or not secret:
        return False
    timestamp: int | None = None
    candidates: list[str] = []
    for element in header.split(","):
        name, _, value = element.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = _mac(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


# --- payload -----------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    # Same rule as every rendered channel: no control characters (terminal escapes, NULs) get through.
    return strip_control(text)


def _optional(text: str | None) -> str | None:
    return None if text is None else _clean(text)


def _guide(item: DigestItem) -> dict[str, Any] | None:
    # Machine-generated text, plain and untrusted like the title: data for the receiver to escape.
    guide = item.guide
    if guide is None:
        return None
    return {
        "tldr": _clean(guide.tldr),
        "contributions": [_clean(text) for text in guide.contributions[:3]],
        "changes": _optional(guide.changes),
        "machine_generated": True,
    }


def _votes(links: VoteLinks | None) -> dict[str, str] | None:
    # Signed links for the subscriber this webhook is: a receiver's own 👍 / 👎 buttons open them.
    return None if links is None else {"like": links.like, "dislike": links.dislike}


def _item(item: DigestItem, public_url: str, votes: VoteLinks | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "arxiv_id": item.arxiv_id,
        "version": item.version,
        "versioned_id": f"{item.arxiv_id}v{item.version}",
        "url": item.url,
        # The paper's BibTeX entry on this PaperTrail (PAPERTRAIL_PUBLIC_URL); null without a public URL.
        "bibtex_url": bibtex_url(public_url, item.arxiv_id) if public_url else None,
        "title": _clean(item.title),
        "authors": [_clean(name) for name in item.authors],
        "categories": list(item.categories),
        "reasons": [_clean(reason) for reason in item.reasons],
        "changes": list(item.changes),
        "upvotes": item.upvotes,
        "abstract": _clean(item.abstract),
        "comment": _optional(item.comment),
        "journal_ref": _optional(item.journal_ref),
        "doi": _optional(item.doi),
        "guide": _guide(item),
        # The signed 👍 / 👎 pages for this subscriber (docs/webhooks.md); null without PAPERTRAIL_SECRET_KEY.
        "vote_urls": _votes(votes),
    }
    if item.recommended is not None:
        # Only on learned recommendations, so a digest of follows' matches is the same document
        # as before: the score and the reasons as data (the liked paper's id, the shared terms).
        data["recommended"] = item.recommended
        data["recommended_reasons"] = [
            {"field": reason.field, "term": _clean(reason.term)} for reason in item.reasons
        ]
    return data


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _receipt(receipt: Receipt | None) -> dict[str, Any] | None:
    # Data only: counts, stored source names and UTC times; the digest's text words it for people.
    if receipt is None:
        return None
    return {
        "since": _timestamp(receipt.since),
        "until": _timestamp(receipt.until),
        "timezone": receipt.timezone,
        "matched": receipt.matched,
        "sources": [
            {
                "source": _clean(scan.source),
                "name": _clean(source_name(scan.source)),
                "runs": scan.runs,
                "announcements": scan.announcements,
                "new_versions": scan.new_versions,
            }
            for scan in receipt.sources
        ],
        "outages": [
            {
                "source": _clean(outage.source),
                "name": _clean(source_name(outage.source)),
                "state": outage.state,
                "from": _timestamp(outage.start),
                "to": _timestamp(outage.end) if outage.end else None,
            }
            for outage in receipt.outages
        ],
    }


def digest_payload(message: Message, generated_at: datetime) -> dict[str, Any]:
    """The JSON document for one digest (schema ``papertrail.digest/1``, see docs/webhooks.md)."""
    items = [_item(item, message.public_url, message.votes_of(item)) for item in message.items]
    recommended = sum(1 for item in message.items if item.recommended is not None)
    revisions = sum(1 for item in message.items if item.is_revision and item.recommended is None)
    counts = {
        "new": len(items) - revisions - recommended,
        "revisions": revisions,
        # Matches left out by PAPERTRAIL_DIGEST_MAX_ITEMS; they are still marked sent.
        "more": max(0, message.item_count - len(items)),
    }
    if recommended:
        counts["recommended"] = recommended  # learned recommendations among items; absent when none
    return {
        "schema": SCHEMA,
        "digest": message.key if _SAFE_KEY.fullmatch(message.key) else _content_key(items),
        "generated_at": _timestamp(generated_at),
        # "heartbeat": no items, sent on an arXiv announcement day when nothing matched (the reader asked).
        "kind": "heartbeat" if message.heartbeat else "digest",
        "subject": one_line(message.subject),
        # The reader's language: the subject and the guides are in it; every key and the reasons and
        # changes stay English (they are data).
        "language": message.language,
        "counts": counts,
        "items": items,
        # What PaperTrail scanned for this reader since the previous digest (docs/webhooks.md).
        "receipt": _receipt(message.receipt),
    }


def _content_key(items: list[dict[str, Any]]) -> str:
    # A digest rendered without a ledger key still needs a stable id for receiver-side deduplication.
    ids = ",".join(str(item["versioned_id"]) for item in items)
    return "sha256-" + hashlib.sha256(ids.encode()).hexdigest()[:32]


def encode_payload(payload: Mapping[str, Any]) -> bytes:
    """The exact body bytes: compact JSON, ASCII only (bidi overrides and the like arrive escaped)."""
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode("ascii")
