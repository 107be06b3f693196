"""Decoded extender requests. Field names follow ``k8s.io/kube-scheduler/extender/v1``."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from app.model import NodeName, Pod
from app.wire.errors import WireError


class NodeListItems(msgspec.Struct):
    """A NodeList with each item kept as raw JSON: validated as JSON, never built into objects.

    Decoded inside the request body in the same pass as the rest of it: the items are zero-copy
    views into the body, so a 5,000-node NodeList costs one scan and no allocation per field.
    """

    items: list[msgspec.Raw] | None = None


_items_decoder = msgspec.json.Decoder(NodeListItems)
_node_decoder = msgspec.json.Decoder(NodeName)
_OPEN_BRACE = ord("{")


@dataclass
class NodeItems:
    """The ``Nodes`` NodeList of a non-node-cache-capable request, items kept as raw JSON."""

    items: list[msgspec.Raw]
    _names: list[str] | None = field(default=None, repr=False)
    _labels: list[dict[str, str]] | None = field(default=None, repr=False)

    @classmethod
    def decode(cls, raw: msgspec.Raw | bytes) -> NodeItems:
        """Split a raw NodeList into raw items, checking only its shape (``WireError`` if wrong)."""
        try:
            decoded = _items_decoder.decode(raw)
        except msgspec.ValidationError as exc:
            raise WireError(
                f"invalid request: `Nodes` must be a NodeList object with `items`: {exc}"
            ) from exc
        except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
            raise WireError(f"invalid request: `Nodes` cannot be decoded: {exc!r}") from exc
        return cls.of(decoded)

    @classmethod
    def of(cls, decoded: NodeListItems) -> NodeItems:
        """Wrap already-split items, checking that each is a JSON object (``WireError`` if not)."""
        items = decoded.items or []
        for i, item in enumerate(items):
            # One byte read per item: the JSON scan already proved each item well-formed.
            if memoryview(item)[0] != _OPEN_BRACE:
                raise WireError(f"invalid request: `Nodes.items[{i}]` must be a Node object")
        return cls(items=items)

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
        decode = _node_decoder.decode
        try:
            nodes = [decode(item) for item in self.items]
        except (RecursionError, UnicodeError, OverflowError, MemoryError) as exc:
            raise WireError(f"invalid request: a `Nodes` item cannot be decoded ({exc!r})") from exc
        except msgspec.ValidationError:
            for i, item in enumerate(self.items):  # the error path only: find which item
                try:
                    decode(item)
                except msgspec.ValidationError as exc:
                    raise WireError(f"invalid request: `Nodes.items[{i}]`: {exc}") from exc
            raise
        self._names = [n.metadata.name for n in nodes]
        self._labels = [n.metadata.labels or {} for n in nodes]


@dataclass
class ExtenderArgs:
    """``ExtenderArgs`` (filter and prioritize): the pod and either node names or full nodes."""

    pod: Pod
    node_names: list[str] | None
    nodes: NodeItems | None
    body: bytes = b""
    """The request body the node items are views into (for the zero-copy echo)."""

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
