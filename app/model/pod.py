"""The pod fields runway uses, as msgspec structs (unknown fields are skipped while decoding)."""

from __future__ import annotations

import msgspec


class OwnerReference(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``metadata.ownerReferences[]``: identifies a pod's controller (a Job, a JobSet...)."""

    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``metadata`` of a pod."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: tuple[OwnerReference, ...] | None = None


class ResourceRequirements(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``resources`` of a container; quantities stay strings until policy needs a number."""

    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class Container(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One container: runway only needs its name and resource requests."""

    name: str = ""
    resources: ResourceRequirements | None = None


class SchedulingGate(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``spec.schedulingGates[]``: while a pod has one, kube-scheduler leaves it alone (1.30 GA)."""

    name: str = ""


class PodSpec(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``spec`` of a pod."""

    nodeName: str | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    schedulerName: str | None = None
    preemptionPolicy: str | None = None
    containers: tuple[Container, ...] | None = None
    initContainers: tuple[Container, ...] | None = None
    overhead: dict[str, str] | None = None
    schedulingGates: tuple[SchedulingGate, ...] | None = None


class PodCondition(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``status.conditions[]``: PodScheduled gives the bind time, Ready the readiness."""

    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None
    reason: str | None = None
    message: str | None = None


class PodStatus(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``status`` of a pod."""

    phase: str | None = None
    nominatedNodeName: str | None = None
    startTime: str | None = None
    conditions: tuple[PodCondition, ...] | None = None


class Pod(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """A pod as runway sees it."""

    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()

    @property
    def key(self) -> str:
        """``namespace/name``, the way operators name a pod."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def uid(self) -> str:
        """The pod's UID (victims are named by UID on the wire)."""
        return self.metadata.uid

    @property
    def priority(self) -> int:
        """Effective priority; a pod without one has priority 0 as in kube-scheduler."""
        return self.spec.priority or 0

    def label(self, key: str) -> str | None:
        """The value of label ``key``, or None."""
        labels = self.metadata.labels
        return labels.get(key) if labels else None

    def annotation(self, key: str) -> str | None:
        """The value of annotation ``key``, or None."""
        annotations = self.metadata.annotations
        return annotations.get(key) if annotations else None

    def has_scheduling_gate(self, name: str) -> bool:
        """Whether ``spec.schedulingGates`` names ``name``."""
        return any(g.name == name for g in self.spec.schedulingGates or ())

    def condition(self, type_: str) -> PodCondition | None:
        """The status condition of the given type, or None."""
        for cond in self.status.conditions or ():
            if cond.type == type_:
                return cond
        return None


DISRUPTION_TARGET = "DisruptionTarget"
"""The pod condition saying why a pod is being deleted (set before every runway eviction)."""
