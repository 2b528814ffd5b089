"""Benchmark: ``papertrail import follows`` and ``papertrail export follows`` through the real CLI.

Generates a follows file of ``--lines`` lines (100,000 by default): 10,000 subscribers (email, telegram,
slack, webhook in the ratio 4:3:2:1) with about ten follows each, drawn from realistic queries (categories,
authors, title phrases, boolean combinations), a quarter of the subscribers with their own schedule,
timezone or language, and one follow in eight new-papers-only or instant. Then, each in a subprocess
running ``python -m papertrail`` (the same entry point as the ``papertrail`` script), into a fresh
database:

1. **import**: the file into an empty store;
2. **import again**: the same file (the idempotent path: every follow is found unchanged);
3. **export**: every follow to a file (``--output``), checked to hold one line per follow.

Wall time and CPU time (user + system, of the child) of each, including the interpreter's start-up, the
imports and the migration check. On a shared machine the wall time is the CPU time stretched by the
load; the CPU time says what the command costs. The target is under 60 s for the first import on
SQLite. ``--postgres`` repeats the three on a fresh schema of ``PAPERTRAIL_TEST_POSTGRES_URL``.

Usage: python bench/import_follows.py [--lines 100000] [--postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from tests.conftest import POSTGRES_URL  # noqa: E402

# Words, not lists: one line each, as they would be typed.
CATEGORIES = "cs.DC cs.LG cs.CL cs.CV cs.AI cs.CR cs.DS cs.PL cs.SE cs.NI stat.ML math.OC quant-ph".split()  # noqa: SIM905
SURNAMES = "Li Wang Zhang Chen Liu Smith Müller García Kumar Nguyen Kim Rossi Dubois Sato".split()  # noqa: SIM905
GIVEN = "Zeng Wei Ada Hannah Jürgen María Ravi Linh Min-jun Giulia Élodie Haruto Petr".split()  # noqa: SIM905
PHRASES = (
    "policy lag",
    "federated learning",
    "large language models",
    "diffusion models",
    "graph neural networks",
    "consensus protocol",
    "byzantine fault tolerance",
    "retrieval augmented generation",
    "speculative decoding",
    "mixture of experts",
    "zero-knowledge proofs",
    "reinforcement learning from human feedback",
)
WORDS = "transformer rollout attention quantization pruning sparsity scheduler compiler".split()  # noqa: SIM905
SCHEDULES = ("instant", "daily 07:30", "weekdays 09:00", "weekly mon 09:00", "weekly fri 17:00")
ZONES = ("Europe/Berlin", "America/New_York", "Asia/Shanghai", "Asia/Tokyo", "Australia/Sydney")


def _author(rng: random.Random) -> str:
    return f'au:"{rng.choice(GIVEN)} {rng.choice(SURNAMES)}"'


def _query(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.25:
        return f"cat:{rng.choice(CATEGORIES)}"
    if kind < 0.45:
        return _author(rng)
    if kind < 0.6:
        return f'ti:"{rng.choice(PHRASES)}"'
    if kind < 0.75:
        return f'"{rng.choice(PHRASES)}" AND cat:{rng.choice(CATEGORIES)}'
    if kind < 0.85:
        return f"({_author(rng)} OR {_author(rng)}) ANDNOT cat:{rng.choice(CATEGORIES)}"
    if kind < 0.95:
        return f"abs:{rng.choice(WORDS)} {rng.choice(WORDS)} cat:{rng.choice(CATEGORIES)}"
    return f"id:{rng.randint(2401, 2611)}.{rng.randint(1, 29999):05d}"


def _address(number: int) -> str:
    kind = number % 10
    if kind < 4:
        return f"email:reader{number}@lab{number % 97}.example.org"
    if kind < 7:
        return f"telegram:{100000 + number}"
    if kind < 9:
        return f"slack:C{number:08X}"
    return f"webhook:https://hooks.example.org/papertrail/{number}?token={uuid.UUID(int=number).hex}"


def write_file(path: Path, lines: int, seed: int = 13) -> int:
    """Write ``lines`` lines to ``path``, each a distinct follow."""
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as file:
        number = 0
        while written < lines:
            address = _address(number)
            options: dict[str, object] = {}
            if rng.random() < 0.25:
                options["schedule"] = rng.choice(SCHEDULES)
                options["timezone"] = rng.choice(ZONES)
            if rng.random() < 0.1:
                options["language"] = "zh"
            queries: set[str] = set()
            for _ in range(min(rng.randint(5, 15), lines - written)):
                query = _query(rng)
                if query in queries:  # one follow per query and subscriber, as the store keeps them
                    continue
                queries.add(query)
                record: dict[str, object] = {"address": address, "query": query, **options}
                if rng.random() < 0.125:
                    record[rng.choice(("new_only", "instant"))] = True
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
            number += 1
    return written


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(url: str, *args: str) -> tuple[float, float, str]:
    """Run ``python -m papertrail ARGS``; return its wall time, its CPU time and what it printed."""
    env = {**os.environ, "PAPERTRAIL_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "papertrail", *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"papertrail {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return elapsed, _children_cpu() - cpu, done.stdout.strip()


def bench(url: str, label: str, source: Path, follows: int, folder: Path) -> None:
    """Import twice and export once into the fresh database at ``url``; print the times."""
    lines = sum(1 for _ in source.open(encoding="utf-8"))
    target = folder / f"export-{label}.jsonl"
    steps = (
        ("import", ("import", "follows", str(source))),
        ("import again", ("import", "follows", str(source))),
        ("export", ("export", "follows", "--output", str(target))),
    )
    for name, args in steps:
        wall, cpu, said = _run(url, *args)
        print(f"{label} {name:<12} {wall:6.1f} s wall {cpu:6.1f} s CPU {lines / wall:8,.0f} lines/s   {said}")
    written = sum(1 for _ in target.open(encoding="utf-8"))
    assert written == follows, f"exported {written} lines for {follows} follows"


def main() -> None:
    """Generate the file and run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "follows.jsonl"
        started = time.perf_counter()
        follows = write_file(source, args.lines)
        print(
            f"{follows:,} lines ({source.stat().st_size / 1e6:.1f} MB) "
            f"generated in {time.perf_counter() - started:.1f} s"
        )
        bench(f"sqlite:///{folder}/bench.db", "sqlite", source, follows, folder)
        if args.postgres:
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            admin = sa.create_engine(POSTGRES_URL)
            with admin.begin() as conn:
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            sep = "&" if "?" in POSTGRES_URL else "?"
            try:
                bench(
                    f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}",
                    "postgresql",
                    source,
                    follows,
                    folder,
                )
            finally:
                with admin.begin() as conn:
                    conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                admin.dispose()


if __name__ == "__main__":
    main()
