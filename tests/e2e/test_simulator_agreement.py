"""The simulator agrees with the real thing (issue #16): one small trace, replayed on a real
kube-apiserver + kube-scheduler 1.20 with runway as its extender, and through
``python -m app simulate``'s engine with the same config; the decisions — who was preempted (and
by whom), who was evicted for PodsReady and deactivated, in which order — must be the same.

The trace (2 nodes of 2 CPUs, every pod asks for 2 CPUs, so node choice cannot matter):

======  ========  =====  ====  ==========  ====================================================
t (s)   workload  queue  prio  ready       what happens
======  ========  =====  ====  ==========  ====================================================
0       stuck     b      low   never       binds; PodsReady timeout (10 s): evicted, and with
                                           backoffLimitCount 0 deactivated
0       a-long    a      low   after 1 s   binds; protected 20 s (team-a's min-runtimes)
2       b-filler  b      low   after 1 s   waits; binds where ``stuck`` was
14      b-high    b      high  after 1 s   preempts ``b-filler`` (same queue, no min-runtime),
                                           not ``a-long`` (reclaim, protected until ~20 s)
16      a-high    a      high  after 1 s   waits until ``a-long``'s 20 s are over, preempts it
======  ========  =====  ====  ==========  ====================================================

The test plays the kubelet (bound pods run; Ready after the trace's delay; terminating pods are
force-deleted) and a Job controller (each workload is a batch/v1 Job of one pod, re-created when
deleted; nothing finishes within the test). Times differ (the real scheduler retries on events,
the simulator on its model's rules), so only the decisions and their order are compared.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.config import parse_config
from app.simulator.engine import SimOptions, simulate
from app.simulator.trace import parse_trace
from tests.e2e.conftest import ControlPlane, poll, runway_scheduling

pytestmark = pytest.mark.e2e

SCHEDULER = "runway-e2e-simulate"
PRIORITY = {"low": 100, "high": 1000}
CONFIG: dict[str, Any] = {
    "queues": [
        {"name": "org"},
        {"name": "team-a", "parent": "org", "preemptMinRuntime": "20s", "reclaimMinRuntime": "20s"},
        {"name": "team-b", "parent": "org"},
    ],
    "waitForPodsReady": {
        "enable": True,
        "timeout": "10s",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffLimitCount": 0},
    },
}
RUNWAY: dict[str, Any] = CONFIG | {
    "kubernetes": {"leaderElection": {"enable": False}},
    "preemption": {"async": True, "gateTimeout": "60s", "schedulerNames": [SCHEDULER]},
}
TRACE: list[dict[str, Any]] = [
    {"name": "stuck", "arrival": 0, "queue": "team-b", "priority": 100, "readyAfter": None},
    {"name": "a-long", "arrival": 0, "queue": "team-a", "priority": 100, "readyAfter": 1},
    {"name": "b-filler", "arrival": 2, "queue": "team-b", "priority": 100, "readyAfter": 1},
    {"name": "b-high", "arrival": 14, "queue": "team-b", "priority": 1000, "readyAfter": 1},
    {"name": "a-high", "arrival": 16, "queue": "team-a", "priority": 1000, "readyAfter": 1},
]
EXPECTED = [
    ("evicted", "stuck", ""),
    ("deactivated", "stuck", ""),
    ("preempted", "b-filler", "b-high"),
    ("preempted", "a-long", "a-high"),
]
CPU = "2"
DURATION = 600


def simulated() -> list[tuple[str, str, str]]:
    """The decisions of the simulator on the trace."""
    cluster = {"cluster": {"nodes": [{"name": "n", "count": 2, "allocatable": {"cpu": CPU}}]}}
    lines = [json.dumps(cluster)] + [
        json.dumps(w | {"duration": DURATION, "requests": {"cpu": CPU}}) for w in TRACE
    ]
    out = simulate(
        parse_config(CONFIG, "agreement.yaml"),
        parse_trace(lines, "agreement"),
        options=SimOptions(until=300),
    )
    return [
        (d.kind, d.workload, d.detail if d.kind == "preempted" else "")
        for d in out.decisions
        if d.kind in ("preempted", "evicted", "deactivated")
    ]


def test_the_simulator_alone_gives_the_expected_decisions() -> None:
    """The trace's story, as the simulator tells it (no control plane needed)."""
    assert simulated() == EXPECTED


class Replay:
    """Plays the trace in real time: creates Jobs and pods, plays kubelet and Job controller,
    and records runway's decisions as they show on the pods and the workloads' records."""

    def __init__(self, plane: ControlPlane, ns: str, nodes: list[str]) -> None:
        self.plane = plane
        self.ns = ns
        self.nodes = nodes
        self.t0 = time.monotonic()
        self.specs = {w["name"]: w for w in TRACE}
        self.job_uids: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self.ready: set[str] = set()
        self.seen: set[tuple[str, str]] = set()
        self.decisions: list[tuple[str, str, str]] = []
        self.uids: dict[str, str] = {}
        """Pod UID → its Job (to name a preemptor)."""

    def now(self) -> float:
        return time.monotonic() - self.t0

    def create(self, name: str) -> None:
        spec = self.specs[name]
        if name not in self.job_uids:
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                        }
                    }
                },
            }
            r = self.plane.api.post(f"/apis/batch/v1/namespaces/{self.ns}/jobs", json=body)
            assert r.status_code == 201, r.text
            self.job_uids[name] = r.json()["metadata"]["uid"]
        prio = "low" if spec["priority"] == PRIORITY["low"] else "high"
        meta = {
            "name": f"{name}-0",
            "labels": {"runway.dev/queue": spec["queue"]},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": self.job_uids[name],
                    "controller": True,
                }
            ],
        }
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "schedulerName": SCHEDULER,
                "priorityClassName": f"sim-{prio}",
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": CPU}},
                    }
                ],
            },
        }
        r = self.plane.api.post(f"/api/v1/namespaces/{self.ns}/pods", json=body)
        if r.status_code == 409:
            return  # the old pod is still terminating: next round
        assert r.status_code == 201, r.text
        self.uids[r.json()["metadata"]["uid"]] = name

    def note(self, kind: str, workload: str, detail: str = "") -> None:
        if (kind, workload) not in self.seen:
            self.seen.add((kind, workload))
            self.decisions.append((kind, workload, detail))

    def step(self) -> None:
        now = self.now()
        pods = {
            p["metadata"]["name"]: p
            for p in self.plane.api.get(f"/api/v1/namespaces/{self.ns}/pods").json()["items"]
        }
        for pod in pods.values():
            job = pod["metadata"]["name"].rsplit("-", 1)[0]
            self.uids.setdefault(pod["metadata"]["uid"], job)
            for cond in pod["status"].get("conditions", []):
                if cond["type"] != "DisruptionTarget" or cond["status"] != "True":
                    continue
                if cond["reason"] == "PreemptionByScheduler":
                    preemptor = next(
                        (w for w in self.specs if f"{self.ns}/{w}-0" in cond["message"]), ""
                    )
                    self.note("preempted", job, preemptor)
                elif cond["reason"] == "PodsReadyTimeout":
                    self.note("evicted", job)
        for record in self.plane.records(self.ns):
            workload = record["spec"]["workload"]
            if workload["source"] != "owner:Job" or workload["name"] not in self.job_uids:
                continue
            name = workload["name"]
            eviction = (record.get("status") or {}).get("eviction") or {}
            # The record is written before the pods are marked and deleted: a pod's
            # DisruptionTarget can be gone before a step sees it, the workload's record cannot.
            # (status.eviction, not spec.active: runway writes spec.active just before the
            # status, so a step could see the deactivation before the eviction.)
            # (Deactivated: the timeout past a requeue limit, as Kueue names that eviction)
            if eviction.get("reason") in ("PodsReadyTimeout", "Deactivated"):
                self.note("evicted", name)
            if eviction.get("deactivated") is True:
                self.note("deactivated", name)
        # The kubelet: terminating pods go at once; bound pods run, Ready after the delay.
        for name, pod in pods.items():
            uid = pod["metadata"]["uid"]
            job = name.rsplit("-", 1)[0]
            if pod["metadata"].get("deletionTimestamp"):
                self.plane.delete_pod(name, self.ns)
                continue
            if not pod["spec"].get("nodeName"):
                continue
            if uid not in self.bound_at:
                self.bound_at[uid] = now
                self.plane.set_pod_running(name, self.ns, ready=False)
            delay = self.specs[job]["readyAfter"]
            if delay is not None and uid not in self.ready and now - self.bound_at[uid] >= delay:
                self.plane.set_pod_running(name, self.ns, ready=True)
                self.ready.add(uid)
        # The Job controller: arrivals, and a deleted pod re-created.
        live = {n for n, p in pods.items() if not p["metadata"].get("deletionTimestamp")}
        for name, spec in self.specs.items():
            if now >= spec["arrival"] and f"{name}-0" not in live:
                self.create(name)
        # Unschedulable pods are retried on a node update (kube-scheduler's flush is long: 60 s
        # on 1.20, 5 min from 1.32).
        for node in self.nodes:
            self.plane.nudge_node(node)


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    plane = dedicated_plane
    with runway_scheduling(
        plane,
        tmp_path_factory.mktemp("agreement"),
        RUNWAY,
        scheduler_name=SCHEDULER,
        priorities={f"sim-{name}": value for name, value in PRIORITY.items()},
    ):
        yield plane


def test_control_plane_and_simulator_make_the_same_decisions(stack: ControlPlane) -> None:
    plane = stack
    ns = f"sim-{uuid.uuid4().hex[:6]}"
    plane.ensure_namespace(ns)
    nodes = [f"{ns}-n{i}" for i in range(2)]
    for name in nodes:
        plane.create_node(name, capacity={"cpu": CPU, "memory": "8Gi", "pods": "20"})
    replay = Replay(plane, ns, nodes)

    def done() -> bool:
        replay.step()
        return len(replay.decisions) >= len(EXPECTED)

    try:
        poll(done, within=150, every=0.5, what="every decision of the trace")
        # A little longer: nothing else may happen (no second preemption, no other eviction).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            replay.step()
    finally:
        print("control plane decisions:", replay.decisions)
    assert replay.decisions == simulated() == EXPECTED
