"""kube-scheduler 1.20's nominator honours runway's external nomination (issue #12).

With ``preemption.async: true`` runway answers ``{}`` to ``preempt`` and writes
``status.nominatedNodeName`` itself. While runway deletes the victims, its gate and claim keep the
node for the preemptor. The gate keeper releases the gate (and so the claim) once every victim is
terminating or gone (``app/policy/gate.py``); the terminating victims still count in
kube-scheduler's cache, but from the moment they are gone until the preemptor binds only
kube-scheduler's nominator protects the node. What 1.20 does (source in
``~/.cache/runway-k8s/src/pkg-scheduler``):

* the nominator is fed from the pod informer, not only from kube-scheduler's own preemptions:
  ``internal/queue/scheduling_queue.go: PriorityQueue.Add`` / ``AddUnschedulableIfNotPresent``
  call ``AddNominatedPod(pod, "")`` and ``PriorityQueue.Update`` calls
  ``UpdateNominatedPod(oldPod, newPod)``; ``nominatedPodMap.add`` with an empty node name takes
  ``pod.Status.NominatedNodeName`` (``NominatedNodeName(p)``) — so a nomination written by runway
  is recorded like one kube-scheduler wrote. ``scheduler.go: recordSchedulingFailure`` re-adds it
  after every failed attempt (``AddNominatedPod(podInfo.Pod, "")`` with the result's empty node
  name: the pod's own nomination is kept), and its ``updatePod`` only ever *sets*
  ``nominatedNodeName`` (never clears it) when the node name passed is empty;
* filtering counts the nominated pods: ``core/generic_scheduler.go: PodPassesFiltersOnNode`` runs
  the filter plugins once with ``addNominatedPods`` (every pod nominated to the node with a
  priority >= the pod's, other than itself, added to a clone of the NodeInfo) and once without;
  both must pass. A lower-priority pod that would fit the node alone but not beside the nominated
  preemptor fails ``NodeResourcesFit`` ("Insufficient cpu");
* an entry leaves the nominator only when the pod is deleted from the queue (bound: the informer's
  ``Delete``) or its nomination changes in the API: cleared by a higher-priority preemption on
  that node (``defaultpreemption: PrepareCandidate``), or by the pod's own failed attempt when
  no node is worth a preemption (``defaultpreemption: FindCandidates``: every node
  ``UnschedulableAndUnresolvable`` → ``util.ClearNominatedNodeName``).

How long that window lasts depends on kube-scheduler's backoff (the victim's deletion moves the
preemptor to the backoff queue while it backs off: ``MoveAllToActiveOrBackoffQueue``) and on
runway's touch (a pod update: 1.20's ``PriorityQueue.Update`` moves an updated pod from the
unschedulable or the backoff queue straight to the active queue). To hold the window open
deterministically, the preemptor also asks for one ``example.com/widget`` (an extended
resource the node offers), and the test sets the node's widget capacity to 0 before the victim
goes: the preemptor fails ``NodeResourcesFit`` on widgets, a resolvable failure, so 1.20 keeps
its nomination (``FindCandidates`` clears the preemptor's own nomination only when *no* node is
worth a preemption, e.g. a taint it does not tolerate: an earlier version of this test saw
that) and finds no candidate (removing lower-priority pods frees no widget), so runway's
``preempt`` is not called either. The preemptor stays pending with its nomination after the gate
opened and the victim is gone, and runway touches it then (the requeue waker wakes a nominated
pod when the last lower-priority pod on its node is gone). A filler of lower priority is then
tried against the empty node and must fail on cpu: only the nominated preemptor takes that room.
Then the widget comes back and the preemptor binds to its node; the filler never did.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.tasks.wakeup import WAKE_ANNOTATION
from tests.e2e.conftest import (
    ControlPlane,
    RunwayHandle,
    poll,
    runway_scheduling,
)
from tests.e2e.test_preemption_e2e import (
    SCHEDULER,
    bound_and_running,
    get_pod,
    kubelet_reap,
    pod,
)

pytestmark = pytest.mark.e2e

WIDGET = "example.com/widget"


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, RunwayHandle]]:
    plane = dedicated_plane
    config = {
        "queues": [
            {"name": "org"},
            {"name": "team-b", "parent": "org"},
            {"name": "team-f", "parent": "org"},
        ],
        "kubernetes": {"leaderElection": {"enable": False}},
        # takeover on every release (auto lets kube-scheduler execute from 1.33: DESIGN §1.1)
        "preemption": {"async": True, "gateTimeout": "120s", "schedulerNames": [SCHEDULER]},
        "logging": {"level": "info"},
    }
    with runway_scheduling(
        plane,
        tmp_path_factory.mktemp("nomination"),
        config,
        scheduler_name=SCHEDULER,
        priorities={"low": 100, "high": 1000},
    ) as rw:
        yield plane, rw


def set_widgets(plane: ControlPlane, node: str, count: int) -> None:
    """The node's capacity and allocatable of ``WIDGET`` (status subresource, as a device
    plugin's kubelet would report)."""
    capacity = {"cpu": "2", "memory": "8Gi", "pods": "20", WIDGET: str(count)}
    r = plane.api.patch(
        f"/api/v1/nodes/{node}/status",
        json={"status": {"capacity": capacity, "allocatable": capacity}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def create(
    plane: ControlPlane, ns: str, name: str, *, queue: str, priority: str, requests: dict[str, str]
) -> None:
    """A pod with any resource requests (``test_preemption_e2e.pod`` asks for cpu only)."""
    r = plane.api.post(
        f"/api/v1/namespaces/{ns}/pods",
        json={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": {"runway.dev/queue": queue, "runway.dev/workload": name},
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "priorityClassName": priority,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": requests, "limits": requests},
                    }
                ],
            },
        },
    )
    assert r.status_code == 201, r.text


def wake_stamp_of(p: dict[str, Any] | None) -> str | None:
    """The requeue waker's last touch of ``p`` (its annotation), if any."""
    return None if p is None else (p["metadata"].get("annotations") or {}).get(WAKE_ANNOTATION)


def pod_scheduled(p: dict[str, Any]) -> dict[str, Any] | None:
    for c in p["status"].get("conditions", []):
        if c["type"] == "PodScheduled":
            return dict(c)
    return None


@pytest.mark.releases(
    "<1.34",
    reason="kube-scheduler behaviour (issue #39, for the lead): the widget taken away to hold "
    "the window makes the preemptor's retry end in 'Preemption is not helpful for scheduling', "
    "and from 1.34 (seen on 1.34.4 and 1.37.2; not 1.20) the scheduler then clears its "
    'nominatedNodeName (ModeOverride ""): the nomination this test relies on is gone',
)
def test_the_nominator_keeps_a_lower_priority_pod_off_the_node_after_the_gate_opens(
    stack: tuple[ControlPlane, RunwayHandle],
) -> None:
    plane, rw = stack
    ns = f"nom-{uuid.uuid4().hex[:6]}"
    plane.ensure_namespace(ns)
    node = f"{ns}-n0"
    plane.create_node(node, capacity={"cpu": "2", "memory": "8Gi", "pods": "20", WIDGET: "1"})

    # A low-priority victim takes most of the node; the preemptor needs that room.
    pod(plane, ns, "low", queue="team-b", cpu="1500m", priority="low")
    assert poll(lambda: bound_and_running(plane, ns, "low"), within=60, what="low bound") == node
    high_requests = {"cpu": "1500m", WIDGET: "1"}
    create(plane, ns, "high", queue="team-b", priority="high", requests=high_requests)

    # runway takes over: nominates the preemptor, then deletes the victim (Terminating: no
    # kubelet yet). The gate opens as soon as the victim is terminating (app/policy/gate.py), so
    # the claim is gone while the victim's resources still count in kube-scheduler's cache.
    def nominated_victim_going_gate_open() -> bool:
        high = get_pod(plane, ns, "high")
        low = get_pod(plane, ns, "low")
        gated = any(e["preemptor"] == f"{ns}/high" for e in rw.get("/v1/gate"))
        # the preemption in flight is mirrored on the preemptor's record (wl.high) until then
        in_flight = plane.record(ns, "wl.high") or {}
        mirrored = (in_flight.get("status") or {}).get("preemptions") or []
        return (
            high is not None
            and high["status"].get("nominatedNodeName") == node
            and not [e for e in mirrored if e["preemptor"] == "high"]
            and low is not None
            and bool(low["metadata"].get("deletionTimestamp"))
            and not gated
        )

    poll(nominated_victim_going_gate_open, within=60, what="nominated, victim going, gate open")
    recent = rw.get("/v1/preemptions")["recent"]
    assert [r["result"] for r in recent if r["preemptor"] == f"{ns}/high"] == ["success"]

    # Hold the window open: the preemptor cannot bind while the node has no widget.
    set_widgets(plane, node, 0)
    # The kubelet lets the victim go: the node is free but for the nomination.
    woken_before = wake_stamp_of(get_pod(plane, ns, "high"))
    assert kubelet_reap(plane, ns) == ["low"]
    poll(lambda: get_pod(plane, ns, "low") is None, within=30, what="the victim gone")
    # runway's waker touches the preemptor once the victim is gone (not when the gate opened):
    # kube-scheduler moves it to the active queue whatever its backoff.
    poll(
        lambda: wake_stamp_of(get_pod(plane, ns, "high")) not in (None, woken_before),
        within=30,
        what="runway touches the preemptor after its victim is gone",
    )
    high = get_pod(plane, ns, "high")
    assert high is not None and not high["spec"].get("nodeName")
    assert high["status"].get("nominatedNodeName") == node
    assert rw.get("/v1/gate") == []

    # Only the nominator protects the node now. A filler of lower priority fits the empty node
    # alone (1 of 2 CPUs) but not beside the nominated preemptor (1.5 CPUs).
    create(plane, ns, "filler", queue="team-f", priority="low", requests={"cpu": "1"})

    def filler_refused_for_cpu() -> dict[str, Any] | None:
        f = get_pod(plane, ns, "filler")
        assert f is not None
        assert not f["spec"].get("nodeName"), "the filler took the preemptor's node"
        cond = pod_scheduled(f)
        if cond and cond["status"] == "False" and "Insufficient cpu" in cond.get("message", ""):
            return cond
        return None

    cond = poll(filler_refused_for_cpu, within=30, what="kube-scheduler refuses the filler (cpu)")
    assert cond["reason"] == "Unschedulable"
    high = get_pod(plane, ns, "high")
    assert high is not None and high["status"].get("nominatedNodeName") == node

    # The widget comes back (a node update: both pods are retried); the preemptor binds to its
    # node and the filler is never bound before it.
    set_widgets(plane, node, 1)

    def high_bound() -> bool:
        f = get_pod(plane, ns, "filler")
        assert f is not None and not f["spec"].get("nodeName"), "the filler bound first"
        return bound_and_running(plane, ns, "high") == node

    poll(high_bound, within=60, every=0.05, what="the preemptor binds to its nominated node")
    f = get_pod(plane, ns, "filler")
    assert f is not None and not f["spec"].get("nodeName")
    recent = rw.get("/v1/preemptions")["recent"]
    assert [r["result"] for r in recent if r["preemptor"] == f"{ns}/high"] == ["success"]
