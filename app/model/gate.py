"""The preemption gate's data: pod references, gate entries, preemption plans, and the
``runway.dev/preemption-gate`` annotation that mirrors an entry on its preemptor.

Plain data and a codec, no rules: when a gate opens is ``app.policy.gate``'s business, the book
of held preemptors ``app.state.gate``'s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from app.model.pod import Pod

GATE_ANNOTATION = "runway.dev/preemption-gate"
"""Mirrors a gate entry on its preemptor, so other replicas and a restarted runway hold it too."""

MAX_GATE_ANNOTATION_BYTES = 64 * 1024
"""A longer value is not one runway wrote (a preemption's victims fit one node): it is ignored
unread, so a hostile annotation cannot cost a parse of megabytes."""


@dataclass(frozen=True)
class PodRef:
    """A pod named the ways the API needs: UID for preconditions, namespace/name for paths."""

    uid: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, pod: Pod) -> PodRef:
        """The API names of ``pod``."""
        return cls(pod.metadata.uid, pod.metadata.namespace, pod.metadata.name)


@dataclass(frozen=True)
class GateEntry:
    """One held preemptor."""

    preemptor: PodRef
    node: str
    victims: tuple[PodRef, ...]
    since: float
    deadline: float
    rule: str = ""
    """The queue rule that made the victims eligible (for messages)."""
    holder: str = ""
    """Identity of the runway replica running the task."""
    priority: int = 0
    """The preemptor's priority (from the cache): its claim keeps pods of lower or equal
    priority off ``node`` where they would not fit beside it."""


@dataclass(frozen=True)
class PreemptionPlan:
    """What one preemption must do: the API calls for ``victims``, then nominate ``node``."""

    preemptor: PodRef
    node: str
    victims: tuple[PodRef, ...]
    message: str
    """The DisruptionTarget message: names the preemptor and the queue rule."""
    rule: str = ""
    priority: int = 0
    """The preemptor's priority (from the cache)."""
    unnominate: tuple[PodRef, ...] = ()
    """Lower-priority pods nominated to ``node``: their nomination is cleared (takeover)."""
    off_node: tuple[PodRef, ...] = ()
    """Gang siblings of the victims on other nodes (also in ``victims``): kube-scheduler deletes
    only the chosen node's victims, so runway deletes these itself in either mode."""
    awaited: tuple[PodRef, ...] = ()
    """Pods already going that this preemption waits for (its gate entry holds them as victims)
    but never touches: another preemption in flight chose them, or they are terminating. One
    victim, one preemption: no second condition, record or DELETE."""
    displaced: tuple[PodRef, ...] = ()
    """Preemptors of lower priority whose claim on ``node`` this preemption takes: their gate
    opens and their nomination is cleared (they are retried at once)."""
    counted: tuple[str, ...] = ()
    """UIDs of ``victims`` whose workload's eviction another preemption in flight has recorded
    already: deleted, not recorded again (an eviction counts once)."""


def encode_entry(entry: GateEntry) -> str:
    """The annotation value for ``entry`` (compact JSON)."""
    return json.dumps(
        {
            "node": entry.node,
            "victims": [[v.uid, v.namespace, v.name] for v in entry.victims],
            "since": entry.since,
            "deadline": entry.deadline,
            "rule": entry.rule,
            "holder": entry.holder,
            "priority": entry.priority,
        },
        separators=(",", ":"),
    )


def decode_entry(pod: Pod) -> GateEntry | None:
    """The gate entry mirrored on ``pod``, or None (absent, oversized or unreadable: the value
    is written by users too, so this never raises)."""
    raw = pod.annotation(GATE_ANNOTATION)
    if not raw or len(raw) > MAX_GATE_ANNOTATION_BYTES:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or not isinstance(data.get("victims"), list):
            return None
        victims = tuple(PodRef(*_ref(v)) for v in data["victims"])
        since, deadline = float(data["since"]), float(data["deadline"])
        if not (math.isfinite(since) and math.isfinite(deadline)):
            return None  # an infinite deadline would hold the preemptor forever
        node = data["node"]
        if not isinstance(node, str):
            return None
        return GateEntry(
            preemptor=PodRef.of(pod),
            node=node,
            victims=victims,
            since=since,
            deadline=deadline,
            rule=str(data.get("rule", "")),
            holder=str(data.get("holder", "")),
            priority=int(data.get("priority", 0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError):
        return None


def _ref(value: object) -> tuple[str, str, str]:
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(x, str) for x in value)):
        raise ValueError("a victim is [uid, namespace, name]")
    return value[0], value[1], value[2]
