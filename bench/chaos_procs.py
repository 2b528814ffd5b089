"""The chaos suite's processes: the real ``papertrail`` command line, started with subprocess, killed with
SIGKILL, stopped with SIGTERM.

Every process gets the same environment: this checkout on ``PYTHONPATH``, no ``PAPERTRAIL_*`` setting of
the caller's, and the trial's settings (:func:`service_env`). Its log lines (stderr) go to a file of its
own in the trial's folder, read back when a trial waits for a line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos_ledger import ROOT

# Roles of the processes a trial starts, and whether each one sends digests.
DELIVERING = {"worker": True, "run": True, "ingest": False, "digest": True}
# The email notifier sends through one SMTP session in one thread per process
# (notifiers/email/notifier.py): at most this many messages of one process are on the wire at any instant.
SMTP_SESSIONS_PER_PROCESS = 1
# Seconds a process gets to exit after SIGTERM before it is killed (the service's own budget is 30 s).
STOP_TIMEOUT = 40.0


def service_env(
    *,
    database_url: str,
    feed_url: str,
    smtp_port: int,
    config_path: Path,
    lease_seconds: float,
    batch: int,
    concurrency: int,
    max_items: int,
    dead_url: str,
) -> dict[str, str]:
    """The environment of every process of a trial (see docs/chaos.md for why each value)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERTRAIL_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    settings = {
        "config": str(config_path),  # absent: settings come only from here
        "database_url": database_url,
        "arxiv_rss_url": feed_url,
        # `run`'s other sources point at a closed loopback port: they fail at once, nothing leaves the host.
        "hf_api_url": f"{dead_url}/api/",
        "arxiv_api_url": f"{dead_url}/api/query",
        "arxiv_oai_url": f"{dead_url}/oai",
        "http_retries": "0",
        "http_backoff": "0.01",
        "smtp_host": "127.0.0.1",
        "smtp_port": str(smtp_port),
        "smtp_from": "PaperTrail <alerts@chaos.test>",
        "smtp_timeout": "10",
        "digest_max_items": str(max_items),
        "delivery_lease_seconds": str(lease_seconds),
        "worker_batch": str(batch),
        "worker_concurrency": str(concurrency),
        "digest_check_seconds": "1",
        "log_format": "text",
    }
    env.update({f"PAPERTRAIL_{name.upper()}": value for name, value in settings.items()})
    return env


@dataclass
class Service:
    """One ``python -m papertrail ...`` process of a trial."""

    role: str  # worker | ingest | run | digest
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    killed: bool = False

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    @property
    def worker(self) -> str:
        """The name its claims carry in the ledger (``core.delivery.digests.worker_name``: host and pid)."""
        return f"{socket.gethostname()}:{self.pid}"

    @property
    def delivers(self) -> bool:
        """Whether it sends digests."""
        return DELIVERING[self.role]

    def alive(self) -> bool:
        """Still running."""
        return self.proc.poll() is None

    def output(self) -> str:
        """Its log lines so far."""
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def has_line(self, pattern: str) -> bool:
        """Whether a log line so far matches ``pattern``."""
        return re.search(pattern, self.output(), re.M) is not None

    def kill(self) -> None:
        """SIGKILL, and wait until it is gone."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.killed = True
        self.proc.wait()

    def stop(self, *, signalled: bool = False) -> int:
        """SIGTERM (unless ``signalled`` already: a second one would cancel the work in flight) and the exit
        code; SIGKILL when it does not exit within :data:`STOP_TIMEOUT`."""
        if self.alive() and not signalled:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9


class Services:
    """Starts and tracks the processes of one trial."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env = env
        self.folder = folder
        self.all: list[Service] = []

    def start(self, role: str) -> Service:
        """Start one process: ``worker``, ``ingest`` (arxiv-rss once), ``run`` (scheduler and worker roles)
        or ``digest`` (``digest --now``)."""
        args = {
            "worker": ["worker"],
            "ingest": ["ingest", "--source", "arxiv-rss"],
            "run": ["run", "--role", "scheduler,worker"],
            "digest": ["digest", "--now"],
        }[role]
        log = self.folder / f"{len(self.all):02d}-{role}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "papertrail", *args],
                env=self.env,
                cwd=self.folder,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        service = Service(role, args, log, proc)
        self.all.append(service)
        return service

    def alive(self) -> list[Service]:
        """The processes still running."""
        return [s for s in self.all if s.alive()]

    def stop_all(self) -> None:
        """SIGTERM every process still running (together), then wait for each."""
        running = self.alive()
        for service in running:
            service.proc.send_signal(signal.SIGTERM)
        for service in running:
            service.stop(signalled=True)

    def send_now(self, timeout: float = 120.0) -> int:
        """``papertrail digest --now`` (the operator's "send everything pending now") to its end."""
        service = self.start("digest")
        try:
            return service.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            service.kill()
            return -9


def status_json(env: dict[str, str], folder: Path) -> dict[str, Any] | None:
    """``papertrail status --json`` as data (None when it fails)."""
    done = subprocess.run(
        [sys.executable, "-m", "papertrail", "status", "--json"],
        env=env,
        cwd=folder,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return None
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
