"""The cluster model: nodes with allocatable resources, pods bound to them, and where
kube-scheduler would put a pod (docs/simulator.md, "The cluster model").

What it models of kube-scheduler 1.20 (``pkg/scheduler/core/generic_scheduler.go``):

- **feasibility**: a pod fits a node when every requested resource fits in what the node has
  left (NodeResourcesFit); nothing else filters (no taints, affinity, ports or volumes).
- **which node**: a spread, as NodeResourcesLeastAllocated scores: the feasible node with the
  most left of the *index resource* (a device such as ``nvidia.com/gpu`` when nodes have one,
  else ``cpu``), ties to the node that has had that much free the longest. kube-scheduler breaks
  ties at random and samples nodes (``numFeasibleNodesToFind``); other score plugins (balanced
  allocation, image locality, runway's ``prioritize``) are left out.

Amounts are integers as ``app.policy.quantity`` counts them (``cpu`` in millicores).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from app.policy.quantity import Resources
from app.simulator.trace import NodeGroup


@dataclass(slots=True)
class SimNode:
    """One node: what it has, what is left, and the pods bound to it (UID → requests)."""

    name: str
    allocatable: Mapping[str, int]
    pool: str | None = None
    free: Resources = field(default_factory=dict)
    pods: dict[str, Mapping[str, int]] = field(default_factory=dict)

    def fits(self, requests: Mapping[str, int]) -> bool:
        """Every requested resource fits in what is left."""
        free = self.free
        return all(free.get(k, 0) >= v for k, v in requests.items())

    def fits_without(self, requests: Mapping[str, int], removed: Iterable[str]) -> bool:
        """The pod would fit once the pods ``removed`` (UIDs bound here) are gone."""
        freed = dict(self.free)
        for uid in removed:
            for k, v in self.pods[uid].items():
                freed[k] = freed.get(k, 0) + v
        return all(freed.get(k, 0) >= v for k, v in requests.items())


class Cluster:
    """The nodes and their bound pods; binds and unbinds keep ``free`` exact."""

    def __init__(self, groups: Sequence[NodeGroup]) -> None:
        self.nodes: list[SimNode] = []
        for g in groups:
            width = len(str(g.count - 1))
            for i in range(g.count):
                self.nodes.append(
                    SimNode(
                        name=f"{g.name}-{i:0{width}d}",
                        allocatable=dict(g.allocatable),
                        pool=g.pool,
                        free=dict(g.allocatable),
                    )
                )
        self.by_name = {n.name: n for n in self.nodes}
        if len(self.by_name) != len(self.nodes):
            raise ValueError("two nodes have the same name")
        self.capacity: Resources = {}
        for n in self.nodes:
            for k, v in n.allocatable.items():
                self.capacity[k] = self.capacity.get(k, 0) + v
        self.allocated: Resources = dict.fromkeys(self.capacity, 0)
        # An upper bound of any node's free amount per resource: binds only lower the truth,
        # unbinds raise the bound, a failed full search makes it exact again.
        self._max_free: Resources = {}
        for n in self.nodes:
            for k, v in n.free.items():
                self._max_free[k] = max(self._max_free.get(k, 0), v)
        self.node_of: dict[str, str] = {}
        # Nodes by what they have left of one resource (a device such as a GPU if any node has
        # one, else cpu), so a search visits only nodes with room for that resource.
        devices = sorted(
            {k for n in self.nodes for k in n.allocatable if k not in ("cpu", "memory")}
        )
        self.index_resource = devices[0] if devices else "cpu"
        self._position = {n.name: i for i, n in enumerate(self.nodes)}
        self._buckets: dict[int, dict[int, None]] = {}
        for i, n in enumerate(self.nodes):
            self._buckets.setdefault(n.free.get(self.index_resource, 0), {})[i] = None

    def __iter__(self) -> Iterator[SimNode]:
        return iter(self.nodes)

    def surely_unfit(self, requests: Mapping[str, int]) -> bool:
        """No node can have room for ``requests`` (a cheap, safe test)."""
        if requests.get(self.index_resource, 0) > max(self._buckets, default=0):
            return True
        mf = self._max_free
        return any(mf.get(k, 0) < v for k, v in requests.items())

    def place(self, requests: Mapping[str, int]) -> SimNode | None:
        """The node a pod with ``requests`` is bound to, or None when none has room: the node
        with the most left of the index resource, then the one that has had that much longest.
        """
        if self.surely_unfit(requests):
            return None
        need = requests.get(self.index_resource, 0)
        nodes = self.nodes
        scanned = 0
        for amount in sorted(self._buckets, reverse=True):
            if amount < need:
                break
            for i in self._buckets[amount]:
                node = nodes[i]
                if node.fits(requests):
                    return node
                scanned += 1
        if scanned == len(nodes):
            # Every node looked at: what is free is known exactly again.
            exact: Resources = {}
            for node in nodes:
                for k, v in node.free.items():
                    if v > exact.get(k, 0):
                        exact[k] = v
            self._max_free = exact
        return None

    def _move(self, node: SimNode, before: int) -> None:
        after = node.free.get(self.index_resource, 0)
        if after != before:
            i = self._position[node.name]
            bucket = self._buckets[before]
            del bucket[i]
            if not bucket:
                del self._buckets[before]
            self._buckets.setdefault(after, {})[i] = None

    def bind(self, uid: str, node: SimNode, requests: Mapping[str, int]) -> None:
        """Bind pod ``uid`` to ``node``; its requests must fit (raises ``ValueError``)."""
        if not node.fits(requests):
            raise ValueError(f"pod {uid} does not fit on {node.name}")
        before = node.free.get(self.index_resource, 0)
        for k, v in requests.items():
            node.free[k] = node.free.get(k, 0) - v
            self.allocated[k] = self.allocated.get(k, 0) + v
        node.pods[uid] = requests
        self.node_of[uid] = node.name
        self._move(node, before)

    def unbind(self, uid: str) -> SimNode:
        """Remove pod ``uid`` from its node; returns the node."""
        node = self.by_name[self.node_of.pop(uid)]
        requests = node.pods.pop(uid)
        before = node.free.get(self.index_resource, 0)
        mf = self._max_free
        for k, v in requests.items():
            node.free[k] = node.free.get(k, 0) + v
            self.allocated[k] -= v
            if node.free[k] > mf.get(k, 0):
                mf[k] = node.free[k]
        self._move(node, before)
        return node

    def over_capacity(self) -> list[str]:
        """Nodes whose bound pods request more than they have (the model's invariant: none)."""
        bad = []
        for n in self.nodes:
            for k, cap in n.allocatable.items():
                used = sum(r.get(k, 0) for r in n.pods.values())
                if used > cap or n.free.get(k, 0) != cap - used:
                    bad.append(n.name)
                    break
            else:
                if any(k not in n.allocatable and v for r in n.pods.values() for k, v in r.items()):
                    bad.append(n.name)
        return bad
