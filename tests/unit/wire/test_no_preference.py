"""``NO_PREFERENCE`` (``[]``) ranks nodes as a uniform ``HostPriorityList`` would.

kube-scheduler 1.20 (``core/generic_scheduler.go``, ``prioritizeNodes``) adds each listed host's
``score * weight`` to ``combinedScores[host]``, then adds ``combinedScores[node] *
(MaxNodeScore / MaxExtenderPriority)`` to every node's total; a host the extender did not list
adds 0. ``selectHost`` takes a node of the highest total. Modelled here as the scheduler does it.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from app.wire import NO_PREFERENCE

MAX_NODE_SCORE, MAX_EXTENDER_PRIORITY = 100, 10


def totals(base: dict[str, int], reply: list[dict[str, int | str]], weight: int) -> dict[str, int]:
    """The nodes' totals after one extender's prioritize reply, as 1.20 sums them."""
    combined: dict[str, int] = {}
    for entry in reply:
        host, score = str(entry["Host"]), int(entry["Score"])
        combined[host] = combined.get(host, 0) + score * weight
    factor = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
    return {node: s + combined.get(node, 0) * factor for node, s in base.items()}


def best(scores: dict[str, int]) -> set[str]:
    """The nodes selectHost may pick."""
    top = max(scores.values())
    return {node for node, s in scores.items() if s == top}


@given(
    st.dictionaries(st.text(min_size=1, max_size=8), st.integers(0, 700), min_size=1, max_size=30),
    st.integers(0, 10),
    st.integers(1, 100),
)
def test_no_preference_picks_the_nodes_a_uniform_list_picks(
    base: dict[str, int], score: int, weight: int
) -> None:
    uniform: list[dict[str, int | str]] = [{"Host": n, "Score": score} for n in base]
    assert best(totals(base, json.loads(NO_PREFERENCE), weight)) == best(
        totals(base, uniform, weight)
    )
    # and the order of every node, not just the winners
    with_uniform = totals(base, uniform, weight)
    without = totals(base, json.loads(NO_PREFERENCE), weight)
    assert sorted(base, key=with_uniform.__getitem__) == sorted(base, key=without.__getitem__)
