"""The one source of time. Policy takes ``now`` as an argument; the edges ask a ``Clock``."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time in Unix seconds (Kubernetes timestamps are wall-clock)."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()


class ManualClock:
    """A clock that moves only when told to: for tests and offline simulation."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        """The current manual time."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self._now += seconds

    def set(self, now: float) -> None:
        """Jump to ``now``."""
        self._now = now
