"""Exporting a subscription from one server and importing it on another."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from core.db import Database
from papertrail.cli.app import app
from tests.cli_helpers import runner
from tests.conftest import POSTGRES_URL, migrated_store

ADDRESS = "email:ada@example.org"


@pytest.fixture(name="target")
def target_fixture(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Database]:
    """A second fresh store on the same kind of database as ``store``: the server a subscription moves to."""
    if db_url.startswith("sqlite"):
        yield from migrated_store(f"sqlite:///{tmp_path}/target.db")
        return
    admin: sa.Engine = request.getfixturevalue("_pg_admin")
    schema = f"pt_{uuid.uuid4().hex[:12]}"
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield from migrated_store(f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}")
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A document without what differs between two servers: the export's time and digest numbers."""
    doc = copy.deepcopy(doc)
    del doc["exported_at"]
    for item in doc["received"]:
        del item["digest"]
    return doc


def good_document() -> dict[str, Any]:
    """A version-2 document (tests/test_subscription_learned.py reads version 1 too)."""
    return {
        "format": "papertrail-subscription",
        "version": 2,
        "exported_at": "2026-12-01T08:00:00Z",
        "address": ADDRESS,
        "status": "active",
        "schedule": "daily 08:00",
        "timezone": "Europe/Berlin",
        "language": None,
        "heartbeat": False,
        "recommend": 5,
        "newsletters": ["ml-weekly"],
        "follows": [{"query": "cat:cs.DC", "new_only": False, "instant": False}],
        "received": [
            {
                "arxiv_id": "2611.08864",
                "version": 2,
                "title": "A title",
                "sent_at": "2026-11-30T07:00:02+01:00",
                "digest": 17,
            }
        ],
        "votes": [
            {"arxiv_id": "2611.08864", "version": 2, "value": 1, "voted_at": "2026-11-30T09:00:00Z"},
            {"arxiv_id": "2611.08865", "version": 1, "value": -1, "voted_at": "2026-11-30T09:01:00+08:00"},
        ],
        "library": [
            {"key": "2306.03564", "arxiv_id": "2306.03564", "version": 2, "title": "T", "abstract": "A"},
            {"key": "doi:10.1/x", "arxiv_id": None, "version": None, "title": "Text", "abstract": "Only"},
        ],
    }


def invoke(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(name="two_servers")
def two_servers_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[str, str]:
    """Two SQLite databases: the exporting server's (set as PAPERTRAIL_DATABASE_URL) and the target's."""
    source, target = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", source)
    return source, target
