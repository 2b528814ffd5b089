"""`make test-quick`: the `db` and `net` marks tests/conftest.py sets from a test's fixtures, and the guard
that fails a test left in the quick set by mistake."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent


def test_a_database_fixture_marks_the_test_db(sqlite_url: str, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("db") is not None
    assert request.node.get_closest_marker("net") is None


def test_a_test_without_such_fixtures_is_in_the_quick_set(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert request.node.get_closest_marker("db") is None
    assert request.node.get_closest_marker("net") is None


def test_in_quick_mode_even_loopback_is_refused_with_the_mark_to_add(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(conftest, "QUICK", True)
    with (
        socket.socket() as sock,
        pytest.raises(conftest.QuickModeRefusal, match="mark this test `db` or `net`"),
    ):
        conftest._check(sock, ("127.0.0.1", 9))


@pytest.mark.net
def test_a_connecting_test_run_in_quick_mode_fails_and_says_so() -> None:
    # A test that is marked `net` and whose code under test turns every connection error into its own
    # (a retryable delivery failure): run in quick mode regardless of its mark, the refusal still reaches
    # pytest, since it is no Exception the notifier could catch.
    test = "tests/test_notifier_telegram.py::test_unreachable_api_is_retryable"
    env = {**os.environ, "PAPERTRAIL_TEST_QUICK": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "QuickModeRefusal: connection to" in run.stdout
    assert "mark this test `db` or `net`" in run.stdout
