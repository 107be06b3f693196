"""What runway manages (DESIGN §2.0), end to end on a real kube-apiserver and kube-scheduler:
the operator issue's case. With ``waitForPodsReady`` on and the default scope, a Job whose pods
name no queue — a Deployment's pods, an add-on — is never evicted and gets no WorkloadRecord,
while a Job naming a queue is; a pod runway does not manage is explained as such; and a pod in
``kube-system`` is never managed, even naming a queue.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, poll
from tests.e2e.test_requeue_e2e import TOKEN, Cluster, only_node

pytestmark = pytest.mark.e2e

NS = "scope-e2e"
TIMEOUT_S = 3
CONFIG: dict[str, Any] = {
    "auth": {"mode": "static", "staticTokens": [TOKEN]},
    "kubernetes": {"leaderElection": {"enable": False}},
    "scope": {},  # the default: a pod must name a queue
    "waitForPodsReady": {
        "enable": True,
        "timeout": f"{TIMEOUT_S}s",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffBaseSeconds": 30},
    },
}


@pytest.fixture
def cluster(dedicated_plane: ControlPlane, tmp_path: Path) -> Iterator[Cluster]:
    dedicated_plane.ensure_namespace(NS)
    only_node(dedicated_plane, "scope-node", {"cpu": "8", "memory": "8Gi", "pods": "20"})
    c = Cluster(
        dedicated_plane,
        tmp_path,
        ns=NS,
        config=CONFIG,
        jobs={"queued": 1, "unqueued": 1},
        labels={"queued": {"runway.dev/queue": "batch"}},
    )
    try:
        yield c
    finally:
        c.close()


def test_a_never_ready_job_that_names_no_queue_is_never_evicted_nor_recorded(
    cluster: Cluster,
) -> None:
    c = cluster
    c.create_job("queued")
    c.create_job("unqueued")
    runway = c.start_runway()
    c.until("both Jobs' pods bound", lambda: c.bound_pods() == 2)
    # the queued Job times out and is evicted: runway manages it
    c.until("the queued Job evicted", lambda: c.eviction("queued").get("count") == 1, within=60)
    # the other runs never Ready well past the timeout too: no record, no eviction
    unqueued_uid = c.pods()["unqueued-0"]["metadata"]["uid"]
    c.until(
        "twice the timeout after the unqueued pod's bind",
        lambda: time.time() > c.bound_at[unqueued_uid] + 2 * TIMEOUT_S,
        within=30,
    )
    assert c.record("unqueued") == {}
    unqueued = c.pods()["unqueued-0"]
    assert unqueued["spec"].get("nodeName") and not unqueued["metadata"].get("deletionTimestamp")
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def explained() -> dict[str, Any] | None:
        c.step()  # the evicted queued pod is re-created by the test's Job controller
        answer = runway.client.get(
            "/v1/explain",
            params={"preemptor": f"{NS}/queued-0", "victim": f"{NS}/unqueued-0"},
            headers=auth,
        )
        return answer.json() if answer.status_code == 200 else None

    body = poll(explained, what="an explanation of the pair")
    assert "names no queue" in body["notManaged"]["victim"], body
    assert "not managed" in body["explanation"]
    # the workload list shows what runway manages only
    listed = runway.client.get("/v1/workloads", params={"limit": 500}, headers=auth).json()
    names = {w["name"] for w in listed["items"] if w["namespace"] == NS}
    assert "unqueued" not in names, listed


def test_a_kube_system_pod_is_never_managed_even_naming_a_queue(
    dedicated_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = dedicated_plane
    only_node(plane, "scope-system-node", {"cpu": "8", "memory": "8Gi", "pods": "20"})
    c = Cluster(
        plane,
        tmp_path,
        ns="kube-system",
        config=CONFIG,
        jobs={"addon": 1},
        labels={"addon": {"runway.dev/queue": "batch"}},
    )
    try:
        c.create_job("addon")
        c.start_runway()
        c.until("the add-on bound", lambda: c.bound_pods() >= 1)
        bound_at = poll(lambda: c.bound_at, what="the add-on's bind seen")
        # well past the timeout: still bound, still no record
        c.until(
            "the timeout passed by a margin",
            lambda: (
                c.pods()["addon-0"]["spec"].get("nodeName")
                and min(bound_at.values()) + 3 * TIMEOUT_S < time.time()
            ),
            within=30,
        )
        assert not c.pods()["addon-0"]["metadata"].get("deletionTimestamp")
        assert c.record("addon") == {}
    finally:
        for p in plane.pods():
            if p["metadata"]["namespace"] == "kube-system" and p["metadata"]["name"] == "addon-0":
                plane.delete_pod("addon-0", "kube-system")
        r = plane.api.delete("/apis/batch/v1/namespaces/kube-system/jobs/addon")
        assert r.status_code in (200, 202, 404), r.text
        c.close()
