"""What an attempt of an edge client raises when another try may work (the HTTP and the LLM client)."""

from __future__ import annotations

import asyncio
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
    stopping: asyncio.Event | None = None,
) -> T:
    """Run ``attempt(1)``, ``attempt(2)`` … until one returns or ``attempts`` are used up.

    An attempt that raises :class:`Retry` is tried again after its ``wait`` (logged); the last one's error
    is raised as it is. Any other exception ends the loop at once. Once ``stopping`` is set (the process is
    stopping) a back-off ends at once and the error that caused it is raised, as if no attempt were left:
    a stop must not sit out a doubling back-off or a server's Retry-After.
    """
    for number in range(1, attempts + 1):
        try:
            return await attempt(number)
        except Retry as retry:
            if number == attempts:
                raise retry.error from None
            if stopping is not None and stopping.is_set():
                log.info("%s; not retried: stopping", retry.error)
                raise retry.error from None
            log.info(
                "%s; retrying in %.1f s (attempt %d of %d)", retry.error, retry.wait, number + 1, attempts
            )
            if not await _wait_unless(sleep(retry.wait), stopping):
                log.info("stopping: the retry is given up")
                raise retry.error from None
    raise ValueError(f"attempts must be at least 1, not {attempts}")


async def _wait_unless(waiting: Awaitable[None], stopping: asyncio.Event | None) -> bool:
    """Await ``waiting`` unless ``stopping`` is set first (then cancel it); True when it finished."""
    if stopping is None:
        await waiting
        return True
    wait = asyncio.ensure_future(waiting)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({wait, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Also when this task is cancelled: neither helper may outlive it.
        for task in (wait, stop):
            task.cancel()
    if wait.done() and not wait.cancelled():
        wait.result()  # a fake sleep's error, if any
        return True
    return False
