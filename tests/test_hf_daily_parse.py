"""parse_daily over every recorded huggingface.co daily_papers response in tests/corpus/hf-daily, and over
broken copies of them.

Counts and expected values come from ``json.loads`` over the raw bytes, not from the parser, so the tests
check the parser against the data rather than against itself.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from core.values import CommunityPick
from ingest.hf_daily_parse import DailyPage, HfFormatError, parse_daily
from tests.conftest import CORPUS

HF_DIR = CORPUS / "hf-daily"
RAW_DIR = HF_DIR / "raw-2024-03"
API_DIR = HF_DIR / "api-objects-reserialized"
ALL_FILES = sorted(HF_DIR.glob("*/*.json"))


def _day(path: Path) -> date:
    """The requested ?date= of a recording, from its file name (the only reliable daily key)."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", path.name)
    assert found, path
    return date.fromisoformat(found.group(0))


def _page(path: Path) -> DailyPage:
    return parse_daily(path.read_bytes(), _day(path))


def _pick(path: Path, arxiv_id: str) -> CommunityPick:
    picks = [pick for pick in _page(path).picks if pick.arxiv_id == arxiv_id]
    assert len(picks) == 1, (path, arxiv_id)
    return picks[0]


def _items(path: Path) -> list[dict[str, Any]]:
    items = json.loads(path.read_bytes())
    assert isinstance(items, list)
    return items


def _one_item_response(path: Path, arxiv_id: str, **changes: Any) -> tuple[bytes, dict[str, Any]]:
    """A real item of a recording, re-serialized alone with some fields of its ``paper`` changed."""
    item = next(item for item in _items(path) if item["paper"]["id"] == arxiv_id)
    item["paper"].update(changes)
    return json.dumps([item]).encode(), item


# ----------------------------------------------------------------------------------------------------------
# Every recorded file


def test_corpus_folder_is_there() -> None:
    # Guards the parametrised tests below against passing vacuously on a missing or moved corpus.
    assert len(list(RAW_DIR.glob("*.json"))) == 16
    assert len(list(API_DIR.glob("*.json"))) == 64


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recorded_file_parses_completely(path: Path) -> None:
    items = _items(path)
    page = _page(path)
    # The upstream recorder already dropped items lacking id/title/summary/authors/publishedAt, and every id
    # is an arXiv id, so nothing here may be skipped and no field may be dropped.
    assert page.skipped == ()
    assert page.notes == ()
    assert len(page.picks) == len(items)
    assert [pick.arxiv_id for pick in page.picks] == [item["paper"]["id"] for item in items]
    assert [pick.upvotes for pick in page.picks] == [item["paper"]["upvotes"] for item in items]
    assert [pick.comments for pick in page.picks] == [item["numComments"] for item in items]
    for pick, item in zip(page.picks, items, strict=True):
        assert pick.day == _day(path)
        assert pick.source == "hf-daily"
        assert pick.title and "\n" not in pick.title and pick.title == pick.title.strip()
        assert "\n" not in pick.summary
        assert pick.authors == tuple(author["name"] for author in item["paper"]["authors"])
        assert pick.published_at is not None and pick.published_at.tzinfo is UTC
        assert pick.published_at == datetime.fromisoformat(item["paper"]["publishedAt"])


def test_total_items_match_the_corpus_description() -> None:
    # shared/corpus/SOURCES.md: 80 files, 1343 daily_papers array items.
    assert len(ALL_FILES) == 80
    assert sum(len(_page(path).picks) for path in ALL_FILES) == 1343


def test_fields_appear_in_the_eras_the_corpus_describes() -> None:
    picks = [pick for path in ALL_FILES for pick in _page(path).picks]
    before_2025_04 = [pick for pick in picks if pick.day < date(2025, 4, 1)]
    # ai_keywords, githubRepo and projectPage first show up on 2025-04-01, ai_summary on 2025-06-02.
    assert not any(p.keywords or p.github_repo or p.project_page or p.ai_summary for p in before_2025_04)
    later = [pick for pick in picks if pick.day >= date(2025, 6, 2)]
    assert sum(bool(p.keywords) for p in later) > len(later) // 2
    assert any(p.github_repo for p in later) and any(p.project_page for p in later)
    assert any(p.ai_summary for p in later)
    assert all(p.github_repo is None or p.github_repo.startswith("https://github.com/") for p in picks)


# ----------------------------------------------------------------------------------------------------------
# Spot checks per era


def test_2024_raw_bytes_spot_check() -> None:
    path = RAW_DIR / "daily_papers_2024-03-12.json"
    pick = _pick(path, "2403.06634")
    assert pick.title == "Stealing Part of a Production Language Model"
    assert pick.day == date(2024, 3, 12)
    assert pick.upvotes == 63
    assert pick.comments == 3
    assert len(pick.authors) == 13
    # The arXiv name, not the account's display name ("VConm").
    assert pick.authors[9] == "Arthur Conmy"
    assert pick.authors[-1] == "Florian Tramèr"
    # 2024: paper.publishedAt is the arXiv submission time, the day before the Daily Papers listing.
    assert pick.published_at == datetime(2024, 3, 11, 11, 46, 12, tzinfo=UTC)
    assert pick.keywords == () and pick.github_repo is None and pick.ai_summary is None


def test_2024_hard_wrapped_title_is_collapsed() -> None:
    pick = _pick(RAW_DIR / "daily_papers_2024-03-13.json", "2403.07750")
    # paper.title is "Synth^2: ... Captions and\n  Image Embeddings".
    assert (
        pick.title == "Synth^2: Boosting Visual-Language Models with Synthetic Captions and Image Embeddings"
    )


def test_2024_reserialized_spot_check() -> None:
    path = API_DIR / "2024-05-27.json"
    pick = _pick(path, "2405.15738")
    assert pick.title == "ConvLLaVA: Hierarchical Backbones as Visual Encoder for Large Multimodal Models"
    assert (pick.upvotes, pick.comments) == (32, 3)
    assert pick.authors[:2] == ("Chunjiang Ge", "Sijie Cheng")
    assert pick.published_at == datetime(2024, 5, 24, 17, 34, 15, tzinfo=UTC)


def test_tex_in_summary_is_decoded() -> None:
    pick = _pick(API_DIR / "2024-05-27.json", "2405.15032")
    assert "Üstün et al." in pick.summary and "\\" not in pick.summary
    assert pick.authors[-2:] == ("Ahmet Üstün", "Sara Hooker")
    percent = _pick(API_DIR / "2024-05-27.json", "2405.15319")
    assert "54.6% speedup" in percent.summary


def test_2025_spot_check_uses_the_papers_own_timestamp() -> None:
    pick = _pick(API_DIR / "2025-04-01.json", "2503.23307")
    assert pick.title == "MoCha: Towards Movie-Grade Talking Character Synthesis"
    assert (pick.upvotes, pick.comments) == (24, 1)
    assert pick.project_page == "https://congwei1230.github.io/MoCha/"
    assert pick.github_repo is None
    assert len(pick.keywords) == 9 and pick.keywords[0] == "speech-video window attention mechanism"
    assert pick.authors[:2] == ("Cong Wei", "Bo Sun")
    # The top-level publishedAt says 00:22:09, four hours off: the 2025 timezone shift.
    assert pick.published_at == datetime(2025, 3, 30, 4, 22, 9, tzinfo=UTC)
    assert pick.day == date(2025, 4, 1)


def test_2025_github_repo_and_ai_summary() -> None:
    pick = _pick(API_DIR / "2025-07-01.json", "2506.23044")
    assert pick.title == "Ovis-U1 Technical Report"
    assert pick.github_repo == "https://github.com/AIDC-AI/Ovis-U1"
    assert pick.ai_summary is not None and pick.ai_summary.startswith("Ovis-U1, a 3-billion-parameter model")
    assert pick.keywords[-1] == "GEdit-Bench-EN"
    assert (pick.upvotes, pick.comments) == (26, 2)


def test_2026_spot_check_rounded_timestamps() -> None:
    pick = _pick(API_DIR / "2026-08-21.json", "2608.19880")
    assert pick.title == "EnvHarness: Awakening Static Worlds for Agent Learning"
    assert (pick.upvotes, pick.comments) == (163, 1)
    assert pick.github_repo == "https://github.com/google-research/envharness"
    assert pick.project_page == "https://envharness.com/"
    assert pick.ai_summary is not None and pick.ai_summary.startswith("EnvHarness and EnvRigger")
    assert pick.keywords == (
        "LLM agents",
        "Environment Harness",
        "EnvHarness",
        "EnvRigger",
        "black-box policy",
        "execution trajectories",
        "reinforcement learning",
        "co-evolution",
    )
    assert len(pick.authors) == 17 and pick.authors[-1] == "Chen-Yu Lee"
    # 2026: paper.publishedAt is rounded to midnight; the pick still belongs to the requested day.
    assert pick.published_at == datetime(2026, 8, 20, tzinfo=UTC)
    assert pick.day == date(2026, 8, 21)


# ----------------------------------------------------------------------------------------------------------
# Decisions


@pytest.mark.parametrize(
    ("path", "arxiv_id", "name", "index"),
    [
        (RAW_DIR / "daily_papers_2024-03-19.json", "2403.10615", "Peter Kocsis", 0),
        (API_DIR / "2026-07-21.json", "2607.18227", "Dingyun Zhang", 0),
        (API_DIR / "2026-06-01.json", "2605.28618", "Yu Zhang", None),
    ],
)
def test_hidden_authors_are_kept(path: Path, arxiv_id: str, name: str, index: int | None) -> None:
    raw = next(item for item in _items(path) if item["paper"]["id"] == arxiv_id)
    hidden = [author["name"] for author in raw["paper"]["authors"] if author["hidden"]]
    assert hidden == [name]
    pick = _pick(path, arxiv_id)
    assert name in pick.authors
    if index is not None:
        assert pick.authors[index] == name  # a hidden entry can be the paper's first author
    assert len(pick.authors) == len(raw["paper"]["authors"])


def test_blank_keywords_are_dropped() -> None:
    assert _pick(API_DIR / "2026-06-01.json", "2605.28618").keywords == ()


def test_repeated_keywords_are_kept_once() -> None:
    path = API_DIR / "2025-10-01.json"
    raw = next(item for item in _items(path) if item["paper"]["id"] == "2509.26625")
    assert raw["paper"]["ai_keywords"].count("pre-training") == 2
    keywords = _pick(path, "2509.26625").keywords
    assert keywords.count("pre-training") == 1
    assert len(keywords) == len(raw["paper"]["ai_keywords"]) - 1


def test_ai_summary_is_trimmed() -> None:
    pick = _pick(API_DIR / "2026-04-01.json", "2603.28032")
    assert pick.ai_summary is not None and pick.ai_summary.startswith("CARLA-Air integrates")


def test_the_day_argument_wins_over_the_timestamps() -> None:
    data = (API_DIR / "2026-08-21.json").read_bytes()
    page = parse_daily(data, date(2030, 1, 1))
    assert {pick.day for pick in page.picks} == {date(2030, 1, 1)}


def test_versioned_id_keeps_the_bare_id_with_a_note() -> None:
    data, _ = _one_item_response(API_DIR / "2026-08-21.json", "2608.19880", id="2608.19880v2")
    page = parse_daily(data, date(2026, 8, 21))
    assert [pick.arxiv_id for pick in page.picks] == ["2608.19880"]
    assert len(page.notes) == 1 and "2608.19880v2" in page.notes[0]


@pytest.mark.parametrize("bad_id", ["hf-internal-123", "2613.00001", "", "10.1145/3580305"])
def test_non_arxiv_id_is_skipped_with_a_note(bad_id: str) -> None:
    path = API_DIR / "2026-08-21.json"
    item = _items(path)[0]
    item["paper"]["id"] = bad_id
    data = json.dumps([item, *_items(path)[1:3]]).encode()
    page = parse_daily(data, date(2026, 8, 21))
    assert len(page.picks) == 2
    assert len(page.skipped) == 1
    assert "item 1" in page.skipped[0] and "not an arXiv id" in page.skipped[0]
    assert not page.is_empty


def test_item_without_paper_or_title_is_skipped() -> None:
    items = _items(API_DIR / "2025-04-01.json")[:3]
    del items[0]["paper"]
    items[1]["paper"]["title"] = "  "
    items[1]["title"] = ""
    page = parse_daily(json.dumps(items).encode(), date(2025, 4, 1))
    assert [pick.arxiv_id for pick in page.picks] == [items[2]["paper"]["id"]]
    assert page.skipped[0].startswith("item 1: no 'paper' object")
    assert page.skipped[1].startswith(f"item 2 ({items[1]['paper']['id']}): no title")


def test_top_level_title_is_the_fallback() -> None:
    data, item = _one_item_response(API_DIR / "2025-04-01.json", "2503.23307")
    raw = json.loads(data)
    del raw[0]["paper"]["title"]
    page = parse_daily(json.dumps(raw).encode(), date(2025, 4, 1))
    assert page.picks[0].title == item["title"]


def test_repeated_paper_is_skipped() -> None:
    items = _items(API_DIR / "2025-04-01.json")[:2]
    page = parse_daily(json.dumps([*items, items[0]]).encode(), date(2025, 4, 1))
    assert len(page.picks) == 2
    assert page.skipped == (
        f"item 3 ({items[0]['paper']['id']}): listed again on 2025-04-01; kept the first",
    )


def test_unusable_optional_fields_are_dropped_with_notes() -> None:
    data, _ = _one_item_response(
        API_DIR / "2026-08-21.json",
        "2608.19880",
        upvotes="163",
        publishedAt="yesterday",
        githubRepo="javascript:alert(1)",
        ai_keywords="LLM agents",
    )
    page = parse_daily(data, date(2026, 8, 21))
    (pick,) = page.picks
    assert (pick.upvotes, pick.published_at, pick.github_repo, pick.keywords) == (0, None, None, ())
    assert pick.project_page == "https://envharness.com/"
    assert len(page.notes) == 4
    assert all(note.startswith("item 1 (2608.19880): ") for note in page.notes)


def test_empty_array_is_an_empty_day() -> None:
    page = parse_daily(b"[]", date(2024, 3, 16))
    assert page.is_empty and page.picks == () and page.skipped == ()
    assert page.day == date(2024, 3, 16)


def test_all_items_skipped_is_not_empty() -> None:
    page = parse_daily(b'[{"title": "x"}]', date(2024, 3, 16))
    assert not page.is_empty and page.picks == ()


# ----------------------------------------------------------------------------------------------------------
# Responses that are not a daily_papers array


def test_html_page_raises() -> None:
    html = (
        b"<!DOCTYPE html>\n<html><head><title>503 Service Temporarily Unavailable</title></head>"
        b"<body><h1>503 Service Temporarily Unavailable</h1></body></html>\n"
    )
    with pytest.raises(HfFormatError, match=r"HTML.*503 Service.*retry later"):
        parse_daily(html, date(2024, 3, 12))


@pytest.mark.parametrize("fraction", [0.5, 0.999])
def test_truncated_json_raises(fraction: float) -> None:
    data = (RAW_DIR / "daily_papers_2024-03-12.json").read_bytes()
    cut = data[: int(len(data) * fraction)]
    with pytest.raises(HfFormatError, match=r"ends before the JSON does.*cut short; retry"):
        parse_daily(cut, date(2024, 3, 12))


def test_truncated_inside_a_string_raises_as_truncated() -> None:
    data = (RAW_DIR / "daily_papers_2024-03-12.json").read_bytes()
    cut = data[: data.index(b"Nicholas Carlini") + 4]
    with pytest.raises(HfFormatError, match="cut short"):
        parse_daily(cut, date(2024, 3, 12))


def test_error_object_raises_with_its_message() -> None:
    with pytest.raises(HfFormatError, match=r"error object: 'Invalid date'.*check the date"):
        parse_daily(b'{"error":"Invalid date"}', date(2024, 3, 12))


def test_other_json_object_raises() -> None:
    with pytest.raises(HfFormatError, match=r"JSON object with keys \['papers'\]"):
        parse_daily(b'{"papers": []}', date(2024, 3, 12))


@pytest.mark.parametrize("data", [b"", b" \r\n"], ids=["empty", "blank"])
def test_empty_body_raises(data: bytes) -> None:
    with pytest.raises(HfFormatError, match="instead of JSON"):
        parse_daily(data, date(2024, 3, 12))


def test_array_of_strings_raises() -> None:
    # What the corrupted upstream days hold: Python repr strings instead of JSON objects.
    data = json.dumps(["{'paper': {'id': '2412.08580'}}"]).encode()
    with pytest.raises(HfFormatError, match="item 1 is a JSON str, not an object"):
        parse_daily(data, date(2024, 12, 11))


@pytest.mark.parametrize("data", [b'"hello"', b"42", b"null", b"not json"])
def test_other_json_values_and_garbage_raise(data: bytes) -> None:
    with pytest.raises(HfFormatError):
        parse_daily(data, date(2024, 3, 12))


@pytest.mark.parametrize("depth", [65, 100_000])
def test_json_nested_too_deeply_raises(depth: int) -> None:
    """Past the shared nesting limit, and past the decoder's own stack: a clear error, no RecursionError."""
    data = b"[" * depth + b"]" * depth
    with pytest.raises(HfFormatError, match=r"returned JSON nested too deeply \(more than 64 arrays"):
        parse_daily(data, date(2024, 3, 12))


def test_utf8_bom_is_accepted() -> None:
    data = (RAW_DIR / "daily_papers_2024-03-29.json").read_bytes()
    assert len(parse_daily(b"\xef\xbb\xbf" + data, date(2024, 3, 29)).picks) == len(json.loads(data))
