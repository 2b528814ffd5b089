"""SIGTERM while a digest is on the wire: the send finishes and is recorded, nothing else is claimed.

A real ``papertrail run --role worker`` process delivers signed webhooks to a loopback receiver that takes
two seconds to answer; the signal arrives while two sends are in flight.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from core.db import Database
from core.models import DigestState
from tests.fakes.webhook_receiver import webhook_receiver
from tests.servers import Answer
from tests.support.due_digests import DIGEST, MATCH, SUBSCRIBER, seed_due_digests
from tests.support.service_process import ServiceProcess, service_env

SUBSCRIBERS = 5
IN_FLIGHT = 2


def test_sigterm_during_sends_finishes_them_and_claims_nothing_more(
    sqlite_store: Database, tmp_path: Path
) -> None:
    seed_due_digests(sqlite_store.engine, SUBSCRIBERS)
    slow = Answer(200, delay=1.0)
    with webhook_receiver(*[slow] * IN_FLIGHT) as receiver:
        with sqlite_store.engine.begin() as conn:  # the seeded console subscribers become webhooks
            conn.execute(
                sa.update(SUBSCRIBER).values(
                    address=sa.func.printf("webhook:%s/%d", receiver.url, SUBSCRIBER.c.id)
                )
            )
        env = service_env(
            tmp_path,
            database_url=str(sqlite_store.engine.url),
            secret_key="k" * 32,
            webhook_allow_hosts="127.0.0.1",
            worker_batch=str(IN_FLIGHT),
            worker_concurrency=str(IN_FLIGHT),
        )
        service = ServiceProcess(["run", "--role", "worker"], env)
        try:
            assert receiver.wait_for(IN_FLIGHT, timeout=30), service.output
            code = service.stop()
        finally:
            service.kill()
        deliveries = receiver.deliveries

    assert code == 0, service.output
    assert "SIGTERM received: stopping" in service.output
    # Exactly the two sends in flight reached the receiver, once each: nothing was claimed after the signal.
    keys = [d.key for d in deliveries]
    assert len(keys) == IN_FLIGHT and len(set(keys)) == IN_FLIGHT, keys
    delivered = {int(key.rsplit("-", 1)[1]) for key in keys}
    with sqlite_store.engine.connect() as conn:
        digests = dict(conn.execute(sa.select(DIGEST.c.id, DIGEST.c.state)).all())
        matches = conn.execute(sa.select(MATCH.c.id, MATCH.c.digest_id)).all()
    # The in-flight digests finished and were recorded as sent ...
    assert {d for d, state in digests.items() if state == DigestState.SENT} == delivered
    # ... and every other match is still waiting: in a pending digest or in none. None lost, none claimed.
    assert len(matches) == SUBSCRIBERS
    for match_id, digest_id in matches:
        if digest_id not in delivered:
            assert digest_id is None or digests[digest_id] == DigestState.PENDING, (match_id, digests)
