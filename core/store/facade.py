"""The store: one facade over the database's repositories, built once per process from an engine.

``Store`` holds the engine, opens transactions (:meth:`Store.session`) and composes one repository per
aggregate, each a plain class in its own module that is handed the store (and any repository it reads
through) when the store is built; code reaches every one as ``store.<repository>.<method>(...)``:

===================  ==========================  ===================================================
attribute            module                      what it stores
===================  ==========================  ===================================================
``papers``           core.store.papers           papers, versions, community picks, search backlog
``runs``             core.store.runs             source runs and HTTP validators
``subscribers``      core.store.subscribers      subscribers and their follows, one at a time
``follow_files``     core.store.follows          bulk import and export of follows
``matches``          core.store.matches          versions to match, query matches, their fan-out
``ledger``           core.store.ledger           digest planning, heartbeats, what waits
``claims``           core.store.ledger_claims    workers claiming digests, the digests' items
``outcomes``         core.store.ledger_outcomes  sent, retried, refused, dead digests requeued
``alarms``           core.store.alarms           delivery alarms, held digests, refused subscribers
``newsletters``      core.store.newsletters      newsletters, members, issues
``guides``           core.store.guides           AI guides
``counts``           core.store.counts           the library's maintained totals
``dashboard``        core.store.browse           status page, metrics and ``status`` reads
``browser``          core.store.browser          the paper browser's pages
``feeds``            core.store.feeds            Atom feeds and the feed nonce
``taste``            core.store.taste            votes, seeds, learned models, library look-ups
``recommend``        core.store.recommend        the recommendation pass
``signups``          core.store.signup           pending sign-ups and sign-up quotas
``replays``          core.store.replays          signed Slack requests already accepted
``subscriptions``    core.store.subscription     a whole subscription's export and import
===================  ==========================  ===================================================

Each public repository method is one transaction, so a failure never leaves anything stored half-way. A
repository talks to the database one way, said in its docstring: through an ORM session
(:meth:`Store.session`: model objects, ``session.exec``/``get``/``add``, and Core statements run by that
session), or through a Core connection only (:meth:`Store.connection`).
The store's record types stay importable from here (``from core.store.facade import Novelty``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session

from core.store.alarms import AlarmStore
from core.store.browse import DashboardStore, SourceHealth, StatusSummary
from core.store.browser import BrowserStore
from core.store.counts import CountStore
from core.store.feeds import FeedStore
from core.store.follows import FollowFileStore
from core.store.guides import GuideStore
from core.store.ledger import LedgerStore
from core.store.ledger_claims import ClaimStore
from core.store.ledger_outcomes import OutcomeStore
from core.store.matches import MatchStore, QueryHit
from core.store.newsletters import NewsletterStore
from core.store.papers import PaperStore, version_to_paper
from core.store.papers_save import Novelty, SaveResult
from core.store.recommend import RecommendStore
from core.store.replays import ReplayStore
from core.store.runs import RunStore
from core.store.signup import SignupRecords
from core.store.subscribers import StoredFollow, SubscriberStore
from core.store.subscription import SubscriptionRecords
from core.store.taste import TasteStore

# The record types callers import from the facade (they are defined beside their repositories).
__all__ = [
    "DatabaseFolderMissing",
    "Novelty",
    "QueryHit",
    "SaveResult",
    "SourceHealth",
    "StatusSummary",
    "Store",
    "StoredFollow",
    "make_engine",
    "version_to_paper",
]


class DatabaseFolderMissing(ValueError):
    """The folder of a SQLite database URL does not exist (a mistyped path, most likely)."""


def make_engine(url: str, *, create_folder: bool = True) -> Engine:
    """Create an engine for ``url``; for a SQLite file use WAL with foreign keys.

    A SQLite file's missing folder is created when ``create_folder``, else refused with
    ``DatabaseFolderMissing``: the command line creates only the default ``./data/`` (issue 16: a
    mistyped ``sqlite:////nonexistent/dir/pt.db`` silently made the folders and an empty database).
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1].split("?", 1)[0]
        if path and path != ":memory:":
            folder = Path(path).parent
            if create_folder:
                folder.mkdir(parents=True, exist_ok=True)
            elif not folder.is_dir():
                raise DatabaseFolderMissing(
                    f"the folder {folder} of the SQLite database {path} does not exist; check "
                    f"PAPERTRAIL_DATABASE_URL, or create the folder first (mkdir -p {folder})"
                )
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            # 64 MiB of page cache instead of SQLite's 2 MiB: a day's matches insert into the ledger's
            # indexes in no useful order, and with the default cache most of those inserts miss it
            # (measured: 2.4x less CPU for 531k rows; docs/benchmarks.md).
            cursor.execute("PRAGMA cache_size=-65536")
            cursor.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


class Store:
    """The database. Build one per process from an engine and pass it down; reach its repositories by
    attribute (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.papers = PaperStore(self)
        self.runs = RunStore(self)
        self.subscribers = SubscriberStore(self)
        self.follow_files = FollowFileStore(self)
        self.matches = MatchStore(self)
        self.ledger = LedgerStore(self, self.matches)
        self.claims = ClaimStore(self)
        self.outcomes = OutcomeStore(self)
        self.alarms = AlarmStore(self)
        self.newsletters = NewsletterStore(self)
        self.guides = GuideStore(self)
        self.counts = CountStore(self)
        self.dashboard = DashboardStore(self, self.counts, self.guides, self.alarms)
        self.browser = BrowserStore(self, self.counts)
        self.feeds = FeedStore(self, self.browser)
        self.taste = TasteStore(self)
        self.recommend = RecommendStore(self)
        self.signups = SignupRecords(self)
        self.replays = ReplayStore(self)
        self.subscriptions = SubscriptionRecords(self)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on any exception."""
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def connection(self) -> Iterator[sa.Connection]:
        """The Core connection of such a transaction, for the repositories that speak Core only (no ORM
        objects): the same transaction :meth:`session` opens, committed or rolled back the same way."""
        with self.session() as session:
            yield session.connection()
