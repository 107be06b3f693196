"""Client-side rate limit of API calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """Client-side QPS limit (as client-go's ``--kube-api-qps``/``burst``)."""

    def __init__(self, qps: float, burst: int, monotonic: Callable[[], float] = time.monotonic):
        self.qps = qps
        self.burst = max(1, burst)
        self.tokens = float(self.burst)
        self.monotonic = monotonic
        self.stamp = monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait for a token."""
        async with self.lock:
            now = self.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            if self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.qps)
                self.stamp = self.monotonic()
                self.tokens = 0.0
            else:
                self.tokens -= 1
