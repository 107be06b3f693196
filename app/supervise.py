"""Supervision of runway's background loops: an unexpected error (or an unexpected return) is
logged, counted (``runway_loop_restarts_total{loop}``) and the loop started again after a capped
exponential backoff. Used by the kube loops (the reflectors, leader election) and the
tasks' ``Ticker`` alike, so no loop ends silently and freezes what it feeds. Also the two
endings every loop's owner writes: a bounded wait for its first answer (``wait_within``) and
stopping its task (``stop_task``); and the one way a long pass shares the event loop with the
verbs (``Turns``, ``in_slices``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from app import metrics
from app.logs import get_logger

log = get_logger("supervise")

T = TypeVar("T")

SLICE_S = 0.002
"""Longest a background pass holds the event loop before it lets the verbs run (``in_slices``):
kube-scheduler waits for a verb's answer, and issue #29 bars any pause over 50 ms."""

MAX_EXPONENT = 64
"""Backoff exponents stop growing here (``2.0 ** 1024`` overflows a float)."""


def capped_delay(attempt: int, base: float, cap: float, factor: float = 2.0) -> float:
    """``base * factor ** attempt`` bounded by ``cap``, for any ``attempt`` (never overflows)."""
    return min(cap, base * factor ** min(max(attempt, 0), MAX_EXPONENT))


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    base: float = 0.5,
    cap: float = 30.0,
    restart_on_return: bool = True,
    healthy_after: float = 60.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run ``run()`` until cancelled, restarting it after an error (or after it returned, when
    ``restart_on_return``). The backoff resets once a run lasted ``healthy_after`` seconds."""
    attempt = 0
    while True:
        started = time.monotonic()
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("background loop failed; restarting it", loop=name, error=repr(exc))
        else:
            if not restart_on_return:
                return
            log.warning("background loop ended; restarting it", loop=name)
        metrics.LOOP_RESTARTS.labels(name).inc()
        if time.monotonic() - started >= healthy_after:
            attempt = 0
        await sleep(capped_delay(attempt, base, cap))
        attempt += 1


async def wait_within(awaitable: Awaitable[Any], within: float) -> bool:
    """Await ``awaitable`` for at most ``within`` seconds; True when it completed in time."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            await awaitable
            return True
    return False


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Turns:
    """Lets the event loop run whenever a pass has held it for ``budget`` seconds: a pass calls
    ``take`` between two small pieces of work (``in_slices`` does for a synchronous pass)."""

    def __init__(self, budget: float = SLICE_S) -> None:
        self.budget = budget
        self._held = 0.0
        self._since = time.perf_counter()

    async def take(self) -> None:
        """Give the loop one turn if this pass has held it for ``budget`` since the last."""
        now = time.perf_counter()
        if now - self._since >= self.budget:
            self._held += now - self._since
            await asyncio.sleep(0)  # one turn of the loop: the verbs waiting are answered
            self._since = time.perf_counter()

    @property
    def held(self) -> float:
        """Seconds the pass has held the loop so far (its turns given away not counted): what
        the pass cost, however busy the loop was meanwhile."""
        return self._held + time.perf_counter() - self._since


async def in_slices(
    steps: Generator[None, None, T], budget: float = SLICE_S, *, turns: Turns | None = None
) -> T:
    """Run a synchronous pass written as a generator (it yields between two small pieces of
    work: a pod, a workload) and return what it returns, letting the event loop run whenever
    the pass has held it for ``budget`` seconds (``turns``: pass one to learn what the pass
    held). The pass must expect the world to change at each of its yields (iterate over a
    snapshot, not a live dict)."""
    turns = turns if turns is not None else Turns(budget)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await turns.take()


def run_through(steps: Generator[None, None, T]) -> T:
    """Run a pass written for ``in_slices`` to its end at once and return what it returns (a
    caller that has no loop to share: a synchronous API, a test)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
