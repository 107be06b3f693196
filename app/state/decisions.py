"""The last preempt decisions, for ``GET /v1/preemptions/decisions`` and explain."""

from __future__ import annotations

from collections import deque

from app.policy.victims import Decision


class DecisionLog:
    """A bounded, newest-last log of preempt decisions."""

    def __init__(self, size: int = 200) -> None:
        self._log: deque[Decision] = deque(maxlen=size)

    def add(self, decision: Decision) -> None:
        """Remember a decision (the oldest falls off)."""
        self._log.append(decision)

    def latest(self, limit: int | None = None) -> list[Decision]:
        """Newest first."""
        items = list(reversed(self._log))
        return items if limit is None else items[:limit]

    def about(self, preemptor_key: str, victim_uid: str | None) -> Decision | None:
        """The newest decision for this preemptor (that mentions the victim, when given)."""
        for decision in reversed(self._log):
            if decision.preemptor.key != preemptor_key:
                continue
            if victim_uid is None or decision.record_of(victim_uid) is not None:
                return decision
        return None
