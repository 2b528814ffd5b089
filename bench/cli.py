"""Benchmark: the start-up cost of each ``papertrail`` command, against ``import typer``.

Each command runs as a fresh process (``python -m papertrail ...`` from this checkout), as a user runs it.
Its CPU time (user + system, from ``resource.getrusage(RUSAGE_CHILDREN)`` deltas around the child) and its
wall time are measured ``--repeat`` times, the commands interleaved round by round so that a burst of load
on this shared machine hits them all alike. The baseline is ``python -c "import typer"``, measured in the
same rounds: a CLI cannot start faster than its framework imports. Reported: the median of each, the
ratio of the medians to the baseline's, and the baseline's spread (the machine's noise).

Three floors are measured alongside, for what the targets can reach: a two-command typer app printing
its ``--help`` and a command's ``--help`` (typer loads rich and markdown-it to print help, and pydantic to
convert a command's parameters), and ``import typer, pydantic_settings, sqlmodel``: the libraries no
command that reads the settings and opens the store can do without.

Targets: ``--help`` and ``follow --help`` at most 2 x the baseline's CPU time; ``follow``,
``follows``, ``status`` and ``try`` on a populated SQLite store at most 4 x.

The store is populated once, in a temporary directory, through the real CLI: two follows, then
``papertrail ingest`` of the recorded arXiv RSS day (rss.arxiv.org, 28 Nov 2024, 1,504 items; the feed
``papertrail demo`` ships), served from 127.0.0.1. Before timing, each command runs once with bytecode
writing on, so that every run reads compiled modules, as an installed PaperTrail does.

Usage: python bench/cli.py [--repeat 11]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from papertrail.cli.demo import demo_feed_bytes, serve_bytes  # noqa: E402

ADDRESS = "console:bench"
FOLLOWS = ("cat:cs.DC", 'abs:"graph neural network"')
BASELINE = "import typer"
HELP_TARGET = 2.0
STORE_TARGET = 4.0
# The smallest typer app with a callback option and two commands with help texts: typer's own cost.
FLOOR_APP = """
import typer
app = typer.Typer(help="An app.", no_args_is_help=True, add_completion=False)
@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log more.")) -> None:
    pass
@app.command()
def follow(
    address: str = typer.Argument(..., help="Who."), query: str = typer.Argument(..., help="What.")
) -> None:
    \"\"\"Add a follow.\"\"\"
@app.command()
def follows(address: str = typer.Argument(..., help="Who.")) -> None:
    \"\"\"List the follows.\"\"\"
app()
"""
STORE_LIBRARIES = "import typer, pydantic_settings, sqlmodel"


@dataclass
class Command:
    """One measured command line and its target (a multiple of the baseline's CPU time)."""

    label: str
    argv: list[str]
    target: float | None = None
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def commands() -> list[Command]:
    """The baseline, then the commands of the issue with their targets."""
    cli = [sys.executable, "-m", "papertrail"]
    return [
        Command(f'python -c "{BASELINE}"', [sys.executable, "-c", BASELINE], None),
        Command("papertrail --help", [*cli, "--help"], HELP_TARGET),
        Command("papertrail follow --help", [*cli, "follow", "--help"], HELP_TARGET),
        Command(
            f"papertrail follow {ADDRESS} {FOLLOWS[0]}", [*cli, "follow", ADDRESS, FOLLOWS[0]], STORE_TARGET
        ),
        Command(f"papertrail follows {ADDRESS}", [*cli, "follows", ADDRESS], STORE_TARGET),
        Command("papertrail status", [*cli, "status"], STORE_TARGET),
        Command(f"papertrail try {FOLLOWS[0]}", [*cli, "try", FOLLOWS[0]], STORE_TARGET),
        Command("floor: typer app --help", [sys.executable, "-c", FLOOR_APP, "--help"]),
        Command(
            "floor: typer app follow --help", [sys.executable, "-c", FLOOR_APP, "follow", "--help"], None
        ),
        Command(f'floor: python -c "{STORE_LIBRARIES}"', [sys.executable, "-c", STORE_LIBRARIES]),
    ]


def run(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[float, float]:
    """Run ``argv`` to completion; its (CPU seconds, wall seconds). Fails loudly on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def environment(tmp: Path, feed_url: str) -> dict[str, str]:
    """A clean environment: this checkout first on the path, a SQLite store in ``tmp``, no settings file."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PAPERTRAIL_") and key not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    env.update(
        PYTHONPATH=str(ROOT),
        PAPERTRAIL_DATABASE_URL=f"sqlite:///{tmp}/papertrail.db",
        PAPERTRAIL_ARXIV_RSS_URL=feed_url,
        PAPERTRAIL_ARXIV_CATEGORIES="cs",
        PAPERTRAIL_CONFIG=str(tmp / "absent.toml"),
    )
    return env


def populate(env: Mapping[str, str], tmp: Path) -> None:
    """Two follows and the recorded RSS day, stored through the CLI itself."""
    cli = [sys.executable, "-m", "papertrail"]
    for query in FOLLOWS:
        run([*cli, "follow", ADDRESS, query], env, tmp)
    run([*cli, "ingest", "--source", "arxiv-rss"], env, tmp)


def measure(repeat: int) -> list[Command]:
    """Populate a store, warm the bytecode caches, then time every command ``repeat`` times, interleaved."""
    table = commands()
    with (
        tempfile.TemporaryDirectory(prefix="papertrail-bench-cli-") as name,
        serve_bytes(demo_feed_bytes()) as url,
    ):
        tmp = Path(name)
        env = environment(tmp, url)
        populate(env, tmp)
        for command in table:  # compiles and caches every module the command imports
            run(command.argv, env, tmp)
        for _ in range(repeat):
            for command in table:
                cpu, wall = run(command.argv, env, tmp)
                command.cpu.append(cpu)
                command.wall.append(wall)
    return table


def report(table: Sequence[Command]) -> str:
    """The results as a text table: medians, ratios to the baseline, targets and the baseline's noise."""
    base = table[0]
    base_cpu, base_wall = statistics.median(base.cpu), statistics.median(base.wall)
    width = max(len(c.label) for c in table)
    lines = [
        f"{'command':<{width}}  {'CPU ms':>7}  {'x base':>6}  {'wall ms':>7}  {'x base':>6}  target",
    ]
    for command in table:
        cpu, wall = statistics.median(command.cpu), statistics.median(command.wall)
        ratio = cpu / base_cpu
        verdict = "" if command.target is None else f"<= {command.target:g} x: "
        if command.target is not None:
            verdict += "met" if ratio <= command.target else "NOT met"
        lines.append(
            f"{command.label:<{width}}  {cpu * 1000:>7.0f}  {ratio:>6.1f}  {wall * 1000:>7.0f}  "
            f"{wall / base_wall:>6.1f}  {verdict}"
        )
    quartiles = statistics.quantiles(base.cpu, n=4) if len(base.cpu) > 1 else [base_cpu] * 3
    low, high = min(base.cpu), max(base.cpu)
    lines.append(
        f"baseline noise over {len(base.cpu)} runs: CPU {low * 1000:.0f}-{high * 1000:.0f} ms "
        f"(interquartile {quartiles[0] * 1000:.0f}-{quartiles[2] * 1000:.0f} ms), "
        f"wall {min(base.wall) * 1000:.0f}-{max(base.wall) * 1000:.0f} ms; load average "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    return "\n".join(lines)


def main() -> None:
    """Parse the options, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=11, help="runs of each command (median taken)")
    args = parser.parse_args()
    print(report(measure(args.repeat)))


if __name__ == "__main__":
    main()
