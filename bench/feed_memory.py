"""Benchmark: peak memory of ``papertrail ingest`` on a large feed, with the body cap above and below it.

Once a 200 MB feed took 2.42 GB of RSS, and nothing bounded the download. The feed here is the
recorded day (``tests/corpus/arxiv-rss/aioarxiv_rss_mock_feed.xml``, 1,504 items, 2.8 MB) with its items
repeated until the body reaches ``--mb`` megabytes. Copy ``k`` of an item has every arXiv id in it
(``YYMM.NNNNN``) given the month ``k`` counted from January 2000, so the ids stay unique and valid and the
store does real work. The feed is served over loopback HTTP without a Content-Length (the body ends when
the connection closes), so the cap is enforced while streaming, not on an announced length.

Each measurement is one ``papertrail ingest`` in a child process against a fresh SQLite file; its peak
resident set size is the ``ru_maxrss`` that ``os.wait4`` reports for that child alone:

* baseline: the interpreter and the imports, ingesting the empty recorded feed;
* cap above the body (``PAPERTRAIL_HTTP_MAX_BYTES`` = 2 x the body): the whole ingest, stored;
* cap below the body (``PAPERTRAIL_HTTP_MAX_BYTES`` = the body / 4): the download stopped at the cap;
* parse only: ``parse_feed`` on the body in a file, in a child of its own, for the parser's share, read
  as the RSS source reads it (from the file, versions spooled past ``SPOOL_AFTER``) where this
  ``parse_feed`` can, else from the bytes; its baseline is the same child on the empty feed.

The children are started by a small launcher process that exists before the feed is built: on Linux a
child's ``ru_maxrss`` starts at the RSS of the process that spawned it (the high-water mark survives
vfork and exec), so children of this process, which holds the feed, would all read at least its size
(before the fix this floored the baseline at 133 MB, above the real 94 MB).

One untimed ``papertrail ingest`` of the empty feed runs first, so that no measured child pays for
compiling the modules (a first run after an edit writes the ``.pyc`` files and peaks ~20 MB higher).

Run: ``PYTHONPATH=. python -m bench.feed_memory --mb 50``. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FEED = ROOT / "tests" / "corpus" / "arxiv-rss" / "aioarxiv_rss_mock_feed.xml"
EMPTY = ROOT / "tests" / "corpus" / "arxiv-rss" / "aioarxiv_empty_rss_mock_feed.xml"
_ID_RE = re.compile(rb"\b\d{4}\.(\d{5})(?!\d)")
_ITEMS_RE = re.compile(rb"(\s*<item>.*?</item>)", re.DOTALL)
MB = 1024 * 1024


def big_feed(target: int) -> bytes:
    """The recorded feed with its items repeated (ids renamed per copy) to at least ``target`` bytes."""
    data = FEED.read_bytes()
    items = _ITEMS_RE.findall(data)
    head = data[: data.index(items[0])]
    tail = data[data.index(items[-1]) + len(items[-1]) :]
    block = b"".join(items)
    parts = [head]
    size = len(head) + len(tail)
    copy = 0
    while size < target:
        month = f"{copy // 12 % 100:02d}{copy % 12 + 1:02d}".encode()
        part = _ID_RE.sub(month + rb".\1", block)
        parts.append(part)
        size += len(part)
        copy += 1
    parts.append(tail)
    return b"".join(parts)


@contextmanager
def serve(body: bytes) -> Iterator[str]:
    """Serve ``body`` at a loopback URL, HTTP/1.0 without Content-Length, in 64 KiB writes."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/rss+xml")
            self.end_headers()
            try:
                view = memoryview(body)
                for start in range(0, len(body), 65536):
                    self.wfile.write(view[start : start + 65536])
            except OSError:
                pass  # the client stopped at its cap

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rss/"
    finally:
        server.shutdown()
        server.server_close()


# Runs one command per line of JSON on its stdin and answers with the child's ru_maxrss (KiB), wall seconds
# and output. It stays small, so its own RSS (about 10 MB) is below any child's and cannot show through.
_LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    started = time.perf_counter()
    child = subprocess.Popen(job["argv"], env=job["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = child.stdout.read().decode("utf-8", "replace")
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0  # reaped by wait4: keep Popen from waiting again
    answer = {"kib": usage.ru_maxrss, "seconds": time.perf_counter() - started, "output": output}
    print(json.dumps(answer), flush=True)
"""


class Launcher:
    """The small process that starts every measured child (see the module docstring)."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(self, argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
        """Run ``argv``; its peak RSS in MB (``ru_maxrss`` of that child alone), wall seconds, last output."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"argv": argv, "env": env}) + "\n")
        self._process.stdin.flush()
        answer = json.loads(self._process.stdout.readline())
        lines = answer["output"].strip().splitlines() or [""]
        # Linux reports ru_maxrss in KiB.
        return answer["kib"] / 1024, answer["seconds"], lines[-1]

    def close(self) -> None:
        """Let the launcher finish."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait()


def ingest(launcher: Launcher, url: str, cap: int, workdir: Path, name: str) -> tuple[float, float, str]:
    """One ``papertrail ingest`` of ``url`` into a fresh SQLite file, with the body cap ``cap``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PAPERTRAIL_DATABASE_URL": f"sqlite:///{workdir / (name + '.db')}",
        "PAPERTRAIL_ARXIV_RSS_URL": url,
        "PAPERTRAIL_HTTP_MAX_BYTES": str(cap),
        "PAPERTRAIL_HTTP_DEADLINE": "900",
    }
    return launcher.run([sys.executable, "-m", "papertrail", "ingest"], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the feed in MB (default 50)")
    args = parser.parse_args()
    launcher = Launcher()  # before the feed exists: see the module docstring
    try:
        measure(launcher, args.mb)
    finally:
        launcher.close()


def measure(launcher: Launcher, mb: float) -> None:
    """Build a feed of ``mb`` megabytes and print the table of peak RSS per run."""
    body = big_feed(int(mb * MB))
    size = len(body)
    print(f"feed: {size / MB:.1f} MB, {body.count(b'<item>'):,} items")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        rows: list[tuple[str, float, float, str]] = []
        with serve(EMPTY.read_bytes()) as url:
            ingest(launcher, url, 64 * MB, workdir, "warm-up")
            rows.append(("baseline: empty feed", *ingest(launcher, url, 64 * MB, workdir, "empty")))
        with serve(body) as url:
            above = ingest(launcher, url, 2 * size, workdir, "above")
            rows.append((f"cap {2 * size / MB:.0f} MB (above)", *above))
            below = ingest(launcher, url, size // 4, workdir, "below")
            rows.append((f"cap {size / 4 / MB:.0f} MB (below)", *below))
        path = workdir / "feed.xml"
        path.write_bytes(body)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        parse_rows = [
            ("parse baseline: empty", *launcher.run([sys.executable, "-c", _PARSE, str(EMPTY)], env)),
            ("parse_feed only", *launcher.run([sys.executable, "-c", _PARSE, str(path)], env)),
        ]
    # "over baseline": what the feed itself cost, the interpreter and imports of the baseline run taken off.
    print(f"{'run':<24} {'peak RSS MB':>12} {'over baseline':>14} {'x body':>7} {'seconds':>8}  outcome")
    for group in (rows, parse_rows):
        base = group[0][1]
        for label, rss, seconds, outcome in group:
            extra = rss - base
            print(
                f"{label:<24} {rss:12.0f} {extra:14.0f} {extra * MB / size:7.2f} {seconds:8.1f}  "
                f"{outcome[:90]}"
            )


# The parser alone, in a child: from the open file with the versions spooled as the RSS source does, where
# parse_feed takes those (it once took bytes only), else from the bytes.
_PARSE = """
import inspect, sys
from ingest.arxiv_rss_parse import parse_feed
with open(sys.argv[1], "rb") as body:
    if "spool_after" in inspect.signature(parse_feed).parameters:
        from ingest.paper_spool import SPOOL_AFTER
        page = parse_feed(body, spool_after=SPOOL_AFTER)
    else:
        page = parse_feed(body.read())
print(len(page.items), "items parsed")
"""


if __name__ == "__main__":
    main()
