"""A workload's life as persisted facts (DESIGN §2.3), end to end: a real kube-apiserver and
kube-scheduler with runway as its extender; the test plays the kubelet and the Job controller
(``Cluster`` of ``test_requeue_e2e``).

* KEP-349's deadlock: a gang of 3 pods of 2 CPU on a 4-CPU node binds 2 pods and can never bind the
  third. It is admitted at its first bind, so ``timeout`` runs out, it is evicted, and the small
  workload that ``blockAdmission`` held behind it binds.
* A protected gang with a pending replacement pod keeps its protection: its *started* fact is
  persisted in its WorkloadRecord (``status.life``), so a higher-priority preemptor is vetoed.
* A Job with a Failed pod and a Ready replacement is PodsReady (failed pods are not members):
  never evicted, even with a short ``recoveryTimeout``.
* A gang never PodsReady as a whole (one pod Ready then crashed, the other never Ready) stays on
  the ``timeout`` clock and is evicted, with ``recoveryTimeout`` unset (KEP-349).
* A Job of parallelism 3 with 2 pods Ready and 1 Failed, not replaced, is not PodsReady: its
  size is the Job's ``parallelism`` (read from the Job, KEP-349's ready + succeeded ≥ size), and
  the ``timeout`` evicts it.
* A Job whose pod is re-created keeps its place in ``Creation`` order (its *created* fact is the
  Job's creationTimestamp, read from the Job and persisted in its record, not the new pod's;
  ``test_podsready_e2e`` has the case of a Job never admitted).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, poll, rfc3339_now
from tests.e2e.test_requeue_e2e import Cluster, only_node

pytestmark = pytest.mark.e2e

NS = "lifecycle-e2e"
LEADER_OFF: dict[str, Any] = {"leaderElection": {"enable": False}}


@pytest.fixture(scope="module")
def plane(dedicated_plane: ControlPlane) -> ControlPlane:
    for name, value in (("lc-low", 100), ("lc-high", 1000)):
        dedicated_plane.ensure_priority_class(name, value)
    dedicated_plane.ensure_namespace(NS)
    return dedicated_plane


def cluster(
    plane: ControlPlane,
    tmp: Path,
    node: str,
    cpu: str,
    config: dict[str, Any],
    jobs: dict[str, int],
) -> Cluster:
    only_node(plane, node, {"cpu": cpu, "memory": "8Gi", "pods": "20"})
    return Cluster(
        plane,
        tmp,
        ns=NS,
        config={"kubernetes": LEADER_OFF, **config},
        jobs=jobs,
        cpu="2",
        priority_class="lc-low",
        ready=True,
    )


def bound_names(c: Cluster) -> set[str]:
    return {
        name
        for name, p in c.pods().items()
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def hold(c: Cluster, seconds: float, check: Any) -> None:
    """Keep playing the kubelet for ``seconds``, asserting ``check`` all along."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.step()
        assert check(), "the condition held until now no longer holds"
        time.sleep(0.2)  # the kubelet's pace, not a wait for a condition


def unscheduled_pod(c: Cluster, name: str, owner: str) -> None:
    """A replacement pod of Job ``owner`` that no scheduler handles: it stays pending."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": owner,
                    "uid": c.job_uids[owner],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "runway-e2e-nobody",
            "priorityClassName": "lc-low",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
        },
    }
    r = c.plane.api.post(f"/api/v1/namespaces/{NS}/pods", json=body)
    assert r.status_code == 201, r.text


def test_partial_gang_times_out_and_the_workload_behind_it_binds(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    config = {
        "waitForPodsReady": {
            "enable": True,
            "timeout": "5s",
            "blockAdmission": True,
            "requeuingStrategy": {"backoffBaseSeconds": 120, "backoffMaxSeconds": 600},
        }
    }
    c = cluster(plane, tmp_path, "lc-gang-node", "4", config, {"gang": 3})
    made.append(c)
    c.create_job("gang")
    runway = c.start_runway()
    c.until("two of the gang's three pods bind", lambda: len(bound_names(c)) == 2)
    # admitted at its first bind, though not started (once runway's watch has the binds)
    c.until(
        "runway sees the gang admitted",
        lambda: runway.get(f"/v1/workloads/{NS}/gang")["state"] == "admitted",
    )
    view = runway.get(f"/v1/workloads/{NS}/gang")
    assert view["state"] == "admitted" and view["life"]["admitted"]["time"] is not None
    assert view["life"]["started"]["time"] is None
    # the small workload behind it: held by blockAdmission, then bound once the gang is evicted
    c.jobs["small"] = 1
    c.create_job("small")
    c.until(
        "the partial gang is evicted (PodsReadyTimeout)",
        lambda: c.eviction("gang").get("reason") == "PodsReadyTimeout",
        within=30,
    )
    c.until("the small workload binds", lambda: "small-0" in bound_names(c), within=30)
    # the gang's re-created pods wait out their backoff
    assert not bound_names(c) & {"gang-0", "gang-1", "gang-2"}


def test_protected_gang_with_a_pending_replacement_keeps_its_protection(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    config = {"minRuntime": {"defaultPreemptMinRuntime": "10m"}}
    c = cluster(plane, tmp_path, "lc-protect-node", "2", config, {"guard": 2})
    c.cpu = "1"
    made.append(c)
    c.create_job("guard")
    runway = c.start_runway()
    c.until("the gang runs", lambda: len(bound_names(c)) == 2)
    c.until("its started fact is persisted", lambda: c.life("guard").get("started"))
    # one pod is lost; its replacement is pending (no scheduler picks it up)
    del c.jobs["guard"]
    c.plane.delete_pod("guard-1", NS)
    unscheduled_pod(c, "guard-r", "guard")
    view = c.until(
        "runway sees the replacement",
        lambda: (v := runway.get(f"/v1/workloads/{NS}/guard")) and len(v["pods"]) == 2 and v,
    )
    assert view["life"]["started"]["source"] == "persisted"
    assert view["protectedUntil"] is not None and view["protectedUntil"] > rfc3339_now()
    # a higher-priority pod needs the whole node: the gang is protected, preemption is vetoed
    c.create_pod("boss", cpu="2", priority_class="lc-high")
    c.until(
        "runway vetoes the preemption",
        lambda: any(
            d["preemptor"]["pod"] == f"{NS}/boss" and d["chosenNode"] is None
            for d in runway.get("/v1/preemptions/decisions")["decisions"]
        ),
        within=30,
    )
    hold(c, 3, lambda: bound_names(c) == {"guard-0"})


def test_failed_pod_with_a_ready_replacement_is_not_evicted(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    config = {
        "waitForPodsReady": {
            "enable": True,
            "timeout": "3s",
            "recoveryTimeout": "5s",
            "blockAdmission": False,
        }
    }
    c = cluster(plane, tmp_path, "lc-failed-node", "8", config, {"work": 2})
    made.append(c)
    c.create_job("work")
    runway = c.start_runway()
    c.until("the Job runs", lambda: runway.get(f"/v1/workloads/{NS}/work")["podsReady"])
    # work-1 fails (the kubelet reports it); the Job controller creates a replacement
    now = rfc3339_now()
    status = {
        "phase": "Failed",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
    }
    r = c.plane.api.patch(
        f"/api/v1/namespaces/{NS}/pods/work-1/status",
        json={"status": status},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    c.jobs["work"] = 0  # the names work-0/1 stay taken: the replacement is work-r
    c.create_pod("work-r", owner="work")
    c.until("the replacement is Ready", lambda: runway.get(f"/v1/workloads/{NS}/work")["podsReady"])
    view = runway.get(f"/v1/workloads/{NS}/work")
    assert view["life"]["members"]["count"] == 2  # the failed pod is not a member
    # longer than recoveryTimeout since the failure: a failed pod counted as a member would
    # have made the Job lose PodsReady for good and be evicted by now
    hold(c, 6, lambda: "reason" not in c.eviction("work"))
    assert {"work-0", "work-r"} <= bound_names(c)


def set_ready(c: Cluster, name: str, ready: bool) -> None:
    """The kubelet's readiness probe flips: only the Ready condition changes (its startTime
    stays, so a Ready=False well after it shows the pod had been Ready)."""
    status = {
        "conditions": [{"type": "Ready", "status": str(ready), "lastTransitionTime": rfc3339_now()}]
    }
    r = c.plane.api.patch(
        f"/api/v1/namespaces/{NS}/pods/{name}/status",
        json={"status": status},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def test_a_gang_never_pods_ready_times_out_although_one_pod_was_ready(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    """Issue #27 item 5 (KEP-349: ``timeout`` "applies before the job has started"): a gang of 2
    whose first pod was Ready and then crashed, while the second never became Ready, was never
    PodsReady. It stays on the start clock and is evicted when ``timeout`` runs out, although
    ``recoveryTimeout`` is unset (on main it was on no clock at all and never evicted)."""
    config = {"waitForPodsReady": {"enable": True, "timeout": "8s", "blockAdmission": False}}
    c = cluster(plane, tmp_path, "lc-crash-node", "8", config, {"crash": 2})
    c.ready = False  # the test's kubelet starts the pods not Ready
    made.append(c)
    c.create_job("crash")
    runway = c.start_runway()
    c.until("both pods run", lambda: bound_names(c) == {"crash-0", "crash-1"})
    c.until("crash-0 is Running", lambda: c.pods()["crash-0"]["status"].get("startTime"))
    set_ready(c, "crash-0", True)
    time.sleep(2.5)  # the probe's period: the crash comes well after the pod's start
    set_ready(c, "crash-0", False)

    def clock() -> str:
        view = runway.get(f"/v1/workloads/{NS}/crash")
        assert not view["podsReady"]
        return str(view["podsReadyClock"])

    assert c.until("the workload's clock", clock) == "WaitForStart"
    c.until(
        "evicted by the start timeout",
        lambda: c.eviction("crash").get("reason") == "PodsReadyTimeout",
        within=40,
    )


def test_a_job_with_a_failed_pod_is_short_of_its_parallelism_and_times_out(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    """KEP-349: PodsReady is measured against the workload's size, "we don't take failed pods
    into account". A Job of 3 whose pods are all bound, 2 Ready and 1 Failed (no replacement: the
    test's Job controller makes none) is not PodsReady; its size comes from the Job's
    ``parallelism``, which runway reads (and never writes), and ``timeout`` evicts it."""
    config = {"waitForPodsReady": {"enable": True, "timeout": "15s", "blockAdmission": False}}
    c = cluster(plane, tmp_path, "lc-parallel-node", "8", config, {"short": 3})
    c.ready = False  # the test's kubelet starts the pods not Ready; the test makes two Ready
    made.append(c)
    c.create_job("short")
    runway = c.start_runway()
    names = {"short-0", "short-1", "short-2"}
    c.until("the Job's three pods bind", lambda: bound_names(c) == names)
    c.until(
        "the three pods run",
        lambda: all(c.pods()[n]["status"].get("phase") == "Running" for n in names),
    )
    c.jobs["short"] = 0  # no replacement of the failed pod
    set_ready(c, "short-0", True)
    set_ready(c, "short-1", True)
    # short-2 fails without ever having been Ready (its Ready=False is the kubelet's first)
    ready_false = next(
        cond for cond in c.pods()["short-2"]["status"]["conditions"] if cond["type"] == "Ready"
    )
    status = {"phase": "Failed", "conditions": [ready_false]}
    r = c.plane.api.patch(
        f"/api/v1/namespaces/{NS}/pods/short-2/status",
        json={"status": status},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200, r.text

    def seen() -> dict[str, Any] | None:
        view: dict[str, Any] = runway.get(f"/v1/workloads/{NS}/short")
        ready = {p["name"] for p in view["pods"] if p["ready"]}
        failed = {p["name"] for p in view["pods"] if p["phase"] == "Failed"}
        return view if ready == {"short-0", "short-1"} and failed == {"short-2"} else None

    view = c.until("runway sees 2 Ready and 1 Failed", seen)
    members = view["life"]["members"]
    assert (members["count"], members["size"], members["sizeSource"]) == (2, 3, "parallelism")
    assert view["podsReady"] is False
    assert view["podsReadyClock"] == "WaitForStart"  # never PodsReady: the start clock
    summary = runway.get("/v1/cache/summary")
    assert summary["jobsReadable"] is True and summary["jobs"] >= 1
    c.until(
        "evicted by the start timeout",
        lambda: c.eviction("short").get("reason") == "PodsReadyTimeout",
        within=60,
    )
    c.assert_job_untouched("short")  # read, never written


def test_recreated_job_keeps_its_place_in_creation_order(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    c = cluster(plane, tmp_path, "lc-order-node", "2", {}, {"old": 1})
    made.append(c)
    c.create_job("old")
    runway = c.start_runway()
    c.until("the old Job runs", lambda: bound_names(c) == {"old-0"})
    created = c.until("its created fact is persisted", lambda: c.life("old").get("created"))
    # the Job's creationTimestamp (runway reads the Job; before its pods existed)
    assert created == c.job("old")["metadata"]["creationTimestamp"]
    # creationTimestamps have second precision: the next Job must be strictly newer
    poll(lambda: rfc3339_now() > created, within=5, what="the next second")
    c.jobs["new"] = 1
    c.create_job("new")
    c.until("the new Job's pod is pending", lambda: "new-0" in c.pods())
    # nothing may bind any more; the old Job's pod is deleted and re-created, after the new one
    r = c.plane.api.patch(
        "/api/v1/nodes/lc-order-node",
        json={"spec": {"unschedulable": True}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    c.plane.delete_pod("old-0", NS)

    def order() -> list[str]:
        pending = runway.get("/v1/queues/default/pending")["pending"]
        return [p["workload"] for p in pending]

    c.until("both pending", lambda: len(order()) == 2)
    assert order() == [f"{NS}/old", f"{NS}/new"]
