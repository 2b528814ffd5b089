"""The shared rules for untrusted JSON (core.json_input): the depth limit exactly, past the decoder's own
stack, repeated keys in linear time, and an object's key count."""

from __future__ import annotations

import json
import time

import pytest

from core.json_input import MAX_DEPTH, JSONReader, RepeatedKey, TooDeep, TooManyKeys


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def test_depth_up_to_the_limit_is_read_and_one_more_is_refused() -> None:
    reader = JSONReader()
    assert reader.loads(nested(MAX_DEPTH)) is not None
    assert reader.loads(
        '{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}'
    )  # text
    for text in (nested(MAX_DEPTH + 1), nested(100_000), "[" * 100_000, '{"a": ' * 70 + "1" + "}" * 70):
        with pytest.raises(TooDeep, match=r"^nested too deeply \(more than 64 arrays or objects"):
            reader.loads(text)
    shallow = JSONReader(max_depth=2)
    assert shallow.loads(b'{"a": [1]}') == {"a": [1]}
    with pytest.raises(TooDeep):
        shallow.loads('{"a": [[1]]}')
    with pytest.raises(ValueError):
        JSONReader(max_depth=MAX_DEPTH + 1)


def test_not_json_is_the_decoders_own_error() -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        JSONReader().loads('{"a": 1,}')
    assert caught.value.colno == 9


def _cpu(reader: JSONReader, text: str) -> float:
    times = []
    for _ in range(3):
        start = time.process_time()
        with pytest.raises(RepeatedKey):
            reader.loads(text)
        times.append(time.process_time() - start)
    return min(times)


def _many(n: int) -> str:
    return "{" + ",".join(f'"k{i}": 0' for i in range(n)) + f', "k{n - 1}": 1}}'


def test_a_repeated_key_among_many_is_found() -> None:
    with pytest.raises(RepeatedKey, match=r"^key 'k39999' given twice in one object$"):
        JSONReader().loads(_many(40_000))
    assert JSONReader(unique_keys=False).loads('{"a": 1, "a": 2}') == {"a": 2}


# Timed: in `make test-slow` only, where a loaded machine cannot fail the everyday suite.
@pytest.mark.slow
def test_a_repeated_key_is_found_in_linear_time() -> None:
    """10,000 and 40,000 keys with the last one repeated: 4x the keys, well under 10x the time."""
    reader = JSONReader()
    small, large = _cpu(reader, _many(10_000)), _cpu(reader, _many(40_000))
    assert large < 10 * max(small, 0.001), (small, large)


def test_an_object_with_too_many_keys_is_refused() -> None:
    reader = JSONReader(max_keys=3)
    assert reader.loads('[{"a": 1, "b": 2, "c": 3}]') == [{"a": 1, "b": 2, "c": 3}]
    with pytest.raises(
        TooManyKeys, match=r"^an object with 4 keys; this format has at most 3 in one object$"
    ):
        reader.loads('[{"a": 1, "b": 2, "c": 3, "d": 4}]')
