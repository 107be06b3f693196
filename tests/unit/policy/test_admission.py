"""The filter's rule chain: order of the rules and what each rejection tells the operator."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model import Pod
from app.model.eviction import EvictionRecord
from app.policy.admission import (
    ADMIT,
    RULES,
    Blocker,
    FilterInput,
    FilterPolicy,
    GateHold,
    admit,
    may_hold,
    preconditions,
    split_nodes,
)
from app.policy.claims import Claim

NOW = 1_800_000_000.0
POD = Pod()
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in \d+s\)")

DEACTIVATED = EvictionRecord(
    "PodsReadyTimeout", NOW - 10, count=3, deactivated=True, message="RequeuingLimitExceeded: x"
)
BACKOFF = EvictionRecord("PodsReadyTimeout", NOW - 10, count=2, requeue_at=NOW + 110)
PREEMPTED = EvictionRecord("Preempted", NOW - 10, preemptor_uid="p-uid")
GATE = GateHold(nominated_node="n1", outstanding_victims=2, until=NOW + 30)
BLOCKER = Blocker("ns/other", timeout_at=NOW + 200)


def facts(**kw: object) -> FilterInput:
    base: dict[str, object] = {"workload": "ns/wl", "queue": "team-a"}
    base.update(kw)
    return FilterInput(**base)  # type: ignore[arg-type]


def test_no_facts_admits_everywhere() -> None:
    assert admit() is ADMIT
    assert admit(facts()) is ADMIT


@pytest.mark.parametrize(
    ("kw", "rule"),
    [
        ({"record": DEACTIVATED, "gate": GATE, "blockers": [BLOCKER]}, "deactivated"),
        ({"record": BACKOFF, "gate": GATE, "blockers": [BLOCKER]}, "backoff"),
        ({"gate": GATE, "blockers": [BLOCKER], "queueing_strategy": "StrictFIFO"}, "gate"),
        (
            {"record": PREEMPTED, "preemptor_pending": True, "blockers": [BLOCKER]},
            "anti-flapping",
        ),
        (
            {"blockers": [BLOCKER], "queueing_strategy": "StrictFIFO", "queue_head": "ns/x"},
            "block-admission",
        ),
        ({"queueing_strategy": "StrictFIFO", "queue_head": "ns/x"}, "strict-fifo"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_first_rule_that_holds_answers(kw: dict[str, object], rule: str) -> None:
    verdict = admit(facts(**kw), NOW)
    assert verdict.rule == rule
    assert rule in RULES
    assert "ns/wl" in verdict.reason


def test_deactivated_says_how_to_reactivate() -> None:
    verdict = admit(facts(record=DEACTIVATED), NOW)
    assert not verdict.allowed and verdict.until is None
    assert "RequeuingLimitExceeded: x" in verdict.reason
    assert "POST /v1/workloads/ns/wl:activate" in verdict.reason


def test_backoff_says_until_when() -> None:
    verdict = admit(facts(record=BACKOFF), NOW)
    assert verdict.until == NOW + 110
    assert "2027-01-15T08:01:50Z (in 110s)" in verdict.reason
    assert "eviction #2" in verdict.reason and ":activate" in verdict.reason
    assert admit(facts(record=BACKOFF), NOW + 110) is ADMIT


def test_gate_keeps_only_the_nominated_node() -> None:
    verdict = admit(facts(gate=GATE), NOW)
    assert verdict.allowed and verdict.only_nodes == frozenset({"n1"})
    split = split_nodes(verdict, ["n0", "n1", "n2"])
    assert split.passed == ["n1"]
    assert set(split.unresolvable) == {"n0", "n2"}
    assert "preemption in flight" in split.unresolvable["n0"]
    assert "2 victim(s)" in verdict.reason and RFC3339.search(verdict.reason)


def test_gate_without_nomination_rejects_all() -> None:
    verdict = admit(facts(gate=GateHold(None, 1)), NOW)
    assert not verdict.allowed and verdict.rule == "gate"
    assert split_nodes(verdict, ["a"]).passed == []


def test_anti_flapping_is_bounded_and_needs_a_pending_preemptor() -> None:
    held = admit(facts(record=PREEMPTED, preemptor_pending=True, preemptor_name="ns/p"), NOW)
    assert held.rule == "anti-flapping" and held.until == NOW + 50
    assert "ns/p" in held.reason and RFC3339.search(held.reason)
    assert admit(facts(record=PREEMPTED, preemptor_pending=False), NOW) is ADMIT
    assert admit(facts(record=PREEMPTED, preemptor_pending=True), NOW + 50) is ADMIT
    policy = FilterPolicy(anti_flapping_seconds=600)
    assert admit(facts(record=PREEMPTED, preemptor_pending=True), NOW + 50, policy).rule


def test_block_admission_ignores_self_and_timed_out() -> None:
    verdict = admit(facts(blockers=[BLOCKER, Blocker("ns/z", NOW + 100)]), NOW)
    assert verdict.rule == "block-admission" and verdict.until == NOW + 100
    assert "ns/z and 1 other(s)" in verdict.reason and "blockAdmission: false" in verdict.reason
    assert admit(facts(blockers=[Blocker("ns/wl", NOW + 100)]), NOW) is ADMIT
    assert admit(facts(blockers=[Blocker("ns/z", NOW)]), NOW) is ADMIT


def test_strict_fifo_only_blocks_non_heads() -> None:
    strict = {"queueing_strategy": "StrictFIFO"}
    assert admit(facts(queue_head="ns/wl", **strict), NOW) is ADMIT
    assert admit(facts(queue_head=None, **strict), NOW) is ADMIT
    verdict = admit(facts(queue_head="ns/first", **strict), NOW)
    assert "queueingStrategy: BestEffortFIFO on queue team-a" in verdict.reason
    best_effort = facts(queue_head="ns/first", queueing_strategy="BestEffortFIFO")
    assert admit(best_effort, NOW) is ADMIT


def test_admitted_workload_skips_admission_rules() -> None:
    f = facts(blockers=[BLOCKER], queueing_strategy="StrictFIFO", queue_head="ns/x", admitted=True)
    assert admit(f, NOW) is ADMIT


def test_split_rejects_every_node_with_the_reason() -> None:
    verdict = admit(facts(record=DEACTIVATED), NOW)
    split = split_nodes(verdict, ["a", "b"])
    assert split.passed == [] and split.unresolvable == {"a": verdict.reason, "b": verdict.reason}
    assert split_nodes(ADMIT, ["a"]).passed is None


# --- the filter's shortcut is derived from the rules (issue #30 item 2) -----------------------


def test_the_chain_is_in_the_documented_order() -> None:
    """DESIGN §5 and the module docstring: the first rule that holds the pod answers."""
    assert RULES == (
        "deactivated",
        "backoff",
        "gate",
        "anti-flapping",
        "block-admission",
        "strict-fifo",
        "claim",
    )


_records = st.one_of(
    st.none(),
    st.builds(
        EvictionRecord,
        reason=st.sampled_from(["Preempted", "PodsReadyTimeout"]),
        time=st.floats(NOW - 1000, NOW),
        preemptor_uid=st.one_of(st.none(), st.just("p-uid")),
        count=st.integers(0, 5),
        requeue_at=st.one_of(st.none(), st.floats(NOW - 100, NOW + 100)),
        deactivated=st.booleans(),
    ),
)
_claims = st.lists(
    st.builds(
        Claim,
        node=st.sampled_from(["n1", "n2"]),
        preemptor_uid=st.just("q"),
        preemptor=st.just("ns/q"),
        priority=st.integers(0, 10),
        room=st.none(),
    ),
    max_size=2,
)


@given(
    record=_records,
    gate=st.one_of(st.none(), st.just(GATE)),
    pending=st.booleans(),
    blockers=st.lists(st.just(BLOCKER), max_size=1),
    strategy=st.sampled_from(["BestEffortFIFO", "StrictFIFO"]),
    head=st.one_of(st.none(), st.just("ns/w"), st.just("ns/other")),
    admitted=st.booleans(),
    claims=_claims,
)
def test_what_may_hold_rules_out_the_chain_admits(
    record: EvictionRecord | None,
    gate: GateHold | None,
    pending: bool,
    blockers: list[Blocker],
    strategy: str,
    head: str | None,
    admitted: bool,
    claims: list[Claim],
) -> None:
    """Surely free (no rule's precondition holds) implies the chain admits."""
    input_ = FilterInput(
        workload="ns/w",
        record=record,
        gate=gate,
        preemptor_pending=pending,
        preemptor_name="ns/p" if pending else None,
        blockers=tuple(blockers),
        queueing_strategy=strategy,  # type: ignore[arg-type]
        queue_head=head,
        admitted=admitted,
        claims=tuple(claims),
    )
    if not may_hold(preconditions(input_)):
        assert admit(input_, NOW) == ADMIT
