"""Lean views of Kubernetes objects: only the fields runway reads.

The same structs are decoded from the scheduler's extender payloads (``app.wire``) and from the
API server's list/watch streams (``app.kube``), so policy sees one shape whatever the source and
the cache keeps a few hundred bytes per pod instead of whole objects.
"""

from app.model.node import Node, NodeName
from app.model.pod import (
    Container,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)

__all__ = [
    "Container",
    "Node",
    "NodeName",
    "ObjectMeta",
    "OwnerReference",
    "Pod",
    "PodCondition",
    "PodSpec",
    "PodStatus",
    "ResourceRequirements",
]
