"""The unit of work (core/db.py): repository functions called on a ``Transaction`` join it, so two steps in
one ``database.transaction()`` commit together and roll back together; called on the ``Database`` each is its
own transaction. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.db import Database
from core.follows import subscriber_records
from core.models import RunState
from core.papers import run_records

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


class Planted(Exception):
    """Raised inside the unit of work to make it roll back."""


def test_two_calls_in_one_transaction_roll_back_together(db: Database) -> None:
    with pytest.raises(Planted), db.transaction() as tx:
        run_id = run_records.start_run(tx, "arxiv-rss", now=NOW)
        subscriber_records.ensure_subscriber(tx, "console:ada", timezone="UTC", schedule="daily 08:00")
        assert run_records.running_run(tx, "arxiv-rss") is not None  # seen inside the transaction
        raise Planted
    assert run_records.running_run(db, "arxiv-rss") is None
    assert subscriber_records.get_subscriber(db, "console:ada") is None
    assert run_id > 0


def test_two_calls_in_one_transaction_commit_together(db: Database) -> None:
    with db.transaction() as tx:
        run_id = run_records.start_run(tx, "arxiv-rss", now=NOW)
        run_records.finish_run(tx, run_id, RunState.OK, now=NOW)
        with tx.transaction() as inner:  # a step opening a unit of work joins the caller's
            subscriber_records.ensure_subscriber(inner, "console:ada", timezone="UTC", schedule="daily 08:00")
    assert [run.state for run in run_records.latest_runs(db)] == [RunState.OK]
    assert subscriber_records.get_subscriber(db, "console:ada") is not None


def test_each_call_on_the_database_is_its_own_transaction(db: Database) -> None:
    run_records.start_run(db, "arxiv-rss", now=NOW)
    with pytest.raises(Planted), db.transaction() as tx:
        subscriber_records.ensure_subscriber(tx, "console:ada", timezone="UTC", schedule="daily 08:00")
        raise Planted
    assert run_records.running_run(db, "arxiv-rss") is not None  # committed before, kept
    assert subscriber_records.get_subscriber(db, "console:ada") is None


def test_a_savepoint_that_fails_rolls_back_alone(db: Database) -> None:
    # Its part is undone, the exception reaches the caller, and the rest of the transaction still commits:
    # on PostgreSQL even after a statement that failed inside it.
    import sqlalchemy as sa

    with db.transaction() as tx:
        run_records.start_run(tx, "arxiv-rss", now=NOW)
        with pytest.raises(Planted), tx.savepoint() as part:
            subscriber_records.ensure_subscriber(part, "console:ada", timezone="UTC", schedule="daily 08:00")
            raise Planted
        with pytest.raises(sa.exc.DBAPIError), tx.savepoint() as part, part.connection() as connection:
            connection.execute(sa.text("SELECT * FROM no_such_table"))
        subscriber_records.ensure_subscriber(tx, "console:bob", timezone="UTC", schedule="daily 08:00")
    assert run_records.running_run(db, "arxiv-rss") is not None
    assert subscriber_records.get_subscriber(db, "console:ada") is None
    assert subscriber_records.get_subscriber(db, "console:bob") is not None


def test_a_savepoint_in_a_transaction_that_has_only_read_commits_nothing_alone(db: Database) -> None:
    # SQLite's driver begins a transaction only before a write: the savepoint must not begin (and its
    # release commit) one of its own, apart from the transaction it belongs to.
    with pytest.raises(Planted), db.transaction() as tx:
        assert run_records.running_run(tx, "arxiv-rss") is None
        with tx.savepoint() as part:
            run_records.start_run(part, "arxiv-rss", now=NOW)
        raise Planted
    assert run_records.running_run(db, "arxiv-rss") is None
