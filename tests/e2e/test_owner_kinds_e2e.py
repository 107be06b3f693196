"""A workload owned by a kind runway was never told about (a custom resource the test plays the
controller of) keeps its backoff, count and deactivation across the re-creation of its pods: the
record is runway's own WorkloadRecord, owned by that object (so garbage-collected with it), and
runway never reads or writes the object itself."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import ControlPlane, RunwayFactory, poll

NS, NODE = "kinds", "kinds-n1"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainers.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Trainer", "plural": "trainers", "singular": "trainer"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
CONFIG: dict[str, Any] = {
    "waitForPodsReady": {
        "enable": True,
        "timeout": "2s",
        "requeuingStrategy": {"backoffBaseSeconds": 10, "backoffLimitCount": 1},
    },
    "kubernetes": {"leaderElection": {"enable": False}},
    "preemption": {"schedulerNames": ["runway-e2e-nobody"]},
}


def trainer(plane: ControlPlane) -> dict[str, Any]:
    r = plane.api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD)
    assert r.status_code in (201, 409), r.text
    path = f"/apis/example.com/v1/namespaces/{NS}/trainers"
    poll(lambda: plane.api.get(path).status_code == 200, within=60, what="trainers served")
    r = plane.api.post(
        path,
        json={"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t1"}},
    )
    assert r.status_code == 201, r.text
    obj: dict[str, Any] = r.json()
    return obj


def evicted(plane: ControlPlane, name: str) -> bool:
    r = plane.api.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    return r.status_code == 404 or r.json()["metadata"].get("deletionTimestamp") is not None


def record(plane: ControlPlane) -> dict[str, Any]:
    (found,) = plane.records(NS)
    return found


def test_an_unknown_owner_kind_keeps_backoff_count_and_deactivation(
    control_plane: ControlPlane, runway: RunwayFactory
) -> None:
    plane = control_plane
    plane.ensure_namespace(NS)
    plane.create_node(NODE)
    owner_obj = trainer(plane)
    owner = {
        "apiVersion": "example.com/v1",
        "kind": "Trainer",
        "name": "t1",
        "uid": owner_obj["metadata"]["uid"],
        "controller": True,
    }
    rw = runway.start(CONFIG)

    def filter_(name: str) -> dict[str, Any]:
        pod = plane.api.get(f"/api/v1/namespaces/{NS}/pods/{name}").json()
        r = rw.client.post(
            "/scheduler/filter", json={"Pod": pod, "NodeNames": [NODE], "Nodes": None}
        )
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        return answer

    def run_never_ready(name: str) -> None:
        plane.create_pod(name, NS, owner=owner)
        plane.bind(name, NODE, NS)
        plane.set_pod_running(name, NS, ready=False)
        poll(lambda: evicted(plane, name), within=60, what=f"{name} evicted (PodsReadyTimeout)")
        plane.delete_pod(name, NS)  # no kubelet: the test finishes the deletion

    run_never_ready("t1-0")
    first = record(plane)
    assert first["metadata"]["name"] == "trainer.t1"
    assert first["metadata"]["ownerReferences"] == [
        {k: owner[k] for k in ("apiVersion", "kind", "name", "uid")}
    ]
    assert first["status"]["eviction"]["count"] == 1
    # The controller re-creates its pod: held by the backoff that survived the old pod.
    plane.create_pod("t1-1", NS, owner=owner)
    poll(
        lambda: "backoff" in json.dumps(filter_("t1-1")),
        within=30,
        what="the re-created pod held by the backoff",
    )
    # Once the backoff is over it is let through; bound and never ready again, the limit
    # (1 requeue) is exceeded and the workload is deactivated.
    poll(
        lambda: filter_("t1-1").get("NodeNames") == [NODE],
        within=60,
        what="the backoff over",
    )
    plane.delete_pod("t1-1", NS)
    run_never_ready("t1-2")
    poll(lambda: record(plane)["spec"]["active"] is False, within=30, what="deactivated")
    plane.create_pod("t1-3", NS, owner=owner)
    poll(
        lambda: "deactivated" in json.dumps(filter_("t1-3")),
        within=30,
        what="the re-created pod held as deactivated",
    )
    # runway never wrote the Trainer (it has no access to it in the chart either).
    kept = plane.api.get(f"/apis/example.com/v1/namespaces/{NS}/trainers/t1").json()
    assert kept["metadata"]["resourceVersion"] == owner_obj["metadata"]["resourceVersion"]
