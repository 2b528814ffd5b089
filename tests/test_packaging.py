"""The container build sees every folder the wheel needs: a folder missing there breaks only the image build.

There is no Docker daemon here (docs/deploy.md), so the image itself is not built by the tests; this keeps
the three lists that must agree from drifting apart: the wheel's packages and force-included data
(pyproject.toml), the build context (.dockerignore) and what the Dockerfile copies.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Packages the wheel lists but the image does not need (they are not in the build context on purpose).
NOT_IN_IMAGE = {"tests", "bench"}


def _wheel_folders() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    return (set(wheel["packages"]) - NOT_IN_IMAGE) | set(wheel["force-include"])


def test_the_build_context_and_the_dockerfile_hold_every_folder_of_the_wheel() -> None:
    allowed = {
        line[1:].strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    }
    copied = set(re.findall(r"^COPY (\S+) \1$", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    needed = _wheel_folders()
    assert needed <= allowed, f".dockerignore leaves out {sorted(needed - allowed)}"
    assert needed <= copied, f"the Dockerfile does not copy {sorted(needed - copied)}"
    assert "locale" in needed  # the catalogs travel in the wheel
