"""Retries in one place: jittered exponential backoff, bounded in total time, honouring 429s.

What is retried: 429 always (the server did not process the call); 5xx, timeouts and connection
failures only for idempotent calls; 409 Conflict only when the caller says its call re-reads
before writing. 4xx errors that say "your request is wrong" (400, 403, 404, 422) never are.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from app.kube.errors import ApiUnavailable, Conflict, KubeError, ServerError, TooManyRequests
from app.logs import get_logger
from app.supervise import capped_delay

T = TypeVar("T")
log = get_logger("kube.retry")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter in ``[d/2, d]`` (so replicas do not retry in step)."""

    base: float = 0.2
    cap: float = 10.0
    factor: float = 2.0
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0-based)."""
        d = capped_delay(attempt, self.base, self.cap, self.factor)
        return d / 2 + self.rng.random() * d / 2


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how fast to retry. ``total`` bounds the whole call, waits included."""

    total: float = 30.0
    backoff: Backoff = field(default_factory=Backoff)
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    """How to wait (tests pass a recorder)."""


def should_retry(exc: BaseException, *, idempotent: bool, on_conflict: bool) -> bool:
    """Whether ``exc`` is worth another attempt for a call with these properties."""
    if isinstance(exc, TooManyRequests):
        return True
    if isinstance(exc, ServerError | ApiUnavailable):
        return idempotent
    if isinstance(exc, Conflict):
        return on_conflict
    return False


async def retrying(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    idempotent: bool,
    on_conflict: bool = False,
    what: str = "",
    monotonic: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``call`` until it succeeds, fails for good, or ``policy.total`` seconds would pass.

    A 429's Retry-After is honoured when it fits in the remaining budget (else the 429 is raised
    at once: waiting past the bound helps nobody). The last error is re-raised unchanged.
    """
    deadline = monotonic() + policy.total
    attempt = 0
    while True:
        try:
            return await call()
        except KubeError as exc:
            if not should_retry(exc, idempotent=idempotent, on_conflict=on_conflict):
                raise
            wait = policy.backoff.delay(attempt)
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None:
                wait = max(wait, retry_after)
            remaining = deadline - monotonic()
            if wait > remaining:
                raise
            log.debug(
                "retrying", what=what, attempt=attempt + 1, wait=round(wait, 3), error=str(exc)
            )
            attempt += 1
            await policy.sleep(wait)
