"""Decoded extender requests. Field names follow ``k8s.io/kube-scheduler/extender/v1``."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from app.model import NodeName, Pod
from app.wire.errors import WireError


class _ItemsRaw(msgspec.Struct):
    """A NodeList with each item kept as raw JSON: validated as JSON, never built into objects."""

    items: list[msgspec.Raw] | None = None


_items_decoder = msgspec.json.Decoder(_ItemsRaw)
_node_decoder = msgspec.json.Decoder(NodeName)


@dataclass
class NodeItems:
    """The ``Nodes`` NodeList of a non-node-cache-capable request, items kept as raw JSON."""

    raw: msgspec.Raw
    items: list[msgspec.Raw]
    _names: list[str] | None = field(default=None, repr=False)
    _labels: list[dict[str, str]] | None = field(default=None, repr=False)

    @classmethod
    def decode(cls, raw: msgspec.Raw) -> NodeItems:
        """Split a raw NodeList into raw items, checking only its shape (``WireError`` if wrong)."""
        try:
            decoded = _items_decoder.decode(raw)
        except msgspec.ValidationError as exc:
            raise WireError(
                f"invalid request: `Nodes` must be a NodeList object with `items`: {exc}"
            ) from exc
        items = decoded.items or []
        for i, item in enumerate(items):
            if bytes(memoryview(item)[:1]) != b"{":
                raise WireError(f"invalid request: `Nodes.items[{i}]` must be a Node object")
        return cls(raw=raw, items=items)

    def names(self) -> list[str]:
        """Every node's ``metadata.name``, decoded on first use only."""
        if self._names is None:
            self._decode_meta()
        assert self._names is not None
        return self._names

    def labels(self) -> list[dict[str, str]]:
        """Every node's labels, in item order, decoded on first use only."""
        if self._labels is None:
            self._decode_meta()
        assert self._labels is not None
        return self._labels

    def _decode_meta(self) -> None:
        nodes = []
        for i, item in enumerate(self.items):
            try:
                nodes.append(_node_decoder.decode(item))
            except msgspec.ValidationError as exc:
                raise WireError(f"invalid request: `Nodes.items[{i}]`: {exc}") from exc
        self._names = [n.metadata.name for n in nodes]
        self._labels = [n.metadata.labels or {} for n in nodes]


@dataclass
class ExtenderArgs:
    """``ExtenderArgs`` (filter and prioritize): the pod and either node names or full nodes."""

    pod: Pod
    node_names: list[str] | None
    nodes: NodeItems | None

    @property
    def node_cache_capable(self) -> bool:
        """True when the scheduler sent ``NodeNames`` (``nodeCacheCapable: true``)."""
        return self.node_names is not None

    def names(self) -> list[str]:
        """The names of the offered nodes, whichever mode the scheduler used."""
        if self.node_names is not None:
            return self.node_names
        assert self.nodes is not None
        return self.nodes.names()


@dataclass(frozen=True)
class VictimCandidate:
    """One offered victim: its UID always, the full pod when the scheduler sent it."""

    uid: str
    pod: Pod | None = None


@dataclass
class PreemptionArgs:
    """``ExtenderPreemptionArgs``: the preemptor and, per offered node, its victims."""

    pod: Pod
    victims: dict[str, list[VictimCandidate]]
    pdb_violations: dict[str, int]
    meta: bool  # True when sent as NodeNameToMetaVictims (nodeCacheCapable)
