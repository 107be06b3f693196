"""Min-runtime protection and asynchronous preemption on a real kube-scheduler + kube-apiserver.

runway is registered as the scheduler's extender (filter/prioritize/preempt, nodeCacheCapable).
There is no kubelet: the test marks bound pods Running and force-deletes terminating ones.
Scenario per test, each in its own namespace on its own nodes (a dedicated control plane):

* reclaim: a low-priority workload in queue A (reclaimMinRuntime D) runs on the only node that
  fits a high-priority pod of queue B: not preempted before D, preempted after; the victim carries
  DisruptionTarget, the preemptor binds to the nominated node, the gate is empty afterwards;
* preempt: the same within one queue with preemptMinRuntime;
* elastic: a protected elastic workload above its minAvailable loses pods only down to it;
* takeover (a DELETE webhook counts the calls): each victim deleted once, by runway, the
  preemptor nominated by runway and bound; a refused victim DELETE clears the nomination, opens
  the gate and the preemptor is retried; a forged ``preempt`` makes no API call;
* a shielded cheapest victim (issue #35): kube-scheduler offers a kube-system add-on that
  requests memory; runway takes the low-priority pod beside it and the cpu-only preemptor binds;
* many preemptions at once (issue #27), with slow DELETEs: two preemptors sharing a gang delete
  each victim once (the second awaits the off-node sibling); a higher priority takes a lower
  claim (its nomination cleared) and the victim is still deleted once.

After a preemption, runway's Events are on the victim ("Preempted by ns/high on node ...") and the
preemptor ("Preempting 1 pod on node ..."), read back with ``GET /api/v1/namespaces/ns/events``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import (
    ControlPlane,
    RunwayHandle,
    poll,
)
from tests.e2e.webhook import UNDELETABLE, DeleteWebhook, gated_runway_scheduling

pytestmark = pytest.mark.e2e

D = 15  # seconds of protection: short, so the test sees both sides of it
SCHEDULER = "runway-e2e-preempt"


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, RunwayHandle]]:
    plane = dedicated_plane
    config = {
        "queues": [
            {"name": "org"},
            {
                "name": "team-a",
                "parent": "org",
                "reclaimMinRuntime": f"{D}s",
                "preemptMinRuntime": f"{D}s",
            },
            {"name": "team-b", "parent": "org"},
            {"name": "team-c", "parent": "org", "reclaimMinRuntime": "1h"},
        ],
        "kubernetes": {"leaderElection": {"enable": False}},
        # takeover on every release (auto lets kube-scheduler execute from 1.33: DESIGN §1.1)
        "preemption": {"async": True, "gateTimeout": "60s", "schedulerNames": [SCHEDULER]},
        "logging": {"level": "info"},
    }
    with gated_runway_scheduling(
        plane,
        tmp_path_factory.mktemp("preempt"),
        config,
        scheduler_name=SCHEDULER,
        priorities={"low": 100, "high": 1000, "top": 2000},
        probe_namespace="pre-probe",
    ) as rw:
        yield plane, rw


# A preemptor kube-scheduler asks about ~50 ms after its creation, before runway's watch has it,
# is refused as unknown; from 1.32 runway's wake-up touch when it arrives does not re-queue it
# (QueueingHints: its rejector is NodeResourcesFit), so it waited for the 5-minute flush (1 run in
# 3 on 1.34.4 and 1.37.2; issue #39). Holds as gates (issue #34) close it on 1.30+: the stack
# registers runway's webhook, the preemptor is created gated and reaches the scheduler only once
# runway has it. 1.20 has no gates and needs none (the touch re-queues it).


def pod(
    plane: ControlPlane,
    ns: str,
    name: str,
    *,
    queue: str,
    cpu: str,
    priority: str,
    workload: str | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    labels = {"runway.dev/queue": queue, "runway.dev/workload": workload or name}
    meta: dict[str, Any] = {"name": name, "labels": labels, "annotations": annotations or {}}
    r = plane.api.post(
        f"/api/v1/namespaces/{ns}/pods",
        json={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "schedulerName": SCHEDULER,
                "priorityClassName": priority,
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu}},
                    }
                ],
            },
        },
    )
    assert r.status_code == 201, r.text


def get_pod(plane: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    r = plane.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return None if r.status_code == 404 else r.raise_for_status().json()


def bound_and_running(plane: ControlPlane, ns: str, name: str) -> str | None:
    """Play the kubelet: once the scheduler bound the pod, mark it Running/Ready."""
    p = get_pod(plane, ns, name)
    node = p and p["spec"].get("nodeName")
    if not node:
        return None
    if p["status"].get("phase") != "Running":
        plane.set_pod_running(name, ns)
    return str(node)


def kubelet_reap(plane: ControlPlane, ns: str) -> list[str]:
    """Play the kubelet: force-delete pods marked for deletion; returns their names."""
    reaped = []
    for p in plane.api.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]:
        if p["metadata"].get("deletionTimestamp"):
            plane.delete_pod(p["metadata"]["name"], ns)
            reaped.append(p["metadata"]["name"])
    return reaped


def nudge(plane: ControlPlane, node: str) -> None:
    """A node update moves unschedulable pods back to the active queue (no wait for the
    scheduler's flush): ``ControlPlane.nudge_node``."""
    plane.nudge_node(node)


def setup_ns(plane: ControlPlane, nodes: int, cpu: str) -> tuple[str, list[str]]:
    tag = uuid.uuid4().hex[:6]
    ns = f"pre-{tag}"
    plane.ensure_namespace(ns)
    # Earlier tests' nodes are cordoned so each test sees only its own.
    for n in plane.nodes():
        plane.api.patch(
            f"/api/v1/nodes/{n['metadata']['name']}",
            json={"spec": {"unschedulable": True}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
    # ... and their pods still pending are gone: one (an elastic gang's unplaced pod) would
    # otherwise preempt on this test's nodes and take the room this test frees.
    pending = plane.api.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName="})
    for p in pending.raise_for_status().json()["items"]:
        if p["metadata"]["namespace"].startswith("pre-"):
            plane.delete_pod(p["metadata"]["name"], p["metadata"]["namespace"])
    names = [f"{ns}-n{i}" for i in range(nodes)]
    for name in names:
        plane.create_node(
            name,
            capacity={"cpu": cpu, "memory": "8Gi", "pods": "20"},
            labels={"runway.dev/pool": "a"},
        )
    return ns, names


def decisions_for(rw: RunwayHandle, key: str) -> list[dict[str, Any]]:
    return [d for d in rw.get(f"/v1/preemptions/decisions?preemptor={key}")["decisions"]]


def run_protection_scenario(
    plane: ControlPlane, rw: RunwayHandle, *, victim_queue: str, preemptor_queue: str, action: str
) -> None:
    ns, (node,) = setup_ns(plane, 1, "2")
    pod(plane, ns, "low", queue=victim_queue, cpu="2", priority="low")
    bound_at = time.monotonic()
    assert poll(lambda: bound_and_running(plane, ns, "low"), within=60, what="low bound") == node
    pod(plane, ns, "high", queue=preemptor_queue, cpu="2", priority="high")

    # Before D: the scheduler asks runway to preempt; the only victim is protected.
    def refused() -> bool:
        for d in decisions_for(rw, f"{ns}/high"):
            for n in d["nodes"]:
                for v in n["pods"]:
                    if v["pod"] == f"{ns}/low" and v["protected"] and v["action"] == action:
                        return d["chosenNode"] is None
        return False

    poll(refused, within=30, what="runway refuses to preempt the protected victim")
    low = get_pod(plane, ns, "low")
    assert low is not None and not low["metadata"].get("deletionTimestamp")
    assert time.monotonic() - bound_at < D, "too slow to observe the protected window"

    # After D: the next preempt call picks the victim; the async task marks and deletes it.
    def preempted() -> bool:
        nudge(plane, node)
        p = get_pod(plane, ns, "low")
        return p is None or bool(p["metadata"].get("deletionTimestamp"))

    poll(preempted, within=D + 45, every=1, what="the victim is preempted after D")
    # The start is the bind's PodScheduled time, of second precision (truncated): the
    # protection may end up to 1 s before the test's own observation of the bind plus D.
    assert time.monotonic() - bound_at >= D - 1

    # kube-scheduler itself also deletes the victims it was told about, so the deletion may be
    # seen before runway's task has patched the condition: wait for the condition.
    def disruption_target() -> dict[str, Any] | None:
        low = get_pod(plane, ns, "low")
        assert low is not None, "the victim was reaped before the test saw its condition"
        conds = {c["type"]: c for c in low["status"].get("conditions", [])}
        return conds.get("DisruptionTarget")

    cond = poll(disruption_target, within=20, what="DisruptionTarget on the victim")
    assert cond["status"] == "True"
    assert cond["reason"] == "PreemptionByScheduler"
    assert f"{ns}/high" in cond["message"]

    def nominated() -> bool:
        high = get_pod(plane, ns, "high")
        return high is not None and high["status"].get("nominatedNodeName") == node

    poll(nominated, within=20, what="the preemptor nominated to the node")

    # The kubelet lets the victim go; the preemptor lands on its nominated node.
    def high_bound() -> bool:
        kubelet_reap(plane, ns)
        nudge(plane, node)
        return bound_and_running(plane, ns, "high") == node

    poll(high_bound, within=60, every=1, what="the preemptor binds to the nominated node")
    poll(lambda: rw.get("/v1/gate") == [], within=30, what="the gate is empty")
    recent = rw.get("/v1/preemptions")["recent"]
    assert any(r["preemptor"] == f"{ns}/high" and r["result"] == "success" for r in recent)

    # runway's Events (kube-scheduler writes its own too, from another source).
    def runway_event(name: str, reason: str) -> dict[str, Any] | None:
        r = plane.api.get(
            f"/api/v1/namespaces/{ns}/events",
            params={"fieldSelector": f"involvedObject.name={name},reason={reason}"},
        )
        for e in r.raise_for_status().json()["items"]:
            if e.get("source", {}).get("component") == "runway":
                return dict(e)
        return None

    victim_event = poll(lambda: runway_event("low", "Preempted"), within=20, what="victim Event")
    assert victim_event["message"].startswith(f"Preempted by {ns}/high on node {node}")
    assert victim_event["involvedObject"]["kind"] == "Pod"
    assert victim_event["count"] == 1
    preemptor_event = poll(
        lambda: runway_event("high", "Preempting"), within=20, what="preemptor Event"
    )
    assert preemptor_event["message"].startswith(f"Preempting 1 pod on node {node}")


def test_reclaim_waits_for_reclaim_min_runtime(stack: tuple[ControlPlane, RunwayHandle]) -> None:
    plane, rw = stack
    run_protection_scenario(
        plane, rw, victim_queue="team-a", preemptor_queue="team-b", action="reclaim"
    )


def test_preempt_waits_for_preempt_min_runtime(stack: tuple[ControlPlane, RunwayHandle]) -> None:
    plane, rw = stack
    run_protection_scenario(
        plane, rw, victim_queue="team-a", preemptor_queue="team-a", action="preempt"
    )


def test_elastic_workload_loses_pods_only_down_to_min_available(
    stack: tuple[ControlPlane, RunwayHandle],
) -> None:
    plane, rw = stack
    ns, nodes = setup_ns(plane, 2, "2")
    elastic = {"runway.dev/min-available": "2"}
    for i in range(4):
        pod(
            plane,
            ns,
            f"el-{i}",
            queue="team-c",
            cpu="1",
            priority="low",
            workload="el",
            annotations=elastic,
        )
    for i in range(4):
        poll(lambda i=i: bound_and_running(plane, ns, f"el-{i}"), within=60, what=f"el-{i} bound")

    # Needs a whole node (2 of the 4 pods): allowed, the workload keeps its minAvailable of 2.
    pod(plane, ns, "big-0", queue="team-b", cpu="2", priority="high")

    def big0_bound() -> bool:
        kubelet_reap(plane, ns)
        return bound_and_running(plane, ns, "big-0") is not None

    poll(big0_bound, within=90, every=1, what="the first preemptor takes a node")
    left = [
        p
        for p in plane.api.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        if p["metadata"]["name"].startswith("el-") and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(left) == 2

    # A second node would take the workload below minAvailable while it is protected (1h).
    pod(plane, ns, "big-1", queue="team-b", cpu="2", priority="high")

    def refused() -> bool:
        nudge(plane, nodes[0])
        return any(d["chosenNode"] is None and d["nodes"] for d in decisions_for(rw, f"{ns}/big-1"))

    poll(refused, within=60, every=1, what="runway refuses to go below minAvailable")
    left = [
        p
        for p in plane.api.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        if p["metadata"]["name"].startswith("el-") and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(left) == 2
    assert get_pod(plane, ns, "big-1")["spec"].get("nodeName") is None  # type: ignore[index]


# --- a shielded cheapest victim (issue #35) --------------------------------------------------


def test_a_shielded_cheapest_victim_is_replaced_by_what_the_preemptor_lacks(
    stack: tuple[ControlPlane, RunwayHandle],
) -> None:
    """kube-scheduler offers the cheapest victim: a kube-system add-on (priority 0, cpu and
    memory). runway never preempts kube-system, and takes the low-priority pod beside it
    instead: the cpu-only preemptor needs its cpu, not the add-on's memory."""
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    addon = f"addon-{ns}"
    plane.create_pod(addon, "kube-system", requests={"cpu": "1", "memory": "256Mi"})
    try:
        plane.bind(addon, node, "kube-system")
        plane.set_pod_running(addon, "kube-system")
        pod(plane, ns, "low", queue="team-b", cpu="1", priority="low")
        assert poll(lambda: bound_and_running(plane, ns, "low"), within=60, what="low") == node
        pod(plane, ns, "high", queue="team-b", cpu="1", priority="high")

        def replaced() -> dict[str, Any] | None:
            nudge(plane, node)
            for d in decisions_for(rw, f"{ns}/high"):
                if d["chosenNode"] == node:
                    return d
            return None

        decision = poll(replaced, within=60, every=1, what="runway takes the low pod instead")
        records = {r["pod"]: r for n in decision["nodes"] for r in n["pods"]}
        assert records[f"kube-system/{addon}"]["outcome"] == "dropped"
        assert "protected namespace kube-system" in records[f"kube-system/{addon}"]["reason"]
        assert records[f"{ns}/low"]["outcome"] == "reselected"

        def high_bound() -> bool:
            kubelet_reap(plane, ns)
            nudge(plane, node)
            return bound_and_running(plane, ns, "high") == node

        poll(high_bound, within=60, every=1, what="the high-priority preemptor binds")
        running = get_pod(plane, "kube-system", addon)
        assert running is not None and not running["metadata"].get("deletionTimestamp")
        assert get_pod(plane, ns, "low") is None
    finally:
        plane.delete_pod(addon, "kube-system")


# --- takeover: each victim deleted once, failure paths, forged requests ----------------------
# A validating webhook on pod DELETE (tests/e2e/webhook.py) counts every DELETE and who sent it;
# it refuses pods labelled e2e/undeletable. No delay: these tests are not timed.


@pytest.fixture(scope="module")
def hook(stack: tuple[ControlPlane, RunwayHandle]) -> Iterator[DeleteWebhook]:
    plane, _ = stack
    with DeleteWebhook(delay_s=0.0) as webhook:
        webhook.register(plane)
        yield webhook


def uid_of(plane: ControlPlane, ns: str, name: str) -> str:
    p = get_pod(plane, ns, name)
    assert p is not None, f"{ns}/{name} is gone"
    return str(p["metadata"]["uid"])


def running_victims(plane: ControlPlane, ns: str, count: int, *, labels: dict[str, str]) -> None:
    """``count`` low-priority pods of 1 CPU in queue team-b (no protection), bound and Running."""
    for i in range(count):
        pod(plane, ns, f"low-{i}", queue="team-b", cpu="1", priority="low")
        if labels:
            plane.api.patch(
                f"/api/v1/namespaces/{ns}/pods/low-{i}",
                json={"metadata": {"labels": labels}},
                headers={"Content-Type": "application/merge-patch+json"},
            ).raise_for_status()
    for i in range(count):
        poll(lambda i=i: bound_and_running(plane, ns, f"low-{i}"), within=60, what=f"low-{i}")


def status_manager(p: dict[str, Any], field_name: str) -> set[str]:
    """Field managers that own ``status.<field_name>`` (server-side field tracking)."""
    return {
        m["manager"]
        for m in p["metadata"].get("managedFields", [])
        if f"f:{field_name}" in (m.get("fieldsV1") or {}).get("f:status", {})
    }


def runway_samples(rw: RunwayHandle, name: str) -> list[tuple[dict[str, str], float]]:
    text = rw.client.get("/metrics").raise_for_status().text
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


def refused_counts(rw: RunwayHandle) -> dict[str, float]:
    return {
        labels["reason"]: value
        for labels, value in runway_samples(rw, "runway_preemptions_refused_total")
    }


def pod_deletes(rw: RunwayHandle) -> float:
    """DELETE requests runway made for pods (every answer code)."""
    return sum(
        value
        for labels, value in runway_samples(rw, "runway_kube_api_requests_total")
        if labels["verb"] == "delete" and labels["resource"] == "pods"
    )


def test_takeover_deletes_each_victim_once_and_the_preemptor_binds(
    stack: tuple[ControlPlane, RunwayHandle], hook: DeleteWebhook
) -> None:
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    running_victims(plane, ns, 2, labels={})
    victims = {uid_of(plane, ns, f"low-{i}") for i in range(2)}
    deletes_before = pod_deletes(rw)
    pod(plane, ns, "high", queue="team-b", cpu="2", priority="high")

    # runway nominates first, then deletes: the victims stay Terminating (no kubelet yet), so
    # the nomination is seen before the preemptor can bind; it was written by runway.
    def nominated() -> dict[str, Any] | None:
        high = get_pod(plane, ns, "high")
        return high if high and high["status"].get("nominatedNodeName") == node else None

    high = poll(nominated, within=60, what="the preemptor nominated")
    managers = status_manager(high, "nominatedNodeName")
    assert managers and "kube-scheduler" not in managers, managers

    def high_bound() -> bool:
        kubelet_reap(plane, ns)
        return bound_and_running(plane, ns, "high") == node

    poll(high_bound, within=60, every=0.5, what="the preemptor binds to its node")
    assert hook.deletes(ns, "scheduler") == {}, "kube-scheduler deleted a victim"
    # Each victim was DELETEd by runway (the webhook) with one request each (runway's own count;
    # the API server may validate one request twice when it retries its storage update).
    assert set(hook.deletes(ns, "runway")) == victims
    assert pod_deletes(rw) - deletes_before == len(victims)
    poll(lambda: rw.get("/v1/gate") == [], within=30, what="the gate is empty")
    recent = rw.get("/v1/preemptions")["recent"]
    mine = [r for r in recent if r["preemptor"] == f"{ns}/high"]
    assert [r["result"] for r in mine] == ["success"], mine


def test_a_refused_victim_delete_clears_the_nomination_and_the_preemptor_is_retried(
    stack: tuple[ControlPlane, RunwayHandle], hook: DeleteWebhook
) -> None:
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    running_victims(plane, ns, 1, labels={UNDELETABLE: "true"})
    pod(plane, ns, "low-1", queue="team-b", cpu="1", priority="low")
    poll(lambda: bound_and_running(plane, ns, "low-1"), within=60, what="low-1")
    pod(plane, ns, "high", queue="team-b", cpu="2", priority="high")

    def failed() -> list[dict[str, Any]]:
        return [
            r
            for r in rw.get("/v1/preemptions")["recent"]
            if r["preemptor"] == f"{ns}/high" and r["result"] == "error"
        ]

    first = poll(failed, within=60, what="the preemption fails on the refused DELETE")[-1]
    assert "nomination cleared, gate backing off" in first["steps"], first

    # The nomination is cleared at once (nothing reserves the node for a preemption that failed).
    def unnominated() -> bool:
        high = get_pod(plane, ns, "high")
        return high is not None and not high["status"].get("nominatedNodeName")

    poll(unnominated, within=30, every=0.05, what="the nomination cleared")
    # kube-scheduler retries it, and runway decides again (and fails again while refused) once
    # each back-off ends: 1 s after the first failure, 2 s after the second... — not a hot loop.
    tries = poll(lambda: len(failed()) >= 3 and failed(), within=60, what="the preemptor retried")
    starts = sorted(r["started"] for r in tries)
    finishes = sorted(r["finished"] for r in tries)
    for n, (done, again) in enumerate(zip(finishes, starts[1:], strict=False), start=1):
        assert again - done >= 2 ** (n - 1) - 0.25, (n, again - done, tries)
    assert all(not c.allowed for c in hook.calls_in(ns) if c.name == "low-0")

    # Once the victim may go, a retry succeeds and the preemptor binds.
    plane.api.patch(
        f"/api/v1/namespaces/{ns}/pods/low-0",
        json={"metadata": {"labels": {UNDELETABLE: None}}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).raise_for_status()

    # No node update here (nudge): on 1.20 runway's touch at the back-off's end re-queues the
    # preemptor; from 1.32 (a touch re-queues nothing NodeResourcesFit rejected) runway re-runs
    # the calls then, and the victim's deletion re-queues it. Either way within a back-off
    # (8 s or 16 s by then), never the flush (60 s on 1.20, 5 minutes from 1.32).
    def high_bound() -> bool:
        kubelet_reap(plane, ns)
        return bound_and_running(plane, ns, "high") == node

    poll(high_bound, within=30, every=0.5, what="the retried preemptor binds")
    assert hook.deletes(ns, "scheduler") == {}
    poll(lambda: rw.get("/v1/gate") == [], within=30, what="the gate is empty")


def test_a_forged_preempt_request_makes_no_api_call(
    stack: tuple[ControlPlane, RunwayHandle], hook: DeleteWebhook
) -> None:
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    pod(plane, ns, "vip", queue="team-b", cpu="2", priority="high")
    poll(lambda: bound_and_running(plane, ns, "vip"), within=60, what="vip bound")
    vip = get_pod(plane, ns, "vip")
    assert vip is not None
    # A real pending pod of low priority (it cannot preempt vip) and a made-up one.
    pod(plane, ns, "lowly", queue="team-b", cpu="2", priority="low")
    lowly = get_pod(plane, ns, "lowly")
    assert lowly is not None
    ghost = {
        "metadata": {"name": "ghost", "namespace": ns, "uid": str(uuid.uuid4())},
        "spec": {"priority": 2147483647, "schedulerName": SCHEDULER},
    }

    def forged(p: dict[str, Any], **spec: Any) -> dict[str, Any]:
        p = {"metadata": p["metadata"], "spec": {**p["spec"], **spec}}
        return {
            "Pod": p,
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": vip["metadata"]["uid"]}], "NumPDBViolations": 0}
            },
        }

    # A victim of higher priority than the (cached) preemptor: the policy, which reads the
    # priority from the cache, never chooses it; no plan, so nothing to refuse or call.
    def not_chosen() -> bool:
        r = rw.client.post("/scheduler/preempt", json=forged(lowly, priority=2147483647))
        assert r.status_code == 200, r.text
        assert not (r.json().get("NodeNameToMetaVictims") or {}), r.text
        decided = decisions_for(rw, f"{ns}/lowly")
        return bool(decided) and all(d["chosenNode"] is None for d in decided)

    poll(not_chosen, within=20, what="the higher-priority victim is not chosen")
    cases = {
        "preemptor-unknown": forged(ghost),
        "preemptor-bound": forged(vip, priority=2147483647),
    }
    for reason, payload in cases.items():
        before = refused_counts(rw).get(reason, 0.0)

        def refused(
            payload: dict[str, Any] = payload, reason: str = reason, before: float = before
        ) -> bool:
            # Until runway's watch has seen a just-created pod it is refused as unknown.
            r = rw.client.post("/scheduler/preempt", json=payload)
            assert r.status_code == 200, r.text
            assert not (r.json().get("NodeNameToMetaVictims") or {}), (reason, r.text)
            return refused_counts(rw).get(reason, 0.0) > before

        poll(refused, within=20, what=f"a forged preempt refused as {reason}")

    # No API call was made for the victim: no DELETE, no condition, no nomination of anyone.
    assert hook.calls_in(ns) == []
    after = get_pod(plane, ns, "vip")
    assert after is not None and not after["metadata"].get("deletionTimestamp")
    assert "DisruptionTarget" not in {c["type"] for c in after["status"].get("conditions", [])}
    assert not (get_pod(plane, ns, "lowly") or {}).get("status", {}).get("nominatedNodeName")


def preempted_workloads(rw: RunwayHandle) -> float:
    return sum(
        value
        for labels, value in runway_samples(rw, "runway_evicted_workloads_total")
        if labels["reason"] == "Preempted"
    )


def test_two_preemptors_sharing_a_gang_delete_each_victim_once(
    stack: tuple[ControlPlane, RunwayHandle], hook: DeleteWebhook
) -> None:
    """Issue #27: p preempts gang g (g-0 on one node, its sibling g-1 on the other); before the
    slow deletes land, p2 (same priority) is offered the other node with g-1. runway nominates
    p2 there awaiting g-1 — it deletes neither g-1 nor g-0 a second time — both preemptors bind,
    and the gang's history counts one preemption."""
    plane, rw = stack
    ns, nodes = setup_ns(plane, 2, "2")
    for i in range(2):
        pod(plane, ns, f"g-{i}", queue="team-b", cpu="2", priority="low", workload="g")
    placed = {
        poll(lambda i=i: bound_and_running(plane, ns, f"g-{i}"), within=60, what=f"g-{i}")
        for i in range(2)
    }
    assert placed == set(nodes)
    gang = {uid_of(plane, ns, f"g-{i}") for i in range(2)}
    deletes_before = pod_deletes(rw)
    evicted_before = preempted_workloads(rw)
    hook.delay_s = 3.0  # the deletes land well after both preempt calls
    try:
        pod(plane, ns, "p", queue="team-b", cpu="2", priority="high")
        pod(plane, ns, "p2", queue="team-b", cpu="2", priority="high")

        def both_nominated() -> dict[str, str] | None:
            found = {}
            for name in ("p", "p2"):
                p = get_pod(plane, ns, name)
                node = p and p["status"].get("nominatedNodeName")
                if not node:
                    return None
                found[name] = str(node)
            return found

        nominated = poll(both_nominated, within=60, what="both preemptors nominated")
        assert set(nominated.values()) == set(nodes), nominated  # one node each

        # One eviction of the gang, recorded by the preemption that chose it (on the gang's
        # WorkloadRecord, wl.g), counted once.
        def recorded_by() -> str | None:
            eviction = plane.record_status(ns, "wl.g", "eviction")
            return str(eviction["preemptorUID"]) if eviction.get("reason") == "Preempted" else None

        by = poll(recorded_by, within=30, what="the gang's eviction record")
        assert by in {uid_of(plane, ns, "p"), uid_of(plane, ns, "p2")}, by
    finally:
        hook.delay_s = 0.0

    def both_bound() -> bool:
        kubelet_reap(plane, ns)
        return all(bound_and_running(plane, ns, n) == nominated[n] for n in ("p", "p2"))

    poll(both_bound, within=90, every=0.5, what="both preemptors bind to their nodes")
    assert hook.deletes(ns, "scheduler") == {}, "kube-scheduler deleted a victim"
    runway_deletes = hook.deletes(ns, "runway")
    assert set(runway_deletes) == gang and set(runway_deletes.values()) == {1}, runway_deletes
    assert pod_deletes(rw) - deletes_before == len(gang)
    assert preempted_workloads(rw) - evicted_before == 1
    awaiting = [
        d
        for name in ("p", "p2")
        for d in decisions_for(rw, f"{ns}/{name}")
        if d["awaitedVictims"] and not d["victims"]
    ]
    assert awaiting, "the second preemptor did not await the gang sibling"
    poll(lambda: rw.get("/v1/gate") == [], within=30, what="the gate is empty")


def test_a_higher_priority_takes_a_lower_claim_and_the_victim_goes_once(
    stack: tuple[ControlPlane, RunwayHandle], hook: DeleteWebhook
) -> None:
    """Issue #27 item 2 (KEP-4832: "pod2's preemption ignores pod1's nomination"): p claims the
    only node while its victim's slow DELETE is in flight; t, of higher priority, is given the
    node anyway: p's claim is dropped (its nomination cleared, its gate opened), the victim is
    not deleted a second time, and t binds."""
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    running_victims(plane, ns, 1, labels={})
    victim = uid_of(plane, ns, "low-0")
    deletes_before = pod_deletes(rw)
    hook.delay_s = 4.0
    try:
        pod(plane, ns, "p", queue="team-b", cpu="2", priority="high")

        def nominated(name: str) -> bool:
            p = get_pod(plane, ns, name)
            return p is not None and p["status"].get("nominatedNodeName") == node

        poll(lambda: nominated("p"), within=60, what="p nominated")
        pod(plane, ns, "t", queue="team-b", cpu="2", priority="top")
        poll(lambda: nominated("t"), within=60, what="t nominated to the node p had claimed")
        taken = [d for d in decisions_for(rw, f"{ns}/t") if d["chosenNode"] == node]
        assert taken and taken[-1]["displacedClaims"][0]["preemptor"] == f"{ns}/p", taken
        assert taken[-1]["victims"] == [] and taken[-1]["awaitedVictims"] == [victim]
    finally:
        hook.delay_s = 0.0

    def t_bound() -> bool:
        kubelet_reap(plane, ns)
        return bound_and_running(plane, ns, "t") == node

    poll(t_bound, within=90, every=0.5, what="t binds to the node")
    p = get_pod(plane, ns, "p")
    assert p is not None and not p["spec"].get("nodeName")
    assert not p["status"].get("nominatedNodeName"), "p's nomination was not cleared"
    assert hook.deletes(ns, "scheduler") == {}
    assert hook.deletes(ns, "runway") == {victim: 1}
    assert pod_deletes(rw) - deletes_before == 1
    poll(lambda: rw.get("/v1/gate") == [], within=30, what="the gate is empty")
