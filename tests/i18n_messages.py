"""The messages marked for translation, by area, and what the catalogs lack. Used by tests/test_i18n.py.

Run ``python -m tests.i18n_messages`` to print, for each area, the ``.po`` entries still missing from
``locale/zh/LC_MESSAGES/<area>.po`` (with empty translations to fill in), and the entries no longer used.
``python -m tests.i18n_messages --update`` rewrites the catalogs instead: each holds exactly its area's
messages, a message that moved between areas keeps its translation, and a new one gets an empty one.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_file
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "locale"
TRANSLATED = ("zh",)

# Options the template environments are created with: trans blocks are extracted as they will be looked up.
_JINJA = {"trim_blocks": "true", "lstrip_blocks": "true", "silent": "false"}


def area_of(path: Path) -> str | None:
    """Which catalog a source file's messages belong to; None for files nobody reads (the CLI, tests)."""
    rel = path.relative_to(ROOT).as_posix()
    # The follow language's errors (and the choices they offer) are said in chats and on the manage page.
    # The chat bots (notifiers/<channel>/chat*.py) speak in chats, as the grammar does.
    if rel.startswith("bot/") or rel in ("core/follows/query.py", "core/languages.py"):
        return "bot"
    if re.match(r"notifiers/\w+/chat\w*\.py$", rel):
        return "bot"
    if rel.startswith(("templates/web/", "papertrail/web/")):
        return "web"
    if rel.startswith(("templates/", "core/", "notifiers/")) or rel == "papertrail/service/signup.py":
        return "digest"
    return None


def sources() -> Iterator[Path]:
    """Every Python module and template that may hold marked messages."""
    for folder in ("bot", "core", "notifiers", "papertrail", "templates"):
        yield from sorted((ROOT / folder).rglob("*.py"))
        yield from sorted((ROOT / folder).rglob("*.j2"))


@dataclass(frozen=True, slots=True)
class Marked:
    """One marked message: its id (a tuple for plural forms) and where it is."""

    msgid: str | tuple[str, str]
    where: str


def extract() -> dict[str, list[Marked]]:
    """The marked messages of each area, in source order, duplicates kept (they show where each is)."""
    found: dict[str, list[Marked]] = {"bot": [], "digest": [], "web": []}
    for path in sources():
        area = area_of(path)
        if area is None:
            continue
        method = "python" if path.suffix == ".py" else "jinja2.ext:babel_extract"
        options = {} if path.suffix == ".py" else _JINJA
        for line, message, _comments, _context in extract_from_file(
            method, str(path), keywords=DEFAULT_KEYWORDS, options=options
        ):
            msgid = message if isinstance(message, str) else (message[0], message[1])
            where = f"{path.relative_to(ROOT).as_posix()}:{line}"
            found[area].append(Marked(msgid, where))
    return found


def catalog(language: str, area: str) -> Catalog:
    """The ``.po`` file of one language and area."""
    with (LOCALE / language / "LC_MESSAGES" / f"{area}.po").open("rb") as file:
        return read_po(file, locale=language)


def key(msgid: str | Sequence[str]) -> str:
    """The catalog key of a message: the singular for plural forms."""
    return msgid if isinstance(msgid, str) else msgid[0]


def _po_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def stub(marked: Marked) -> str:
    """A ``.po`` entry for a missing message, translation empty."""
    if isinstance(marked.msgid, str):
        return f'#: {marked.where}\nmsgid {_po_string(marked.msgid)}\nmsgstr ""\n'
    singular, plural = marked.msgid
    return (
        f'#: {marked.where}\nmsgid {_po_string(singular)}\nmsgid_plural {_po_string(plural)}\nmsgstr[0] ""\n'
    )


def update() -> None:
    """Rewrite every area's catalog to hold exactly the area's messages, translations kept where known."""
    found = extract()
    for language in TRANSLATED:
        catalogs = {area: catalog(language, area) for area in found}
        known = {m.id if isinstance(m.id, str) else m.id[0]: m for c in catalogs.values() for m in c if m.id}
        for area, messages in found.items():
            have = catalogs[area]
            wanted = {key(m.msgid): m for m in reversed(messages)}  # the first place each is marked
            for entry in [m for m in have if m.id and key(m.id) not in wanted]:
                have.delete(entry.id)
            for msgid_key, marked in sorted(wanted.items(), key=lambda item: item[1].where):
                if msgid_key in have:
                    continue
                old = known.get(msgid_key)
                have.add(
                    marked.msgid,
                    old.string if old is not None else ("",) if not isinstance(marked.msgid, str) else "",
                    user_comments=old.user_comments if old is not None else [],
                )
            path = LOCALE / language / "LC_MESSAGES" / f"{area}.po"
            buffer = io.BytesIO()
            write_po(buffer, have, width=0, no_location=True)
            # Keep the file's own header: Babel's carries today's date, which would change on every run.
            header = path.read_bytes().split(b"\n\n", 1)[0]
            path.write_bytes(header + b"\n\n" + buffer.getvalue().split(b"\n\n", 1)[1])


def main() -> int:
    """Print what each area's catalog lacks and what it holds that nothing uses."""
    found = extract()
    problems = 0
    for language in TRANSLATED:
        for area, messages in found.items():
            have = catalog(language, area)
            seen: set[str] = set()
            for marked in messages:
                entry = have.get(key(marked.msgid))
                if key(marked.msgid) in seen:
                    continue
                seen.add(key(marked.msgid))
                if entry is None or not entry.string or entry.fuzzy:
                    problems += 1
                    print(f"# {language}/{area}.po lacks:\n{stub(marked)}")
            unused = [m.id for m in have if m.id and key(m.id) not in seen]
            for msgid in unused:
                print(f"# {language}/{area}.po holds an unused entry: {msgid!r}")
    return 1 if problems else 0


if __name__ == "__main__":
    if "--update" in sys.argv[1:]:
        update()
    sys.exit(main())
