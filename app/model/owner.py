"""A workload's controller owner (a Job, a JobSet...), as read from a pod's ownerReferences, and
what runway keeps of an owner: its UID and its ``runway.dev/`` annotations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.model.pod import Pod

ANNOTATION_PREFIX = "runway.dev/"
"""Only annotations under this prefix are kept for owners."""


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


@dataclass(frozen=True)
class OwnerEntry:
    """What the owner cache keeps of one owner: UID and its ``runway.dev/`` annotations."""

    uid: str
    annotations: Mapping[str, str]
    resource_version: str = field(default="", compare=False)
    """The version these annotations were read at (to never fold an older one over a newer)."""


def owner_of(pod: Pod) -> OwnerRef | None:
    """The pod's controller ownerReference (``controller: true``), or None for a bare pod."""
    for ref in pod.metadata.ownerReferences or ():
        if ref.controller and ref.name and ref.kind and ref.apiVersion:
            return OwnerRef(ref.apiVersion, ref.kind, pod.metadata.namespace, ref.name, ref.uid)
    return None


def runway_annotations(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """The ``runway.dev/`` annotations of ``annotations``."""
    if not annotations:
        return {}
    return {k: v for k, v in annotations.items() if k.startswith(ANNOTATION_PREFIX)}
