"""A `papertrail` process started by a test, its environment, and waiting for it."""

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

T = TypeVar("T")


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
