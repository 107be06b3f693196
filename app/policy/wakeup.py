"""Which pending pods to wake, and when (DESIGN §5: a rejection's end must reach kube-scheduler).

When runway's filter rejects a pod, kube-scheduler parks it in its unschedulable queue and retries
it only after ~60 s (the leftover flush) or on a cluster event it deems relevant. A pod *update*
is such an event: in Kubernetes 1.20 ``PriorityQueue.Update`` moves a pod from the unschedulable
queue straight to the active queue when ``isPodUpdated`` (anything but resourceVersion,
generation and status changed; an annotation is enough). So when the reason of a rejection ends
(requeueAt passes, the workload is reactivated, the preemptor it waited for is bound or gone, a
blocking workload is PodsReady, the StrictFIFO head moves), runway touches the pod.

The leader re-evaluates the filter verdict of every pending pod (on cluster and record changes,
and at the earliest time a hold is known to end) and compares it with the previous pass:

* a pod **held** before and **free** now is woken (its rejection ended);
* a pod held now is remembered with the time its hold ends (None: ends on an event only);
* a pod free in both passes, bound, or gone is forgotten — nothing to wake.

One wake is not a hold's end: a pod nominated to a node (by runway's takeover or by
kube-scheduler) is woken when the last lower-priority pod there is gone (``freed_by``). runway's
gate opens as soon as the victims are *terminating*, but they keep their room in kube-scheduler's
cache until they are *gone*; their deletion moves the preemptor to kube-scheduler's backoff queue
(``MoveAllToActiveOrBackoffQueue``), where it may wait up to ``podMaxBackoffSeconds`` (10 s), and
a pod update moves it to the active queue at once (1.20 ``PriorityQueue.Update`` does not check
backoff). The waker sees the departure as a cache event, not by comparing passes: victims that
go within a pass's interval would be missed.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.model.pod import Pod
from app.policy.admission import Admission

WAKE_SLACK_S = 0.05
"""Re-evaluate this long after a hold's end: the filter's test is ``now < until``."""


@dataclass(frozen=True)
class Hold:
    """Why and until when the filter holds a pod back."""

    rule: str
    """The admission rule (``backoff``, ``deactivated``, ``gate``...)."""
    until: float | None
    """When it is expected to end; None = only an event ends it (reactivation, a bind...)."""


def hold_of(verdict: Admission) -> Hold | None:
    """The hold a filter verdict puts on a pod; None when every offered node may pass.

    A gate restricted to the nominated node counts as a hold: the pod is free only when the
    gate opens.
    """
    if verdict.allowed and verdict.only_nodes is None:
        return None
    return Hold(verdict.rule, verdict.until)


def awaits_victims(pod: Pod, on_node: Iterable[Pod]) -> bool:
    """Whether pods of lower priority than ``pod`` (pending, nominated) are still terminating on
    its nominated node (``on_node``): kube-scheduler 1.20 waits for them too
    (``defaultpreemption.PodEligibleToPreemptOthers``: no new preemption while one is)."""
    return any(
        other.metadata.deletionTimestamp is not None and other.priority < pod.priority
        for other in on_node
    )


def freed_by(gone: Pod, nominated: Iterable[Pod], on_node: Sequence[Pod]) -> list[str]:
    """UIDs of the pods ``nominated`` to the node ``gone`` left whose room it held (it had a
    lower priority) and which no other lower-priority pod still ``on_node`` keeps waiting:
    the pods to wake."""
    return [
        p.uid for p in nominated if gone.priority < p.priority and not awaits_victims(p, on_node)
    ]


@dataclass(frozen=True)
class WakePlan:
    """The outcome of one evaluation pass."""

    wake: tuple[str, ...]
    """Pods (by UID) held at the previous pass and free now: touch them."""
    held: dict[str, Hold]
    """Pods held now: the ``previous`` of the next pass."""
    next_check: float | None
    """When the earliest known hold ends (plus slack): evaluate again then. None = on events."""


def plan_wakeups(
    previous: Mapping[str, Hold],
    current: Mapping[str, Hold | None],
    *,
    slack: float = WAKE_SLACK_S,
) -> WakePlan:
    """Compare two passes. ``current`` maps every pending pod's UID to its hold (None = free).

    A pod missing from ``current`` is no longer pending (bound or deleted): it is not woken.
    """
    wake = tuple(sorted(uid for uid in previous if uid in current and current[uid] is None))
    held = {uid: hold for uid, hold in current.items() if hold is not None}
    ends = [h.until for h in held.values() if h.until is not None]
    return WakePlan(wake=wake, held=held, next_check=min(ends) + slack if ends else None)


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
