"""A token bucket over an injected clock: the one rate rule of runway (the requeue waker's pod
touches, the Events spam filter, and the Kubernetes client's QPS limit build on it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenBucket:
    """A rate limiter over an injected clock: ``rate`` tokens a second, at most ``burst``."""

    rate: float
    burst: float
    tokens: float = field(default=-1.0)
    updated: float | None = None

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1 (got {self.rate}, {self.burst})")
        if self.tokens < 0:
            self.tokens = self.burst

    def _refill(self, now: float) -> None:
        if self.updated is not None and now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now if self.updated is None else max(self.updated, now)

    def take(self, now: float, wanted: int) -> int:
        """Take up to ``wanted`` whole tokens; returns how many were granted."""
        self._refill(now)
        granted = max(0, min(wanted, int(self.tokens)))
        self.tokens -= granted
        return granted

    def next_token_in(self, now: float) -> float:
        """Seconds until at least one whole token is available (0 when one is)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate
