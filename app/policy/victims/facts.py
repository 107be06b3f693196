"""The facts ``decide`` reads: per pod, per workload, the preemptor, the offered nodes (plain
data the caller builds from the scheduler's offer and runway's cache)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.model import Pod
from app.model.timestamps import parse_time
from app.policy import minruntime, quantity
from app.policy.budget import BudgetResolution
from app.policy.minruntime import ResolutionLike
from app.policy.quantity import Resources
from app.policy.workload import bind_time, is_active, min_available, queue_of, workload_of

Outcome = Literal["kept", "dropped", "reselected", "gang-expanded", "awaited"]
NodeOutcome = Literal["chosen", "lost", "dropped"]

PODS = "pods"
"""Pseudo-resource used when dropped victims requested nothing measurable: one slot per pod."""


@dataclass(frozen=True)
class Rule:
    """A concrete resolved min-runtime; use it when the caller has no ``Resolution`` at hand."""

    action: str
    min_runtime_s: float
    resolved_from: str = ""
    path: Sequence[str] = ()


@dataclass(frozen=True)
class PodFacts:
    """What the decision needs to know about one pod (a victim, a sibling or a bystander)."""

    uid: str
    key: str
    node: str | None
    priority: int = 0
    queue: str = ""
    workload: str = ""
    """Workload key (``namespace/name``); empty = the pod is its own workload."""
    start: float | None = None
    """Start time of the pod's workload (unix seconds); None = unknown → not protected."""
    resolution: ResolutionLike | None = None
    """Min-runtime resolved for (preemptor, this pod); None = no protection known."""
    requests: Mapping[str, int] = field(default_factory=dict)
    """Resource requests as integers (cpu in millicores), see ``app.policy.quantity``."""
    known: bool = True
    """False for a UID the scheduler offered that runway's cache does not hold."""
    budget: BudgetResolution | None = None
    """The preemption budget of the pod's workload (its leaf queue's); None = none known."""
    preemption_history: tuple[float, ...] = ()
    """When the pod's workload was last preempted (its eviction record), oldest first."""
    running_since: float | None = None
    """When this pod itself started running (its ``startTime``, else its bind); None = unknown.
    Work lost counts from here, not from the workload's start: a replacement bound 10 s ago
    in a workload started long ago loses 10 s."""
    terminating: bool = False
    """Being deleted already: never chosen again (awaited, like a reserved victim)."""
    shield: str = ""
    """Why the pod may never be a victim (``app.policy.shield``); empty: it may be one."""

    @classmethod
    def from_pod(
        cls,
        pod: Pod,
        *,
        start: float | None = None,
        resolution: ResolutionLike | None = None,
        workload: str | None = None,
        queue: str | None = None,
        budget: BudgetResolution | None = None,
        preemption_history: tuple[float, ...] = (),
        shield: str = "",
    ) -> PodFacts:
        """Facts of a cached or offered pod; ``start``/``resolution`` come from the caller.

        Raises ``QuantityError`` on an invalid resource quantity.
        """
        return cls(
            uid=pod.uid,
            key=pod.key,
            node=pod.spec.nodeName or None,
            priority=pod.priority,
            queue=queue if queue is not None else queue_of(pod),
            workload=workload if workload is not None else str(workload_of(pod)),
            start=start,
            resolution=resolution,
            requests=quantity.pod_requests(pod),
            budget=budget,
            preemption_history=preemption_history,
            running_since=running_since(pod),
            terminating=pod.metadata.deletionTimestamp is not None,
            shield=shield,
        )

    @classmethod
    def unknown(cls, uid: str, node: str) -> PodFacts:
        """An offered UID runway's cache does not hold: no start known, so never protected."""
        return cls(uid=uid, key=uid, node=node, known=False)

    @property
    def workload_key(self) -> str:
        """The workload key, the pod's own key when it is a workload of its own."""
        return self.workload or f"pod:{self.key}"


@dataclass(frozen=True)
class WorkloadFacts:
    """A workload's pods and its floor; pods should exclude terminating and finished ones."""

    key: str
    min_available: int
    running: int
    pods: Sequence[PodFacts] = ()

    @property
    def elastic(self) -> bool:
        """Elastic = minAvailable below the pod count (DESIGN §2); otherwise a gang."""
        return minruntime.is_elastic(self.min_available, len(self.pods))

    def may_lose(self, evicting: int) -> bool:
        """While protected and elastic: whether it may lose ``evicting`` pods (the floor)."""
        return minruntime.elastic_may_lose(self.min_available, self.running, evicting)

    @classmethod
    def from_pods(cls, key: str, pods: Sequence[Pod], facts: Sequence[PodFacts]) -> WorkloadFacts:
        """Build from the workload's cached pods and their ``PodFacts`` (same order).

        Terminating and finished pods are left out: they neither count towards the floor nor
        need evicting. Running = bound to a node and not finished.
        """
        live = [(pod, fact) for pod, fact in zip(pods, facts, strict=True) if is_active(pod)]
        running = sum(1 for pod, _ in live if pod.spec.nodeName)
        return cls(
            key=key,
            min_available=min_available([pod for pod, _ in live]),
            running=running,
            pods=tuple(fact for _, fact in live),
        )


@dataclass(frozen=True)
class Preemptor:
    """The pod that wants to run."""

    uid: str
    key: str
    priority: int
    queue: str
    workload: str = ""
    requests: Mapping[str, int] | None = None
    """What it requests (``quantity.pod_requests``: cpu in millicores); None = unknown (an
    invalid quantity, or a caller that does not say): re-selection then frees what the dropped
    victims requested, the only measure left."""

    @classmethod
    def from_pod(cls, pod: Pod, queue: str | None = None) -> Preemptor:
        """Facts of the preemptor from its pod (``queue``: as ``queue_of`` with the tree gives
        it; default the label alone)."""
        try:
            requests: Resources | None = quantity.pod_requests(pod)
        except quantity.QuantityError:
            requests = None
        return cls(
            pod.uid,
            pod.key,
            pod.priority,
            queue if queue is not None else queue_of(pod),
            str(workload_of(pod)),
            requests,
        )


@dataclass(frozen=True)
class NodeOffer:
    """One offered node: the scheduler's victims and the node's other pods (from the cache)."""

    victims: Sequence[PodFacts]
    pdb_violations: int = 0
    others: Sequence[PodFacts] = ()
    """The node's other pods, neither terminating nor finished (those hold nothing to free)."""
    allocatable: Mapping[str, int] | None = None
    """The node's ``status.allocatable`` as integers (``pods`` included); None = unknown (not in
    runway's cache): re-selection then bounds what it frees by the preemptor's requests alone."""
    nominated: Mapping[str, int] = field(default_factory=dict)
    """The summed requests of pending pods nominated to the node at the preemptor's priority or
    above (``pods``: how many): kube-scheduler keeps their room, so it is not free for the
    preemptor (its nominator)."""


def running_since(pod: Pod) -> float | None:
    """When ``pod`` started running: its ``status.startTime`` (the kubelet's), else its bind
    (PodScheduled=True); None when it is not bound."""
    if not pod.spec.nodeName:
        return None
    started = parse_time(pod.status.startTime)
    return started if started is not None else bind_time(pod)
