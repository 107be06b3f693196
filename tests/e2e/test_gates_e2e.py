"""Holds as scheduling gates end to end (issue #34, DESIGN §5.8): a real kube-apiserver calls
runway's mutating webhook (through a loopback HTTPS front: ``tests/e2e/webhook.GateWebhook``)
and a real kube-scheduler places the pods runway ungates.

* The API server takes runway's patches: a gate appended at creation, ours removed alone by the
  JSON patch with its ``test`` preconditions, a stale patch refused, no gate added later.
* Each hold kind as a gate: the four wake-up tests (``test_wakeups_e2e``: backoff, a lifted
  deactivation, blockAdmission, StrictFIFO) run with the webhook registered; every pod runway
  held was gated while held and never ``Unschedulable`` (no scheduling cycle, no autoscaler
  demand), and each still binds within 2 s of its hold's end. The backoff's and the
  deactivation's pods are the evicted workload's re-created pods: gated by the webhook.
* A gang (``runway.dev/min-available: 3``) is ungated together, once its third pod exists.
* blockAdmission admits one workload at a time through gates too: two workloads free at the
  same pass, the second keeps its gate (``SchedulingGated``, never ``Unschedulable`` nor bound)
  while the first binds and until it is Ready.
* The webhook down: pods are still created (``failurePolicy: Ignore``), without the gate, and
  the filter holds them.
* A tenant who removes its pod's gate (its own token; the API allows it) gains nothing: the
  filter holds the pod until the backoff ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.model.timestamps import parse_time
from app.policy.schedgate import GATE, ungate_patch
from tests.builders import pod as as_pod
from tests.e2e import test_wakeups_e2e as wakeups
from tests.e2e.conftest import ControlPlane, poll
from tests.e2e.test_requeue_e2e import Cluster, only_node
from tests.e2e.test_tenant_e2e import apply, token_for
from tests.e2e.webhook import GateWebhook

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.releases(
        ">=1.30", reason="scheduling gates are GA from 1.30; 1.20 has none (holds are filter)"
    ),
]

NS = wakeups.NS
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def gates_of(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def unschedulable(pod: dict[str, Any]) -> bool:
    """``PodScheduled=False, reason Unschedulable``: what cluster autoscalers count as demand."""
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class GatedCluster(Cluster):
    """``Cluster`` with runway's gate webhook registered once runway runs; its kubelet round
    also notes which pending pods it saw gated and which ``Unschedulable``."""

    hook: GateWebhook

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.seen_gated: set[str] = set()
        self.seen_unschedulable: set[str] = set()

    def start_runway(self) -> Any:
        runway = super().start_runway()
        self.hook.target = runway.url
        self.hook.register(self.plane, [self.ns])
        return runway

    def step(self) -> None:
        for name, pod in self.pods().items():
            if not pod["spec"].get("nodeName"):
                if GATE in gates_of(pod):
                    self.seen_gated.add(name)
                if unschedulable(pod):
                    self.seen_unschedulable.add(name)
        super().step()


@pytest.fixture
def hook() -> Iterator[GateWebhook]:
    with GateWebhook() as h:
        yield h


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch, hook: GateWebhook) -> Iterator[list[GatedCluster]]:
    """The wake-up tests' clusters, gated."""
    GatedCluster.hook = hook
    monkeypatch.setattr(wakeups, "Cluster", GatedCluster)
    clusters: list[Any] = []
    try:
        yield clusters
    finally:
        for c in clusters:
            c.close()


def test_the_api_server_takes_runways_patches(plane_ns: ControlPlane) -> None:
    plane = plane_ns
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "patched"},
        "spec": {
            "schedulingGates": [{"name": "example.com/other"}, {"name": GATE}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
        },
    }
    r = plane.api.post(f"/api/v1/namespaces/{NS}/pods", json=body)
    assert r.status_code == 201, r.text
    created = r.json()
    patch = ungate_patch(as_pod(created))
    assert patch is not None
    stale = [dict(op) for op in patch]
    stale[0]["value"] = "another-uid"
    path = f"/api/v1/namespaces/{NS}/pods/patched"
    r = plane.api.patch(path, json=stale, headers=JSON_PATCH)
    assert r.status_code == 422, r.text  # the UID precondition
    r = plane.api.patch(path, json=patch, headers=JSON_PATCH)
    assert r.status_code == 200, r.text
    assert gates_of(r.json()) == ["example.com/other"], "ours removed, the other kept"
    r = plane.api.patch(path, json=patch, headers=JSON_PATCH)
    assert r.status_code == 422, "applied twice: the place's test fails, nothing else goes"
    add = [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]
    r = plane.api.patch(path, json=add, headers=JSON_PATCH)
    assert r.status_code == 422, "a gate is never added after creation"
    plane.delete_pod("patched", NS)


@pytest.fixture
def plane_ns(dedicated_plane: ControlPlane) -> ControlPlane:
    dedicated_plane.ensure_namespace(NS)
    for p in dedicated_plane.pods():
        if p["metadata"]["namespace"] == NS:
            dedicated_plane.delete_pod(p["metadata"]["name"], NS)
    return dedicated_plane


@pytest.mark.parametrize(
    ("test", "held"),
    [
        (wakeups.test_a_backoff_ends_in_a_bind, "train-0"),
        (wakeups.test_a_lifted_deactivation_ends_in_a_bind, "lifted-0"),
        (wakeups.test_block_admission_ends_in_a_bind_when_the_blocker_is_ready, "b-0"),
        (wakeups.test_a_strict_fifo_head_leaving_ends_in_a_bind, "small-0"),
    ],
    ids=["backoff", "deactivated", "block-admission", "strict-fifo"],
)
def test_each_hold_is_a_gate_and_ends_in_a_bind(
    plane_ns: ControlPlane, tmp_path: Path, gated: list[GatedCluster], test: Any, held: str
) -> None:
    test(plane_ns, tmp_path, gated)
    (c,) = gated
    assert held in c.seen_gated, f"{held} was held by the filter, not its gate"
    assert held not in c.seen_unschedulable, f"{held} looked Unschedulable while runway held it"
    assert c.hook.reviews > 0


def cluster(plane: ControlPlane, tmp: Path, made: list[Any], node: str, **kw: Any) -> Any:
    only_node(plane, node, {"cpu": "4", "memory": "8Gi", "pods": "20"})
    c = GatedCluster(plane, tmp, ns=NS, **kw)
    made.append(c)
    return c


BACKOFF: dict[str, Any] = {
    **wakeups.BASE,
    "waitForPodsReady": {
        "enable": True,
        "timeout": "2s",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffBaseSeconds": 20, "backoffLimitCount": 5},
    },
}


def in_backoff(c: Any, job: str = "train") -> float:
    """Start runway, let the Job's pod time out: returns requeueAt."""
    c.create_job(job)
    c.start_runway()
    c.until("the PodsReady timeout evicts", lambda: c.eviction(job).get("count") == 1, within=60)
    requeue_at = parse_time(c.eviction(job)["requeueAt"])
    assert requeue_at is not None
    return requeue_at


def test_a_gang_is_ungated_together(
    plane_ns: ControlPlane, tmp_path: Path, gated: list[GatedCluster]
) -> None:
    c = cluster(plane_ns, tmp_path, gated, "gt-gang", config=wakeups.BASE, jobs={})
    c.start_runway()

    def gang_pod(i: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"gang-{i}",
                "labels": {"runway.dev/workload": "gang"},
                "annotations": {"runway.dev/min-available": "3"},
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": "100m"}},
                    }
                ]
            },
        }
        r = c.plane.api.post(f"/api/v1/namespaces/{NS}/pods", json=body)
        assert r.status_code == 201, r.text

    gang_pod(0)
    gang_pod(1)
    time.sleep(3)  # two leader passes at least: 2 of 3, still gated
    pods = c.pods()
    assert all(gates_of(pods[f"gang-{i}"]) == [GATE] for i in (0, 1)), pods
    gang_pod(2)
    c.until("the gang binds", lambda: c.bound_pods() == 3, within=30)
    assert {"gang-0", "gang-1", "gang-2"} <= c.seen_gated


BLOCK: dict[str, Any] = {
    **wakeups.BASE,
    "waitForPodsReady": {"enable": True, "timeout": "5m", "blockAdmission": True},
}


def stays(c: GatedCluster, what: str, check: Any, seconds: float) -> None:
    """``check`` holds at every kubelet round for ``seconds`` (a few leader passes)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.step()
        assert check(), what
        time.sleep(0.2)  # the kubelet's round, as ``Cluster.until``


def test_block_admission_ungates_one_workload_at_a_time(
    plane_ns: ControlPlane, tmp_path: Path, gated: list[GatedCluster]
) -> None:
    """second and third wait gated behind first (bound, not Ready); first Ready frees both at
    the same pass: ungating second admits it, so third keeps its gate while second binds and
    until it is Ready — it never reaches kube-scheduler to be held by the filter
    (Unschedulable: autoscaler demand). Job names of their own: the wake-up tests' Jobs a and b
    stay in the namespace."""
    c = cluster(
        plane_ns,
        tmp_path,
        gated,
        "gt-block",
        config=BLOCK,
        jobs={"first": 1, "second": 1, "third": 1},
    )
    c.start_runway()
    c.create_job("first")
    c.until("first binds (Running, not Ready: it blocks admission)", lambda: c.bound_pods() == 1)
    c.create_job("second")
    c.create_job("third")
    c.until("second and third are gated", lambda: {"second-0", "third-0"} <= c.seen_gated)

    def waiting(name: str) -> bool:
        pod = c.pods()[name]
        return GATE in gates_of(pod) and not pod["spec"].get("nodeName")

    stays(
        c,
        "second and third stay gated while first is not Ready",
        lambda: waiting("second-0") and waiting("third-0"),
        3,
    )
    c.plane.set_pod_running("first-0", NS, ready=True)
    c.until(
        "second binds once first is Ready",
        lambda: c.pods()["second-0"]["spec"].get("nodeName"),
        within=30,
    )
    stays(c, "third keeps its gate while second is not Ready", lambda: waiting("third-0"), 4)
    assert "third-0" not in c.seen_unschedulable, (
        "third was ungated with second and held by the filter"
    )
    c.plane.set_pod_running("second-0", NS, ready=True)
    c.until("third binds once second is Ready", lambda: c.bound_pods() == 3, within=30)
    assert {"second-0", "third-0"} <= c.seen_gated
    assert not {"second-0", "third-0"} & c.seen_unschedulable, c.seen_unschedulable


def test_with_the_webhook_down_pods_are_created_and_held_by_the_filter(
    plane_ns: ControlPlane, tmp_path: Path, gated: list[GatedCluster]
) -> None:
    c = cluster(plane_ns, tmp_path, gated, "gt-down", config=BACKOFF, jobs={"down": 1})
    requeue_at = in_backoff(c, "down")
    c.hook.target = None  # runway's webhook does not answer (failurePolicy Ignore)
    evicted = c.bound_uids()
    c.until("the re-created pod exists", lambda: "down-0" in c.pods())
    pod = c.pods()["down-0"]
    if GATE in gates_of(pod):  # re-created before the webhook went down: make another
        c.plane.delete_pod("down-0", NS)
        c.until("re-created again", lambda: "down-0" in c.pods())
        pod = c.pods()["down-0"]
    assert gates_of(pod) == [], "created without the gate"
    c.until(
        "the filter holds it (Unschedulable, runway's reason)",
        lambda: unschedulable(c.pods()["down-0"]),
        within=30,
    )
    assert time.time() < requeue_at, "held before its requeueAt"
    assert not c.bound_uids() - evicted
    c.until("it binds after requeueAt", lambda: c.bound_pods(evicted) == 1, within=60)
    assert time.time() >= requeue_at - 1.0


def test_a_tenant_removing_its_gate_gains_nothing(
    plane_ns: ControlPlane, tmp_path: Path, gated: list[GatedCluster]
) -> None:
    plane = plane_ns
    token = token_for(plane, NS, "tenant")
    apply(
        plane,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "tenant-pods", "namespace": NS},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}],
        },
    )
    apply(
        plane,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-pods", "namespace": NS},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "tenant-pods",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": NS}],
        },
    )
    c = cluster(plane, tmp_path, gated, "gt-tenant", config=BACKOFF, jobs={"tenant": 1})
    requeue_at = in_backoff(c, "tenant")
    evicted = c.bound_uids()
    c.until(
        "the re-created pod is gated",
        lambda: GATE in gates_of(c.pods().get("tenant-0", {})),
    )
    pod = c.pods()["tenant-0"]
    patch = ungate_patch(as_pod(pod))
    assert patch is not None
    r = plane.api.patch(
        f"/api/v1/namespaces/{NS}/pods/tenant-0",
        json=patch,
        headers={**JSON_PATCH, "Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.text  # the API allows removing a gate
    assert gates_of(r.json()) == []
    c.until(
        "the filter holds it all the same",
        lambda: unschedulable(c.pods()["tenant-0"]),
        within=30,
    )
    assert not c.bound_uids() - evicted and time.time() < requeue_at
    status = poll(
        lambda: (s := c.runway.get(f"/v1/workloads/{NS}/tenant"))["hold"] and s,
        within=10,
        what="runway's watch has the ungated pod",
    )
    assert status["hold"]["by"] == "filter" and status["hold"]["rule"] == "backoff", status
    c.until("it binds after requeueAt", lambda: c.bound_pods(evicted) == 1, within=60)
    assert time.time() >= requeue_at - 1.0


def test_a_held_workload_says_its_gate_holds_it(
    plane_ns: ControlPlane, tmp_path: Path, gated: list[GatedCluster]
) -> None:
    c = cluster(plane_ns, tmp_path, gated, "gt-rest", config=BACKOFF, jobs={"held": 1})
    in_backoff(c, "held")
    c.until(
        "the re-created pod is gated",
        lambda: GATE in gates_of(c.pods().get("held-0", {})),
    )
    # what `kubectl get pods` shows as STATUS SchedulingGated
    poll(
        lambda: any(
            x.get("type") == "PodScheduled" and x.get("reason") == "SchedulingGated"
            for x in (c.pods()["held-0"].get("status") or {}).get("conditions") or []
        ),
        within=10,
        what="PodScheduled=False, reason SchedulingGated",
    )
    status = poll(
        lambda: (s := c.runway.get(f"/v1/workloads/{NS}/held"))["hold"] and s,
        within=10,
        what="runway's watch has the re-created pod",
    )
    assert status["hold"]["by"] == "schedulingGate" and status["hold"]["rule"] == "backoff"
    assert any(p["schedulingGated"] for p in status["pods"])
    listed = c.runway.get(f"/v1/workloads?namespace={NS}")["items"]
    assert [w["holdBy"] for w in listed if w["name"] == "held"] == ["schedulingGate"]
    release = c.runway.get("/v1/release")
    assert release["holdsAsGates"] is True
    held = [x for x in c.record("held")["status"]["conditions"] if x["type"] == "Held"]
    assert [x["reason"] for x in held] == ["SchedulingGate"], "the WorkloadRecord says so too"
    poll(
        lambda: (
            'runway_held_pods{hold="schedulingGate"} 1.0' in c.runway.client.get("/metrics").text
        ),
        within=10,
        what="the gauge counts the gated pod",
    )
