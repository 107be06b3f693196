"""Queues from KAI-Scheduler's Queue objects on a real kube-apiserver: the CRD
(``queues.scheduling.run.ai`` v2, minimal schema) and two Queues are created, runway runs with
``queueSource: kai``; ``GET /v1/queues`` shows the tree with each value's source, follows an edit
through the watch, and keeps the last good tree (with the error) when an edit is invalid."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, RunwayFactory, poll

pytestmark = pytest.mark.e2e

QUEUES = "/apis/scheduling.run.ai/v2/queues"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "queues.scheduling.run.ai"},
    "spec": {
        "group": "scheduling.run.ai",
        "scope": "Cluster",
        "names": {
            "plural": "queues",
            "singular": "queue",
            "kind": "Queue",
            "listKind": "QueueList",
        },
        "versions": [
            {
                "name": "v2",
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


@pytest.fixture
def kai_crd(control_plane: ControlPlane) -> Iterator[str]:
    """The Queue CRD (left installed if another test made it) and a unique name prefix; the
    Queues created under it are deleted afterwards."""
    plane = control_plane
    r = plane.api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD)
    assert r.status_code in (201, 409), r.text
    poll(lambda: plane.api.get(QUEUES).status_code == 200, within=30, what="the Queue kind served")
    prefix = f"kai-{uuid.uuid4().hex[:6]}"
    try:
        yield prefix
    finally:
        for q in plane.api.get(QUEUES).json().get("items", []):
            if q["metadata"]["name"].startswith(prefix):
                plane.api.delete(f"{QUEUES}/{q['metadata']['name']}")


def create_queue(plane: ControlPlane, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": {"gpu": {"quota": -1}}, **spec},
    }
    r = plane.api.post(QUEUES, json=body)
    assert r.status_code == 201, r.text


def patch_spec(plane: ControlPlane, name: str, **spec: Any) -> None:
    r = plane.api.patch(
        f"{QUEUES}/{name}",
        json={"spec": spec},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def test_queue_tree_from_kai_queue_objects(
    control_plane: ControlPlane, runway: RunwayFactory, kai_crd: str
) -> None:
    plane, p = control_plane, kai_crd
    create_queue(plane, f"{p}-research", reclaimMinRuntime="10m")
    create_queue(plane, f"{p}-team-a", parentQueue=f"{p}-research", preemptMinRuntime="5m")
    rw = runway.start({"queueSource": "kai", "kubernetes": {"leaderElection": {"enable": False}}})

    def team_a() -> dict[str, Any] | None:
        body = rw.get("/v1/queues")
        found = {q["name"]: q for q in body["queues"]}.get(f"{p}-team-a")
        return (
            dict(found, queueSource=body["queueSource"], error=body["queueSourceError"])
            if found
            else None
        )

    q = poll(team_a, within=30, what="team-a in GET /v1/queues")
    assert q["queueSource"] == "kai"
    assert q["parent"] == f"{p}-research"
    assert q["source"] == f"Queue/{p}-team-a"
    assert q["effectivePreemptMinRuntimeSeconds"] == 300
    assert q["effectivePreemptSource"] == f"Queue/{p}-team-a"
    assert q["effectiveReclaimMinRuntimeSeconds"] == 600
    assert q["effectiveReclaimSource"] == f"Queue/{p}-research"

    # An edit arrives through the watch.
    patch_spec(plane, f"{p}-team-a", preemptMinRuntime="7m")
    poll(
        lambda: (team_a() or {}).get("effectivePreemptMinRuntimeSeconds") == 420,
        within=30,
        what="the edit applied",
    )

    # An invalid edit (a bare number) keeps the last good tree and says why.
    patch_spec(plane, f"{p}-team-a", preemptMinRuntime="300")
    q = poll(lambda: (t := team_a()) and t["error"] and t, within=30, what="the refusal")
    assert f"Queue/{p}-team-a: preemptMinRuntime" in q["error"]
    assert q["effectivePreemptMinRuntimeSeconds"] == 420
