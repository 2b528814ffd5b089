"""Parse huggingface.co/api/daily_papers responses into ``CommunityPick`` values. Pure: bytes in, values out.

A response (``?date=YYYY-MM-DD``) is a JSON array of objects ``{"paper": {...}, "publishedAt", "title",
"numComments", ...}``; ``shared/corpus/SOURCES.md`` records which fields appear when. Per item we read:

- ``paper.id``: the bare arXiv id. Hugging Face lists arXiv papers only, but anything that is not an arXiv id
  is skipped with a note, because a pick must attach to an arXiv paper and never create a second one;
- ``paper.title`` / ``paper.summary`` (falling back to the top-level ``title`` / ``summary``), with arXiv's
  hard wraps collapsed and TeX escapes such as ``\\%`` or ``\\"u`` decoded;
- ``paper.authors[].name``, ``paper.upvotes``, the top-level ``numComments``, and from 2025 on
  ``paper.ai_keywords``, ``paper.ai_summary``, ``paper.githubRepo`` and ``paper.projectPage``;
- ``paper.publishedAt`` as an aware UTC datetime.

Decisions, each grounded in the recorded responses:

- **Hidden authors are kept.** ``hidden: true`` is a flag on the Hugging Face side of an author entry (in
  the recordings it occurs only on entries linked to a Hugging Face account), not a statement that the
  person did not write the paper: the three hidden entries in the corpus are all in the arXiv author list,
  two of them as first author (``Peter Kocsis`` on 2403.10615, ``Dingyun Zhang`` on 2607.18227). Dropping
  them would make ``au:`` follows miss those papers and misstate who wrote them. Author names are the
  arXiv names (``name``), never the account's display name (``user.fullname`` can be a nickname, ``VConm``).
- **The requested date is the daily key**, passed in as ``day``. The timestamps changed meaning over the
  years: in 2025 the top-level ``publishedAt`` is sometimes 4 h off ``paper.publishedAt``, and in 2026 all of
  them are rounded to T00:00 / T20:00. ``published_at`` is therefore only ``paper.publishedAt`` (the arXiv
  submission time, at day precision from 2026), never used to decide which day a pick belongs to.
- Fields the value object has no place for (thumbnail / mediaUrl, organization, githubStars,
  submittedOnDailyAt, ...) are not read, so their appearance or disappearance cannot break parsing.

Outcomes a caller must tell apart: a page of picks (maybe with ``skipped`` items and ``notes`` about fields
that were dropped), an empty page (``[]``: a day nobody submitted papers, e.g. a weekend), and
``HfFormatError`` when the bytes are not a JSON array of objects at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from core.json_input import JSONLimitError, JSONReader
from core.tex_accents import decode_tex
from core.values import CommunityPick

__all__ = ["SOURCE", "DailyPage", "HfFormatError", "parse_daily"]

SOURCE = "hf-daily"

_URL_HINT = "check that the URL is https://huggingface.co/api/daily_papers?date=YYYY-MM-DD"
# The answer is untrusted JSON, read by the shared rules (core.json_input): its nesting limit.
_READER = JSONReader(unique_keys=False)

# New-style ids (0704.0001, 2411.17700; month 01-12) and old-style ids (hep-th/9901001, math.GT/0309136),
# optionally with a version suffix, which a pick does not need and which is therefore dropped.
_ARXIV_ID_RE = re.compile(
    r"\A(?P<id>\d{2}(?:0[1-9]|1[0-2])\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})(?:v(?P<version>\d+))?\Z"
)


class HfFormatError(ValueError):
    """The bytes are not a daily_papers response: HTML, empty, truncated JSON, a JSON error object, ..."""


@dataclass(frozen=True, slots=True)
class DailyPage:
    """One parsed daily_papers response.

    ``skipped`` has one note per item that produced no pick; ``notes`` has one per field that was present but
    unusable and was left out of an otherwise good pick (an upvote count that is not a number, ...).
    """

    day: date
    picks: tuple[CommunityPick, ...]
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True for a day without any items (``[]``), not for a day whose items were all skipped."""
        return not self.picks and not self.skipped


def parse_daily(data: bytes, day: date) -> DailyPage:
    """Parse the bytes of a ``daily_papers?date=<day>`` response into a ``DailyPage``.

    ``day`` is the date that was requested; every pick carries it, whatever the timestamps inside say.
    Raises ``HfFormatError`` if ``data`` is not a JSON array of objects: an empty body, an HTML page,
    truncated or invalid JSON, a JSON error object such as ``{"error": "..."}``, or any other JSON value.
    Items that cannot be used are not dropped silently: each leaves a note in ``DailyPage.skipped``.
    """
    items = _load_array(data, day)
    picks: list[CommunityPick] = []
    skipped: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    for position, item in enumerate(items, start=1):
        result = _parse_item(item, position, day, notes)
        if isinstance(result, str):
            skipped.append(result)
        elif result.arxiv_id in seen:
            # One pick per paper and day: a repeat would count the paper's upvotes twice downstream.
            skipped.append(f"item {position} ({result.arxiv_id}): listed again on {day}; kept the first")
        else:
            seen.add(result.arxiv_id)
            picks.append(result)
    return DailyPage(day=day, picks=tuple(picks), skipped=tuple(skipped), notes=tuple(notes))


def _load_array(data: bytes, day: date) -> list[dict[str, Any]]:
    """Decode ``data`` and check that it is a JSON array of objects, with errors an operator can act on."""
    what = f"huggingface.co daily_papers for {day}"
    stripped = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not stripped:
        body = "an empty body" if not data else f"a blank body ({len(data)} bytes of whitespace)"
        raise HfFormatError(f"{what} returned {body} instead of JSON; retry later, and {_URL_HINT}")
    if stripped.startswith(b"<"):
        # No JSON value starts with "<": this is an HTML error page (a proxy, a 5xx) or XML.
        raise HfFormatError(
            f"{what} returned an HTML/XML page instead of JSON (first bytes: {_preview(data)}); the service "
            f"may be down or rate-limiting (retry later), or the URL is wrong ({_URL_HINT})"
        )
    try:
        value = _READER.loads(data)
    except JSONLimitError as exc:  # nested too deeply: no real answer does, and no RecursionError
        raise HfFormatError(
            f"{what} returned JSON {exc} (first bytes: {_preview(data)}); {_URL_HINT}, and keep the "
            "response for a bug report if the URL is right"
        ) from exc
    except UnicodeDecodeError as exc:
        raise HfFormatError(
            f"{what} returned bytes that are not UTF-8 text ({exc}; first bytes: {_preview(data)}); "
            f"{_URL_HINT}, and keep the response for a bug report if the URL is right"
        ) from exc
    except json.JSONDecodeError as exc:
        if exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string"):
            # The decoder ran out of input before the document closed (a string left open reports where it
            # opened, not the end): a cut download, not bad JSON.
            raise HfFormatError(
                f"the {what} response ends before the JSON does ({exc.msg}; {len(data)} bytes, last bytes: "
                f"{_preview(data[-80:])}): the download was cut short; retry the fetch"
            ) from exc
        raise HfFormatError(
            f"{what} returned invalid JSON ({exc}; first bytes: {_preview(data)}); {_URL_HINT}, "
            "and keep the response for a bug report if the URL is right"
        ) from exc

    if isinstance(value, dict):
        message = value.get("error")
        if isinstance(message, str | list):
            detail = message if isinstance(message, str) else "; ".join(map(str, message))
            raise HfFormatError(
                f"{what} answered with an error object: {detail!r}; check the date (YYYY-MM-DD, not in the "
                f"future) and {_URL_HINT}; retry later if the message says the service is busy"
            )
        raise HfFormatError(
            f"{what} returned a JSON object with keys {sorted(value)[:8]} where an array of papers was "
            f"expected; the API may have changed: compare a fresh response with shared/corpus/hf-daily"
        )
    if not isinstance(value, list):
        raise HfFormatError(
            f"{what} returned a JSON {type(value).__name__} ({_preview(data)}) where an array of papers was "
            f"expected; {_URL_HINT}"
        )
    for position, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            # A response whose items are strings or numbers is not a daily_papers response at all (corrupted
            # recordings hold Python repr strings), so the whole page is refused rather than item by item.
            raise HfFormatError(
                f"{what}: item {position} is a JSON {type(item).__name__}, not an object "
                f"({_preview(json.dumps(item).encode())}); the response is not a daily_papers array; "
                "compare it with shared/corpus/hf-daily and keep it for a bug report"
            )
    return value


def _parse_item(item: dict[str, Any], position: int, day: date, notes: list[str]) -> CommunityPick | str:
    """Turn one array item into a ``CommunityPick``, or return a note saying why it was skipped."""
    paper = item.get("paper")
    if not isinstance(paper, dict):
        return f"item {position}: no 'paper' object (keys: {sorted(item)[:8]}); skipped"
    raw_id = paper.get("id")
    if not isinstance(raw_id, str):
        return f"item {position}: paper.id is {raw_id!r}, not a string; skipped"
    match = _ARXIV_ID_RE.match(raw_id.strip())
    if match is None:
        return f"item {position}: paper.id {raw_id!r} is not an arXiv id; skipped (a pick must attach to one)"
    arxiv_id = match.group("id")
    label = f"item {position} ({arxiv_id})"
    if match.group("version"):
        notes.append(f"{label}: paper.id {raw_id!r} carried a version; kept the bare id {arxiv_id}")

    title = _text(paper.get("title")) or _text(item.get("title"))
    if not title:
        return f"{label}: no title in paper.title or title; skipped"

    return CommunityPick(
        arxiv_id=arxiv_id,
        day=day,
        title=decode_tex(title),
        summary=decode_tex(_text(paper.get("summary")) or _text(item.get("summary"))),
        authors=_authors(paper.get("authors"), label, notes),
        upvotes=_count(paper, "upvotes", "paper.upvotes", label, notes),
        comments=_count(item, "numComments", "numComments", label, notes),
        published_at=_timestamp(paper.get("publishedAt"), label, notes),
        keywords=_keywords(paper.get("ai_keywords"), label, notes),
        ai_summary=_text(paper.get("ai_summary")) or None,
        github_repo=_url(paper.get("githubRepo"), "paper.githubRepo", label, notes),
        project_page=_url(paper.get("projectPage"), "paper.projectPage", label, notes),
        source=SOURCE,
    )


def _authors(value: object, label: str, notes: list[str]) -> tuple[str, ...]:
    """The ``name`` of every author entry, in order; hidden ones included (see the module docstring)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        notes.append(f"{label}: paper.authors is a {type(value).__name__}, not a list; no authors kept")
        return ()
    names: list[str] = []
    for index, author in enumerate(value, start=1):
        name = _text(author.get("name")) if isinstance(author, dict) else ""
        if name:
            names.append(name)
        else:
            notes.append(f"{label}: author {index} has no name ({_short(author)}); left out")
    return tuple(names)


def _count(obj: dict[str, Any], key: str, field: str, label: str, notes: list[str]) -> int:
    """A non-negative integer field, 0 when absent; a wrong value is noted rather than trusted."""
    value = obj.get(key)
    if value is None:
        return 0
    # bool is an int subclass, and True upvotes would be a wrong 1.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    notes.append(f"{label}: {field} is {value!r}, not a count; used 0")
    return 0


def _keywords(value: object, label: str, notes: list[str]) -> tuple[str, ...]:
    """``paper.ai_keywords`` without blanks or repeats; the recordings have both (``[""]``, doubled words)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        notes.append(f"{label}: paper.ai_keywords is a {type(value).__name__}, not a list; no keywords kept")
        return ()
    seen: dict[str, None] = {}
    for keyword in value:
        text = _text(keyword)
        if text:
            seen.setdefault(text, None)
    return tuple(seen)


def _url(value: object, field: str, label: str, notes: list[str]) -> str | None:
    """An http(s) link, or None. Other schemes are refused because the link ends up in digests."""
    text = _text(value)
    if not text:
        return None
    if text.lower().startswith(("https://", "http://")):
        return text
    notes.append(f"{label}: {field} {text[:80]!r} is not an http(s) URL; left out")
    return None


def _timestamp(value: object, label: str, notes: list[str]) -> datetime | None:
    """An ISO-8601 time (``2024-05-24T17:34:15.000Z``) as an aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            # The API always sends Z; a time without an offset is read as UTC rather than as local time.
            return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    notes.append(f"{label}: paper.publishedAt {value!r} is not an ISO-8601 time; left out")
    return None


def _text(value: object) -> str:
    """A string field with every whitespace run (arXiv's ``\\n  `` hard wraps) collapsed; "" otherwise."""
    return " ".join(value.split()) if isinstance(value, str) else ""


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _preview(data: bytes, limit: int = 80) -> str:
    """The first bytes of a response, shown in error messages so an operator can recognise them."""
    text = data[:limit].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(data) > limit else ""))
