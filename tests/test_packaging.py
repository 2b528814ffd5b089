"""The wheel: its packages, and a container build that sees every folder of it.

There is no Docker daemon here (docs/deploy.md), so the image itself is not built by the tests; the first
test keeps the three lists that must agree from drifting apart: the wheel's packages and force-included
data (pyproject.toml), the build context (.dockerignore) and what the Dockerfile copies. The second builds
the wheel and checks that it ships the runtime packages and nothing else (it used to carry
``tests``, the recorded corpus included, and ``bench`` as top-level packages, 5 MB, two import names that
collide with anything else installed under them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = {"core", "ingest", "notifiers", "bot", "papertrail"}


def _wheel_folders() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    return set(wheel["packages"]) | set(wheel["force-include"])


def test_the_build_context_and_the_dockerfile_hold_every_folder_of_the_wheel() -> None:
    allowed = {
        line[1:].strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    }
    copied = set(re.findall(r"^COPY (\S+) \1$", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    needed = _wheel_folders()
    assert needed <= allowed, f".dockerignore leaves out {sorted(needed - allowed)}"
    assert needed <= copied, f"the Dockerfile does not copy {sorted(needed - copied)}"
    assert "locale" in needed  # the catalogs travel in the wheel


@pytest.mark.net
def test_the_wheel_holds_only_the_runtime_packages(tmp_path: Path) -> None:
    # pip builds with the backend pyproject.toml names (hatchling), in an isolated environment: the
    # same wheel `pip install .` makes. About 5 s here.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--quiet", "-w", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("papertrail-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = {name for name in top if name.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert top - dist_info == RUNTIME
    # The data the runtime reads from inside the package, and the console script.
    for folder in ("templates", "migrations/versions", "locale"):
        assert any(name.startswith(f"papertrail/_data/{folder}/") for name in names), folder
    assert "papertrail/cli/demo_data/arxiv-rss-2024-11-28.xml.gz" in names
    assert {"papertrail/web/static/favicon.ico", "papertrail/web/static/favicon.svg"} <= set(names)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        assert "papertrail = papertrail.cli.app:app" in archive.read(entry_points).decode()
    assert wheel.stat().st_size < 3_000_000
