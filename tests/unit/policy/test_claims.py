"""Claims (policy/claims.py) and the filter's claim rule (policy/admission.py): a preemption in
flight keeps lower- or equal-priority pods off its node where they would not fit beside it."""

from __future__ import annotations

import pytest

from app.policy.admission import FilterInput, admit, split_nodes
from app.policy.claims import Claim, blocks, room_after

CPU = "cpu"


def claim(room: dict[str, int] | None, priority: int = 100) -> Claim:
    return Claim("n1", "uid-p", "ns/p", priority, room, until=None)


@pytest.mark.parametrize(
    ("uid", "priority", "requests", "room", "blocked"),
    [
        ("uid-q", 10, {CPU: 500}, {CPU: 1000}, False),  # fits beside the preemptor
        ("uid-q", 10, {CPU: 1500}, {CPU: 1000}, True),  # does not fit
        ("uid-q", 100, {CPU: 1500}, {CPU: 1000}, True),  # equal priority: kept off too
        ("uid-q", 101, {CPU: 1500}, {CPU: 1000}, False),  # higher priority: not held back
        ("uid-p", 100, {CPU: 1500}, {CPU: 0}, False),  # the preemptor itself
        ("uid-q", 10, {}, None, True),  # room unknown: keep lower pods off
        ("uid-q", 10, {"memory": 1}, {CPU: 1000}, True),  # a resource with no room left
    ],
)
def test_blocks(
    uid: str,
    priority: int,
    requests: dict[str, int],
    room: dict[str, int] | None,
    blocked: bool,
) -> None:
    assert blocks(claim(room), uid, priority, requests) is blocked


def test_room_after_subtracts_the_staying_pods_and_the_preemptor() -> None:
    room = room_after({CPU: 4000, "memory": 8}, {CPU: 1000}, {CPU: 2000, "memory": 2})
    assert room == {CPU: 1000, "memory": 6}


def test_a_claim_keeps_its_node_only_and_says_why() -> None:
    verdict = admit(FilterInput(workload="ns/q", claims=(claim({CPU: 0}),)), now=0)
    assert verdict.allowed and verdict.rule == "claim"
    split = split_nodes(verdict, ["n0", "n1", "n2"])
    assert split.passed == ["n0", "n2"]
    assert list(split.unresolvable) == ["n1"]
    assert "kept free for a preemption in flight" in split.unresolvable["n1"]
    assert "ns/p" not in split.unresolvable["n1"]  # never another tenant's pod name
    assert "Nothing to do" in split.unresolvable["n1"]


def test_a_rejection_wins_over_a_claim() -> None:
    facts = FilterInput(
        workload="ns/q", claims=(claim({CPU: 0}),), queueing_strategy="StrictFIFO", queue_head="x"
    )
    verdict = admit(facts, now=0)
    assert not verdict.allowed and verdict.rule == "strict-fifo"
