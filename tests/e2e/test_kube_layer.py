"""runway's kube layer against a real kube-apiserver: the cache converges to the API server's
state (create, bind, status, delete), survives an apiserver restart mid-watch, and two
replicas elect exactly one leader that hands over when it stops."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    ControlPlane,
    RunwayFactory,
    RunwayHandle,
    poll,
    write_scheduler_config,
)

pytestmark = pytest.mark.e2e


# Keyed by namespace/name: the cache summary hands out no UIDs unless read-only REST is
# protected (a UID is what a forged preempt would name).
def _api_view(plane: ControlPlane) -> tuple[dict[str, tuple[str | None, str]], dict[str, Any]]:
    pods = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": (
            p["spec"].get("nodeName"),
            p["metadata"]["resourceVersion"],
        )
        for p in plane.pods()
    }
    nodes = {
        n["metadata"]["name"]: (n["metadata"].get("labels", {}), n["status"].get("allocatable", {}))
        for n in plane.nodes()
    }
    return pods, nodes


def _runway_view(
    runway: RunwayHandle,
) -> tuple[dict[str, tuple[str | None, str]], dict[str, Any]]:
    summary = runway.summary(detail=True)
    pods = {
        f"{p['namespace']}/{p['name']}": (p["nodeName"], p["resourceVersion"])
        for p in summary["podItems"]
    }
    assert all(p["uid"] is None for p in summary["podItems"])
    nodes = {n["name"]: (n["labels"], n["allocatable"]) for n in summary["nodeItems"]}
    return pods, nodes


def converged(plane: ControlPlane, runway: RunwayHandle) -> bool:
    """runway's cache holds exactly the API server's pods (same versions) and nodes."""
    return _api_view(plane) == _runway_view(runway)


def assert_converges(
    plane: ControlPlane, runway: RunwayHandle, what: str, within: float = 30
) -> None:
    try:
        poll(lambda: converged(plane, runway), within=within, what=what)
    except AssertionError:
        api, mine = _api_view(plane), _runway_view(runway)
        raise AssertionError(f"{what}: not converged\napi:    {api}\nrunway: {mine}") from None


def test_cache_converges_after_create_bind_status_delete(
    control_plane: ControlPlane, runway: RunwayFactory
) -> None:
    plane = control_plane
    tag = uuid.uuid4().hex[:6]
    ns = f"conv-{tag}"
    plane.ensure_namespace(ns)
    for i in range(2):
        plane.create_node(f"conv-{tag}-n{i}", labels={"pool": f"p{i}"})
    rw = runway.start()
    assert rw.summary()["synced"] is True
    assert_converges(plane, rw, "initial list")

    for i in range(6):
        plane.create_pod(
            f"w-{i}", ns, labels={"runway.dev/workload": "train", "runway.dev/queue": "research"}
        )
    plane.bind("w-0", f"conv-{tag}-n0", ns)
    plane.bind("w-1", f"conv-{tag}-n1", ns)
    plane.bind("w-2", f"conv-{tag}-n1", ns)
    plane.set_pod_running("w-0", ns)
    plane.delete_pod("w-3", ns)  # pending
    plane.delete_pod("w-2", ns)  # bound
    plane.create_node(
        f"conv-{tag}-n9", labels={"pool": "late"}, capacity={"cpu": "2", "pods": "10"}
    )
    assert_converges(plane, rw, "after create, bind, status and delete")

    summary = rw.summary()
    mine = [p for p in rw.summary(detail=True)["podItems"] if p["namespace"] == ns]
    assert sorted(p["name"] for p in mine) == ["w-0", "w-1", "w-4", "w-5"]
    assert {p["workload"] for p in mine} == {f"{ns}/train"}
    assert summary["queues"]["research"] >= 4
    running = next(p for p in mine if p["name"] == "w-0")
    assert running["phase"] == "Running" and running["nodeName"] == f"conv-{tag}-n0"
    metrics = rw.client.get("/metrics").text
    assert 'runway_watch_events_total{resource="pods",type="ADDED"}' in metrics
    assert 'runway_cache_objects{resource="pods"}' in metrics
    assert 'runway_kube_api_requests_total{code="200",resource="pods",verb="list"}' in metrics


def test_apiserver_restart_mid_watch_converges_again(
    control_plane: ControlPlane, runway: RunwayFactory
) -> None:
    plane = control_plane
    tag = uuid.uuid4().hex[:6]
    ns = f"restart-{tag}"
    plane.ensure_namespace(ns)
    plane.create_pod("before", ns)
    rw = runway.start()
    assert_converges(plane, rw, "before the restart")

    plane.apiserver_stop()
    # runway keeps answering from its cache while the API server is away.
    assert rw.client.get("/healthz").status_code == 200
    assert any(p["name"] == "before" for p in rw.summary(detail=True)["podItems"])
    plane.apiserver_start()
    # Changes right after the restart, likely before runway's watch is back: it must resume
    # (or relist) without losing them.
    plane.create_pod("after", ns)
    plane.bind("before", plane.create_node(f"restart-{tag}-n")["metadata"]["name"], ns)
    plane.delete_pod("before", ns)
    assert_converges(plane, rw, "after the apiserver restart", within=60)
    assert rw.ready()


def _leaders(handles: list[RunwayHandle]) -> list[RunwayHandle]:
    return [h for h in handles if h.summary()["leader"]]


def test_two_replicas_elect_one_leader_and_hand_over(
    control_plane: ControlPlane, runway: RunwayFactory
) -> None:
    lease = f"runway-e2e-{uuid.uuid4().hex[:6]}"
    config = {
        "kubernetes": {
            "leaderElection": {
                "leaseName": lease,
                "leaseDuration": "4s",
                "renewDeadline": "3s",
                "retryPeriod": "500ms",
            }
        }
    }
    a = runway.start(config)
    b = runway.start(config)
    both = [a, b]
    leaders = poll(lambda: _leaders(both), within=20, what="a leader")
    assert len(leaders) == 1
    leader = leaders[0]
    follower = b if leader is a else a
    holder = control_plane.lease(lease)
    assert holder is not None
    assert holder["spec"]["holderIdentity"] == leader.summary()["identity"]
    assert "runway_leader 1.0" in leader.client.get("/metrics").text
    assert "runway_leader 0.0" in follower.client.get("/metrics").text
    # Over several renewals, still exactly one leader.
    for _ in range(5):
        assert len(_leaders(both)) == 1
        time.sleep(0.5)  # sampling interval across renewals

    # A clean stop releases the lease: the follower takes over well before it would expire.
    leader.stop()
    poll(lambda: follower.summary()["leader"], within=4, what="follower takes over")
    lease_now = control_plane.lease(lease)
    assert lease_now is not None
    assert lease_now["spec"]["holderIdentity"] == follower.summary()["identity"]
    assert lease_now["spec"]["leaseTransitions"] >= 1


def test_crashed_leader_is_replaced_after_the_lease_expires(
    control_plane: ControlPlane, runway: RunwayFactory
) -> None:
    lease = f"runway-e2e-{uuid.uuid4().hex[:6]}"
    config = {
        "kubernetes": {
            "leaderElection": {
                "leaseName": lease,
                "leaseDuration": "3s",
                "renewDeadline": "2s",
                "retryPeriod": "500ms",
            }
        }
    }
    a = runway.start(config)
    poll(lambda: a.summary()["leader"], within=20, what="a leads")
    b = runway.start(config)
    assert b.summary()["leader"] is False
    a.kill()  # SIGKILL by pid: no release
    poll(lambda: b.summary()["leader"], within=15, what="b takes over the expired lease")


def test_real_scheduler_calls_runway_and_the_cache_sees_the_binding(
    control_plane: ControlPlane, runway: RunwayFactory, tmp_path: Path
) -> None:
    plane = control_plane
    tag = uuid.uuid4().hex[:6]
    ns = f"sched-{tag}"
    plane.ensure_namespace(ns)
    plane.create_node(f"sched-{tag}-n0")
    rw = runway.start()
    config = write_scheduler_config(
        tmp_path / "scheduler.yaml",
        rw.url,
        release=plane.release,
        scheduler_name=f"runway-e2e-{tag}",
    )
    plane.start_scheduler(config)
    try:
        plane.create_pod("p", ns, scheduler_name=f"runway-e2e-{tag}")

        def bound_in_cache() -> bool:
            items = rw.summary(detail=True)["podItems"]
            # Earlier tests' nodes exist too: any node will do.
            return any(p["namespace"] == ns and p["nodeName"] for p in items)

        poll(bound_in_cache, within=60, what="the scheduler binds the pod via runway")
        api_pod = plane.api.get(f"/api/v1/namespaces/{ns}/pods/p").json()
        assert api_pod["spec"]["nodeName"]
        metrics = rw.client.get("/metrics").text
        assert 'runway_extender_requests_total{outcome="ok",verb="filter"}' in metrics
    finally:
        plane.stop_scheduler()


async def test_pod_writes_never_land_on_a_pod_recreated_under_the_same_name(
    control_plane: ControlPlane,
) -> None:
    # The DisruptionTarget mark and the DELETE carry the pod's UID: when the name now belongs to
    # another pod (a tenant re-created it, or named it in a forged gate), neither lands.
    from app.kube.access import load_access
    from app.kube.client import KubeClient
    from app.kube.pods import KubePodWriter
    from app.model.gate import PodRef

    plane = control_plane
    ns = f"uid-{uuid.uuid4().hex[:6]}"
    plane.ensure_namespace(ns)
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    path = f"/api/v1/namespaces/{ns}/pods"
    first = plane.api.post(path, json=body).raise_for_status().json()["metadata"]["uid"]
    access = load_access(str(plane.kubeconfig))
    assert access is not None
    client = KubeClient(access)
    try:
        pods = KubePodWriter(client)
        old = PodRef(first, ns, "p")
        assert await pods.add_condition(old, "DisruptionTarget", "Test", "mine", time.time())
        plane.api.delete(f"{path}/p", params={"gracePeriodSeconds": 0}).raise_for_status()
        poll(lambda: plane.api.get(f"{path}/p").status_code == 404, within=30, what="p gone")
        second = plane.api.post(path, json=body).raise_for_status().json()["metadata"]["uid"]
        assert second != first
        assert not await pods.add_condition(old, "DisruptionTarget", "Test", "not yours", 0.0)
        assert not await pods.delete(old)
        now = plane.api.get(f"{path}/p").raise_for_status().json()
        assert now["metadata"]["uid"] == second and "deletionTimestamp" not in now["metadata"]
        types = [c["type"] for c in now["status"].get("conditions") or []]
        assert "DisruptionTarget" not in types
    finally:
        await client.aclose()
