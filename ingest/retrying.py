"""What an attempt of an edge client raises when another try may work (the HTTP and the LLM client)."""

from __future__ import annotations

from typing import Generic, TypeVar

E = TypeVar("E", bound=Exception)


class Retry(Exception, Generic[E]):
    """Internal: this attempt failed with ``error`` in a way worth another try after ``wait`` seconds.

    The retry loop raises ``error`` itself once the attempts are used up.
    """

    def __init__(self, error: E, wait: float) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait
