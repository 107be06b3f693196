"""Issue 25 on the real kube-apiserver: a tenant writes nothing runway trusts.

runway runs with a token bound to the chart's own ClusterRole (rendered from helm/runway, applied
as is), so it can do no more than an installed runway. The tenant is a ServiceAccount with a
namespace Role on pods and Jobs in ``tenant-a`` and the chart's read-only WorkloadRecord role
(what aggregation into ``view`` gives it in a real cluster). Each test is a row of the issue's
table: what the tenant writes (runway's retired state annotations, another team's queue label,
a record) and what runway does — nothing on the tenant's word. The test plays kubelet and Job
controller and calls the verbs as kube-scheduler would.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.conftest import ControlPlane, RunwayFactory, RunwayHandle, poll, rfc3339_now
from tests.helm_chart import render

RUNWAY_NS, A, B, C = "runway-system", "tenant-a", "tenant-b", "tenant-c"
SCHEDULER = "runway-e2e-nobody"
GROUP = "/apis/runway.dev/v1alpha1"
CONFIG: dict[str, Any] = {
    "queues": [
        {
            "name": "org-a",
            "namespaces": [A],
            "preemptionBudget": {"maxPreemptions": 1, "window": "24h"},
        },
        {"name": "qa", "parent": "org-a"},
        {"name": "org-b", "namespaces": [B], "reclaimMinRuntime": "1h", "preemptMinRuntime": "1h"},
        {"name": "qb", "parent": "org-b"},
        {"name": "strict-b", "parent": "org-b", "queueingStrategy": "StrictFIFO"},
        # by the namespace's labels (an administrator's), not its name
        {"name": "team-a-labelled", "namespaceSelector": {"matchLabels": {"team": "a"}}},
    ],
    "waitForPodsReady": {
        "enable": True,
        "timeout": "3s",
        "blockAdmission": True,
        "requeuingStrategy": {"backoffBaseSeconds": 600, "backoffLimitCount": 5},
    },
    "kubernetes": {"leaderElection": {"enable": False}},
    "preemption": {"schedulerNames": [SCHEDULER]},
    "logging": {"level": "info"},
}
FAR = "2099-01-01T00:00:00Z"


@dataclass
class World:
    plane: ControlPlane
    factory: RunwayFactory
    runway: RunwayHandle
    tenant: httpx.Client
    kubeconfig: Path

    def restart(self) -> None:
        """A restart (or a leader change): a fresh process reads the cluster again."""
        self.runway.stop()
        self.runway = self.factory.start(CONFIG, args=("--kubeconfig", str(self.kubeconfig)))

    def verb(self, verb: str, pod: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
        r = self.runway.client.post(
            f"/scheduler/{verb}", json={"Pod": pod, "NodeNames": nodes, "Nodes": None}
        )
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        return answer

    def metric(self, name: str, labels: dict[str, str]) -> float:
        text = self.runway.client.get("/metrics").text
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for line in text.splitlines():
            if line.startswith(f"{name}{{{want}}}"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


def token_for(plane: ControlPlane, namespace: str, account: str) -> str:
    r = plane.api.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
    )
    assert r.status_code in (201, 409), r.text
    r = plane.api.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        json={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    assert r.status_code == 201, r.text
    token: str = r.json()["status"]["token"]
    return token


def apply(plane: ControlPlane, obj: dict[str, Any]) -> None:
    kind, meta = obj["kind"], obj["metadata"]
    group_version = obj["apiVersion"]
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}.get(
        kind, kind.lower() + "s"
    )
    base = "/apis/" + group_version if "/" in group_version else "/api/v1"
    ns = meta.get("namespace")
    path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
    r = plane.api.post(path, json=obj)
    assert r.status_code in (201, 409), r.text


def kubeconfig_with(path: Path, server: str, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "p", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "runway", "user": {"token": token}}],
                "contexts": [{"name": "p", "context": {"cluster": "p", "user": "runway"}}],
                "current-context": "p",
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def world(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    plane = dedicated_plane
    for ns in (RUNWAY_NS, A, B, C):
        plane.ensure_namespace(ns)
    for name, value in (("low", 10), ("mid", 500), ("high", 1000)):
        plane.ensure_priority_class(name, value)
    plane.create_node("n1")
    # runway as installed: the chart's ClusterRole for its ServiceAccount, nothing more.
    objects = render({"config": {"kubernetes": {"leaderElection": {"enable": False}}}})
    roles = [o for o in objects if o["kind"] == "ClusterRole"]
    for role in roles:
        apply(plane, role)
    runway_role = next(r for r in roles if r["metadata"]["name"] == "rw-runway")
    viewer_role = next(r for r in roles if r["metadata"]["name"].endswith("-workloadrecords-view"))
    assert (
        viewer_role["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    )
    apply(
        plane,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "runway-e2e"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": runway_role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": "runway", "namespace": RUNWAY_NS}],
        },
    )
    tmp = tmp_path_factory.mktemp("tenant")
    kubeconfig = kubeconfig_with(
        tmp / "runway.kubeconfig", plane.url, token_for(plane, RUNWAY_NS, "runway")
    )
    # The tenant: pods and Jobs in its namespace, and read access to its records.
    apply(
        plane,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "tenant", "namespace": A},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
                {
                    "apiGroups": ["batch"],
                    "resources": ["jobs"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
            ],
        },
    )
    for name, kind in (("tenant", "Role"), (viewer_role["metadata"]["name"], "ClusterRole")):
        apply(
            plane,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"tenant-{kind.lower()}", "namespace": A},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": A}],
            },
        )
    tenant_token = token_for(plane, A, "tenant")
    factory = RunwayFactory(plane, tmp)
    with (
        httpx.Client(
            base_url=plane.url,
            headers={"Authorization": f"Bearer {tenant_token}"},
            verify=False,
            timeout=30,
        ) as tenant,
        contextlib.closing(factory),
    ):
        handle = factory.start(CONFIG, args=("--kubeconfig", str(kubeconfig)))
        w = World(plane, factory, handle, tenant, kubeconfig)
        try:
            yield w
        except BaseException:
            print(w.runway.logs())
            raise


def tenant_pod(
    w: World,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: str = "low",
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod the tenant creates with its own token."""
    meta: dict[str, Any] = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": SCHEDULER,
            "priorityClassName": priority,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }
    r = w.tenant.post(f"/api/v1/namespaces/{A}/pods", json=body)
    assert r.status_code == 201, r.text
    pod: dict[str, Any] = r.json()
    return pod


def pod_in(w: World, ns: str, name: str, *, queue: str, priority: str) -> dict[str, Any]:
    r = w.plane.api.post(
        f"/api/v1/namespaces/{ns}/pods",
        json={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"runway.dev/queue": queue}},
            "spec": {
                "schedulerName": SCHEDULER,
                "priorityClassName": priority,
                "containers": [
                    {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}
                ],
            },
        },
    )
    assert r.status_code == 201, r.text
    pod: dict[str, Any] = r.json()
    return pod


def get_pod(w: World, ns: str, name: str) -> dict[str, Any] | None:
    r = w.plane.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    pod: dict[str, Any] = r.json()
    return pod


def label_namespace(w: World, ns: str, labels: dict[str, str | None]) -> None:
    """An administrator (re)labels a namespace (``None`` removes a label)."""
    r = w.plane.api.patch(
        f"/api/v1/namespaces/{ns}",
        json={"metadata": {"labels": labels}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def queue_in_runway(w: World, ns: str, name: str) -> str | None:
    r = w.runway.client.get(f"/v1/workloads/{ns}/{name}")
    if r.status_code != 200:
        return None
    queue: str = r.json()["queue"]
    return queue


def in_cache(w: World, ns: str, name: str) -> bool:
    r = w.runway.client.get(f"/v1/workloads/{ns}/{name}")
    return r.status_code == 200


def seen_state_annotations(w: World, at_least: float) -> bool:
    return w.metric("runway_invalid_objects_total", {"field": "state-annotation"}) >= at_least


# --------------------------------------------------------------------------------------------


def test_a_tenant_cannot_write_runway_records(world: World) -> None:
    w = world
    record = {
        "apiVersion": "runway.dev/v1alpha1",
        "kind": "WorkloadRecord",
        "metadata": {"name": "pod.forged", "namespace": A},
        "spec": {"workload": {"name": "forged", "source": "pod"}, "active": True},
    }
    r = w.tenant.post(f"{GROUP}/namespaces/{A}/workloadrecords", json=record)
    assert r.status_code == 403, r.text
    assert w.tenant.get(f"{GROUP}/namespaces/{A}/workloadrecords").status_code == 200
    assert w.tenant.get(f"{GROUP}/namespaces/{B}/workloadrecords").status_code == 403
    # runway's own records in the tenant's namespace: readable, never writable by it
    r = w.plane.api.post(f"{GROUP}/namespaces/{A}/workloadrecords", json=record)
    assert r.status_code == 201, r.text
    for method, path, body in (
        ("PATCH", f"{GROUP}/namespaces/{A}/workloadrecords/pod.forged", {"spec": {"active": True}}),
        ("DELETE", f"{GROUP}/namespaces/{A}/workloadrecords/pod.forged", None),
        (
            "PUT",
            f"{GROUP}/namespaces/{A}/workloadrecords/pod.forged/status",
            {**record, "status": {"eviction": {"reason": "Preempted", "time": FAR}}},
        ),
    ):
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        r = w.tenant.request(
            method, path, content=json.dumps(body) if body else None, headers=headers
        )
        assert r.status_code == 403, (method, r.text)
    w.plane.api.delete(f"{GROUP}/namespaces/{A}/workloadrecords/pod.forged")


def test_forged_gates_delete_nothing_claim_nothing_and_break_nothing(world: World) -> None:
    """Rows 1, 2, 3, 10, 11: gate annotations on the tenant's pending pods naming another
    tenant's pod (by its UID, or its own UID with the other's name), an absurd priority and
    deadline, 62 KB values: at the next restart nothing is resumed, deleted or marked, nothing
    is claimed, no verb fails."""
    w = world
    victim = pod_in(w, B, "precious", queue="qb", priority="high")
    w.plane.bind("precious", "n1", B)
    w.plane.set_pod_running("precious", B)
    uid = victim["metadata"]["uid"]
    future = time.time() + 10 * 365 * 86400

    def gate(victim_uid: str, **extra: Any) -> str:
        value = {
            "node": "n1",
            "victims": [[victim_uid, B, "precious"]],
            "since": time.time(),
            "deadline": future,
            "rule": "forged",
            "holder": "",
            "priority": 10**12,
        }
        return json.dumps({**value, **extra})

    before = w.metric("runway_invalid_objects_total", {"field": "state-annotation"})
    tenant_pod(w, "squat", annotations={"runway.dev/preemption-gate": gate(uid)})
    own = tenant_pod(w, "own-uid", annotations={"runway.dev/preemption-gate": "x"})
    r = w.tenant.patch(
        f"/api/v1/namespaces/{A}/pods/own-uid",
        json={
            "metadata": {
                "annotations": {"runway.dev/preemption-gate": gate(own["metadata"]["uid"])}
            }
        },
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    tenant_pod(w, "forever", annotations={"runway.dev/preemption-gate": gate(uid, deadline=1e12)})
    tenant_pod(w, "huge", annotations={"runway.dev/preemption-gate": "[" * 62_000})
    w.restart()  # "resuming a preemption left in flight" happened at a restart
    poll(lambda: seen_state_annotations(w, before + 4), within=30, what="the forged pods seen")
    poll(lambda: in_cache(w, A, "huge"), within=30, what="the tenant's pods in runway's cache")
    # Nothing was acted on: the other tenant's pod is untouched, no Event in its namespace.
    got = get_pod(w, B, "precious")
    assert got is not None and got["metadata"].get("deletionTimestamp") is None
    conditions = {c["type"] for c in got["status"].get("conditions", [])}
    assert "DisruptionTarget" not in conditions
    events = w.plane.api.get(f"/api/v1/namespaces/{B}/events").json()["items"]
    assert not [e for e in events if e["reason"] in ("Preempted", "Preempting")]
    assert w.runway.get("/v1/gate") == []  # nobody held on a forged gate
    # Nothing is claimed: a low-priority pod of tenant-b may use n1.
    other = pod_in(w, B, "small", queue="qb", priority="low")
    answer = w.verb("filter", other, ["n1"])
    assert answer.get("NodeNames") == ["n1"], answer
    # And no verb or REST read fails on the forged values.
    for name in ("squat", "forever", "huge"):
        pod = get_pod(w, A, name)
        assert pod is not None
        answer = w.verb("filter", pod, ["n1"])
        assert answer.get("NodeNames") == ["n1"], answer  # not held either
    for path in ("/v1/queues", f"/v1/workloads/{A}/squat", "/v1/gate", "/v1/preemptions"):
        assert w.runway.client.get(path).status_code == 200, path


def test_forged_life_facts_and_history_protect_nothing(world: World) -> None:
    """Rows 4 and 5: a Job annotated as started in 2099 and as just preempted (its queue has a
    budget of 1 preemption per 24 h) is neither min-runtime nor budget protected."""
    w = world
    now = rfc3339_now()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "immortal",
            "annotations": {
                "runway.dev/workload-started": FAR,
                "runway.dev/workload-admitted": FAR,
                "runway.dev/eviction-reason": "Preempted",
                "runway.dev/eviction-time": now,
                "runway.dev/preemption-history": now,
            },
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "pause"}],
                }
            }
        },
    }
    r = w.tenant.post(f"/apis/batch/v1/namespaces/{A}/jobs", json=job)
    assert r.status_code == 201, r.text
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "immortal",
        "uid": r.json()["metadata"]["uid"],
        "controller": True,
    }
    tenant_pod(
        w,
        "immortal-0",
        labels={"runway.dev/queue": "qa"},
        annotations={"runway.dev/workload-started": FAR},
        owner=owner,
    )
    w.plane.bind("immortal-0", "n1", A)
    w.plane.set_pod_running("immortal-0", A)
    pod_in(w, B, "boss", queue="qb", priority="high")
    poll(lambda: in_cache(w, B, "boss"), within=30, what="boss in runway's cache")
    r = w.runway.client.get(
        "/v1/explain", params={"preemptor": f"{B}/boss", "victim": f"{A}/immortal-0"}
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["protected"] is False, answer
    assert answer["eligible"] is True, answer
    assert answer["budget"]["preemptionsInWindow"] == 0, answer


def test_queue_labels_reach_only_the_queues_a_namespace_may_use(world: World) -> None:
    """Rows 8 and 9: the tenant labels its pods with tenant-b's StrictFIFO queue (and forges an
    old creation time) and its preemptor with tenant-b's queue (to turn a reclaim into a
    same-queue preemption): both land in `default`; tenant-b's head stays the head and its
    workloads keep the 1 h reclaim protection."""
    w = world
    first = pod_in(w, B, "first", queue="strict-b", priority="low")
    tenant_pod(
        w,
        "cut-in",
        labels={"runway.dev/queue": "strict-b"},
        annotations={"runway.dev/workload-created": "2000-01-01T00:00:00Z"},
    )
    poll(lambda: in_cache(w, A, "cut-in"), within=30, what="cut-in in runway's cache")
    answer = w.verb("filter", first, ["n1"])
    assert answer.get("NodeNames") == ["n1"], answer
    pending = w.runway.get("/v1/queues/strict-b/pending")
    names = json.dumps(pending)
    assert f"{B}/first" in names and f"{A}/cut-in" not in names
    assert w.metric("runway_queue_denied_total", {"queue": "strict-b"}) >= 1
    # The tenant's preemptor labelled with tenant-b's leaf: still a reclaim, still protected.
    pod_in(w, B, "running-b", queue="qb", priority="low")
    w.plane.bind("running-b", "n1", B)
    w.plane.set_pod_running("running-b", B)
    tenant_pod(w, "thief", labels={"runway.dev/queue": "qb"}, priority="high")
    poll(lambda: in_cache(w, A, "thief"), within=30, what="thief in runway's cache")
    r = w.runway.client.get(
        "/v1/explain", params={"preemptor": f"{A}/thief", "victim": f"{B}/running-b"}
    )
    assert r.status_code == 200, r.text
    explained = r.json()
    assert explained["action"] == "reclaim", explained
    assert explained["protected"] is True and explained["minRuntimeSeconds"] == 3600, explained
    assert explained["queueDenied"] == {"preemptor": "qb"}, explained


def test_a_tenant_cannot_escape_its_backoff_or_block_others(world: World) -> None:
    """Rows 6 and 7: a never-ready workload is evicted and backed off in its WorkloadRecord; the
    tenant re-creates its pods without any runway annotation and cannot touch the record — still
    held. Its forged ``workload-admitted: 2099`` blocks nobody past its real timeout."""
    w = world
    tenant_pod(
        w,
        "flaky",
        labels={"runway.dev/queue": "qa"},
        annotations={"runway.dev/workload-admitted": FAR},
    )
    w.plane.bind("flaky", "n1", A)
    w.plane.set_pod_running("flaky", A, ready=False)
    # The real timeout (3 s from the bind) evicts it: runway deletes the pod.
    poll(
        lambda: (
            (p := get_pod(w, A, "flaky")) is None
            or p["metadata"].get("deletionTimestamp") is not None
        ),
        within=60,
        what="the never-ready pod evicted",
    )
    w.plane.delete_pod("flaky", A)  # no kubelet: the test finishes the deletion
    records = w.plane.records(A)
    (record,) = [r for r in records if r["spec"]["workload"]["name"] == "flaky"]
    assert record["status"]["eviction"]["reason"] == "PodsReadyTimeout"
    assert record["status"]["eviction"]["count"] == 1
    name = record["metadata"]["name"]
    # The tenant re-creates it (as its controller would) with nothing of runway's on it...
    again = tenant_pod(w, "flaky", labels={"runway.dev/queue": "qa"})
    # ...and cannot reset the record.
    r = w.tenant.delete(f"{GROUP}/namespaces/{A}/workloadrecords/{name}")
    assert r.status_code == 403, r.text
    poll(lambda: in_cache(w, A, "flaky"), within=30, what="the re-created pod in the cache")
    held = w.verb("filter", again, ["n1"])
    assert held.get("NodeNames") in ([], None), held
    reasons = json.dumps(held)
    assert "backoff" in reasons, held
    # blockAdmission: tenant-b's pending workload is admitted (the forged admission in 2099
    # blocks nothing; the real one timed out and was evicted).
    waiting = pod_in(w, B, "waiting", queue="qb", priority="low")
    poll(
        lambda: w.verb("filter", waiting, ["n1"]).get("NodeNames") == ["n1"],
        within=30,
        what="tenant-b's workload admitted",
    )


def test_kubectl_get_shows_the_record_columns(world: World) -> None:
    """The table kubectl prints (the API server's Table for the CRD's printer columns)."""
    w = world
    r = w.plane.api.get(
        f"{GROUP}/namespaces/{A}/workloadrecords",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    assert r.status_code == 200, r.text
    table = r.json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    for column in ("Name", "Workload", "Queue", "Active", "Evicted", "Count", "Age"):
        assert column in columns, columns
    rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
    assert any("flaky" in name for name in rows), rows


def test_a_namespace_selector_follows_the_namespaces_labels_live(world: World) -> None:
    """A queue for the namespaces labelled ``team=a``: a pod of such a namespace uses it; one of
    another namespace naming it is queued in ``default`` (counted); an administrator relabelling
    the namespaces changes both outcomes while runway runs (its ClusterRole may watch
    namespaces: the chart's, applied as is)."""
    w = world
    queue = "team-a-labelled"
    label_namespace(w, C, {"team": "a"})
    denied_before = w.metric("runway_queue_denied_total", {"queue": queue})
    pod_in(w, C, "labelled", queue=queue, priority="low")
    pod_in(w, B, "unlabelled", queue=queue, priority="low")
    poll(lambda: queue_in_runway(w, C, "labelled") == queue, within=30, what="C's pod in it")
    poll(
        lambda: queue_in_runway(w, B, "unlabelled") == "default",
        within=30,
        what="B's pod queued in default",
    )
    pending = json.dumps(w.runway.get(f"/v1/queues/{queue}/pending"))
    assert f"{C}/labelled" in pending and f"{B}/unlabelled" not in pending
    assert w.metric("runway_queue_denied_total", {"queue": queue}) >= denied_before + 1
    # The administrator moves the label from tenant-c to tenant-b: no restart, both follow.
    label_namespace(w, B, {"team": "a"})
    poll(
        lambda: queue_in_runway(w, B, "unlabelled") == queue,
        within=30,
        what="B's pod moved into the queue after B was labelled",
    )
    denied_now = w.metric("runway_queue_denied_total", {"queue": queue})
    label_namespace(w, C, {"team": None})
    poll(
        lambda: queue_in_runway(w, C, "labelled") == "default",
        within=30,
        what="C's pod moved to default after its label was removed",
    )
    assert w.metric("runway_queue_denied_total", {"queue": queue}) >= denied_now + 1
    pending = json.dumps(w.runway.get(f"/v1/queues/{queue}/pending"))
    assert f"{B}/unlabelled" in pending and f"{C}/labelled" not in pending
    label_namespace(w, B, {"team": None})
