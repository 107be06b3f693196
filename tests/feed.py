"""A stand-in for the pod watch a verb drives (``app.state.cache.PodFeed``)."""

from __future__ import annotations

from app.model import Pod
from app.state.cache import ClusterCache


class ArrivingFeed:
    """A pod watch whose socket holds ``arriving`` (pods, applied as upserts by either call);
    ``calls`` records what was asked of it."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.calls: list[str] = []
        self.arriving: list[Pod] = []

    def _apply(self, call: str) -> int:
        self.calls.append(call)
        for pod in self.arriving:
            self.cache.upsert_pod(pod)
        count, self.arriving = len(self.arriving), []
        return count

    def hurry(self) -> None:
        """Apply what has arrived (and end the window)."""
        self._apply("hurry")

    def catch_up(self) -> int:
        """Apply what has arrived."""
        return self._apply("catch_up")
