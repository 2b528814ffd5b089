"""One read model of a paper version per boundary (docs/architecture.md, "One shape of a paper per boundary").

A product class whose fields carry a version's number and a title is a shape of a paper version. Each one is
named here, either as the read model of its boundary or as a record of another concept that names a version;
a new one fails this test until it is folded into its boundary's shape or classified with a reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("core", "bot", "papertrail", "notifiers", "ingest")

# The shape of each boundary (PaperView counts with its VersionView rows).
READ_MODELS = {
    "core/values.py:PaperIn": "what a source yields",
    "core/models.py:Version": "what is stored",
    "core/values.py:DigestItem": "what a reader sees of one version: digests, webhooks, Atom entries, try",
    "core/papers/browser_rows.py:PaperRow": "a browser list row: a paper's newest version, v1's date, picks",
    "core/papers/status.py:PaperView": "a paper's page: every version and what it changed, picks",
}
# Records of other concepts that name a version (and copy its title for their own use).
OTHER_RECORDS = {
    "core/ledger/ledger_sent.py:SentMatch": "the ledger's record of a sending: match, digest, time",
    "core/guides/prompt.py:GuideSubject": "the guide step's work item; never leaves core.guides",
    "core/taste/taste_records.py:VoteView": "a reader's vote as the likes list shows it",
    "core/people/subscription_file.py:Received": "a line of the subscription export file",
    "core/people/subscription_file.py:LibraryLine": "a library seed line of the subscription export file",
    "papertrail/web/votes.py:Ballot": "what a signed vote link names, inside the vote page",
}
# Packages may use only their own copy of these: they stay inside the package that declares them.
PRIVATE = {"GuideSubject": "core/guides/", "Ballot": "papertrail/web/votes.py"}
_VERSION_FIELDS = {"version", "number", "latest_version", "versions"}


def _product_files() -> list[Path]:
    return sorted(path for top in PRODUCT for path in (ROOT / top).rglob("*.py"))


def version_shapes() -> set[str]:
    """``path:Class`` of every product class with a title field and a version number field."""
    found: set[str] = set()
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
            if "title" in fields and fields & _VERSION_FIELDS:
                found.add(f"{path.relative_to(ROOT).as_posix()}:{node.name}")
    return found


def test_every_shape_of_a_version_is_its_boundarys_read_model_or_another_record() -> None:
    shapes = version_shapes()
    unclassified = shapes - READ_MODELS.keys() - OTHER_RECORDS.keys()
    assert not unclassified, (
        f"{sorted(unclassified)} carry a version: use the read model of their boundary "
        "(a reader's view is core.values.DigestItem) or classify them here with a reason"
    )
    assert READ_MODELS.keys() | OTHER_RECORDS.keys() <= shapes, "a classified class is gone: drop it here"
    assert len(READ_MODELS) == 5


def test_private_records_stay_in_their_package() -> None:
    for name, home in PRIVATE.items():
        users = {
            path.relative_to(ROOT).as_posix()
            for path in _product_files()
            if re.search(rf"\b{name}\b", path.read_text(encoding="utf-8"))
        }
        assert users and all(user.startswith(home) for user in users), (name, sorted(users))
