"""A Kubernetes Event runway wants written: what it is about, and what it says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED
from app.model.gate import PodRef
from app.model.owner import OwnerRef

EventType = Literal["Normal", "Warning"]

# Reasons (CamelCase, as kube-scheduler and Kueue write them); the eviction records' own reasons
# (Preempted, PodsReadyTimeout) name their Events too.
PREEMPTING = "Preempting"
DEACTIVATED = "Deactivated"
REACTIVATED = "Reactivated"
REASONS = (PREEMPTED, PREEMPTING, PODS_READY_TIMEOUT, DEACTIVATED, REACTIVATED)


def shown_to(kind: str, key: str, reader_namespace: str) -> str:
    """How an object (``kind`` ``namespace/name``) is named in text a tenant of
    ``reader_namespace`` reads (a condition, an Event, a filter reason): ``pod ns/x`` in its own
    namespace, ``a pod in another namespace`` otherwise — never another tenant's name."""
    namespace, sep, _ = key.partition("/")
    if not sep or namespace == reader_namespace:
        return f"{kind} {key}"
    return f"a {kind} in another namespace"


@dataclass(frozen=True, order=True)
class ObjectRef:
    """The object an Event is about (its ``involvedObject``)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def of_pod(cls, pod: PodRef) -> ObjectRef:
        """A pod as an Event's subject."""
        return cls("v1", "Pod", pod.namespace, pod.name, pod.uid)

    @classmethod
    def of_owner(cls, owner: OwnerRef) -> ObjectRef:
        """A controller owner (a Job, a JobSet...) as an Event's subject."""
        return cls(owner.api_version, owner.kind, owner.namespace, owner.name, owner.uid)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class EventNote:
    """One Event to record about ``regarding``."""

    regarding: ObjectRef
    reason: str
    message: str
    type: EventType = "Normal"
    action: str = ""
    """What runway did (``Preempting``, ``Evicting``...): the Event's ``action``."""
