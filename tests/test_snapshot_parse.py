"""iter_snapshot / open_snapshot over the recorded 200-line head of the Kaggle arxiv-metadata-oai-snapshot
(tests/corpus/arxiv-snapshot) and over copies of it with one line broken.

Counts come from ``json.loads`` and a regex over the raw lines, not from the parser. Throughput is measured
in bench/, not here.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from core.values import AnnounceType, PaperIn
from ingest.snapshot_parse import SnapshotRecord, SnapshotSkip, iter_snapshot, open_snapshot
from tests.conftest import CORPUS

SAMPLE = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"


@pytest.fixture(scope="module")
def sample_bytes() -> bytes:
    return SAMPLE.read_bytes()


@pytest.fixture(scope="module")
def lines(sample_bytes: bytes) -> list[bytes]:
    return sample_bytes.splitlines(keepends=True)


@pytest.fixture(scope="module")
def records(sample_bytes: bytes) -> list[SnapshotRecord]:
    out = list(iter_snapshot(io.BytesIO(sample_bytes)))
    assert all(isinstance(item, SnapshotRecord) for item in out)
    return [item for item in out if isinstance(item, SnapshotRecord)]


@pytest.fixture(scope="module")
def by_id(records: list[SnapshotRecord]) -> dict[str, SnapshotRecord]:
    return {record.arxiv_id: record for record in records}


def _parse(data: bytes, **kwargs: Any) -> tuple[list[SnapshotRecord], list[SnapshotSkip]]:
    items = list(iter_snapshot(io.BytesIO(data), **kwargs))
    return (
        [item for item in items if isinstance(item, SnapshotRecord)],
        [item for item in items if isinstance(item, SnapshotSkip)],
    )


def _with_line(lines: list[bytes], number: int, replacement: bytes) -> bytes:
    """The sample with its 1-based line ``number`` replaced."""
    return b"".join(replacement if index == number else line for index, line in enumerate(lines, start=1))


def _edited(line: bytes, **changes: Any) -> bytes:
    """A real line with some keys changed (a value of ``...`` deletes the key), as one JSON line."""
    obj = json.loads(line)
    for key, value in changes.items():
        key = key.replace("_", "-") if key in ("journal_ref", "report_no") else key
        if value is ...:
            del obj[key]
        else:
            obj[key] = value
    return json.dumps(obj).encode() + b"\n"


# ----------------------------------------------------------------------------------------------------------
# The whole sample


def test_every_line_is_a_record_with_every_version(lines: list[bytes], records: list[SnapshotRecord]) -> None:
    assert len(lines) == 200
    assert len(records) == 200
    assert [record.line for record in records] == list(range(1, 201))
    expected_ids = [json.loads(line)["id"] for line in lines]
    assert [record.arxiv_id for record in records] == expected_ids
    # Two independent counts of versions: the decoded lists, and a regex over the raw bytes.
    by_json = sum(len(json.loads(line)["versions"]) for line in lines)
    by_regex = sum(len(re.findall(rb'\{"version":"v\d+","created":"', line)) for line in lines)
    assert by_json == by_regex == 326
    assert sum(len(record.versions) for record in records) == by_json
    for record, line in zip(records, lines, strict=True):
        raw = json.loads(line)
        assert [paper.versioned_id for paper in record.versions] == [
            f"{raw['id']}{version['version']}" for version in raw["versions"]
        ]


def test_invariants(records: list[SnapshotRecord]) -> None:
    for record in records:
        assert record.update_date is not None
        for paper in record.versions:
            assert paper.source == "snapshot"
            assert paper.arxiv_id == record.arxiv_id
            assert paper.announce_type is (AnnounceType.NEW if paper.version == 1 else AnnounceType.REPLACE)
            assert paper.announced_at is not None and paper.announced_at.tzinfo is UTC
            assert paper.title and "\n" not in paper.title and paper.title == paper.title.strip()
            assert "\n" not in paper.abstract and not paper.abstract.startswith(" ")
            assert paper.authors and all(name == name.strip() and name for name in paper.authors)
            assert paper.categories
        dates = [paper.announced_at for paper in record.versions if paper.announced_at is not None]
        assert dates == sorted(dates)


def test_first_record(by_id: dict[str, SnapshotRecord]) -> None:
    record = by_id["0704.0001"]
    assert record.line == 1
    assert record.update_date == date(2008, 11, 26)
    assert record.submitter == "Pavel Nadolsky"
    assert record.report_no == "ANL-HEP-PR-07-12"
    v1, v2 = record.versions
    assert v1 == PaperIn(
        arxiv_id="0704.0001",
        version=1,
        title="Calculation of prompt diphoton production cross sections at Tevatron and LHC energies",
        abstract=v1.abstract,
        authors=("C. Balázs", "E. L. Berger", "P. M. Nadolsky", "C. -P. Yuan"),
        categories=("hep-ph",),
        announce_type=AnnounceType.NEW,
        announced_at=datetime(2007, 4, 2, 19, 18, 42, tzinfo=UTC),
        comment="37 pages, 15 figures; published version",
        journal_ref="Phys.Rev.D76:013009,2007",
        doi="10.1103/PhysRevD.76.013009",
        license=None,
        source="snapshot",
    )
    assert v1.abstract.startswith(
        "A fully differential calculation in perturbative quantum chromodynamics is "
    )
    assert v1.abstract.endswith("can be obtained with judicious selection of events.")
    assert v2.version == 2 and v2.announce_type is AnnounceType.REPLACE
    assert v2.announced_at == datetime(2007, 7, 24, 20, 10, 27, tzinfo=UTC)
    assert (v2.title, v2.abstract, v2.authors) == (v1.title, v1.abstract, v1.authors)


def test_old_four_digit_id_and_categories_and_license(by_id: dict[str, SnapshotRecord]) -> None:
    # 0704.xxxx is the first scheme after the archive/YYMMNNN ids: four digits after the dot, not five.
    paper = by_id["0704.0002"].versions[0]
    assert paper.versioned_id == "0704.0002v1"
    assert paper.categories == ("math.CO", "cs.CG")
    assert paper.license == "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"
    assert paper.authors == ("Ileana Streinu", "Louis Theran")
    assert paper.journal_ref is None and paper.doi is None


def test_multi_version_paper_with_dates(by_id: dict[str, SnapshotRecord]) -> None:
    record = by_id["0704.0064"]
    assert [(paper.version, paper.announced_at) for paper in record.versions] == [
        (1, datetime(2007, 4, 1, 13, 32, 15, tzinfo=UTC)),
        (2, datetime(2007, 5, 3, 16, 35, 49, tzinfo=UTC)),
        (3, datetime(2007, 12, 6, 13, 31, 19, tzinfo=UTC)),
        (4, datetime(2008, 6, 5, 11, 21, 43, tzinfo=UTC)),
        (5, datetime(2008, 10, 24, 12, 23, 58, tzinfo=UTC)),
    ]
    assert [paper.announce_type for paper in record.versions] == [AnnounceType.NEW] + [
        AnnounceType.REPLACE
    ] * 4


@pytest.mark.parametrize(
    ("arxiv_id", "authors"),
    [
        ("0704.0028", ("Péter E. Frenkel",)),
        ("0704.0032", ("A. Esteban-Pretel", "R. Tomàs", "J. W. F. Valle")),
        ("0704.0049", ("Mikkel Øbro",)),
        ("0704.0062", ("Rastislav Šrámek", "Broňa Brejová", "Tomáš Vinař")),
        # [last, first, suffix]
        ("0704.0009", ("Paul Harvey", "Bruno Merin", "Tracy L. Huard", "Luisa M. Rebull")),
        # a fourth item (the affiliation) is dropped
        ("0704.0163", ("Peter Brommer", "Franz Gähler")),
        # a collaboration has only a last name; "et al" in the string is not in authors_parsed
        ("0704.0020", ("The BABAR Collaboration", "B. Aubert")),
        # the string's "Dall\'Aglio" would decode as "DallÁglio"; authors_parsed has it right
        ("0704.0187", ("G. Worseck", "C. Fechner", "L. Wisotzki", "A. Dall'Aglio")),
    ],
)
def test_author_names(by_id: dict[str, SnapshotRecord], arxiv_id: str, authors: tuple[str, ...]) -> None:
    got = by_id[arxiv_id].versions[0].authors
    assert got[: len(authors)] == authors


def test_suffix_follows_the_name(by_id: dict[str, SnapshotRecord]) -> None:
    assert "Neal J. Evans II" in by_id["0704.0009"].versions[0].authors


def test_titles_are_dewrapped_tex_decoded_and_math_kept(by_id: dict[str, SnapshotRecord]) -> None:
    assert by_id["0704.0019"].versions[0].title == (
        "Approximation for extinction probability of the contact process based on the Gröbner basis"
    )
    assert by_id["0704.0073"].versions[0].title == "A transcendental approach to Kollár's injectivity theorem"
    assert by_id["0704.0005"].versions[0].title == "From dyadic $\\Lambda_{\\alpha}$ to $\\Lambda_{\\alpha}$"
    assert by_id["0704.0011"].versions[0].title == (
        "Computing genus 2 Hilbert-Siegel modular forms over $\\Q(\\sqrt{5})$ via the Jacquet-Langlands "
        "correspondence"
    )


# ----------------------------------------------------------------------------------------------------------
# Files


@pytest.mark.parametrize("name", ["sample.jsonl.gz", "sample.json.gz", "renamed.jsonl"])
def test_gzip_is_read_transparently(
    tmp_path: Path, sample_bytes: bytes, records: list[SnapshotRecord], name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(sample_bytes))
    with open_snapshot(path) as stream:
        assert list(iter_snapshot(stream)) == records


def test_plain_file_is_read(records: list[SnapshotRecord]) -> None:
    with open_snapshot(SAMPLE) as stream:
        assert list(iter_snapshot(stream)) == records


def test_open_snapshot_of_a_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_snapshot(tmp_path / "absent.jsonl.gz")


def test_iteration_is_lazy(sample_bytes: bytes) -> None:
    stream = io.BytesIO(sample_bytes)
    first = next(iter_snapshot(stream))
    assert isinstance(first, SnapshotRecord) and first.arxiv_id == "0704.0001"
    # Only the first line has been consumed, not the file.
    assert stream.tell() == sample_bytes.index(b"\n") + 1


# ----------------------------------------------------------------------------------------------------------
# Broken lines


def test_a_line_nested_too_deeply_is_skipped_and_the_rest_kept(lines: list[bytes]) -> None:
    """Past the decoder's own stack (a RecursionError ended the whole read) and past the shared limit."""
    deep = [b'{"id": "0704.0100", "x": ' + b"[" * depth + b"]" * depth + b"}\n" for depth in (100_000, 65)]
    records, skips = _parse(b"".join([*lines[:99], *deep, *lines[101:]]))
    assert [skip.line for skip in skips] == [100, 101] and len(records) == 198
    assert all("nested too deeply (more than 64 arrays" in skip.reason for skip in skips)


def test_corrupted_line_in_the_middle_is_skipped_and_the_rest_kept(lines: list[bytes]) -> None:
    broken = lines[99][: len(lines[99]) // 2] + b"\n"  # a real line cut in half
    records, skips = _parse(_with_line(lines, 100, broken))
    assert len(records) == 199
    assert [skip.line for skip in skips] == [100]
    assert "invalid JSON" in skips[0].reason
    assert str(skips[0]).startswith("line 100: invalid JSON") and str(skips[0]).endswith("; skipped")
    assert [record.line for record in records] == [n for n in range(1, 201) if n != 100]
    assert "0704.0100" not in {record.arxiv_id for record in records}
    assert sum(len(record.versions) for record in records) == 326 - len(json.loads(lines[99])["versions"])


def test_line_without_id_is_skipped(lines: list[bytes]) -> None:
    records, skips = _parse(_with_line(lines, 57, _edited(lines[56], id=...)))
    assert len(records) == 199
    assert [(skip.line, skip.reason.split(" (")[0]) for skip in skips] == [(57, "no 'id'")]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"id": "0704.0057v2"}, "is not a bare arXiv id"),
        # {"id": 5} was reported as "no 'id' (keys: ['id'])".
        ({"id": 5}, "'id' is a JSON number, not a string: 5"),
        ({"id": None}, "'id' is a JSON null, not a string"),
        ({"id": ["0704.0057"]}, "'id' is a JSON array, not a string"),
        ({"id": "  "}, "'id' is empty"),
        ({"versions": []}, "'versions' is []"),
        ({"versions": ...}, "'versions' is None"),
        ({"versions": [{"version": "1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}]}, "'1' is not vN"),
        ({"versions": [{"version": "v1", "created": "yesterday"}]}, "not an RFC-822 date"),
        (
            {"versions": [{"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}] * 2},
            "v1 is listed twice",
        ),
        ({"title": None}, "no title"),
    ],
)
def test_unusable_fields_skip_the_line_with_a_reason(
    lines: list[bytes], changes: dict[str, Any], reason: str
) -> None:
    records, skips = _parse(_with_line(lines, 57, _edited(lines[56], **changes)))
    assert len(records) == 199
    assert len(skips) == 1 and skips[0].line == 57
    assert reason in skips[0].reason


def test_non_object_line_is_skipped(lines: list[bytes]) -> None:
    records, skips = _parse(_with_line(lines, 3, b'["0704.0003"]\n'))
    assert len(records) == 199 and skips[0].line == 3 and "a JSON array, not an object" in skips[0].reason


def test_old_style_id_is_accepted(lines: list[bytes]) -> None:
    # The sample starts at 0704.0001, so it has no archive/YYMMNNN id; this is a real line with one put in.
    records, skips = _parse(_edited(lines[0], id="hep-ph/9901001") + _edited(lines[1], id="math.GT/0309136"))
    assert skips == []
    assert [paper.versioned_id for paper in records[0].versions] == ["hep-ph/9901001v1", "hep-ph/9901001v2"]
    assert records[1].arxiv_id == "math.GT/0309136"


def test_authors_string_is_the_fallback(lines: list[bytes]) -> None:
    records, _ = _parse(
        _edited(lines[61], authors_parsed=...)
        + _edited(lines[19], authors_parsed=[])
        + _edited(lines[0], authors_parsed=[["Balázs", 7, ""]])
    )
    assert records[0].versions[0].authors == ("Rastislav Šrámek", "Broňa Brejová", "Tomáš Vinař")
    assert records[1].versions[0].authors == ("The BABAR Collaboration", "B. Aubert")  # no "et al"
    # A broken authors_parsed entry makes the whole list untrusted; the string decodes Bal\'azs.
    assert records[2].versions[0].authors == ("C. Balázs", "E. L. Berger", "P. M. Nadolsky", "C.-P. Yuan")


def test_versions_out_of_order_are_sorted(lines: list[bytes]) -> None:
    raw = json.loads(lines[63])
    records, _ = _parse(_edited(lines[63], versions=list(reversed(raw["versions"]))))
    assert [paper.version for paper in records[0].versions] == [1, 2, 3, 4, 5]
    assert records[0].versions[0].announced_at == datetime(2007, 4, 1, 13, 32, 15, tzinfo=UTC)


def test_other_rfc822_layouts_are_read(lines: list[bytes]) -> None:
    versions = [{"version": "v1", "created": "Sun, 01 Apr 2007 15:32:15 +0200"}]
    records, skips = _parse(_edited(lines[0], versions=versions))
    assert skips == []
    assert records[0].versions[0].announced_at == datetime(2007, 4, 1, 13, 32, 15, tzinfo=UTC)


def test_blank_lines_are_ignored_but_counted(lines: list[bytes]) -> None:
    records, skips = _parse(lines[0] + b"\n   \n" + lines[1])
    assert skips == [] and [record.line for record in records] == [1, 4]


class _RecordingStream(io.BytesIO):
    """A stream that remembers the longest chunk a single readline call returned."""

    longest = 0

    def readline(self, size: int | None = -1, /) -> bytes:
        chunk = super().readline(size)
        self.longest = max(self.longest, len(chunk))
        return chunk


def test_over_long_line_is_skipped_without_being_held(lines: list[bytes]) -> None:
    limit = max(len(line) for line in lines[:3]) + 1
    long_line = b"[" + b"1," * 5000 + b"1]\n"
    stream = _RecordingStream(lines[0] + long_line + lines[1] + lines[2])
    items = list(iter_snapshot(stream, max_line_bytes=limit))
    assert [(type(item).__name__, item.line) for item in items] == [
        ("SnapshotRecord", 1),
        ("SnapshotSkip", 2),
        ("SnapshotRecord", 3),
        ("SnapshotRecord", 4),
    ]
    skip = items[1]
    assert isinstance(skip, SnapshotSkip)
    assert f"line is {len(long_line)} bytes, longer than the {limit}-byte limit" in skip.reason
    assert stream.longest <= limit  # the long line was read in pieces and dropped, never whole


def test_cut_last_line_is_reported(lines: list[bytes]) -> None:
    records, skips = _parse(b"".join(lines[:5]) + lines[5][:300])
    assert len(records) == 5
    assert skips[0].line == 6 and "file may be cut short" in skips[0].reason


def test_invalid_utf8_is_skipped(lines: list[bytes]) -> None:
    records, skips = _parse(lines[0] + b'{"id": "0704.0002", "title": "\xff\xfe"}\n' + lines[2])
    assert len(records) == 2 and skips[0].line == 2 and "invalid JSON" in skips[0].reason


def test_utf8_bom_at_the_start_is_accepted(sample_bytes: bytes) -> None:
    records, skips = _parse(b"\xef\xbb\xbf" + sample_bytes)
    assert skips == [] and len(records) == 200
