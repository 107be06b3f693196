"""The preemption gate's data: pod references, gate entries, preemption plans. An entry is
mirrored on its preemptor's ``WorkloadRecord`` (``app.model.record``), never on the pod.

Plain data and a codec, no rules: when a gate opens is ``app.policy.gate``'s business, the book
of held preemptors ``app.state.gate``'s.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from app.model.pod import Pod

GATE_ANNOTATION = "runway.dev/preemption-gate"
"""Where versions before the WorkloadRecord mirrored a gate: retired, never read (a tenant can
write it on its own pods)."""


SEALED: Final = "sha256:"
"""The prefix of a sealed UID: what a record shows of a pod in another namespace."""


@lru_cache(maxsize=1 << 16)
def seal(uid: str) -> str:
    """How a record a tenant reads names a pod of another namespace (a victim in its
    preemptor's record, a preemptor in its victim's): a digest of its UID, never the UID.
    runway finds the pod again by computing the digest of the pods it might be (the pods on the
    gate's node; the preemptors it has seen); a tenant learns only that some pod was involved.
    Memoised: an order or a gate check seals the same few UIDs again and again."""
    if is_sealed(uid):
        return uid
    return SEALED + hashlib.sha256(uid.encode()).hexdigest()[:32]


def is_sealed(uid: str | None) -> bool:
    """Whether ``uid`` is a sealed UID (``seal``)."""
    return bool(uid) and uid.startswith(SEALED)  # type: ignore[union-attr]


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
    """The DisruptionTarget message for the preemptor's namespace: names the preemptor, its
    queue and priority, and the victims' min-runtime rule."""
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
    public_message: str = ""
    """The DisruptionTarget message for a victim of another namespace: "a higher-priority
    workload", no name, queue or priority of the preemptor ("" = ``PUBLIC_MESSAGE``)."""

    def message_for(self, namespace: str) -> str:
        """The DisruptionTarget message a victim in ``namespace`` carries."""
        if namespace == self.preemptor.namespace:
            return self.message
        return self.public_message or f"{PREEMPTED_BY} to run on node {self.node}"


PREEMPTED_BY: Final = "Preempted by a higher-priority workload"
"""How a victim's message names a preemptor of another namespace (issue #36: no namespace,
name, queue or priority of another tenant)."""
