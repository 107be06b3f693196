"""Issue #37, each row of its table on the real control plane (a kube-apiserver and kube-scheduler
with runway as its extender; the test plays the kubelet and the Job controller: ``Cluster`` of
``test_requeue_e2e``):

* recovery after a second loss: a Job recovers from a failed pod, later loses another one; the
  recovery clock counts from that *last* loss (Kueue's PodsReady lastTransitionTime), not from
  the old Failed pod the Job keeps — and the same across runway restarts (the ``lost`` and
  ``recovered`` facts are persisted in the WorkloadRecord);
* creation order of a workload never admitted: a Job's only pod, pending behind a StrictFIFO
  head, deleted and re-created by its controller keeps its place (its *created* fact is the
  Job's creationTimestamp, persisted at first sight);
* order after reactivation: deactivated past its requeue limit (eviction reason ``Deactivated``,
  as Kueue), then reactivated, a workload sorts by its creation;
* blockAdmission while recovering: an admitted workload that lost a pod holds the next
  admission back until it recovers (Kueue counts every admitted workload not PodsReady);
* what a PodsReady timeout deletes: only the active pods, a Succeeded pod stays;
* without the WorkloadRecord CRD runway is not ready and says why, once, with the fix
  (``/readyz``, ``runway_records_available``, ``check-config --kubeconfig``), and picks the CRD
  up when it is installed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.model.timestamps import parse_time
from tests.e2e.conftest import ControlPlane, RunwayFactory, poll, rfc3339_now
from tests.e2e.test_requeue_e2e import TOKEN, Cluster, only_node

pytestmark = pytest.mark.e2e

NS = "podsready-e2e"
LEADER_OFF: dict[str, Any] = {"leaderElection": {"enable": False}}
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workloadrecords.runway.dev"
AUTH = {"mode": "static", "staticTokens": [TOKEN]}


@pytest.fixture(scope="module")
def plane(dedicated_plane: ControlPlane) -> ControlPlane:
    dedicated_plane.ensure_priority_class("pr-low", 100)
    dedicated_plane.ensure_namespace(NS)
    return dedicated_plane


def cluster(
    plane: ControlPlane,
    tmp: Path,
    made: list[Cluster],
    node: str,
    config: dict[str, Any],
    jobs: dict[str, int],
    *,
    ready: bool = True,
) -> Cluster:
    only_node(plane, node, {"cpu": "8", "memory": "8Gi", "pods": "20"})
    c = Cluster(
        plane,
        tmp,
        ns=NS,
        config={"kubernetes": LEADER_OFF, **config},
        jobs=jobs,
        cpu="1",
        priority_class="pr-low",
        ready=ready,
    )
    made.append(c)
    return c


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


def set_status(c: Cluster, name: str, phase: str, *, ready: bool = False) -> None:
    """The kubelet reports ``name`` in ``phase`` (Ready as given, changed now)."""
    status = {
        "phase": phase,
        "conditions": [
            {"type": "Ready", "status": str(ready), "lastTransitionTime": rfc3339_now()}
        ],
    }
    r = c.plane.api.patch(
        f"/api/v1/namespaces/{NS}/pods/{name}/status",
        json={"status": status},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def workload(c: Cluster, name: str) -> dict[str, Any]:
    assert c.runway is not None
    view: dict[str, Any] = c.runway.get(f"/v1/workloads/{NS}/{name}")
    return view


def pending_order(c: Cluster, queue: str = "default") -> list[str]:
    assert c.runway is not None
    return [p["workload"] for p in c.runway.get(f"/v1/queues/{queue}/pending")["pending"]]


def cordon(c: Cluster, node: str) -> None:
    r = c.plane.api.patch(
        f"/api/v1/nodes/{node}",
        json={"spec": {"unschedulable": True}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def next_second(after: str) -> None:
    """creationTimestamps have second precision: wait until a later one is possible."""
    poll(lambda: rfc3339_now() > after, within=5, what="the next second")


# --- the recovery clock ---------------------------------------------------------------------


@pytest.mark.parametrize("restart", [False, True], ids=["one-process", "restarted"])
def test_a_second_loss_runs_the_recovery_clock_from_itself(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster], restart: bool
) -> None:
    """A Job recovers from one failed pod; longer than recoveryTimeout later it loses another.
    The clock counts from the second loss: not evicted at once (on main: at once, its deadline
    taken from the old Failed pod the Job keeps), evicted ``recoveryTimeout`` after it."""
    recovery = 25.0 if restart else 10.0  # a restart takes seconds of the clock
    config = {
        "waitForPodsReady": {
            "enable": True,
            "timeout": "60s",
            "recoveryTimeout": f"{recovery:.0f}s",
            "blockAdmission": False,
        }
    }
    work = "rec-restart" if restart else "rec-once"  # names never reused: no GC on this plane
    c = cluster(plane, tmp_path, made, f"{work}-node", config, {work: 2})
    c.create_job(work)
    c.start_runway()
    c.until("the Job runs", lambda: workload(c, work)["podsReady"])
    c.until("runway recorded it PodsReady", lambda: c.life(work).get("ready"))
    # Ready for a while before a pod fails (on 1.37 the whole Job starts within one second):
    # its Ready=False is then the pods' evidence of the loss (policy.podsready.FLIP_MARGIN_S)
    hold(c, 3, lambda: True)
    # first loss: work-1 fails; the Job controller's replacement becomes Ready
    c.jobs[work] = 0  # the names -0/-1 stay taken: the replacement is -r
    set_status(c, f"{work}-1", "Failed")
    first_loss = time.time()
    c.create_pod(f"{work}-r", owner=work)
    c.until("recovered", lambda: workload(c, work)["podsReady"])
    c.until("the recovery persisted", lambda: c.life(work).get("recovered"))
    if restart:
        c.start_runway()  # a new process: nothing in memory
    # longer than recoveryTimeout after the first loss, the second one
    poll(lambda: time.time() > first_loss + recovery + 3, within=30, what="the old loss aged")
    set_status(c, f"{work}-0", "Failed")
    second_loss = time.time()
    lost = c.until("the loss persisted", lambda: c.life(work).get("lost"))
    lost_at = parse_time(lost)
    assert lost_at is not None and lost_at >= int(second_loss) - 1
    conditions = {k["type"]: k for k in c.record(work)["status"]["conditions"]}
    ready = conditions["PodsReady"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "False",
        "WaitForRecovery",
        lost,
    )
    if restart:
        c.start_runway()
        assert c.life(work)["lost"] == lost  # the clock is not reset by a restart
    view = workload(c, work)
    assert view["podsReadyClock"] == "WaitForRecovery"
    assert view["podsReadyDeadline"] is not None
    assert parse_time(view["podsReadyDeadline"]) == lost_at + recovery
    # not evicted at once: the old Failed pod is not the loss
    hold(c, lost_at + recovery - 3 - time.time(), lambda: "reason" not in c.eviction(work))
    c.until(
        "evicted by the recovery timeout",
        lambda: c.eviction(work).get("reason") == "PodsReadyTimeout",
        within=30,
    )
    evicted = parse_time(c.eviction(work)["time"])
    assert evicted is not None and evicted >= lost_at + recovery - 1
    assert "recoveryTimeout" in c.eviction(work)["message"]


def test_block_admission_holds_the_next_workload_while_one_recovers(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    """Kueue (``podsReadyForAllAdmittedWorkloads``): every admitted workload whose PodsReady is
    not True blocks the next admission, one recovering from a lost pod too."""
    config = {
        "waitForPodsReady": {
            "enable": True,
            "timeout": "60s",
            "recoveryTimeout": "60s",
            "blockAdmission": True,
        }
    }
    c = cluster(plane, tmp_path, made, "pr-block-node", config, {"blk": 2})
    c.create_job("blk")
    c.start_runway()
    c.until("the Job runs", lambda: workload(c, "blk")["podsReady"])
    c.jobs["blk"] = 0  # no replacement yet
    set_status(c, "blk-1", "Failed")
    c.until("recovering", lambda: workload(c, "blk")["podsReadyClock"] == "WaitForRecovery")
    c.jobs["blk-other"] = 1
    c.create_job("blk-other")
    c.until("the other Job's pod is there", lambda: "blk-other-0" in c.pods())
    hold(c, 6, lambda: "blk-other-0" not in bound_names(c))
    view = workload(c, "blk-other")
    assert view["state"] == "pending"
    # the replacement is Ready: recovered, the other one is admitted
    c.create_pod("blk-r", owner="blk")
    c.until("recovered", lambda: workload(c, "blk")["podsReady"])
    c.until("the other Job binds", lambda: "blk-other-0" in bound_names(c), within=30)


# --- queue order ----------------------------------------------------------------------------


def test_a_recreated_pending_pod_keeps_its_place_behind_a_strict_fifo_head(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    """A Job never admitted: its only pod, pending behind the head of a StrictFIFO queue, is
    deleted and re-created by its controller. Its workload keeps its creation (the Job's
    creationTimestamp, persisted at first sight): it stays ahead of a younger Job."""
    config = {"queues": [{"name": "default", "queueingStrategy": "StrictFIFO"}]}
    c = cluster(plane, tmp_path, made, "pr-fifo-node", config, {})
    cordon(c, "pr-fifo-node")  # nothing binds: every Job stays pending
    c.start_runway()
    for name in ("head", "a", "b"):
        c.jobs[name] = 1
        c.create_job(name)
        created = c.job(name)["metadata"]["creationTimestamp"]
        c.until(f"{name}'s pod is pending", lambda n=name: f"{n}-0" in c.pods())
        next_second(created)
    a_created = c.job("a")["metadata"]["creationTimestamp"]
    # created persisted before any bind, from the Job runway read
    assert c.until("a's created is persisted", lambda: c.life("a").get("created")) == a_created
    want = [f"{NS}/head", f"{NS}/a", f"{NS}/b"]
    c.until("the queue's order", lambda: pending_order(c) == want)
    old = c.pods()["a-0"]["metadata"]["uid"]
    c.plane.delete_pod("a-0", NS)
    c.until(
        "a-0 re-created by its controller",
        lambda: (p := c.pods().get("a-0")) is not None and p["metadata"]["uid"] != old,
    )
    c.until(
        "runway sees the new pod", lambda: old not in {p["uid"] for p in workload(c, "a")["pods"]}
    )
    assert pending_order(c) == want
    assert c.life("a")["created"] == a_created


def test_a_reactivated_workload_sorts_by_its_creation(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    """Evicted by a PodsReady timeout past its requeue limit: deactivated, the eviction's
    reason is Deactivated (Kueue's). Reactivated, it is ordered by its creation, ahead of a
    Job created after it — not at the back by the time of that eviction."""
    config = {
        "auth": AUTH,
        "waitForPodsReady": {
            "enable": True,
            "timeout": "3s",
            "requeuingStrategy": {"backoffLimitCount": 0},
        },
    }
    c = cluster(plane, tmp_path, made, "pr-react-node", config, {"old": 1}, ready=False)
    c.create_job("old")
    runway = c.start_runway()
    c.until(
        "deactivated at its first timeout",
        lambda: c.eviction("old").get("deactivated") is True,
        within=40,
    )
    assert c.eviction("old")["reason"] == "Deactivated"
    cordon(c, "pr-react-node")  # nothing binds from here
    next_second(c.eviction("old")["time"])
    c.jobs["young"] = 1
    c.create_job("young")
    c.until("both pending", lambda: len(pending_order(c)) == 2)
    resp = runway.client.post(
        f"/v1/workloads/{NS}/old:activate", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["evictionRecord"]["reason"] == "Deactivated"
    c.until("reactivated", lambda: workload(c, "old")["state"] == "pending")
    assert pending_order(c) == [f"{NS}/old", f"{NS}/young"]


# --- the eviction ---------------------------------------------------------------------------


def test_a_timeout_deletes_only_the_active_pods(
    plane: ControlPlane, tmp_path: Path, made: list[Cluster]
) -> None:
    """A Job of 3 with one Succeeded and two never-ready pods times out: as Kueue suspends the
    Job, only the active pods are deleted; the Succeeded one (its logs) stays."""
    config = {"waitForPodsReady": {"enable": True, "timeout": "5s", "blockAdmission": False}}
    c = cluster(plane, tmp_path, made, "pr-active-node", config, {"mixed": 3}, ready=False)
    c.create_job("mixed")
    c.start_runway()
    names = {"mixed-0", "mixed-1", "mixed-2"}
    c.until("the Job's pods bind", lambda: bound_names(c) == names)
    c.until(
        "they run",
        lambda: all(c.pods()[n]["status"].get("phase") == "Running" for n in names),
    )
    c.jobs["mixed"] = 0  # no re-creation: what is left is what runway left
    done_uid = c.pods()["mixed-0"]["metadata"]["uid"]
    set_status(c, "mixed-0", "Succeeded")
    c.until(
        "evicted by the timeout",
        lambda: c.eviction("mixed").get("reason") == "PodsReadyTimeout",
        within=40,
    )
    c.until("the active pods are gone", lambda: not ({"mixed-1", "mixed-2"} & set(c.pods())))
    survivor = c.pods().get("mixed-0")
    assert survivor is not None and survivor["metadata"]["uid"] == done_uid
    assert not survivor["metadata"].get("deletionTimestamp")
    assert survivor["status"]["phase"] == "Succeeded"
    assert not [
        k for k in survivor["status"].get("conditions", []) if k["type"] == "DisruptionTarget"
    ]
    assert c.eviction("mixed")["count"] == 1


# --- without the CRD ------------------------------------------------------------------------


def check_config(plane: ControlPlane, tmp: Path) -> subprocess.CompletedProcess[str]:
    file = tmp / "check.yaml"
    file.write_text("{}\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "check-config",
            str(file),
            "--kubeconfig",
            str(plane.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_the_crd_runway_is_not_ready_says_why_once_and_picks_it_up(
    plane: ControlPlane, tmp_path: Path
) -> None:
    fix = "kubectl apply -f helm/runway/crds/"
    factory = RunwayFactory(plane, tmp_path)
    try:
        r = plane.api.delete(CRD)
        assert r.status_code in (200, 202, 404), r.text
        poll(
            lambda: plane.api.get("/apis/runway.dev/v1alpha1/workloadrecords").status_code == 404,
            within=60,
            what="the CRD gone",
        )
        checked = check_config(plane, tmp_path)
        assert checked.returncode == 3 and fix in checked.stderr, checked.stderr
        runway = factory.start({"kubernetes": LEADER_OFF}, wait_ready=False)

        def refused() -> str | None:
            try:
                reply = runway.client.get("/readyz")
            except Exception:  # still starting
                return None
            return reply.text if reply.status_code == 503 and fix in reply.text else None

        poll(refused, within=30, what="/readyz saying why")
        metrics = runway.client.get("/metrics").text
        assert "runway_records_available 0.0" in metrics
        time.sleep(12)  # longer than the quiet retry (10 s): it is asked again, not said again
        assert runway.logs().count(fix) == 1, runway.logs()[-3000:]
        assert "eviction records not all loaded" not in runway.logs()
        # installed: picked up without a restart
        plane.install_crds()
        poll(runway.ready, within=30, what="ready once the CRD is installed")
        assert "runway_records_available 1.0" in runway.client.get("/metrics").text
        checked = check_config(plane, tmp_path)
        assert checked.returncode == 0 and "installed and readable" in checked.stdout
    finally:
        plane.install_crds()
        factory.close()
