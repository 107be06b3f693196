"""Client-side rate limit of API calls (client-go's ``qps``/``burst``): waits for a token of the
policy's ``TokenBucket``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from app.policy.rate import TokenBucket


class RateLimiter:
    """Client-side QPS limit: ``acquire`` waits until a token is there."""

    def __init__(self, qps: float, burst: int, monotonic: Callable[[], float] = time.monotonic):
        self.bucket = TokenBucket(rate=qps, burst=max(1, burst))
        self.monotonic = monotonic
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait for a token (callers queue on the lock, in order)."""
        async with self.lock:
            if self.bucket.take(self.monotonic(), 1):
                return
            # One wait is enough: the lock keeps everyone else out until the token is there.
            await asyncio.sleep(self.bucket.next_token_in(self.monotonic()))
            self.bucket.take(self.monotonic(), 1)
