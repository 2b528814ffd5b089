"""Reading JSON that someone else wrote: the one owner of the rules every untrusted JSON input follows.

A file a reader uploads or an operator imports, a webhook's body, an answer from another service: any of
them can nest arrays and objects thousands deep, which makes Python's decoder (and every later
``json.dumps`` or walk of the value) fail with a ``RecursionError`` instead of a clear refusal, or repeat a
key, which JSON allows and which silently keeps the last value. :class:`JSONReader` decodes such text and
refuses, with a :class:`JSONLimitError` saying what was wrong:

* nesting deeper than ``max_depth`` arrays and objects (:class:`TooDeep`, "nested too deeply"), at most
  :data:`MAX_DEPTH`, far deeper than any real input (a Telegram update, a CSL-JSON date nest below 10);
* with ``unique_keys``, a key given twice in one object (:class:`RepeatedKey`), checked in linear time;
* with ``max_keys``, an object with more keys than its format can hold (:class:`TooManyKeys`), refused as
  soon as that object is read, before any check of its keys.

Text that is not JSON raises ``json.JSONDecodeError`` as ``json.loads`` does, so a caller words its line
and column as before. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

# Arrays and objects inside each other, at most. Real inputs nest below 10; Python's decoder gives up
# (RecursionError) near 1,000 minus the caller's own stack, so the limit is named here, well below that,
# and a value that passes can be dumped and walked again safely.
MAX_DEPTH = 64


class JSONLimitError(ValueError):
    """JSON that decodes but breaks a rule of untrusted input; the message says which, for a person."""


class TooDeep(JSONLimitError):
    """Arrays and objects nested deeper than the reader's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested too deeply (more than {limit} arrays or objects inside each other)")
        self.limit = limit


class RepeatedKey(JSONLimitError):
    """A key given twice in one object."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} given twice in one object")
        self.key = key


class TooManyKeys(JSONLimitError):
    """An object with more keys than the format allows."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"an object with {count:,} keys; this format has at most {limit:,} in one object")
        self.count = count
        self.limit = limit


class JSONReader:
    """Decodes untrusted JSON text by the rules above; one instance per input format, reused for every
    document or line (it holds a decoder)."""

    def __init__(
        self, *, max_depth: int = MAX_DEPTH, unique_keys: bool = True, max_keys: int | None = None
    ) -> None:
        if not 1 <= max_depth <= MAX_DEPTH:
            raise ValueError(f"max_depth must be from 1 to {MAX_DEPTH}, not {max_depth}")
        self.max_depth = max_depth
        self.unique_keys = unique_keys
        self.max_keys = max_keys
        hook = self._pairs if unique_keys or max_keys is not None else None
        self._decoder = json.JSONDecoder(object_pairs_hook=hook)

    def loads(self, text: str | bytes) -> Any:
        """The value ``text`` holds; ``json.JSONDecodeError`` if it is not JSON, :class:`JSONLimitError`
        if it breaks a rule, ``UnicodeDecodeError`` for bytes that do not decode. Bytes are decoded as
        ``json.loads`` decodes them (UTF-8, 16 or 32, a UTF-8 BOM skipped), so this replaces it as is."""
        if isinstance(text, bytes):
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        try:
            value = self._decoder.decode(text)
        except RecursionError:
            # The decoder's own stack ran out, far past the limit: the same refusal, not a traceback.
            raise TooDeep(self.max_depth) from None
        # Depth is at most the number of openers: most inputs (a follows line) skip the walk.
        if text.count("[") + text.count("{") > self.max_depth:
            _check_depth(value, self.max_depth)
        return value

    def _pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if self.max_keys is not None and len(pairs) > self.max_keys:
            raise TooManyKeys(len(pairs), self.max_keys)
        record = dict(pairs)
        if self.unique_keys and len(record) < len(pairs):
            # Linear: the first key met a second time. (A count per key would be quadratic in the keys.)
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise RepeatedKey(key)
                seen.add(key)
        return record


def _check_depth(value: Any, limit: int) -> None:
    """Raise :class:`TooDeep` if ``value`` nests more than ``limit`` arrays and objects.

    Iterative, one level at a time, and linear in the values. ``type(v) is`` rather than isinstance: the
    decoder makes plain dicts and lists only, and the exact test is what keeps this at about half the cost
    of the decoding itself (a 24 MB subscription file: 0.12 s).
    """
    level: list[Any] = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            raise TooDeep(limit)
        deeper: list[Any] = []
        for container in level:
            items = container.values() if type(container) is dict else container
            deeper += [item for item in items if type(item) is dict or type(item) is list]
        level = deeper
