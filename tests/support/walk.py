"""The walk of one paper, traced: one recorded arXiv item from the feed to a Telegram message.

One process runs a day's work for one paper through the production entry points: the scheduler's ingest job
(:class:`papertrail.service.runtime.Jobs`) against a loopback server holding the recorded arXiv RSS feed cut
to its first item, then one delivery pass (:func:`core.delivery.digests.send_due_digests`, what every worker
pass and ``papertrail digest`` run) to one Telegram subscriber who follows the paper's category, sent through
python-telegram-bot to the fake Bot API (tests/fakes/telegram_api.py). Setting up (the database, the
follow, the servers) and closing are not traced.

While the walk runs, a profile function (``sys.setprofile`` and ``threading.setprofile``) records every
product file (a ``.py`` file under core/, ingest/, notifiers/, bot/ or papertrail/) whose functions run,
and SQLAlchemy's engine events count the database transactions (``begin``), commits and rollbacks.
Module bodies run by a first import are left out: a running service has imported them already.

**The main path** is the union of the product files that hold a frame on the call stack at the moments the
paper's data takes a new shape (:data:`STEPS`, each recognised by what happens, never by a file path; the
first occurrence of each counts). Every other file entered is "also entered": helpers, configuration,
logging, recommendations, the checks that find nothing to do.

``python -m tests.support.walk --markdown`` prints docs/architecture.md's generated walk; tests/test_walk.py
runs ``--json`` in a subprocess, pins the counts and checks the doc. Trace in a fresh process only: where
other code ran first, its imports and warm caches would change the files entered.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

# -- the production entry points and the shapes the walk watches for -----------------------------------------
# The one place that names product code: after a module moves, fix these imports (and a renamed name in
# STEPS below); the tracer finds everything else by what runs.
from core.config import Settings
from core.delivery.digests import send_due_digests
from core.follows.manage import follow
from core.reasons import Reason
from core.values import DigestItem, Message, PaperIn
from papertrail.service.context import build_context
from papertrail.service.runtime import Jobs
from tests.conftest import BIG_FEED
from tests.fakes.telegram_api import fake_telegram
from tests.servers import Reply, closed_port, feed_server

ROOT = Path(__file__).resolve().parent.parent.parent
PRODUCT = ("core", "ingest", "notifiers", "bot", "papertrail")
SOURCE = "arxiv-rss"
ADDRESS = "telegram:1001"
TOKEN = "123456:TEST-walk-token"


@dataclass(frozen=True)
class Built:
    """A value of ``kind`` is constructed (its ``__init__`` or ``__new__`` is entered)."""

    kind: type

    def codes(self) -> set[CodeType]:
        """The code objects whose entry is this moment."""
        found = set()
        for name in ("__init__", "__new__"):
            # Only the class's own constructors; a static __new__ is reached through the class.
            code = getattr(getattr(self.kind, name), "__code__", None) if name in vars(self.kind) else None
            if code is not None:
                found.add(code)
        return found

    def describe(self) -> str:
        """How the moment is recognised, for the doc."""
        return f"a `{self.kind.__name__}` is built"


@dataclass(frozen=True)
class Entered:
    """A function of qualified name ``qualname`` is entered, in a module of ``package`` (any when empty),
    and, when ``table`` is given, with that table as its ``table`` argument."""

    qualname: str
    package: str = ""
    table: str = ""

    def matches(self, frame: FrameType) -> bool:
        """Whether entering ``frame`` is this moment."""
        module = str(frame.f_globals.get("__name__", ""))
        if self.package and module.split(".", 1)[0] != self.package:
            return False
        return not self.table or getattr(frame.f_locals.get("table"), "name", None) == self.table

    def describe(self) -> str:
        """How the moment is recognised, for the doc."""
        where = f" ({self.package})" if self.package else ""
        table = f" for the `{self.table}` table" if self.table else ""
        return f"`{self.qualname}`{where} is entered{table}"


@dataclass(frozen=True)
class Wrote:
    """A SQL statement matching ``pattern`` is sent through SQLAlchemy."""

    pattern: str
    shown: str

    def describe(self) -> str:
        """How the moment is recognised, for the doc."""
        return f"`{self.shown}` is sent"


@dataclass(frozen=True)
class Step:
    """One moment at which the paper's data takes a new shape."""

    name: str
    what: str
    moment: Built | Entered | Wrote


STEPS: tuple[Step, ...] = (
    Step("fetch", "the feed is requested", Entered("AsyncClient.send", package="httpx")),
    Step("parse", "the item becomes a `PaperIn`", Built(PaperIn)),
    Step("store", "its version row is written", Entered("bulk_insert", table="version")),
    Step("match", "the matcher says why it answers the follow", Built(Reason)),
    Step("match write", "its query match row is written", Entered("bulk_insert", table="query_match")),
    Step(
        "fan-out",
        "the subscriber's ledger row is written",
        Wrote(r'\s*INSERT INTO "?match"?\s', "INSERT INTO match"),
    ),
    Step(
        "plan",
        "the digest that carries it is planned",
        Wrote(r'\s*INSERT INTO "?digest"?\s', "INSERT INTO digest"),
    ),
    Step("read", "it becomes a digest item", Built(DigestItem)),
    Step("render", "the digest becomes a `Message`", Built(Message)),
    Step("send", "the message goes to Telegram", Entered("Bot.send_message", package="telegram")),
    Step(
        "record",
        "the digest is recorded as sent",
        Wrote(r'\s*UPDATE "?digest"? SET .*\bsent_at\b', "UPDATE digest SET sent_at"),
    ),
)


# -- the trace -----------------------------------------------------------------------------------------------


@dataclass
class PathFile:
    """One file of the main path: the first step whose stack holds it, and its functions on those stacks."""

    file: str
    step: str
    functions: list[str]


@dataclass
class Walk:
    """What one traced walk ran."""

    dialect: str
    main_path: list[PathFile]
    entered: list[str]  # every product file whose functions ran, in order of first entry
    transactions: int
    commits: int
    rollbacks: int
    phases: dict[str, int]  # transactions of the ingest and of the delivery
    steps: dict[str, str]  # step -> the innermost product function on its stack
    # Each transaction in the order begun: its phase and the product stack that began it ("file:qualname",
    # outermost first).
    opened: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def also_entered(self) -> list[str]:
        """The files entered that are not on the main path, in order of first entry."""
        main = {f.file for f in self.main_path}
        return [f for f in self.entered if f not in main]


@dataclass
class _Stack:
    step: Step
    frames: list[tuple[str, str]]  # (product file, qualname), outermost first


@dataclass
class Recorder:
    """The profile function's state: files entered, stacks captured, transactions counted."""

    root: str
    phase: str = ""  # what is being recorded; nothing when empty
    files: dict[CodeType, str | None] = field(default_factory=dict)
    entered: dict[str, int] = field(default_factory=dict)
    stacks: list[_Stack] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: {"begin": 0, "commit": 0, "rollback": 0})
    phases: dict[str, int] = field(default_factory=dict)
    opened: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)  # (phase, stack) per begin
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.built = {
            code: step for step in STEPS if isinstance(step.moment, Built) for code in step.moment.codes()
        }
        self.named: dict[str, list[Step]] = {}
        for step in STEPS:
            if isinstance(step.moment, Entered):
                self.named.setdefault(step.moment.qualname, []).append(step)
        self.wrote = [
            (re.compile(step.moment.pattern, re.DOTALL), step)
            for step in STEPS
            if isinstance(step.moment, Wrote)
        ]

    def product_file(self, code: CodeType) -> str | None:
        """``code``'s file relative to the repository when it is a product module, else None (cached)."""
        try:
            return self.files[code]
        except KeyError:
            pass
        name = code.co_filename
        relative = name[len(self.root) :] if name.startswith(self.root) else ""
        found = relative if relative.endswith(".py") and relative.split("/", 1)[0] in PRODUCT else None
        self.files[code] = found
        return found

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        """The profile function: note product files entered and capture the stacks of the steps."""
        if event != "call" or not self.phase:
            return
        code = frame.f_code
        where = self.product_file(code)
        if where is not None and code.co_name != "<module>":
            with self.lock:
                self.entered.setdefault(where, len(self.entered))
        built = self.built.get(code)
        if built is not None and built.name not in self.seen:
            self.capture(built, frame)
        for step in self.named.get(code.co_qualname, ()):
            if step.name not in self.seen and isinstance(step.moment, Entered) and step.moment.matches(frame):
                self.capture(step, frame)

    def statement(self, conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        """SQLAlchemy's ``before_cursor_execute``: capture the stack of a step's write."""
        if not self.phase:
            return
        for pattern, step in self.wrote:
            if step.name not in self.seen and pattern.match(statement):
                self.capture(step, sys._getframe(1))

    def count(self, name: str) -> Callable[..., None]:
        """An engine event listener counting ``name`` (begin, commit, rollback) while recording."""

        def listener(*args: Any) -> None:
            if self.phase:
                with self.lock:
                    self.counts[name] += 1
                    if name == "begin":
                        self.phases[self.phase] = self.phases.get(self.phase, 0) + 1
                        self.opened.append((self.phase, self.product_frames(sys._getframe(1))))

        return listener

    def product_frames(self, frame: FrameType | None) -> list[tuple[str, str]]:
        """The product frames of the stack at ``frame``: (file, qualname), outermost first."""
        frames = []
        while frame is not None:
            where = self.product_file(frame.f_code)
            if where is not None:
                frames.append((where, frame.f_code.co_qualname))
            frame = frame.f_back
        return frames[::-1]

    def capture(self, step: Step, frame: FrameType | None) -> None:
        """Keep the product frames of the stack at ``frame`` as ``step``'s, unless it has one already."""
        frames = self.product_frames(frame)
        with self.lock:
            if step.name not in self.seen:
                self.seen.add(step.name)
                self.stacks.append(_Stack(step, frames))

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Watch every thread started inside the block, and the engines' events; nothing is recorded until
        :meth:`recording`. (The event loop's worker threads start on first use, inside the block.)"""
        listeners = [("before_cursor_execute", self.statement)]
        listeners += [(name, self.count(name)) for name in self.counts]
        for name, listener in listeners:
            sa.event.listen(Engine, name, listener)
        threading.setprofile(self.profile)
        try:
            yield
        finally:
            threading.setprofile(None)
            for name, listener in listeners:
                sa.event.remove(Engine, name, listener)

    @contextmanager
    def recording(self, phase: str) -> Iterator[None]:
        """Record what runs inside the block as ``phase``, in this thread and in the threads
        :meth:`installed` watches."""
        sys.setprofile(self.profile)
        self.phase = phase
        try:
            yield
        finally:
            self.phase = ""
            sys.setprofile(None)

    def result(self, dialect: str) -> Walk:
        """The recorded walk; WalkError when a step's moment never came."""
        missing = [s.name for s in STEPS if s.name not in self.seen]
        if missing:
            raise WalkError(
                f"the walk never reached {', '.join(missing)}: "
                + "; ".join(f"{s.name} waits until {s.moment.describe()}" for s in STEPS if s.name in missing)
                + " (renamed or moved? fix STEPS in tests/support/walk.py)"
            )
        # The stacks in the order their moments happened, each from the caller down: a file's first step is
        # where the walk first reaches it (dicts keep that order).
        steps: dict[str, str] = {}
        functions: dict[str, list[str]] = {}
        for stack in self.stacks:
            for where, qualname in stack.frames:
                steps.setdefault(where, stack.step.name)
                names = functions.setdefault(where, [])
                if qualname not in names:
                    names.append(qualname)
        return Walk(
            dialect=dialect,
            main_path=[PathFile(f, step, functions[f]) for f, step in steps.items()],
            entered=list(self.entered),
            transactions=self.counts["begin"],
            commits=self.counts["commit"],
            rollbacks=self.counts["rollback"],
            phases=dict(self.phases),
            steps={s.step.name: "{}:{}".format(*s.frames[-1]) if s.frames else "" for s in self.stacks},
            opened=[(phase, [f"{where}:{name}" for where, name in frames]) for phase, frames in self.opened],
        )


class WalkError(RuntimeError):
    """The walk did not go as a paper's day goes: a step never happened or the message never arrived."""


def one_item_feed() -> bytes:
    """The recorded arXiv RSS feed (tests/corpus, SOURCES.md) with only its first item."""
    data = BIG_FEED.read_bytes()
    items: list[bytes] = re.findall(rb"\s*<item>.*?</item>", data, re.DOTALL)
    return data[: data.index(items[0])] + items[0] + data[data.index(items[-1]) + len(items[-1]) :]


def _item_id_and_category(feed: bytes) -> tuple[str, str]:
    guid = re.search(rb"oai:arXiv.org:(\d{4}\.\d{5})v\d+", feed)
    category = re.search(rb"<category>([^<]+)</category>", feed)
    assert guid is not None and category is not None, "the recorded feed's first item lost its id or category"
    return guid.group(1).decode(), category.group(1).decode()


async def _walk(database_url: str, recorder: Recorder) -> Walk:
    feed = one_item_feed()
    arxiv_id, category = _item_id_and_category(feed)
    with feed_server(Reply(200, feed)) as server, fake_telegram(TOKEN) as telegram:
        settings = Settings(
            database_url=database_url,
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            telegram_token=TOKEN,
            telegram_api_url=telegram.base_url,
        )
        ctx = build_context(settings, console=io.StringIO())
        try:
            follow(ctx.db, ADDRESS, f"cat:{category}", instant=True)
            with recorder.recording("ingest"):
                await Jobs(ctx).ingest(SOURCE)
            with recorder.recording("delivery"):
                reports = await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, policy=ctx.policy)
        finally:
            await ctx.aclose()
        sent = telegram.sent(ADDRESS.partition(":")[2])
        if (
            [r.sent for r in reports] != [True]
            or len(sent) != 1
            or arxiv_id not in str(sent[0].params["text"])
        ):
            raise WalkError(
                f"expected one Telegram message carrying {arxiv_id}; reports {reports}, sent {sent}"
            )
        return recorder.result(ctx.db.engine.dialect.name)


def trace(database_url: str | None = None) -> Walk:
    """Walk one paper on ``database_url`` (a migrated or empty database; a new SQLite file when None)."""
    with tempfile.TemporaryDirectory(prefix="papertrail-walk-") as folder:
        recorder = Recorder(root=f"{ROOT}/")
        with recorder.installed():
            return asyncio.run(_walk(database_url or f"sqlite:///{folder}/walk.db", recorder))


def from_json(text: str) -> Walk:
    """A walk printed by ``--json``."""
    data = json.loads(text)
    data["main_path"] = [PathFile(**f) for f in data["main_path"]]
    return Walk(**data)


def markdown(walk: Walk) -> str:
    """docs/architecture.md's generated part: the counts, the main path's table and the files also entered."""
    database = "SQLite" if walk.dialect == "sqlite" else walk.dialect
    phases = ", ".join(f"{phase} {count}" for phase, count in walk.phases.items())
    lines = [
        f"Measured on {database}: **{len(walk.main_path)} files on the main path**, {len(walk.entered)} "
        f"product files entered in all, **{walk.transactions} database transactions** ({phases}; "
        f"{walk.commits} commits, {walk.rollbacks} rollbacks).",
        "",
        "| # | file | step | its functions on the path |",
        "|---|------|------|---------------------------|",
    ]
    for number, path in enumerate(walk.main_path, 1):
        names = ", ".join(f"`{name}`" for name in path.functions)
        lines.append(f"| {number} | `{path.file}` | {path.step} | {names} |")
    lines += ["", "Also entered: " + ", ".join(f"`{f}`" for f in walk.also_entered) + "."]
    lines += [
        "",
        "| # | phase | the transaction is begun by (the entry point's callee down to the SQL function) |",
        "|---|-------|------------------------------------------------------------------------------------|",
    ]
    lines += [f"| {n} | {phase} | {began_by(stack)} |" for n, (phase, stack) in enumerate(walk.opened, 1)]
    return "\n".join(lines) + "\n"


def began_by(stack: list[str]) -> str:
    """A transaction's stack, short: module.function from below the entry point down to the SQL function
    (the unit of work's own frames in core/db.py left out)."""
    frames = [frame for frame in stack if not frame.startswith("core/db.py:")]
    shown = frames[1:] if len(frames) > 1 else frames
    return " > ".join(f"`{Path(where).stem}.{name}`" for where, name in (f.split(":", 1) for f in shown))


def steps_markdown() -> str:
    """The steps' table: what each step is and how the tracer recognises its moment."""
    lines = ["| step | the moment | recognised when |", "|------|------------|-----------------|"]
    lines += [f"| {s.name} | {s.what} | {s.moment.describe()} |" for s in STEPS]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Trace the walk and print it as JSON, as the doc's Markdown, or as a short summary."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.walk", description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="a migrated or empty database (default: a new SQLite file)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="the whole walk as JSON (tests/test_walk.py)")
    shape.add_argument("--markdown", action="store_true", help="docs/architecture.md's generated part")
    shape.add_argument(
        "--transactions", action="store_true", help="each transaction with the product stack that began it"
    )
    args = parser.parse_args(argv)
    # Only what the walk sets: no PAPERTRAIL_* variable or papertrail.toml of the caller's changes it.
    for name in [n for n in os.environ if n.startswith("PAPERTRAIL_") and n != "PAPERTRAIL_CORPUS"]:
        del os.environ[name]
    os.environ["PAPERTRAIL_CONFIG"] = os.devnull
    walk = trace(args.database_url)
    if args.json:
        print(json.dumps(asdict(walk), indent=1))
    elif args.markdown:
        print(steps_markdown() + "\n" + markdown(walk), end="")
    elif args.transactions:
        for number, (phase, stack) in enumerate(walk.opened, 1):
            print(f"{number:2} {phase:9} " + " > ".join(stack))
    else:
        print(f"main path: {len(walk.main_path)} files; entered: {len(walk.entered)}; ", end="")
        print(f"transactions: {walk.transactions} ({walk.commits} commits, {walk.rollbacks} rollbacks)")
        for path in walk.main_path:
            print(f"  {path.step:12} {path.file}")
        for name, where in walk.steps.items():
            print(f"  step {name:12} at {where}")


if __name__ == "__main__":
    main()
