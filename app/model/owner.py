"""A workload's controller owner (a Job, a JobSet...), as read from a pod's ownerReferences: the
owner of its WorkloadRecord, and a subject of its Events. runway never reads the owner itself."""

from __future__ import annotations

from dataclasses import dataclass

from app.model.pod import Pod


@dataclass(frozen=True, order=True)
class OwnerRef:
    """A workload's controller owner, named the ways the API needs."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @property
    def kind_key(self) -> tuple[str, str]:
        """``(apiVersion, kind)``: one reflector per value."""
        return (self.api_version, self.kind)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def owner_of(pod: Pod) -> OwnerRef | None:
    """The pod's controller ownerReference (``controller: true``), or None for a bare pod."""
    for ref in pod.metadata.ownerReferences or ():
        if ref.controller and ref.name and ref.kind and ref.apiVersion:
            return OwnerRef(ref.apiVersion, ref.kind, pod.metadata.namespace, ref.name, ref.uid)
    return None
