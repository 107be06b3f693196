"""state/preemption: the PreemptDecider on its own (the verb's state side) — a plan from the
cache's facts, the cross-check before any plan, a held preemptor gets none, decisions logged;
and AwaitedPreemptors (bounded, short-lived)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from app.clock import ManualClock
from app.config import RunwayConfig
from app.model import Pod
from app.model.gate import GateEntry, PodRef
from app.state.preemption import AwaitedPreemptors
from app.wire import decode_preemption_args
from app.wiring import Runway, build

NOW = 1_800_000_000.0


def pod(name: str, *, node: str | None, priority: int) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    return msgspec.convert(raw, Pod)


HIGH = pod("high", node=None, priority=1000)
LOW = pod("low", node="n1", priority=10)
OTHER = pod("other", node="n1", priority=5000)


def runtime() -> Runway:
    rt = build(RunwayConfig(), ManualClock(NOW))
    rt.decider.verify = True  # as with a cluster: act only on what the cache confirms
    rt.cache.replace_pods([HIGH, LOW, OTHER])
    return rt


def args(preemptor: Pod, victims: list[str]) -> Any:
    body = {
        "Pod": msgspec.to_builtins(preemptor),
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": u} for u in victims], "NumPDBViolations": 0}
        },
    }
    return decode_preemption_args(json.dumps(body).encode())


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
