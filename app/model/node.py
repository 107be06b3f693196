"""Node views: ``NodeName`` for the extender hot path (name and labels only), ``Node`` as the
cache keeps it (name, labels, allocatable, cordon flag)."""

from __future__ import annotations

import msgspec


class _NodeMeta(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    labels: dict[str, str] | None = None


class NodeName(msgspec.Struct, frozen=True, gc=False):
    """A Node decoded down to ``metadata.name`` and ``metadata.labels``; the rest is skipped."""

    metadata: _NodeMeta = _NodeMeta()

    @property
    def name(self) -> str:
        """The node's name."""
        return self.metadata.name


class NodeMeta(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``metadata`` of a node."""

    name: str = ""
    uid: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] | None = None


class NodeSpec(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``spec`` of a node: only whether it is cordoned."""

    unschedulable: bool | None = None


class NodeStatus(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``status`` of a node: what pods may request (quantities stay strings)."""

    allocatable: dict[str, str] | None = None


class Node(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """A node as runway's cache keeps it: name, labels, allocatable, cordon flag."""

    metadata: NodeMeta = NodeMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()

    @property
    def name(self) -> str:
        """The node's name."""
        return self.metadata.name

    @property
    def labels(self) -> dict[str, str]:
        """The node's labels (empty dict when it has none)."""
        return self.metadata.labels or {}

    @property
    def allocatable(self) -> dict[str, str]:
        """``status.allocatable`` (empty dict before the kubelet reports it)."""
        return self.status.allocatable or {}
