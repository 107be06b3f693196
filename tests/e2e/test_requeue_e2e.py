"""Requeue end to end: a real kube-apiserver and kube-scheduler with runway as its extender.

The tests play the kubelet (bound pods run; deleted pods go at once) and a tiny Job controller
(a deleted pod of a Job is re-created, owned by a real batch/v1 Job, so the pods are one workload
whose record is the WorkloadRecord ``job.<name>``; no controller-manager runs, so the Job itself
does nothing, and nothing garbage-collects the records).

* PodsReady: with waitForPodsReady timeout 3 s, backoff base 4 s and a limit of 2 requeues, a
  workload whose pods never get Ready is evicted, held for the backoff, evicted again,
  deactivated at the limit, and reactivated by the REST call. runway is restarted mid-backoff:
  count and requeueAt come back from the workload's record (``status.eviction``). Re-admission
  after each backoff comes within seconds: runway wakes the held pods at requeueAt
  (``runway.dev/requeue-wake``) instead of leaving them to kube-scheduler's 60 s
  unschedulable-queue flush.
* Preemption: a high-priority pod preempts a Job's pod; the Job's replacement pod is not bound
  before its pending preemptor, and it is woken once the preemptor is bound.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.model.record import record_name
from app.model.timestamps import parse_time
from app.tasks.wakeup import WAKE_ANNOTATION
from tests.e2e.conftest import (
    ControlPlane,
    RunwayFactory,
    RunwayHandle,
    poll,
    write_scheduler_config,
)

pytestmark = pytest.mark.e2e

NS = "requeue-e2e"
TOKEN = "0123456789abcdef0123456789abcdef"
CONFIG: dict[str, Any] = {
    "auth": {"mode": "static", "staticTokens": [TOKEN]},
    "kubernetes": {"leaderElection": {"enable": False}},
    "waitForPodsReady": {
        "enable": True,
        "timeout": "3s",
        "blockAdmission": False,  # one workload at a time is not what this tests
        "requeuingStrategy": {
            "backoffLimitCount": 2,
            "backoffBaseSeconds": 4,
            "backoffMaxSeconds": 60,
        },
    },
}
PREEMPT_NS = "requeue-preempt-e2e"
PREEMPT_CONFIG: dict[str, Any] = {
    "kubernetes": {"leaderElection": {"enable": False}},
    "requeueStrategy": {"antiFlappingTimeout": "5m"},
    "preemption": {"gateTimeout": "60s"},
}


class Cluster:
    """The plane, runway, the scheduler, and the test's kubelet and Job controller."""

    def __init__(
        self,
        plane: ControlPlane,
        tmp: Path,
        *,
        ns: str = NS,
        config: dict[str, Any] = CONFIG,
        jobs: dict[str, int] | None = None,
        cpu: str = "100m",
        priority_class: str | None = None,
        ready: bool = False,
        labels: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.plane = plane
        self.labels = labels or {}
        """Job name → the labels of its pods (a queue, say)."""
        self.tmp = tmp
        self.ns = ns
        self.config = config
        self.jobs = jobs if jobs is not None else {"train": 2}
        """Job name → pods the controller keeps (``<job>-<i>``)."""
        self.cpu = cpu
        self.priority_class = priority_class
        self.ready = ready
        self.factory = RunwayFactory(plane, tmp)
        self.runway: RunwayHandle | None = None
        self.job_uids: dict[str, str] = {}
        self.binds: list[tuple[float, str]] = []
        self.bound_at: dict[str, float] = {}
        """First time the kubelet saw each pod (by UID) bound."""

    def start_runway(self) -> RunwayHandle:
        if self.runway is not None:
            self.plane.stop_scheduler()
            self.runway.stop()
        self.runway = self.factory.start(self.config)
        config = write_scheduler_config(
            self.tmp / "scheduler.yaml", self.runway.url, release=self.plane.release
        )
        self.plane.start_scheduler(config)
        return self.runway

    def job(self, name: str = "train") -> dict[str, Any]:
        r = self.plane.api.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}")
        job: dict[str, Any] = r.raise_for_status().json()
        return job

    def record(self, name: str = "train") -> dict[str, Any]:
        """The WorkloadRecord of Job ``name``'s workload ({} when runway wrote none yet)."""
        return self.plane.record(self.ns, record_name(name, "owner:Job")) or {}

    def eviction(self, name: str = "train") -> dict[str, Any]:
        """``status.eviction`` of Job ``name``'s record ({} when there is none)."""
        return dict((self.record(name).get("status") or {}).get("eviction") or {})

    def life(self, name: str = "train") -> dict[str, Any]:
        """``status.life`` of Job ``name``'s record ({} when there is none)."""
        return dict((self.record(name).get("status") or {}).get("life") or {})

    def active(self, name: str = "train") -> bool:
        """``spec.active`` of Job ``name``'s record (true when there is none)."""
        return bool(self.record(name).get("spec", {}).get("active", True))

    def assert_job_untouched(self, name: str = "train") -> None:
        """runway keeps no state on the Job (it only reads its parallelism, never writes it)."""
        notes = self.job(name)["metadata"].get("annotations") or {}
        assert not [k for k in notes if k.startswith("runway.dev/")], notes

    def create_job(self, name: str = "train") -> None:
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {
                "parallelism": self.jobs[name],
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
                    }
                },
            },
        }
        r = self.plane.api.post(f"/apis/batch/v1/namespaces/{self.ns}/jobs", json=body)
        assert r.status_code == 201, r.text
        self.job_uids[name] = r.json()["metadata"]["uid"]

    def create_pod(
        self,
        name: str,
        *,
        owner: str | None = None,
        cpu: str | None = None,
        priority_class: str | None = None,
    ) -> dict[str, Any]:
        """A pending pod for kube-scheduler (owned by Job ``owner`` when given)."""
        meta: dict[str, Any] = {"name": name, "namespace": self.ns}
        if owner is not None and owner in self.labels:
            meta["labels"] = dict(self.labels[owner])
        if owner is not None:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": owner,
                    "uid": self.job_uids[owner],
                    "controller": True,
                }
            ]
        spec: dict[str, Any] = {
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu or self.cpu}},
                }
            ],
        }
        if priority_class := priority_class or self.priority_class:
            spec["priorityClassName"] = priority_class
        r = self.plane.api.post(
            f"/api/v1/namespaces/{self.ns}/pods",
            json={"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
        )
        assert r.status_code == 201, r.text
        pod: dict[str, Any] = r.json()
        return pod

    def pods(self) -> dict[str, dict[str, Any]]:
        return {
            p["metadata"]["name"]: p
            for p in self.plane.pods()
            if p["metadata"]["namespace"] == self.ns
        }

    def step(self) -> None:
        """One round of the kubelet and the Job controller."""
        pods = self.pods()
        for name, pod in list(pods.items()):
            if pod["metadata"].get("deletionTimestamp"):
                self.plane.delete_pod(name, self.ns)  # no kubelet to wait for
                del pods[name]
            elif pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") not in (
                "Running",
                "Failed",  # a kubelet does not restart a finished pod (restartPolicy Never)
                "Succeeded",
            ):
                self.binds.append((time.time(), name))
                self.bound_at.setdefault(pod["metadata"]["uid"], time.time())
                self.plane.set_pod_running(name, self.ns, ready=self.ready)
        for job, count in self.jobs.items():
            if job not in self.job_uids:
                continue
            for i in range(count):
                name = f"{job}-{i}"
                if name not in pods:
                    with contextlib.suppress(AssertionError):  # still terminating: next round
                        self.create_pod(name, owner=job)

    def until(self, what: str, check: Any, within: float = 60) -> Any:
        def once() -> Any:
            self.step()
            value = check()
            if value:
                # check() may see a bind step() had not seen yet: one more kubelet round
                # records it (binds, bound_at), so what follows never reads a missing bind.
                self.step()
            return value

        return poll(once, within=within, what=what, every=0.2)

    def bound_pods(self, besides: frozenset[str] = frozenset()) -> int:
        """Bound pods not terminating, but those of UIDs ``besides`` (the evicted ones, which
        runway may not have deleted yet when their workload's record is written)."""
        return sum(
            1
            for p in self.pods().values()
            if p["spec"].get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["uid"] not in besides
        )

    def bound_uids(self) -> frozenset[str]:
        """UIDs of the pods bound now (the re-created pods of an evicted workload are not:
        its backoff holds them)."""
        return frozenset(
            p["metadata"]["uid"] for p in self.pods().values() if p["spec"].get("nodeName")
        )

    def close(self) -> None:
        self.plane.stop_scheduler()
        if self.runway is not None:
            print(self.runway.logs()[-5000:])
        self.factory.close()


@pytest.fixture(scope="module")
def plane(dedicated_plane: ControlPlane) -> ControlPlane:
    """The module's own control plane, with the PriorityClasses the preemption test uses."""
    for name, value in (("rq-low", 100), ("rq-high", 1000)):
        dedicated_plane.ensure_priority_class(name, value)
    return dedicated_plane


def only_node(plane: ControlPlane, name: str, capacity: dict[str, str] | None = None) -> None:
    """Cordon every other node and add ``name`` (pool ``a``): each test sees its own node."""
    for n in plane.nodes():
        r = plane.api.patch(
            f"/api/v1/nodes/{n['metadata']['name']}",
            json={"spec": {"unschedulable": True}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
    plane.create_node(name, labels={"runway.dev/pool": "a"}, capacity=capacity)


@pytest.fixture
def cluster(plane: ControlPlane, tmp_path: Path) -> Iterator[Cluster]:
    plane.ensure_namespace(NS)
    only_node(plane, "rq-node")
    c = Cluster(plane, tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_evicted_backed_off_deactivated_and_reactivated(cluster: Cluster) -> None:
    c = cluster
    c.create_job()
    c.start_runway()

    # 1. the pods are scheduled (through runway), never Ready: evicted after the timeout
    c.until("first eviction", lambda: c.eviction().get("count") == 1)
    ev = c.eviction()
    assert c.record()["metadata"]["name"] == "job.train"
    assert c.record()["spec"]["workload"] == {"name": "train", "source": "owner:Job"}
    assert ev["reason"] == "PodsReadyTimeout"
    assert ev["failedPools"] == ["a"]
    requeue_at = parse_time(ev["requeueAt"])
    assert requeue_at is not None
    # held for the backoff: the re-created pods are bound only once requeueAt has passed, and
    # soon after it (woken by runway, not by the scheduler's 60 s flush)
    c.binds.clear()
    evicted = c.bound_uids()
    c.until("re-admission after the backoff", lambda: c.bound_pods(evicted) == 2, within=30)
    first_bind = min(t for t, _ in c.binds)
    assert requeue_at - 1.0 <= first_bind < requeue_at + 15, (first_bind, requeue_at)

    # 2. evicted again: count 2, backoff 8 s; restart runway in the middle of it
    c.until("second eviction", lambda: c.eviction().get("count") == 2)
    ev = c.eviction()
    requeue_at = parse_time(ev["requeueAt"])
    assert requeue_at is not None
    c.binds.clear()  # before the restart: a bind while the new runway starts must count too
    evicted = c.bound_uids()
    # The restart begins during the backoff; on a busy machine the new process may only be
    # ready after requeueAt, so the check is on when it began, not when it answered.
    restarted_at = time.time()
    runway = c.start_runway()
    assert restarted_at < requeue_at, "the restart must begin during the backoff"
    view = c.until(
        "the restarted runway sees the workload",
        lambda: runway.client.get("/v1/workloads/requeue-e2e/train").json().get("evictionRecord"),
    )
    assert view["count"] == 2
    assert view["requeueAt"] == ev["requeueAt"]
    c.until("re-admission after the second backoff", lambda: c.bound_pods(evicted) == 2, within=30)
    first_bind = min(t for t, _ in c.binds)
    assert requeue_at - 1.0 <= first_bind < requeue_at + 15, (first_bind, requeue_at)

    # 3. third timeout: the limit (2) is exceeded → deactivated; the pods stay pending
    evicted = c.bound_uids()  # what the third timeout evicts
    c.until("deactivation", lambda: c.eviction().get("deactivated") is True)
    assert c.eviction()["count"] == 2
    assert c.eviction()["reason"] == "Deactivated"  # Kueue's reason for this eviction
    assert c.active() is False  # spec.active: false, what `kubectl patch` would undo
    # The record is written before the pods are deleted: the evicted pods may still be bound
    # when the annotation is seen, so only their replacements are counted.
    c.until(
        "re-created pods",
        lambda: sum(1 for p in c.pods().values() if p["metadata"]["uid"] not in evicted) == 2,
    )
    settle = time.monotonic() + 6
    while time.monotonic() < settle:
        c.step()
        assert c.bound_pods(evicted) == 0, "a deactivated workload must not be scheduled"
        time.sleep(0.2)  # keep playing the kubelet for a while

    # 4. reactivation through the REST API (authenticated) lets it run again, at once
    assert runway.client.post("/v1/workloads/requeue-e2e/train:activate").status_code == 401
    resp = runway.client.post(
        "/v1/workloads/requeue-e2e/train:activate",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["evictionRecord"]["count"] == 0
    assert c.active() is True
    assert not c.eviction().get("deactivated")
    assert c.eviction()["count"] == 0
    c.until("scheduling after reactivation", lambda: c.bound_pods() == 2, within=20)
    woken = [p for p in c.pods().values() if WAKE_ANNOTATION in p["metadata"]["annotations"]]
    assert len(woken) == 2, "runway woke the reactivated pods"

    # 5. what `kubectl describe job` shows: runway's Events for each step
    def job_event_reasons() -> set[str]:
        r = c.plane.api.get(
            f"/api/v1/namespaces/{c.ns}/events",
            params={"fieldSelector": "involvedObject.kind=Job,involvedObject.name=train"},
        )
        items = r.raise_for_status().json()["items"]
        return {e["reason"] for e in items if e.get("source", {}).get("component") == "runway"}

    wanted = {"PodsReadyTimeout", "Deactivated", "Reactivated"}
    c.until("runway's Events on the Job", lambda: wanted <= job_event_reasons(), within=20)
    c.assert_job_untouched()


@pytest.fixture
def preempt_cluster(plane: ControlPlane, tmp_path: Path) -> Iterator[Cluster]:
    plane.ensure_namespace(PREEMPT_NS)
    only_node(plane, "rq-preempt-node", {"cpu": "2", "memory": "8Gi", "pods": "20"})
    c = Cluster(
        plane,
        tmp_path,
        ns=PREEMPT_NS,
        config=PREEMPT_CONFIG,
        jobs={"victim": 1},
        cpu="2",
        priority_class="rq-low",
        ready=True,
    )
    try:
        yield c
    finally:
        c.close()


@pytest.mark.releases(
    "<1.34",
    reason="kube-scheduler behaviour (issue #39, for the lead): on 1.34.4 and 1.37.2 the "
    "preemptor binds ~0.3 s after its victim's deletion, before the Job's replacement reaches "
    "runway's filter (NodeResourcesFit refuses it first: 'Insufficient cpu'), so runway never "
    "holds it and never writes the wake annotation the test waits for",
)
def test_replacement_of_preempted_pod_waits_for_its_preemptor(preempt_cluster: Cluster) -> None:
    c = preempt_cluster
    c.create_job("victim")
    c.start_runway()
    c.until("the victim runs", lambda: c.bound_pods() == 1)
    first = c.pods()["victim-0"]["metadata"]["uid"]

    # A high-priority pod needs the whole node: runway's preempt verb picks the victim.
    boss = c.create_pod("boss", cpu="2", priority_class="rq-high")
    boss_uid = boss["metadata"]["uid"]
    c.until(
        "the victim is preempted and its workload's record says so",
        lambda: c.eviction("victim").get("reason") == "Preempted",
    )
    assert c.eviction("victim")["preemptorUID"] == boss_uid
    c.assert_job_untouched("victim")

    # The Job re-creates its pod; the preemptor binds first, the replacement stays pending.
    def boss_bound() -> bool:
        pods = c.pods()
        replacement = pods.get("victim-0")
        assert (
            replacement is None
            or replacement["metadata"]["uid"] == first
            or (replacement["metadata"]["uid"] not in c.bound_at)
        ), "the replacement was bound before its preemptor"
        return boss_uid in c.bound_at

    c.until("the preemptor is bound", boss_bound)
    replacement = c.until(
        "a replacement pod",
        lambda: (p := c.pods().get("victim-0")) and p["metadata"]["uid"] != first and p,
    )
    assert replacement["metadata"]["uid"] not in c.bound_at

    # Its hold (anti-flapping) ended with the bind: runway wakes it; there is no room for it.
    c.until(
        "the replacement is woken",
        lambda: WAKE_ANNOTATION in c.pods()["victim-0"]["metadata"].get("annotations", {}),
        within=20,
    )
    settle = time.monotonic() + 3
    while time.monotonic() < settle:
        c.step()
        assert not c.pods()["victim-0"]["spec"].get("nodeName"), "no room beside the preemptor"
        time.sleep(0.2)  # keep playing the kubelet for a while

    # The preemptor finishes: the replacement takes the node.
    c.plane.delete_pod("boss", c.ns)
    # step() records a bind it sees; check() may see the nodeName a round earlier: wait for
    # the bind to be recorded, not just for the nodeName.
    replacement_uid = replacement["metadata"]["uid"]
    c.until("the replacement runs", lambda: replacement_uid in c.bound_at)
    assert c.bound_at[replacement_uid] > c.bound_at[boss_uid]
