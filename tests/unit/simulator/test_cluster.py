"""The cluster model: fit, spread, bind/unbind bookkeeping."""

from __future__ import annotations

import pytest

from app.simulator.cluster import Cluster
from app.simulator.trace import NodeGroup

GPU = "nvidia.com/gpu"


def gpu_cluster(count: int = 3) -> Cluster:
    return Cluster([NodeGroup("g", count, {"cpu": 64000, GPU: 8})])


def test_nodes_are_named_by_group_and_index() -> None:
    cluster = Cluster([NodeGroup("a", 2, {"cpu": 1000}), NodeGroup("b", 11, {"cpu": 1000})])
    names = [n.name for n in cluster]
    assert names[:3] == ["a-0", "a-1", "b-00"] and names[-1] == "b-10"
    assert cluster.capacity == {"cpu": 13000}


def test_place_spreads_to_the_node_with_the_most_free_gpus() -> None:
    cluster = gpu_cluster()
    first = cluster.place({GPU: 2})
    assert first is not None
    cluster.bind("p1", first, {GPU: 2})
    second = cluster.place({GPU: 2})
    assert second is not None and second.name != first.name


def test_place_returns_none_when_nothing_fits_and_unbind_gives_the_room_back() -> None:
    cluster = gpu_cluster(1)
    (node,) = cluster.nodes
    cluster.bind("p1", node, {GPU: 8, "cpu": 1000})
    assert cluster.place({GPU: 1}) is None
    assert cluster.surely_unfit({GPU: 1})
    cluster.unbind("p1")
    assert cluster.place({GPU: 1}) is node
    assert cluster.allocated == {"cpu": 0, GPU: 0}


def test_a_resource_the_node_lacks_never_fits() -> None:
    cluster = Cluster([NodeGroup("c", 2, {"cpu": 8000})])
    assert cluster.place({GPU: 1}) is None


def test_bind_refuses_what_does_not_fit() -> None:
    cluster = gpu_cluster(1)
    with pytest.raises(ValueError, match="does not fit"):
        cluster.bind("p", cluster.nodes[0], {GPU: 9})
    assert cluster.over_capacity() == []
