"""Many preemptions in flight at once (issue #27), through the preempt verb with a cluster cache:
one victim, one preemption (a victim already chosen, on its node or as an off-node gang sibling,
is never chosen again) and priority on claims (a higher priority takes a lower claim; equal or
lower never)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from app import metrics
from app.api.extender import handle_filter, plan_preempt
from app.clock import ManualClock
from app.model import Node, Pod
from app.server import create_app
from app.wiring import Runway
from tests.builders import runway_config
from tests.integration.kube_fake import FakeApi
from tests.integration.kube_helpers import client

NOW = 1_800_000_000.0


def pod(
    name: str, *, node: str | None, priority: int, workload: str | None = None, cpu: str = "1"
) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "prod",
            "uid": f"uid-{name}",
            "labels": {"runway.dev/workload": workload} if workload else {},
        },
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    return msgspec.convert(raw, Pod)


def node(name: str, cpu: str = "1") -> Node:
    return msgspec.convert(
        {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu}}}, Node
    )


def body(preemptor: Pod, victims: dict[str, list[str]]) -> bytes:
    return json.dumps(
        {
            "Pod": msgspec.to_builtins(preemptor),
            "NodeNameToMetaVictims": {
                n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
                for n, uids in victims.items()
            },
        }
    ).encode()


G0 = pod("g-0", node="n1", priority=10, workload="g")
G1 = pod("g-1", node="n2", priority=10, workload="g")
V3 = pod("v-3", node="n3", priority=10)
P = pod("p", node=None, priority=100)
P2 = pod("p2", node=None, priority=100)
HIGH = pod("high", node=None, priority=1000)


@pytest.fixture
def runway() -> Runway:
    api = FakeApi()
    config = runway_config({"kubernetes": {"leaderElection": {"enable": False}}})  # one replica
    app = create_app(config, ManualClock(NOW), kube=client(api.transport))
    rt: Runway = app.state.runway
    rt.cache.replace_pods([G0, G1, V3, P, P2, HIGH])
    rt.cache.replace_nodes([node("n1"), node("n2"), node("n3")])
    return rt


def test_two_preemptors_sharing_a_gang_never_delete_a_victim_twice(runway: Runway) -> None:
    ctx = runway.api_context()
    _, first = plan_preempt(ctx, body(P, {"n1": ["uid-g-0"]}))
    assert first.plan is not None
    assert {v.name for v in first.plan.victims} == {"g-0", "g-1"}  # g-1: the off-node sibling
    runway.executor.hold(first.plan)  # what submit() does before its task starts
    # Before the deletes land, p2 (same priority) is offered n1 (claimed) and n2 with g-1.
    awaited = metrics.VICTIMS.labels("preempt", "awaited")._value.get()
    _, second = plan_preempt(ctx, body(P2, {"n1": ["uid-g-0"], "n2": ["uid-g-1"]}))
    assert metrics.VICTIMS.labels("preempt", "awaited")._value.get() == awaited + 1
    assert second.plan is not None and second.plan.node == "n2"
    assert second.plan.victims == () and second.plan.off_node == ()  # nothing deleted again
    assert [v.name for v in second.plan.awaited] == ["g-1"]  # its room counts: awaited
    runway.executor.hold(second.plan)
    entry = runway.gate.get("uid-p2")
    assert entry is not None and [v.name for v in entry.victims] == ["g-1"]


def test_a_higher_priority_takes_a_lower_claim_and_the_lower_is_retried(runway: Runway) -> None:
    ctx = runway.api_context()
    _, low = plan_preempt(ctx, body(P, {"n3": ["uid-v-3"]}))
    assert low.plan is not None and low.plan.node == "n3"
    runway.executor.hold(low.plan)
    # Same priority: refused the claimed node (as before).
    _, same = plan_preempt(ctx, body(P2, {"n3": ["uid-v-3"]}))
    assert same.plan is None and same.decision is not None
    assert "not offered twice" in same.decision.nodes[0].reason
    # Higher priority: takes it (kube-scheduler's nominator), without deleting v-3 again.
    _, high = plan_preempt(ctx, body(HIGH, {"n3": ["uid-v-3"]}))
    assert high.plan is not None and high.plan.node == "n3"
    assert high.plan.victims == () and [v.name for v in high.plan.awaited] == ["v-3"]
    assert [r.name for r in high.plan.displaced] == ["p"]
    assert "uid-p" in {r.uid for r in high.plan.unnominate}  # its nomination is cleared
    runway.executor.hold(high.plan)
    # The lower one's gate is open (the gate keeper releases it: retried at once), its claim
    # gone; the higher one's claim holds v-3 reserved.
    held = runway.gate.get("uid-p")
    assert held is not None and runway.gate.check(held, NOW).open
    assert [c.preemptor for c in runway.gate.claims(NOW)] == ["prod/high"]
    assert runway.gate.reserved(NOW) == {"uid-v-3": "prod/high"}
    # p may preempt again, elsewhere: n3 is now claimed by a higher priority.
    _, again = plan_preempt(ctx, body(P, {"n3": ["uid-v-3"]}))
    assert again.plan is None and again.decision is not None
    assert "prod/high (priority 1000, not below 100)" in again.decision.nodes[0].reason


def test_a_lower_pod_uses_a_claimed_node_only_where_it_fits_beside_the_claim(
    runway: Runway,
) -> None:
    runway.cache.replace_nodes([node("n1"), node("n2"), node("n3", cpu="4")])
    small = pod("small", node=None, priority=5, cpu="2")
    big = pod("big", node=None, priority=5, cpu="4")
    urgent = pod("urgent", node=None, priority=1000, cpu="4")
    for p in (small, big, urgent):
        runway.cache.upsert_pod(p)
    ctx = runway.api_context()
    _, low = plan_preempt(ctx, body(P, {"n3": ["uid-v-3"]}))
    assert low.plan is not None
    runway.executor.hold(low.plan)

    def nodes_for(p: Pod) -> list[str]:
        args = json.dumps({"Pod": msgspec.to_builtins(p), "NodeNames": ["n3"]}).encode()
        return list(json.loads(handle_filter(ctx, args))["NodeNames"] or [])

    # 4 CPUs, v-3 going, the preemptor's 1 placed: 3 left. A lower pod of 2 fits beside the
    # claim; one of 4 does not; a higher priority is never kept off by a lower claim.
    assert nodes_for(small) == ["n3"]
    assert nodes_for(big) == []
    assert nodes_for(urgent) == ["n3"]
