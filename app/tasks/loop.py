"""The shape every background task of runway shares: a pass now, then again when poked (a
cache or record change) or when the pass's own wait runs out, debounced, until stopped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from app.logs import get_logger
from app.supervise import supervise

log = get_logger("tasks")


class Ticker:
    """A tracked asyncio loop around ``run_once``; subclasses implement the pass."""

    def __init__(self, name: str, *, tick: float, debounce: float) -> None:
        self.name = name
        self.tick = tick
        """Longest time between two passes."""
        self.debounce = debounce
        """Rest after a pass, so a burst of watch events makes one pass, not hundreds."""
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribers: list[Callable[[], None]] = []

    def follow(self, subscribe: Callable[[], Callable[[], None]]) -> None:
        """Subscribe now (``subscribe`` returns the function that unsubscribes) and unsubscribe
        at ``stop``: the cache, record and gate-book subscriptions every task holds."""
        self._unsubscribers.append(subscribe())

    async def run_once(self) -> float:
        """One pass; returns the seconds until the next one is needed."""
        raise NotImplementedError

    def poke(self) -> None:
        """Ask for a pass soon (after the debounce)."""
        self._poke.set()

    def rest(self) -> float:
        """Seconds to rest after a pass (the debounce; subclasses may stretch it)."""
        return self.debounce

    def start(self) -> None:
        """Start the loop (the first pass runs at once)."""
        self._task = asyncio.get_running_loop().create_task(
            supervise(self.name, self._loop), name=self.name
        )

    @property
    def started(self) -> bool:
        """Whether ``start`` was called (and ``stop`` not yet)."""
        return self._task is not None

    @property
    def alive(self) -> bool:
        """Whether the loop's task runs (started and not ended)."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Drop the subscriptions, end the loop and wait until it has."""
        while self._unsubscribers:
            self._unsubscribers.pop()()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                wait = await self.run_once()
            except Exception:  # a bug in one pass must not end the task for good
                log.exception("background pass failed", task=self.name)
                wait = self.tick
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(min(wait, self.tick), 0.0)):
                    await self._poke.wait()
            self._poke.clear()
            await asyncio.sleep(self.rest())  # the debounce, not a wait for a condition


def listen(listeners: list[Callable[[], None]], callback: Callable[[], None]) -> Callable[[], None]:
    """Add ``callback`` to a plain listener list; returns the function that removes it."""
    listeners.append(callback)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            listeners.remove(callback)

    return remove
