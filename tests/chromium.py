"""Debian's Chromium for the one real-browser test: found, or installed by the test set-up, or a clear skip.

The browser is driven by playwright's client library against the system Chromium (no browser download,
which this machine's network would refuse anyway).
"""

from __future__ import annotations

import os
import shutil
import subprocess

# Where Debian's package puts the browser, then whatever PATH offers.
_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
# apt can take a while on a cold cache; the test set-up waits at most this long.
INSTALL_TIMEOUT = 900


def find_chromium() -> str | None:
    """The path of an installed Chromium, or None."""
    for candidate in _CANDIDATES:
        path = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if path and os.access(path, os.X_OK):
            return path
    return None


def ensure_chromium() -> tuple[str | None, str]:
    """Find Chromium or install Debian's ``chromium`` package; returns (path or None, why not)."""
    found = find_chromium()
    if found:
        return found, ""
    if not shutil.which("apt-get"):
        return None, "Chromium is not installed and this system has no apt-get to install Debian's package"
    if os.geteuid() != 0:
        return None, "Chromium is not installed; run `sudo apt-get install chromium` (the tests are not root)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium", "fonts-dejavu-core"],
    )
    for step in steps:
        try:
            done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"installing Chromium failed ({' '.join(step)}): {exc}"
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return None, f"installing Chromium failed ({' '.join(step)}): {' / '.join(tail)}"
    found = find_chromium()
    return (found, "") if found else (None, "apt-get installed chromium but no binary was found")
