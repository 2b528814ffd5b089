"""SIGTERM while a digest is on the wire: the send finishes and is recorded, nothing else is claimed.

A real ``papertrail run --role worker`` process delivers signed webhooks to a loopback receiver that takes
two seconds to answer; the signal arrives while two sends are in flight.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa

from core.models import DigestState
from core.store.facade import Store
from tests.fakes.webhook_receiver import webhook_receiver
from tests.servers import Answer
from tests.test_workers_pg import DIGEST, MATCH, SUBSCRIBER, seed_due_digests

T = TypeVar("T")
SUBSCRIBERS = 5
IN_FLIGHT = 2


class ServiceProcess:
    """``python -m papertrail ARGS`` with its log lines (stderr) collected by a thread as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "papertrail", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    @property
    def output(self) -> str:
        """Every line so far."""
        with self._changed:
            return "\n".join(self.lines)

    def wait_for_line(self, pattern: str, timeout: float = 20.0) -> str:
        """The first line matching ``pattern``; fails the test if none comes in time."""
        found = wait_until(
            lambda: next((x for x in list(self.lines) if re.search(pattern, x)), None), timeout
        )
        assert found, f"no line matching {pattern!r} in:\n{self.output[-3000:]}"
        return found

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit code; kills the process (and fails) if it does not exit in time."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"still running {timeout} s after SIGTERM:\n{self.output[-3000:]}") from None
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        """Clean-up for a test that failed half-way."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_until(probe: Callable[[], T | None], timeout: float = 20.0) -> T | None:
    """Poll ``probe`` every 50 ms until it returns something truthy, or None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    return None


def service_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This environment without PAPERTRAIL_* settings, plus ``settings`` (PAPERTRAIL_ added to each name)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERTRAIL_")}
    env["PAPERTRAIL_CONFIG"] = str(tmp_path / "absent.toml")
    env.update({f"PAPERTRAIL_{name.upper()}": value for name, value in settings.items()})
    return env


def test_sigterm_during_sends_finishes_them_and_claims_nothing_more(
    sqlite_store: Store, tmp_path: Path
) -> None:
    seed_due_digests(sqlite_store, SUBSCRIBERS)
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
