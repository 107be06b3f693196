"""Node views. The extender hot path only ever needs a node's name and its labels."""

from __future__ import annotations

import msgspec


class _NodeMeta(msgspec.Struct, frozen=True):
    name: str = ""
    labels: dict[str, str] | None = None


class NodeName(msgspec.Struct, frozen=True):
    """A Node decoded down to ``metadata.name`` and ``metadata.labels``; the rest is skipped."""

    metadata: _NodeMeta = _NodeMeta()

    @property
    def name(self) -> str:
        """The node's name."""
        return self.metadata.name


class NodeNameList(msgspec.Struct, frozen=True):
    """A ``NodeList`` decoded down to its items' names and labels."""

    items: list[NodeName] | None = None
