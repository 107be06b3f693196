"""The order of pending workloads in a leaf queue (DESIGN §5, Kueue KEP-1282).

Order: priority (desc) → a pending preemptor before the workloads it evicted → queue-order
timestamp (asc) → name. The queue-order timestamp depends on the last eviction's reason and the
configured strategy for that reason: ``Eviction`` (back of the queue: the eviction time) or
``Creation`` (front: the workload's creation time). A workload never evicted uses its creation
time, and so does one whose last eviction was its deactivation (reason ``Deactivated``: a
requeue limit exceeded), once reactivated — Kueue's ``GetQueueOrderTimestamp`` reads the
eviction time only after a ``PodsReadyTimeout``.

"Preemptor first" (DESIGN §5): at equal priority, a pending workload whose pod is named as the
preemptor in the eviction record of another workload of the same list goes just before the
earliest of *those* workloads — it takes that victim's queue-order timestamp, and wins the tie —
and nowhere further: unrelated workloads older than its victims stay ahead. Without this, a
preempted workload ordered by its creation time could take the head back from its own preemptor
(flapping). The hold on the victim itself is bounded (``anti-flapping``, ``app.policy.admission``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.config.requeue import (
    DEFAULT_PODS_READY_TIMEOUT_TIMESTAMP,
    DEFAULT_PREEMPTION_TIMESTAMP,
    RequeueStrategyConfig,
    TimestampName,
    WaitForPodsReadyConfig,
    pods_ready_timeout_timestamp,
)
from app.model.eviction import DEACTIVATED, PODS_READY_TIMEOUT, EvictionRecord
from app.model.gate import seal
from app.policy.backoff import held_by_record


@dataclass(frozen=True)
class QueueOrderStrategy:
    """Which timestamp orders a workload after each eviction reason."""

    pods_ready_timeout: TimestampName = DEFAULT_PODS_READY_TIMEOUT_TIMESTAMP
    priority_preemption: TimestampName = DEFAULT_PREEMPTION_TIMESTAMP

    @classmethod
    def from_sections(
        cls, wait_for_pods_ready: WaitForPodsReadyConfig, requeue_strategy: RequeueStrategyConfig
    ) -> QueueOrderStrategy:
        """From the two config sections that set it (either shape; see ``app.config.requeue``)."""
        return cls(
            pods_ready_timeout=pods_ready_timeout_timestamp(wait_for_pods_ready, requeue_strategy),
            priority_preemption=requeue_strategy.priority_preemption,
        )

    def for_reason(self, reason: str) -> TimestampName:
        """The strategy for an eviction reason (``Deactivated``: always ``Creation``)."""
        if reason == DEACTIVATED:
            return "Creation"
        return self.pods_ready_timeout if reason == PODS_READY_TIMEOUT else self.priority_preemption


def queue_order_timestamp(
    creation_time: float, record: EvictionRecord | None, strategy: QueueOrderStrategy
) -> float:
    """The timestamp a pending workload is ordered by (Kueue's ``GetQueueOrderTimestamp``).

    ``record`` is the eviction that made the workload pending again; pass None for a workload
    that was never evicted or has been admitted since.
    """
    if record is None or strategy.for_reason(record.reason) == "Creation":
        return creation_time
    return record.time


@dataclass(frozen=True)
class PendingWorkload:
    """A pending workload as ordering sees it."""

    name: str
    """``namespace/name``: the last tie-breaker."""
    priority: int
    creation_time: float
    record: EvictionRecord | None = None
    pod_uids: frozenset[str] = field(default_factory=frozenset)
    """UIDs of its pods: how a victim's record (``preemptor_uid``, sealed when the preemptor is
    of another namespace: ``model.gate.seal``) names its preemptor."""


OrderKey = tuple[int, float, int, str]

Anchors = Mapping[tuple[str, int], float]
"""(preemptor pod UID, priority) → the earliest queue-order timestamp of the workloads of that
priority it evicted."""


def preemptor_anchors(
    workloads: Iterable[PendingWorkload], strategy: QueueOrderStrategy
) -> dict[tuple[str, int], float]:
    """Where each pending preemptor goes: just before the earliest workload it evicted."""
    anchors: dict[tuple[str, int], float] = {}
    for w in workloads:
        if w.record is not None and w.record.preemptor_uid:
            key = (w.record.preemptor_uid, w.priority)
            ts = queue_order_timestamp(w.creation_time, w.record, strategy)
            anchors[key] = min(ts, anchors.get(key, ts))
    return anchors


def queue_order_key(
    workload: PendingWorkload, strategy: QueueOrderStrategy, anchors: Anchors
) -> OrderKey:
    """Sort key: (-priority, queue-order timestamp, 0 if placed as a pending preemptor else 1,
    name). A pending preemptor takes the timestamp of the earliest workload it evicted when
    that is earlier than its own, and the 0 puts it before that workload."""
    ts = queue_order_timestamp(workload.creation_time, workload.record, strategy)
    preemptor = 1
    if anchors:
        for uid in workload.pod_uids:
            # A victim's record names a preemptor of another namespace by its sealed UID.
            for named in (uid, seal(uid)):
                anchor = anchors.get((named, workload.priority))
                if anchor is not None and anchor <= ts:
                    ts, preemptor = anchor, 0
    return (-workload.priority, ts, preemptor, workload.name)


def pending_order(
    workloads: Sequence[PendingWorkload], strategy: QueueOrderStrategy
) -> list[PendingWorkload]:
    """The pending workloads of one leaf queue, head first."""
    anchors = preemptor_anchors(workloads, strategy)
    return sorted(workloads, key=lambda w: queue_order_key(w, strategy, anchors))


def admissible(workload: PendingWorkload, now: float) -> bool:
    """Neither deactivated nor in backoff: may be the head of its queue."""
    return not held_by_record(workload.record, now)


def queue_head(
    workloads: Sequence[PendingWorkload], strategy: QueueOrderStrategy, now: float
) -> PendingWorkload | None:
    """The head of a leaf queue for StrictFIFO: the first *admissible* pending workload.

    Deactivated workloads and workloads in backoff are inadmissible (as in Kueue) and do not
    block the queue behind them.
    """
    for w in pending_order(workloads, strategy):
        if admissible(w, now):
            return w
    return None
