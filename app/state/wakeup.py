"""The wake-up side of the requeue state: the filter verdicts of the pending pods, and a small
time-keyed schedule of the pod touches still to make (see ``app.policy.wakeup``).

``WakeSchedule`` is plain data with the time passed in (no clock, no I/O): a min-heap of
``(due, uid)`` with lazy deletion, one entry per pod, and a per-pod minimum interval between two
touches so that a verdict flapping quickly cannot turn into a patch storm.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from app.policy import admission
from app.policy.wakeup import Hold, hold_of
from app.state import requeue

if TYPE_CHECKING:
    from app.runtime import Runtime


def pending_holds(runtime: Runtime, now: float) -> dict[str, Hold | None]:
    """Every pending (unbound, not terminating) pod's UID with the filter's hold on it now.

    The same facts and rule chain as the filter verb (``requeue.filter_input`` +
    ``admission.admit``), so what the leader expects matches what any replica answers.
    """
    policy = requeue.filter_policy(runtime)
    found: dict[str, Hold | None] = {}
    for pod in runtime.cache.pending_pods():
        if pod.metadata.deletionTimestamp is not None:
            continue
        facts = requeue.filter_input(runtime, pod, now)
        found[pod.uid] = hold_of(admission.admit(facts, now, policy))
    return found


class WakeSchedule:
    """Pod touches keyed by time: at most one entry per pod, and no pod touched twice within
    ``min_interval`` seconds."""

    def __init__(self, min_interval: float = 1.0) -> None:
        self.min_interval = min_interval
        self._heap: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}
        self._touched: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, uid: object) -> bool:
        return uid in self._due

    def push(self, uid: str, at: float) -> float:
        """Schedule a touch of ``uid`` at ``at`` (later if it was touched less than
        ``min_interval`` before); an earlier entry for the same pod wins. Returns the due time."""
        last = self._touched.get(uid)
        if last is not None:
            at = max(at, last + self.min_interval)
        current = self._due.get(uid)
        if current is not None and current <= at:
            return current
        self._due[uid] = at
        heapq.heappush(self._heap, (at, uid))
        return at

    def discard(self, uid: str) -> None:
        """Drop the pod's pending touch (its heap entry is skipped lazily)."""
        self._due.pop(uid, None)

    def clear(self) -> None:
        """Forget everything (leadership lost)."""
        self._heap.clear()
        self._due.clear()
        self._touched.clear()

    def next_at(self) -> float | None:
        """When the earliest touch is due; None when there is none."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float, limit: int) -> list[str]:
        """Up to ``limit`` pods due at ``now``, earliest first; they count as touched at ``now``."""
        out: list[str] = []
        while len(out) < limit:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                break
            _, uid = heapq.heappop(self._heap)
            del self._due[uid]
            self._touched[uid] = now
            out.append(uid)
        # The interval memory stays small: only touches younger than min_interval matter.
        horizon = now - self.min_interval
        if len(self._touched) > 2 * len(out) + 64:
            self._touched = {u: t for u, t in self._touched.items() if t > horizon}
        return out

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
