"""The status page's SVG chart: well-formed, accessible, proportional, and safe with any title."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date, timedelta

import pytest

from core.values import DayCounts
from papertrail.web.chart import ChartWords, daily_chart, describe, nice_ceiling

SVG = "{http://www.w3.org/2000/svg}"
START = date(2026, 11, 1)


def days(*counts: tuple[int, int, int]) -> list[DayCounts]:
    return [DayCounts(START + timedelta(days=i), *c) for i, c in enumerate(counts)]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_chart_is_accessible_and_escapes_its_title() -> None:
    title = '<script>alert("x")</script> & "quotes"'
    root = parse(daily_chart(days((3, 1, 2), (0, 0, 0)), title=title, id_prefix='a"b'))
    assert root.get("role") == "img"
    labelled = (root.get("aria-labelledby") or "").split()
    found = {el.get("id"): el for el in root if el.tag in (f"{SVG}title", f"{SVG}desc")}
    assert set(labelled) == set(found) == {'a"b-title', 'a"b-desc'}
    assert found['a"b-title'].text == title  # escaped in the markup, the same text once parsed
    assert "<script>" not in daily_chart(days((1, 0, 0)), title=title)
    assert found['a"b-desc'].text == describe(days((3, 1, 2), (0, 0, 0)))


def test_bars_are_stacked_and_proportional() -> None:
    root = parse(daily_chart(days((100, 20, 60), (50, 0, 10), (0, 0, 0), (0, 40, 5))))
    new = root.findall(f".//{SVG}rect[@class='bar-new']")
    revisions = root.findall(f".//{SVG}rect[@class='bar-revisions']")
    empty = root.findall(f".//{SVG}rect[@class='bar-empty']")
    assert (len(new), len(revisions), len(empty)) == (2, 2, 1)
    heights = [float(r.get("height", 0)) for r in new]
    assert heights[0] == pytest.approx(2 * heights[1], rel=0.01)
    # The first day's revisions sit on its new papers.
    assert float(revisions[0].get("y", 0)) + float(revisions[0].get("height", 0)) == pytest.approx(
        float(new[0].get("y", 0)), abs=0.11
    )
    line = root.find(f".//{SVG}polyline[@class='line-ai']")
    assert line is not None and len((line.get("points") or "").split()) == 4
    tips = [g.findtext(f"{SVG}title") for g in root.iter(f"{SVG}g")]
    assert tips[0] == "2026-11-01: 100 new papers, 20 revisions, 60 AI-related"
    assert tips[3] == "2026-11-04: 0 new papers, 40 revisions, 5 AI-related"


def test_a_chart_of_nothing_says_so() -> None:
    for empty in ([], days((0, 0, 0), (0, 0, 0))):
        svg = daily_chart(empty)
        parse(svg)
        assert "nothing arrived in this period" in svg
    assert describe(days((0, 0, 0))).endswith("Nothing arrived in this period.")
    assert "Busiest day 2026-11-02 with 1,200." in describe(days((5, 0, 1), (1000, 200, 9)))


@pytest.mark.parametrize(
    ("value", "expected"), [(0, (1, 1)), (1, (1, 1)), (7, (8, 2)), (10, (10, 5)), (1495, (1500, 500))]
)
def test_axis_maximum_is_round(value: int, expected: tuple[int, int]) -> None:
    assert nice_ceiling(value) == expected


def test_the_caller_words_the_chart() -> None:
    words = ChartWords(
        new="新论文",
        revisions="修订",
        ai="<AI>",
        nothing="无",
        describe=lambda ds: f"{len(ds)} 天 <desc>",
        tip=lambda d: f"{d.day.isoformat()} & {d.total}",
    )
    svg = daily_chart(days((3, 1, 2), (0, 0, 0)), words=words)
    root = parse(svg)
    texts = [el.text for el in root.iter(f"{SVG}text")]
    assert {"新论文", "修订", "<AI>"} <= set(texts)
    assert root.find(f"{SVG}desc").text == "2 天 <desc>"  # type: ignore[union-attr]
    assert [el.text for el in root.iter(f"{SVG}title")][1:] == ["2026-11-01 & 4", "2026-11-02 & 0"]
    assert "无" in [el.text for el in parse(daily_chart(days((0, 0, 0)), words=words)).iter(f"{SVG}text")]
