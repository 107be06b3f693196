"""Queue order of pending workloads, replaying Kueue's ordering cases from upstream-cases.json.

Mapping: Kueue's ``Evicted`` condition (status True, reason, lastTransitionTime) is runway's
eviction record (reason, time). An ``Evicted=False`` condition is an eviction that is over (the
workload was admitted again); runway passes no record for it, since the record only orders a
workload that is pending *because of* that eviction. Kueue's ``requeuingTimestamp`` in these tests
is ``waitForPodsReady.requeuingStrategy.timestamp``, which in runway sets the PodsReadyTimeout
strategy only (preemption keeps its own default, Creation) — the same as Kueue's behaviour.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.config import parse_config
from app.config.requeue import RequeuingStrategyConfig
from app.model.eviction import EvictionRecord
from app.model.gate import seal
from app.model.record import RecordState
from app.policy import admission
from app.policy.backoff import next_eviction_state, reactivate
from app.policy.ordering import (
    PendingWorkload,
    QueueOrderStrategy,
    pending_order,
    queue_head,
    queue_order_timestamp,
)
from tests.reference import upstream_cases

NOW = 1_800_000_000.0


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["source"]["case"] for c in cases]


def strategy_from(timestamp: str) -> QueueOrderStrategy:
    config = parse_config({"waitForPodsReady": {"requeuingStrategy": {"timestamp": timestamp}}})
    return QueueOrderStrategy.from_sections(config.wait_for_pods_ready, config.requeue_strategy)


def record_from(cond: dict[str, Any] | None) -> EvictionRecord | None:
    if cond is None or cond["status"] != "True":
        return None
    return EvictionRecord(reason=cond["reason"], time=float(cond["t"]))


TIMESTAMP = upstream_cases("kueue.ordering.timestamp")


@pytest.mark.parametrize("case", TIMESTAMP, ids=ids(TIMESTAMP))
def test_kueue_queue_order_timestamp(case: dict[str, Any]) -> None:
    inp = case["input"]
    cond = inp["evictedCondition"]
    record = record_from(cond)
    for setting, expected in case["expected"].items():
        got = queue_order_timestamp(float(inp["creation_s"]), record, strategy_from(setting))
        want = float(inp["creation_s"]) if expected == "creation" else float(cond["t"])
        assert got == want, setting


POP = upstream_cases("kueue.ordering.pop")


def pending_from(w: dict[str, Any]) -> PendingWorkload:
    return PendingWorkload(
        name=w["name"],
        priority=w.get("priority", 0),
        creation_time=float(w["creation"]),
        record=record_from(w.get("evicted")),
    )


@pytest.mark.parametrize("case", POP, ids=ids(POP))
def test_kueue_pop_order(case: dict[str, Any]) -> None:
    inp = case["input"]
    strategy = strategy_from(inp["requeuingTimestamp"])
    workloads = [pending_from(inp["w1"]), pending_from(inp["w2"])]
    popped = case["expected"]["popped"]
    assert pending_order(workloads, strategy)[0].name == popped
    assert pending_order(workloads[::-1], strategy)[0].name == popped
    head = queue_head(workloads, strategy, now=10.0)
    assert head is not None and head.name == popped
    # StrictFIFO: filter holds back the other one, naming the head.
    other = next(w.name for w in workloads if w.name != popped)
    facts = admission.FilterInput(
        other, queue="q", queueing_strategy=inp["queueingStrategy"], queue_head=head.name
    )
    verdict = admission.admit(facts, now=10.0)
    assert (verdict.allowed, verdict.rule) == (False, "strict-fifo")
    assert popped in verdict.reason


def test_every_kueue_ordering_case_is_replayed() -> None:
    assert sorted(ids(TIMESTAMP + POP)) == sorted(ids(upstream_cases("kueue.ordering")))


# --- runway's own rules


def test_defaults_eviction_for_pods_ready_timeout_creation_for_preemption() -> None:
    defaults = parse_config({})
    s = QueueOrderStrategy.from_sections(defaults.wait_for_pods_ready, defaults.requeue_strategy)
    assert (s.pods_ready_timeout, s.priority_preemption) == ("Eviction", "Creation")
    timed_out = EvictionRecord("PodsReadyTimeout", time=500.0)
    preempted = EvictionRecord("Preempted", time=500.0)
    assert queue_order_timestamp(1.0, timed_out, s) == 500.0
    assert queue_order_timestamp(1.0, preempted, s) == 1.0


def test_requeue_strategy_shape_per_reason() -> None:
    config = parse_config(
        {
            "requeueStrategy": {
                "podsReadyTimeout": "UseCreationTimestamp",
                "priorityPreemption": "UseEvictionTimestamp",
            }
        }
    )
    s = QueueOrderStrategy.from_sections(config.wait_for_pods_ready, config.requeue_strategy)
    assert queue_order_timestamp(1.0, EvictionRecord("PodsReadyTimeout", 500.0), s) == 1.0
    assert queue_order_timestamp(1.0, EvictionRecord("Preempted", 500.0), s) == 500.0


def requeuing(**fields: Any) -> RequeuingStrategyConfig:
    return parse_config(
        {"waitForPodsReady": {"enable": True, "requeuingStrategy": fields}}
    ).wait_for_pods_ready.requeuing_strategy


@pytest.mark.parametrize(
    ("case", "record", "creation_order_timestamp"),
    [
        # Kueue's GetQueueOrderTimestamp: the eviction time only after a PodsReadyTimeout
        ("evicted by a PodsReady timeout", EvictionRecord("PodsReadyTimeout", 500.0), False),
        # Kueue evicts a workload it deactivates (requeue limit) with reason Deactivated
        ("deactivated", EvictionRecord("Deactivated", 500.0, deactivated=True), True),
        ("reactivated after a deactivation", EvictionRecord("Deactivated", 500.0), True),
    ],
)
@pytest.mark.parametrize("setting", ["Eviction", "Creation"])
def test_a_deactivated_workload_is_ordered_by_its_creation(
    case: str, record: EvictionRecord, creation_order_timestamp: bool, setting: str
) -> None:
    config = parse_config(
        {
            "requeueStrategy": {
                "podsReadyTimeout": f"Use{setting}Timestamp",
                "priorityPreemption": f"Use{setting}Timestamp",
            }
        }
    )
    s = QueueOrderStrategy.from_sections(config.wait_for_pods_ready, config.requeue_strategy)
    got = queue_order_timestamp(1.0, record, s)
    assert got == (1.0 if creation_order_timestamp or setting == "Creation" else 500.0), case


def test_reactivation_after_the_requeue_limit_goes_back_to_creation_order() -> None:
    """Issue #37: evicted by PodsReady timeouts past backoffLimitCount, deactivated (reason
    Deactivated, as Kueue), reactivated: it sorts by its creation again, ahead of a workload
    created after it, not at the back by its last eviction."""
    cfg = requeuing(backoffLimitCount=1)
    s = QueueOrderStrategy()  # the defaults: Eviction after a PodsReadyTimeout
    record = next_eviction_state(None, "PodsReadyTimeout", 100.0, cfg)
    assert (record.reason, record.deactivated) == ("PodsReadyTimeout", False)
    record = next_eviction_state(record, "PodsReadyTimeout", 300.0, cfg)
    assert (record.reason, record.deactivated) == ("Deactivated", True)
    back = reactivate(record)
    old = PendingWorkload("ns/old", 0, creation_time=1.0, record=back)
    young = PendingWorkload("ns/young", 0, creation_time=200.0)
    assert [w.name for w in pending_order([young, old], s)] == ["ns/old", "ns/young"]
    # Kueue: a workload deactivated by hand while it waits out a PodsReadyTimeout backoff is
    # not evicted again: its reason stays, and so does its place by that eviction
    timed_out = EvictionRecord("PodsReadyTimeout", 100.0, count=1, requeue_at=160.0)
    by_hand = RecordState(active=False, eviction=timed_out).record
    assert by_hand is not None and by_hand.reason == "PodsReadyTimeout" and by_hand.deactivated
    again = RecordState(active=True, eviction=timed_out).record  # spec.active back to true
    assert again is not None and queue_order_timestamp(1.0, again, s) == 100.0


def test_pending_preemptor_goes_before_the_workload_it_evicted() -> None:
    # Same priority; the victim's Creation timestamp (front) would otherwise win.
    s = QueueOrderStrategy()
    victim = PendingWorkload(
        "ns/victim", 5, 1.0, EvictionRecord("Preempted", 100.0, preemptor_uid="p-uid")
    )
    preemptor = PendingWorkload("ns/preemptor", 5, 50.0, pod_uids=frozenset({"p-uid"}))
    bystander = PendingWorkload("ns/bystander", 5, 2.0)
    order = [w.name for w in pending_order([victim, bystander, preemptor], s)]
    assert order == ["ns/preemptor", "ns/victim", "ns/bystander"]
    # Only ahead of the workloads it evicted: an older unrelated workload stays ahead.
    older = PendingWorkload("ns/older", 5, 0.5)
    order = [w.name for w in pending_order([victim, older, preemptor], s)]
    assert order == ["ns/older", "ns/preemptor", "ns/victim"]
    # Priority still comes first.
    high = PendingWorkload("ns/high", 9, 99.0)
    assert pending_order([victim, preemptor, high], s)[0].name == "ns/high"


def test_a_preemptor_named_sealed_still_goes_before_the_workload_it_evicted() -> None:
    """Issue #36: a victim's record names a preemptor of another namespace by its sealed UID."""
    s = QueueOrderStrategy()
    victim = PendingWorkload(
        "ns/victim", 5, 1.0, EvictionRecord("Preempted", 100.0, preemptor_uid=seal("p-uid"))
    )
    preemptor = PendingWorkload("other/preemptor", 5, 50.0, pod_uids=frozenset({"p-uid"}))
    bystander = PendingWorkload("ns/bystander", 5, 2.0)
    order = [w.name for w in pending_order([victim, bystander, preemptor], s)]
    assert order == ["other/preemptor", "ns/victim", "ns/bystander"]


def test_name_breaks_ties() -> None:
    a, b = PendingWorkload("ns/a", 0, 1.0), PendingWorkload("ns/b", 0, 1.0)
    assert [w.name for w in pending_order([b, a], QueueOrderStrategy())] == ["ns/a", "ns/b"]


def test_head_skips_deactivated_and_backoff() -> None:
    s = QueueOrderStrategy(pods_ready_timeout="Creation")
    deactivated = PendingWorkload(
        "ns/d", 0, 1.0, EvictionRecord("PodsReadyTimeout", 5.0, deactivated=True)
    )
    backing_off = PendingWorkload(
        "ns/b", 0, 2.0, EvictionRecord("PodsReadyTimeout", 5.0, count=1, requeue_at=NOW + 60)
    )
    ready = PendingWorkload("ns/r", 0, 3.0)
    head = queue_head([deactivated, backing_off, ready], s, NOW)
    assert head is not None and head.name == "ns/r"
    head = queue_head([deactivated, backing_off, ready], s, NOW + 60)
    assert head is not None and head.name == "ns/b"
    assert queue_head([deactivated], s, NOW) is None
