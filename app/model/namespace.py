"""The Namespace view the cache keeps: name and labels (a queue's ``namespaceSelector`` matches
the labels; DESIGN §2.1)."""

from __future__ import annotations

import msgspec


class NamespaceMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of a namespace."""

    name: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] | None = None


class Namespace(msgspec.Struct, frozen=True, omit_defaults=True):
    """A Namespace decoded down to its name, version and labels; the rest is skipped."""

    metadata: NamespaceMeta = NamespaceMeta()

    @property
    def name(self) -> str:
        """The namespace's name."""
        return self.metadata.name

    @property
    def labels(self) -> dict[str, str]:
        """The namespace's labels (empty dict when it has none)."""
        return self.metadata.labels or {}
