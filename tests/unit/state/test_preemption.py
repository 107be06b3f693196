"""state/preemption: the PreemptDecider on its own (the verb's state side), one test per branch of
``PreemptDecider.decide`` — the preemptor confirmed by the cache (or refused, and awaited), the
decision on the cache's facts with the gate's view (held, claims, reserved victims), logged
whatever it says, the victims confirmed, then the plan (off-node siblings, awaited, displaced,
nominations cleared); the facts it builds (allocatable, nominated room, bystanders); and
AwaitedPreemptors (bounded, short-lived)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import msgspec

from app.clock import ManualClock
from app.config import RunwayConfig
from app.model import Pod
from app.model.gate import GateEntry, PodRef
from app.policy.victims import PODS, Cause
from app.state.preemption import AwaitedPreemptors
from app.wire import decode_preemption_args
from app.wiring import Runway, build
from tests.builders import node, queued_pod, runway_config

NOW = 1_800_000_000.0


def pod(
    name: str,
    *,
    node: str | None,
    priority: int,
    namespace: str = "ns",
    requests: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    nominated: str | None = None,
    scheduler: str | None = None,
    phase: str | None = None,
) -> Pod:
    status: dict[str, Any] = {"phase": phase or ("Running" if node else "Pending")}
    if nominated:
        status["nominatedNodeName"] = nominated
    spec: dict[str, Any] = {
        "nodeName": node,
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    raw: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels or {},
        },
        "spec": spec,
        "status": status,
    }
    return msgspec.convert(raw, Pod)


HIGH = pod("high", node=None, priority=1000)
LOW = pod("low", node="n1", priority=10)
OTHER = pod("other", node="n1", priority=5000)


def runtime() -> Runway:
    rt = build(runway_config(), ManualClock(NOW))  # its pods name no queue
    rt.decider.verify = True  # as with a cluster: act only on what the cache confirms
    rt.cache.replace_pods([HIGH, LOW, OTHER])
    return rt


def args(preemptor: Pod, victims: list[str], node: str = "n1") -> Any:
    body = {
        "Pod": msgspec.to_builtins(preemptor),
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": u} for u in victims], "NumPDBViolations": 0}
        },
    }
    return decode_preemption_args(json.dumps(body).encode())


def hold(rt: Runway, preemptor: Pod, victims: list[Pod], node: str = "n1") -> None:
    """A preemption in flight of ``preemptor`` on ``node`` (its task running)."""
    refs = tuple(PodRef.of(v) for v in victims)
    entry = GateEntry(PodRef.of(preemptor), node, refs, NOW, NOW + 60, priority=preemptor.priority)
    rt.gate.hold(entry)


def test_a_confirmed_preemption_becomes_a_plan_and_is_logged() -> None:
    rt = runtime()
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.refusal is None and outcome.plan is not None
    assert outcome.plan.node == "n1" and [v.uid for v in outcome.plan.victims] == ["uid-low"]
    assert outcome.plan.priority == 1000  # the cache's priority
    assert rt.decisions.about("ns/high", "uid-low") is not None


def test_a_victim_the_cache_does_not_confirm_refuses_before_any_decision() -> None:
    rt = runtime()
    outcome = rt.decider.decide(args(HIGH, ["uid-nobody"]))  # a victim the cache never saw
    assert outcome.plan is None
    assert outcome.refusal is not None and outcome.refusal.reason == "victim-unknown"
    # a higher-priority pod offered is never a victim: the node's lower one is re-selected
    outcome = rt.decider.decide(args(HIGH, ["uid-other"]))
    assert outcome.plan is not None and [v.uid for v in outcome.plan.victims] == ["uid-low"]


def test_a_held_preemptor_gets_no_second_plan() -> None:
    rt = runtime()
    rt.gate.hold(GateEntry(PodRef.of(HIGH), "n1", (PodRef.of(LOW),), since=NOW, deadline=NOW + 60))
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.plan is None  # its preemption is in flight: nothing to do again


def test_awaited_preemptors_are_bounded_and_short_lived() -> None:
    awaited = AwaitedPreemptors(limit=2, ttl=10)
    for i, uid in enumerate(("a", "b", "c")):
        awaited.add(uid, NOW + i)
    assert len(awaited) == 2  # the oldest forgotten first
    assert not awaited.take("a", NOW + 3)
    assert awaited.take("b", NOW + 5) and not awaited.take("b", NOW + 5)  # taken once
    assert not awaited.take("c", NOW + 20)  # past its ttl


# --- the preemptor, as the cache confirms it --------------------------------------------------


def test_without_a_cluster_the_payloads_preemptor_is_decided_for_unchecked() -> None:
    rt = build(RunwayConfig(), ManualClock(NOW))  # the embedded default: verify off
    stranger = pod("stranger", node=None, priority=1000)  # not in the (empty) cache
    outcome = rt.decider.decide(args(stranger, ["uid-ghost"]))
    assert outcome.refusal is None and outcome.plan is not None
    assert [v.uid for v in outcome.plan.victims] == ["uid-ghost"]  # unknown: not protected
    assert len(rt.decider.awaited) == 0


def test_a_preemptor_the_cache_does_not_know_yet_is_refused_and_awaited() -> None:
    rt = runtime()
    late = pod("late", node=None, priority=1000)
    outcome = rt.decider.decide(args(late, ["uid-low"]))
    assert outcome.decision is None and outcome.plan is None
    assert outcome.refusal is not None and outcome.refusal.reason == "preemptor-unknown"
    assert rt.decider.awaited.take("uid-late", NOW)  # woken when its ADDED event arrives
    assert rt.decisions.about("ns/late", "uid-low") is None  # nothing decided


def test_a_preemptor_without_a_uid_is_refused_and_not_awaited() -> None:
    # The wire refuses such a body; the decider does not count on it.
    rt = runtime()
    nameless = msgspec.structs.replace(
        HIGH, metadata=msgspec.structs.replace(HIGH.metadata, uid="")
    )
    call = dataclasses.replace(args(HIGH, ["uid-low"]), pod=nameless)
    outcome = rt.decider.decide(call)
    assert outcome.refusal is not None and outcome.refusal.reason == "preemptor-unknown"
    assert len(rt.decider.awaited) == 0


def test_a_preemptor_the_cache_does_not_confirm_is_refused() -> None:
    rt = runtime()
    bound = pod("bound", node="n1", priority=1000)
    foreign = pod("foreign", node=None, priority=1000, scheduler="someone-else")
    rt.cache.replace_pods([HIGH, LOW, OTHER, bound, foreign])
    for who, reason in ((bound, "preemptor-bound"), (foreign, "preemptor-scheduler")):
        outcome = rt.decider.decide(args(who, ["uid-low"]))
        assert outcome.plan is None and outcome.decision is None
        assert outcome.refusal is not None and outcome.refusal.reason == reason
    assert len(rt.decider.awaited) == 0


# --- the decision, with the gate's view -------------------------------------------------------


def test_a_preemptor_backing_off_after_a_failure_is_vetoed_with_its_retry_time() -> None:
    rt = runtime()
    hold(rt, HIGH, [LOW])
    rt.gate.finish(HIGH.uid, ok=False, now=NOW)  # failed: backs off
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.plan is None and outcome.decision is not None
    assert outcome.decision.vetoed_by_gate
    assert "its preemption failed (1 in a row); retried after" in outcome.decision.reason


def test_a_held_preemptor_is_vetoed_as_in_flight_and_the_veto_is_logged() -> None:
    rt = runtime()
    hold(rt, HIGH, [LOW])
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.decision is not None and outcome.decision.vetoed_by_gate
    assert "its previous preemption is still in flight" in outcome.decision.reason
    assert [d["reason"] for d in rt.decisions.latest()] == [outcome.decision.reason]


def test_scheduler_executes_asked_again_with_a_victim_running_decides_again() -> None:
    """kube-scheduler executes (``async`` false, auto on 1.33+) and asks again for a preemptor
    runway holds while the victim it was to delete still runs: its DELETE was refused. The gate
    opens (a failure, without back-off) and the call is decided again, so kube-scheduler retries
    instead of parking the pod where nothing re-queues it from 1.32 (DESIGN §4.4)."""
    rt = runtime()
    rt.executor.takeover = False
    hold(rt, HIGH, [LOW])
    rt.gate.finish(HIGH.uid, ok=True)  # runway's part: gate mirrored, records written
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.decision is not None and not outcome.decision.vetoed_by_gate
    assert outcome.plan is not None and [v.uid for v in outcome.plan.victims] == ["uid-low"]
    assert rt.gate.failures(HIGH.uid) == 1


def test_takeover_asked_again_with_a_victim_running_stays_held() -> None:
    """In takeover runway makes the calls: its own task reports a failure (and backs off)."""
    rt = runtime()
    rt.executor.takeover = True
    hold(rt, HIGH, [LOW])
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.decision is not None and outcome.decision.vetoed_by_gate


def test_a_node_claimed_at_equal_priority_is_dropped_and_nothing_is_planned() -> None:
    rt = runtime()
    rival = pod("rival", node=None, priority=1000, nominated="n1")
    rt.cache.replace_pods([HIGH, LOW, OTHER, rival])
    hold(rt, rival, [OTHER])  # its claim on n1 and its victim
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    assert outcome.plan is None and outcome.refusal is None
    assert outcome.decision is not None and outcome.decision.chosen is None
    assert "claimed by the preemption in flight of ns/rival" in outcome.decision.nodes[0].reason


def test_a_lower_claim_is_displaced_its_victim_awaited_and_its_nomination_cleared() -> None:
    rt = runtime()
    mid = pod("mid", node=None, priority=500, nominated="n1")
    parked = pod("parked", node=None, priority=10, nominated="n1")  # lower, nominated there
    rt.cache.replace_pods([HIGH, LOW, OTHER, mid, parked])
    hold(rt, mid, [LOW])
    outcome = rt.decider.decide(args(HIGH, ["uid-low"]))
    plan = outcome.plan
    assert plan is not None and plan.victims == ()  # LOW is mid's victim: not deleted twice
    assert [r.uid for r in plan.awaited] == ["uid-low"]
    assert [r.uid for r in plan.displaced] == ["uid-mid"]
    # mid's nomination is runway's (its gate): cleared; parked's was written by kube-scheduler,
    # and runway clears only nominations it wrote (DESIGN §1.1)
    assert {r.uid for r in plan.unnominate} == {"uid-mid"}


def test_a_gang_sibling_on_another_node_is_planned_off_node() -> None:
    rt = runtime()
    gang = {"runway.dev/workload": "g"}
    g1 = pod("g1", node="n1", priority=10, labels=gang)
    g2 = pod("g2", node="n2", priority=10, labels=gang)
    rt.cache.replace_pods([HIGH, OTHER, g1, g2])
    plan = rt.decider.decide(args(HIGH, ["uid-g1"])).plan
    assert plan is not None
    assert [r.uid for r in plan.victims] == ["uid-g1", "uid-g2"]
    assert [r.uid for r in plan.off_node] == ["uid-g2"]


# --- the facts (issue #35): what the preemptor lacks, counted on the cache's node -------------


def test_a_shielded_cheapest_victim_is_replaced_by_what_the_preemptor_lacks() -> None:
    rt = runtime()
    rt.cache.replace_nodes([node("n1", allocatable={"cpu": "2", "memory": "8Gi", "pods": "110"})])
    addon = pod(
        "addon",
        node="n1",
        priority=0,
        namespace="kube-system",
        requests={"cpu": "1", "memory": "256Mi"},
    )
    cpu_only = pod("cpu-only", node=None, priority=1000)
    rt.cache.replace_pods([cpu_only, LOW, addon])
    outcome = rt.decider.decide(args(cpu_only, ["uid-addon"]))
    assert outcome.plan is not None and [v.uid for v in outcome.plan.victims] == ["uid-low"]
    addon_record = outcome.decision.record_of("uid-addon")  # type: ignore[union-attr]
    assert addon_record is not None and addon_record.cause is Cause.SHIELDED


def test_the_facts_carry_the_nodes_allocatable_and_the_room_of_pods_nominated_there() -> None:
    rt = runtime()
    rt.cache.replace_nodes([node("n1", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})])
    top = pod("top", node=None, priority=5000, nominated="n1", requests={"cpu": "500m"})
    low_nominee = pod("low-nominee", node=None, priority=10, nominated="n1")
    done = pod("done", node="n1", priority=10, phase="Succeeded")
    rt.cache.replace_pods([HIGH, LOW, OTHER, top, low_nominee, done])
    facts = rt.decider.facts(args(HIGH, ["uid-low"]), HIGH)
    offer = facts.offers["n1"]
    assert facts.preemptor.requests == {"cpu": 1000}
    assert offer.allocatable == {"cpu": 4000, "memory": 8 << 30, "pods": 110}
    assert offer.nominated == {"cpu": 500, PODS: 1}  # the lower nominee keeps no room
    assert [p.uid for p in offer.others] == ["uid-other"]  # a finished pod holds nothing
    elsewhere = rt.decider.facts(args(HIGH, [], node="n9"), HIGH).offers["n9"]
    assert elsewhere.allocatable is None and elsewhere.nominated == {}


def test_a_preemptor_in_a_mapped_namespace_preempts_within_its_queue() -> None:
    """``scope.namespaceQueues`` puts an unlabelled preemptor in its namespace's queue for the
    preemption too (one way to a pod's queue: ``ClusterCache.queue_of_pod``): a same-queue
    preemption under ``preemptMinRuntime: 0s``, not a reclaim from ``default`` under the
    queue's 1 h ``reclaimMinRuntime``."""
    raw = {
        "queues": [{"name": "team", "preemptMinRuntime": "0s", "reclaimMinRuntime": "1h"}],
        "scope": {"namespaceQueues": {"ns": "team"}},
    }
    rt = build(runway_config(raw), ManualClock(NOW))
    rt.decider.verify = True
    low = queued_pod("low", "team", namespace="ns", created=NOW - 100, bound=NOW - 60)
    low = msgspec.structs.replace(low, spec=msgspec.structs.replace(low.spec, priority=10))
    high = pod("high", node=None, priority=1000)
    rt.cache.replace_pods([high, low])
    assert rt.cache.queue_of_pod(high) == "team"
    outcome = rt.decider.decide(args(high, ["uid-low"]))
    assert outcome.plan is not None and [v.uid for v in outcome.plan.victims] == ["uid-low"]
