"""Each email digest is recorded as sent the moment the SMTP server accepted it.

The SMTP thread sends the queued digests one after another. When recording waited for the event loop
(busy parsing a feed in ``papertrail run``, say), the thread went on sending while the digests it had
already delivered were still unrecorded: a SIGKILL then re-sent all of them. Now the thread records each
one before it takes the next, so at any instant at most the one mail in flight is unrecorded.

The recording SMTP server checks that at every mail it receives: all the mails it accepted before are
already sent in the ledger. The event loop is kept busy in slices all along, as a parse would.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import col

from core.config import Settings
from core.db import Database
from core.delivery.digests import DeliveryPolicy, send_due_digests
from core.delivery.render import Renderer
from core.follows.index import match_new
from core.follows.manage import follow
from core.models import Digest, DigestState
from core.papers import paper_records
from core.values import PaperIn
from notifiers.email.notifier import EmailNotifier
from tests.servers import LoopbackController, SinkHandler

SUBSCRIBERS = 12


class LedgerCheckingSink(SinkHandler):
    """Accepts every mail, and before each notes how many accepted mails the ledger does not show as sent."""

    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db
        self.unrecorded: list[int] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.db.session() as db:
            sent = db.execute(
                sa.select(sa.func.count()).select_from(Digest).where(col(Digest.state) == DigestState.SENT)
            ).scalar_one()
        self.unrecorded.append(len(self.received) - int(sent))
        return await super().handle_DATA(server, session, envelope)


async def busy_loop(until: asyncio.Event) -> None:
    """Hold the event loop in 50 ms slices, as a synchronous feed parse on the same loop does."""
    while not until.is_set():
        time.sleep(0.05)
        await asyncio.sleep(0)


@pytest.mark.parametrize("concurrency", [1, 20])
async def test_each_mail_is_recorded_before_the_next_is_sent(db: Database, concurrency: int) -> None:
    for n in range(SUBSCRIBERS):
        follow(db, f"email:reader{n}@example.org", "cat:cs.DC", schedule="instant")
    paper_records.save_versions(
        db,
        [PaperIn(f"2611.{n:05d}", 1, f"Paper {n}", "An abstract.", ("Ada",), ("cs.DC",)) for n in range(3)],
    )
    match_new(db)
    sink = LedgerCheckingSink(db)
    controller = LoopbackController(sink)
    controller.start()
    port = controller.port
    done = asyncio.Event()
    notifier = EmailNotifier(
        Settings(smtp_host="127.0.0.1", smtp_port=port, smtp_from="papertrail@example.org").smtp()
    )
    try:
        busy = asyncio.create_task(busy_loop(done))
        reports = await send_due_digests(
            db, {"email": notifier}, Renderer(), policy=DeliveryPolicy(concurrency=concurrency)
        )
        done.set()
        await busy
        await notifier.aclose()
    finally:
        controller.stop()
    assert len(reports) == SUBSCRIBERS and all(r.sent for r in reports)
    assert len(sink.received) == SUBSCRIBERS
    # Checked against the ledger at each mail: every earlier accepted one is already recorded.
    assert len(sink.unrecorded) == SUBSCRIBERS
    assert max(sink.unrecorded) == 0, sink.unrecorded
