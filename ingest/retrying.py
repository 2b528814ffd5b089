"""What an attempt of an edge client raises when another try may work (the HTTP and the LLM client)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

E = TypeVar("E", bound=Exception)
T = TypeVar("T")


class Retry(Exception, Generic[E]):
    """Internal: this attempt failed with ``error`` in a way worth another try after ``wait`` seconds.

    The retry loop raises ``error`` itself once the attempts are used up.
    """

    def __init__(self, error: E, wait: float) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait


async def with_retries(
    attempt: Callable[[int], Awaitable[T]],
    *,
    attempts: int,
    sleep: Callable[[float], Awaitable[None]],
    log: logging.Logger,
) -> T:
    """Run ``attempt(1)``, ``attempt(2)`` … until one returns or ``attempts`` are used up.

    An attempt that raises :class:`Retry` is tried again after its ``wait`` (logged); the last one's error
    is raised as it is. Any other exception ends the loop at once.
    """
    for number in range(1, attempts + 1):
        try:
            return await attempt(number)
        except Retry as retry:
            if number == attempts:
                raise retry.error from None
            log.info(
                "%s; retrying in %.1f s (attempt %d of %d)", retry.error, retry.wait, number + 1, attempts
            )
            await sleep(retry.wait)
    raise ValueError(f"attempts must be at least 1, not {attempts}")
