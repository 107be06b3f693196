"""``python -m app migrate-annotations`` on the real kube-apiserver: the eviction records an
earlier runway kept in annotations (on a Job, on bare pods) are imported into WorkloadRecords
only where that makes the workload less privileged; a dry run writes nothing; a second run
changes nothing; the annotations themselves are left alone (rollback reads them)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.e2e.conftest import ControlPlane

NS = "migrate"
GROUP = "/apis/runway.dev/v1alpha1"
PAST, FUTURE = "2026-01-01T00:00:00Z", "2099-01-01T00:00:00Z"


def old_record(**fields: str) -> dict[str, str]:
    base = {"runway.dev/eviction-reason": "PodsReadyTimeout", "runway.dev/eviction-time": PAST}
    return base | {f"runway.dev/eviction-{k}": v for k, v in fields.items()}


def migrate(plane: ControlPlane, *args: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "migrate-annotations",
            "--kubeconfig",
            str(plane.kubeconfig),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def record(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    r = plane.api.get(f"{GROUP}/namespaces/{NS}/workloadrecords/{name}")
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def test_migration_imports_only_what_makes_a_workload_less_privileged(
    control_plane: ControlPlane,
) -> None:
    plane = control_plane
    plane.ensure_namespace(NS)
    job = plane.api.post(
        f"/apis/batch/v1/namespaces/{NS}/jobs",
        json={
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train",
                "annotations": old_record(
                    count="3", **{"requeue-at": FUTURE}, deactivated="true", message="limit"
                )
                | {"runway.dev/preemption-history": PAST, "runway.dev/workload-started": FUTURE},
            },
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
                }
            },
        },
    )
    assert job.status_code == 201, job.text
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": job.json()["metadata"]["uid"],
        "controller": True,
    }
    plane.create_pod("train-0", NS, owner=owner)
    plane.create_pod("solo", NS, annotations=old_record(count="1"))
    # A gate left in flight by the old version: dropped, never imported.
    plane.create_pod("held", NS, annotations={"runway.dev/preemption-gate": '{"node":"n"}'})

    plan = migrate(plane)
    assert "migrate/train\tcreate" in plan and "migrate/solo\tcreate" in plan, plan
    assert "would be written" in plan
    assert record(plane, "job.train") is None  # a dry run writes nothing

    migrate(plane, "--apply")
    train = record(plane, "job.train")
    assert train is not None
    assert train["spec"]["active"] is False  # the deactivation is imported
    eviction = train["status"]["eviction"]
    assert eviction["count"] == 3 and eviction["requeueAt"] == FUTURE
    assert "preemptionHistory" not in eviction  # protection is never imported
    assert "started" not in train["status"].get("life", {})
    assert train["metadata"]["ownerReferences"][0]["uid"] == owner["uid"]
    solo = record(plane, "pod.solo")
    assert solo is not None and solo["status"]["eviction"]["count"] == 1
    assert record(plane, "pod.held") is None

    # runway's record is stricter now: a second run changes nothing.
    again = migrate(plane, "--apply")
    assert "0 record(s) written" in again, again
    # The annotations stay where they were: a rollback to the earlier version still reads them.
    kept = plane.api.get(f"/apis/batch/v1/namespaces/{NS}/jobs/train").json()
    assert kept["metadata"]["annotations"]["runway.dev/eviction-count"] == "3"
