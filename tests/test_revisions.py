"""What a revision changed: the rule (core.papers.revisions), and every reader of it agreeing on one example.

The example: a v2 whose abstract differs from v1's only in whitespace, with one more category and a licence.
Digests, ``papertrail show``, the paper page, the feeds and the AI guides' prompt all say "categories,
license" for it, and never "abstract".
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.db import Database
from core.delivery import feed_records
from core.delivery.digests import send_due_digests
from core.delivery.render import CHANGE_LABELS, Renderer, changes_text
from core.follows.index import match_new
from core.follows.manage import follow
from core.guides import guide_records
from core.ledger import ledger_records
from core.models import Version
from core.papers import paper_records
from core.papers.revisions import CHANGE_NAMES, changes_of, history, what_changed
from core.values import AnnounceType, PaperIn
from ingest.arxiv_rss_parse import parse_feed
from tests.cli_helpers import invoke
from tests.conftest import BIG_FEED
from tests.support.ledger import ScriptedNotifier
from tests.support.web import client_for

ROOT = Path(__file__).resolve().parent.parent


def _example() -> tuple[PaperIn, PaperIn]:
    """The reported disagreement on a recorded paper: v1, then a v2 with the abstract reflowed (whitespace
    only), one more category and a licence."""
    recorded = next(
        p
        for p in parse_feed(BIG_FEED.read_bytes()).items
        if p.version == 1 and len(p.categories) == 2 and p.license and "\n" not in p.abstract
    )
    v1 = replace(recorded, categories=recorded.categories[:1], license=None)
    reflowed = "\n  ".join(recorded.abstract.split(" ")).replace(". ", ".  ") + " "
    assert reflowed != recorded.abstract and reflowed.split() == recorded.abstract.split()
    v2 = replace(recorded, version=2, abstract=reflowed, announce_type=AnnounceType.REPLACE)
    return v1, v2


# -- the rule --------------------------------------------------------------------------------------------


def _paper(**fields: object) -> PaperIn:
    base = PaperIn(
        "2611.00001", 1, "A title", "An abstract.", ("Ada Lovelace", "Zeng Li"), ("cs.DC", "cs.LG")
    )
    return replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("after", "changed"),
    [
        ({}, ()),
        # Whitespace and line breaks differ between sources for the same text.
        ({"abstract": "  An\n  abstract. "}, ()),
        ({"title": "A\ttitle"}, ()),
        ({"authors": ("Ada  Lovelace", " Zeng Li")}, ()),
        # Composed and decomposed accents are the same text.
        ({"title": "A titl\u00e9"}, ("title",)),
        # Categories are a set: another order is no change, one more is.
        ({"categories": ("cs.LG", "cs.DC")}, ()),
        ({"categories": ("cs.DC", "cs.LG", "stat.ML")}, ("categories",)),
        # Authors are a list: another order is a change.
        ({"authors": ("Zeng Li", "Ada Lovelace")}, ("authors",)),
        # A missing and a blank field are the same; a new one is a change.
        ({"comment": "  "}, ()),
        ({"license": "http://creativecommons.org/licenses/by/4.0/"}, ("license",)),
        ({"journal_ref": "J. 1", "doi": "10.1/x"}, ("journal-ref", "DOI")),
        # TeX is compared as written: a corrected formula is a change.
        ({"abstract": "An $\\alpha$ abstract."}, ("abstract",)),
        (
            {"title": "B", "abstract": "B.", "comment": "c", "categories": ("cs.AI",), "authors": ("X",)},
            ("title", "authors", "abstract", "categories", "comment"),
        ),
    ],
)
def test_what_changed(after: dict[str, object], changed: tuple[str, ...]) -> None:
    assert what_changed(_paper(), _paper(**after)) == changed


def test_what_changed_normalises_unicode_forms() -> None:
    assert what_changed(_paper(title="Schro\u0308dinger"), _paper(title="Schr\u00f6dinger")) == ()
    assert what_changed(_paper(title="Schrodinger"), _paper(title="Schr\u00f6dinger")) == ("title",)


def _stored(number: int, title: str = "A title", doi: str | None = None) -> Version:
    return Version(
        paper_id="2611.00001",
        number=number,
        title=title,
        abstract="An abstract.",
        doi=doi,
        announce_type="new",
        source="arxiv-rss",
    )


def test_history_compares_each_version_with_the_newest_lower_one() -> None:
    # A gap (v2 never stored) compares v3 with v1; the order given does not matter.
    v1, v3, v4 = _stored(1), _stored(3, "B"), _stored(4, "B", "10.1/x")
    assert [(v.number, changed) for v, changed in history([v4, v1, v3])] == [
        (1, ()),
        (3, ("title",)),
        (4, ("DOI",)),
    ]


def test_every_change_name_has_a_digest_label() -> None:
    assert tuple(CHANGE_LABELS) == CHANGE_NAMES
    assert changes_text(CHANGE_NAMES) == (
        "title, authors, abstract, categories, comment, journal-ref, DOI, license"
    )


def test_changes_of_reads_a_batch(db: Database) -> None:
    v1, v2 = _example()
    v3 = replace(v2, version=3, comment="Accepted.")
    paper_records.save_versions(db, [v1])
    paper_records.save_versions(db, [v2, v3])
    with db.engine.connect() as connection:
        found = changes_of(
            connection, [(v1.arxiv_id, 1), (v1.arxiv_id, 2), (v1.arxiv_id, 3), ("2999.99999", 2)]
        )
    assert found == {
        (v1.arxiv_id, 1): (),
        (v1.arxiv_id, 2): ("categories", "license"),
        (v1.arxiv_id, 3): ("comment",),
        ("2999.99999", 2): (),
    }


# -- every reader agrees -----------------------------------------------------------------------------------


@pytest.fixture
def cli_store(db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """The store, also as the command line's database."""
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", db.engine.url.render_as_string(hide_password=False))
    yield db


async def test_a_whitespace_abstract_a_category_and_a_licence_read_alike_everywhere(
    cli_store: Database,
) -> None:
    db = cli_store
    v1, v2 = _example()
    added = follow(db, "console:ada", f"cat:{v1.categories[0]}", schedule="instant")
    subscriber = added.subscriber.id or 0
    paper_records.save_versions(db, [v1])
    paper_records.save_versions(db, [v2])
    assert match_new(db) == 2
    notifier = ScriptedNotifier()
    (report,) = await send_due_digests(db, {"console": notifier}, Renderer())
    assert report.sent

    # The digest as rendered, and its items read again the other way (a digest's items by id).
    message = notifier.sent[0][1]
    items = {item.version: item for item in message.items}
    assert items[2].changes == ("categories", "license") and items[1].changes == ()
    assert "changed: categories, license\n" in message.text
    (digest,) = ledger_records.digests_of(db, subscriber)
    again = {item.version: item.changes for item in ledger_records.digest_items(db, digest.id or 0)}
    assert again == {1: (), 2: ("categories", "license")}

    # papertrail show, as text and as JSON.
    code, out, err = invoke("show", v2.arxiv_id)
    assert code == 0, err
    assert re.search(r"v2 .*changed: categories, license\n", out)
    code, out, err = invoke("show", v2.arxiv_id, "--json")
    assert code == 0, err
    assert [v["changed"] for v in json.loads(out)["versions"]] == [[], ["categories", "license"]]

    # The paper page.
    page = client_for(db).get(f"/papers/{v2.arxiv_id}").text
    assert re.search(r'data-version="2">.*?<td>categories, license</td>', page, flags=re.S)

    # The Atom feeds (a query's and the subscriber's) and the AI guides' prompt.
    sent = feed_records.sent_feed(db, subscriber, limit=10, language="en")
    assert {e.item.version: e.item.changes for e in sent} == {1: (), 2: ("categories", "license")}
    subjects = guide_records.versions_needing_guides(db, "en", 10)
    assert {s.number: s.changed for s in subjects} == {1: (), 2: ("categories", "license")}


# -- one owner ---------------------------------------------------------------------------------------------

# A module comparing one of these fields of two versions side by side is a second rule of what changed
# (``number``: a second reading of which version comes before another).
_COMPARED = {
    "abstract",
    "authors",
    "categories",
    "comment",
    "doi",
    "journal_ref",
    "license",
    "title",
    "number",
}


def _masked(node: ast.AST) -> str:
    """``node`` with every name blanked: ``a.title`` and ``b.title`` read alike."""
    copy = ast.parse(ast.unparse(node), mode="eval")
    for name in ast.walk(copy):
        if isinstance(name, ast.Name):
            name.id = "_"
    return ast.dump(copy)


def _reads_a_field(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr in _COMPARED)
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr")
        for n in ast.walk(node)
    )


def _compares_two_versions(tree: ast.AST) -> list[int]:
    """Lines comparing a field of one value with the same field of another, however wrapped: ``a.title !=
    b.title``, ``getattr(row, f) != getattr(previous, f)``, ``norm(a.abstract) == norm(b.abstract)``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            left, right = node.left, node.comparators[0]
            if _reads_a_field(left) and ast.dump(left) != ast.dump(right) and _masked(left) == _masked(right):
                lines.append(node.lineno)
    return lines


def test_only_the_owner_says_what_a_revision_changed() -> None:
    owner = ROOT / "core" / "papers" / "revisions.py"
    found = {}
    for folder in ("core", "papertrail", "bot", "notifiers", "ingest"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = _compares_two_versions(ast.parse(text))
            if where and path != owner:
                found[path.relative_to(ROOT).as_posix()] = where
    assert found == {}, "ask core.papers.revisions what a revision changed"
    # The rule's own comparison is found by the same check, so the check can see one; before the owner, it
    # found core/papers/status.py (show), core/ledger/ledger_records.py (digests) and
    # core/guides/guide_records.py.
    assert _compares_two_versions(ast.parse(owner.read_text(encoding="utf-8")))
    assert _compares_two_versions(ast.parse("older = [v for v in stored if v.number < revision.number]"))
    assert _compares_two_versions(ast.parse("changed = getattr(row, f) != getattr(previous, f)"))
