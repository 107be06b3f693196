"""prioritize: failed-pool nodes score 0, others 10, with a locality bonus (normalised)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.model import Pod
from app.policy.scoring import MAX_SCORE, MIN_SCORE, NodeFacts, ScoringInput, score_nodes

POD = Pod()
A1 = NodeFacts("a1", {"runway.dev/pool": "a"})
A2 = NodeFacts("a2", {"runway.dev/pool": "a"})
B1 = NodeFacts("b1", {"runway.dev/pool": "b"})
BARE = NodeFacts("bare")


def test_without_facts_every_node_scores_ten() -> None:
    assert score_nodes(POD, [A1, B1, BARE]) == [10, 10, 10]


def test_failed_pool_scores_zero_others_ten() -> None:
    facts = ScoringInput(failed_pools=("a",))
    assert score_nodes(POD, [A1, A2, B1, BARE], facts) == [0, 0, 10, 10]


def test_pool_label_key_is_configurable() -> None:
    node = NodeFacts("z", {"topology.kubernetes.io/zone": "z1"})
    facts = ScoringInput(failed_pools=("z1",), pool_label="topology.kubernetes.io/zone")
    assert score_nodes(POD, [node, A1], facts) == [0, 10]


def test_locality_bonus_is_normalised() -> None:
    facts = ScoringInput(failed_pools=("a",), workload_nodes=frozenset({"a2", "b1"}))
    assert score_nodes(POD, [A1, A2, B1, BARE], facts) == [0, 2, 10, 8]
    only_local = ScoringInput(workload_nodes=frozenset({"b1"}))
    assert score_nodes(POD, [A1, B1], only_local) == [8, 10]


@given(
    pools=st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
    local=st.sets(st.sampled_from(["a1", "a2", "b1", "bare"])),
)
def test_scores_are_integers_in_range(pools: list[str], local: set[str]) -> None:
    facts = ScoringInput(failed_pools=tuple(pools), workload_nodes=frozenset(local))
    scores = score_nodes(POD, [A1, A2, B1, BARE], facts)
    assert all(isinstance(s, int) and MIN_SCORE <= s <= MAX_SCORE for s in scores)
