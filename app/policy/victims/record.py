"""The decision record: what ``decide`` did with each offered node and victim, and why (the
reply, the executor's plan, ``GET /v1/preemptions/decisions``, the metrics' counts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.model.timestamps import format_optional_time
from app.policy import minruntime
from app.policy.budget import budget_status
from app.policy.claims import Claim
from app.policy.minruntime import Protection
from app.policy.victims.facts import NodeOutcome, Outcome, PodFacts, Preemptor

# --- the decision record -------------------------------------------------------------------


class Cause(StrEnum):
    """Why a pod got its outcome, as a constant (``VictimRecord.reason`` says it to an operator
    in full). The counts are bucketed by it; the JSON shows the reason text."""

    ALREADY_GOING = "already-going"
    """Awaited: another preemption in flight chose it, or it is terminating."""
    UNKNOWN_POD = "unknown-pod"
    """Kept: an offered UID runway's cache does not hold (start unknown: not protected)."""
    NOT_PROTECTED = "not-protected"
    """Kept: neither its min-runtime nor its preemption budget protects it (nor its gang)."""
    ABOVE_ELASTIC_FLOOR = "above-elastic-floor"
    """Kept: protected, but its elastic workload keeps minAvailable running without it."""
    GANG_GOES_WHOLE = "gang-goes-whole"
    """Kept: its gang is evicted already, by another of this node's victims."""
    SHIELDED = "shielded"
    """Dropped: ``policy.shield`` — runway never preempts it."""
    GANG_INELIGIBLE = "gang-ineligible"
    """Dropped: its gang has a shielded member or one of the preemptor's priority or above."""
    PROTECTED = "protected"
    """Dropped: its min-runtime or preemption budget (or a gang member's) protects it."""
    ELASTIC_FLOOR = "elastic-floor"
    """Dropped: protected, and evicting it would take its elastic workload below minAvailable."""
    REPLACES_DROPPED = "replaces-dropped"
    """Re-selected: it frees what the preemptor lacks in place of the dropped victims."""
    GANG_MEMBER = "gang-member"
    """Gang-expanded: a member of a gang another victim evicts."""


INELIGIBLE: frozenset[Cause] = frozenset({Cause.SHIELDED, Cause.GANG_INELIGIBLE})
"""Causes of a drop that no waiting lifts (counted ``ineligible``, not ``protected``)."""


def action_for(preemptor: Preemptor, pod: PodFacts) -> str:
    """``preempt`` within the preemptor's leaf queue, ``reclaim`` across queues."""
    if pod.resolution is not None:
        return pod.resolution.action
    return "preempt" if pod.queue == preemptor.queue else "reclaim"


def protection(preemptor: Preemptor, pod: PodFacts, now: float) -> Protection:
    """The pod's protection at ``now``: its min-runtime and its workload's preemption budget
    (``minruntime.protection``)."""
    budget = (
        budget_status(pod.preemption_history, pod.budget, now) if pod.budget is not None else None
    )
    return minruntime.protection(pod.resolution, pod.start, now, action_for(preemptor, pod), budget)


@dataclass(frozen=True)
class VictimRecord:
    """What happened to one pod on one offered node, and why."""

    uid: str
    key: str
    node: str | None
    workload: str
    priority: int
    queue: str
    outcome: Outcome
    reason: str
    offered: bool
    protection: Protection
    cause: Cause

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (no infinities, lists not tuples)."""
        p = self.protection
        return {
            "uid": self.uid,
            "pod": self.key,
            "node": self.node,
            "workload": self.workload,
            "priority": self.priority,
            "queue": self.queue,
            "offered": self.offered,
            "outcome": self.outcome,
            "reason": self.reason,
            "action": p.action,
            "protected": p.protected,
            "protectedBy": minruntime.protected_by(p),
            "budget": p.budget.to_dict() if p.budget is not None else None,
            "minRuntimeSeconds": p.min_runtime_s,
            "rule": p.resolved_from,
            "queuePath": list(p.path),
            "start": format_optional_time(p.start),
            "protectedUntil": format_optional_time(p.protected_until),
        }


@dataclass(frozen=True)
class NodeRecord:
    """One offered node: its victims after the rules, its rank, and why it won, lost or dropped."""

    node: str
    outcome: NodeOutcome
    reason: str
    pdb_violations: int
    victims: tuple[str, ...]
    """UIDs to return for this node (offered kept + re-selected + on-node gang siblings)."""
    off_node: tuple[tuple[str, str | None], ...]
    """(UID, node) of gang siblings elsewhere that go too."""
    records: tuple[VictimRecord, ...]
    max_priority: int | None = None
    priority_sum: int = 0
    victim_count: int = 0
    work_lost: float = 0.0
    """Seconds: the sum over the victims of the time each has run (``work_lost``)."""
    awaited: tuple[str, ...] = ()
    """UIDs on this node already going (another preemption's victims, or terminating): their
    room counts, nobody deletes them again."""
    displaced: tuple[Claim, ...] = ()
    """Claims of lower-priority preemptions on this node that choosing it takes."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "node": self.node,
            "outcome": self.outcome,
            "reason": self.reason,
            "numPDBViolations": self.pdb_violations,
            "victims": list(self.victims),
            "offNodeVictims": [{"uid": u, "node": n} for u, n in self.off_node],
            "awaitedVictims": list(self.awaited),
            "displacedClaims": [_claim_dict(c) for c in self.displaced],
            "maxPriority": self.max_priority,
            "prioritySum": self.priority_sum,
            "victimCount": self.victim_count,
            "workLostSeconds": round(self.work_lost, 3),
            "pods": [r.to_dict() for r in self.records],
        }


@dataclass(frozen=True)
class Counts:
    """For metrics: offered victims kept / protected (min-runtime) / protected by the preemption
    budget alone / ineligible, re-selected and gang-expanded pods, each by kind
    (preempt|reclaim), over every offered node; and nodes dropped."""

    kept: Mapping[str, int]
    protected: Mapping[str, int]
    ineligible: Mapping[str, int]
    reselected: Mapping[str, int]
    gang_expanded: Mapping[str, int]
    nodes_dropped: int
    budget: Mapping[str, int] = field(default_factory=dict)
    awaited: Mapping[str, int] = field(default_factory=dict)
    """Pods already going (another preemption's victims, or terminating): not chosen again."""

    @classmethod
    def of(cls, records: Sequence[NodeRecord], nodes_dropped: int) -> Counts:
        """The counts of every pod record of every node, each in its ``bucket``, by kind."""
        buckets: dict[str, dict[str, int]] = {name: {} for name in _BUCKETS}
        for node in records:
            for rec in node.records:
                by_kind = buckets[bucket(rec)]
                kind = rec.protection.action
                by_kind[kind] = by_kind.get(kind, 0) + 1
        return cls(
            kept=buckets["kept"],
            protected=buckets["protected"],
            ineligible=buckets["ineligible"],
            reselected=buckets["reselected"],
            gang_expanded=buckets["gang_expanded"],
            nodes_dropped=nodes_dropped,
            budget=buckets["budget"],
            awaited=buckets["awaited"],
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "awaited": dict(self.awaited),
            "kept": dict(self.kept),
            "protected": dict(self.protected),
            "ineligible": dict(self.ineligible),
            "reselected": dict(self.reselected),
            "gangExpanded": dict(self.gang_expanded),
            "budget": dict(self.budget),
            "nodesDropped": self.nodes_dropped,
        }


_BUCKETS = ("kept", "protected", "budget", "ineligible", "reselected", "gang_expanded", "awaited")
_BY_OUTCOME = {
    "kept": "kept",
    "reselected": "reselected",
    "gang-expanded": "gang_expanded",
    "awaited": "awaited",
}


def bucket(rec: VictimRecord) -> str:
    """The ``Counts`` field a record counts in: its outcome's; a drop is ``ineligible`` (no
    waiting lifts it), ``budget`` (the preemption budget alone protects) or ``protected``."""
    if rec.outcome != "dropped":
        return _BY_OUTCOME[rec.outcome]
    if rec.cause in INELIGIBLE:
        return "ineligible"
    return "budget" if rec.protection.by_budget_only else "protected"


@dataclass(frozen=True)
class Decision:
    """The preempt verb's answer and its reasons. ``chosen`` None = veto (reply ``{}``)."""

    preemptor: Preemptor
    now: float
    chosen: str | None
    reason: str
    victims: tuple[str, ...] = ()
    """UIDs on the chosen node, returned to the scheduler."""
    off_node: tuple[tuple[str, str | None], ...] = ()
    """(UID, node) of gang siblings not in the reply (other nodes, pending, or missing from the
    node's listing): the executor deletes them too."""
    pdb_violations: int = 0
    awaited: tuple[str, ...] = ()
    """UIDs on the chosen node already going (reserved by another preemption in flight, or
    terminating): the preemption waits for them but neither deletes nor records them."""
    displaced: tuple[Claim, ...] = ()
    """Claims of lower-priority preemptions on the chosen node that this one takes: their
    preemptors lose the claim and are retried (kube-scheduler's nominator)."""
    counted: tuple[str, ...] = ()
    """Victims (of ``all_victims``) whose workload another preemption in flight is evicting
    already: deleted, but the eviction is not recorded a second time."""
    nodes: tuple[NodeRecord, ...] = ()
    counts: Counts = field(
        default_factory=lambda: Counts({}, {}, {}, {}, {}, 0),
    )
    vetoed_by_gate: bool = False

    def reply(self) -> dict[str, tuple[list[str], int]]:
        """``{node: (uids, NumPDBViolations)}`` for ``encode_preemption_result``; ``{}`` = veto."""
        if self.chosen is None:
            return {}
        return {self.chosen: (list(self.victims), self.pdb_violations)}

    def all_victims(self) -> tuple[tuple[str, str | None], ...]:
        """Every (UID, node) to evict: the chosen node's victims, then off-node siblings."""
        return tuple((u, self.chosen) for u in self.victims) + self.off_node

    def record_of(self, uid: str) -> VictimRecord | None:
        """The record of ``uid`` on the chosen node, else on the first node that mentions it."""
        ordered = sorted(self.nodes, key=lambda n: n.node != self.chosen)
        for node in ordered:
            for rec in node.records:
                if rec.uid == uid:
                    return rec
        return None

    def recorded_nodes(self, max_nodes: int | None = None) -> tuple[NodeRecord, ...]:
        """The node records worth keeping: the chosen node first, then the others in offer
        order, at most ``max_nodes`` of them (None: all)."""
        if max_nodes is None or len(self.nodes) <= max_nodes:
            return self.nodes
        chosen = [n for n in self.nodes if n.node == self.chosen]
        others = [n for n in self.nodes if n.node != self.chosen]
        return tuple(chosen + others)[:max_nodes]

    def to_dict(self, max_nodes: int | None = None) -> dict[str, Any]:
        """JSON-ready, for the REST listing and the explain endpoint; at most ``max_nodes`` node
        records (the chosen node's first; ``nodesOmitted`` counts the rest)."""
        p = self.preemptor
        nodes = self.recorded_nodes(max_nodes)
        return {
            "preemptor": {
                "uid": p.uid,
                "pod": p.key,
                "priority": p.priority,
                "queue": p.queue,
                "workload": p.workload,
            },
            "time": format_optional_time(self.now),
            "chosenNode": self.chosen,
            "reason": self.reason,
            "vetoedByGate": self.vetoed_by_gate,
            "victims": list(self.victims),
            "offNodeVictims": [{"uid": u, "node": n} for u, n in self.off_node],
            "awaitedVictims": list(self.awaited),
            "displacedClaims": [_claim_dict(c) for c in self.displaced],
            "numPDBViolations": self.pdb_violations,
            "nodes": [n.to_dict() for n in nodes],
            "nodesOmitted": len(self.nodes) - len(nodes),
            "counts": self.counts.to_dict(),
        }


def _claim_dict(claim: Claim) -> dict[str, Any]:
    return {"preemptor": claim.preemptor, "priority": claim.priority, "node": claim.node}
