"""Issue 36 on the real kube-apiserver: what a tenant still controlled, each row a test.

runway runs with a token bound to the chart's own ClusterRole (rendered from helm/runway, applied
as is). The tenant is a ServiceAccount with a namespace Role on pods and Jobs in ``tenant-a`` and
the chart's read-only WorkloadRecord role, as in ``test_tenant_e2e``; the test plays kubelet and
Job controller and calls the verbs as kube-scheduler would.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ControlPlane, RunwayFactory, poll, rfc3339_now
from tests.e2e.test_tenant_e2e import (
    GROUP,
    World,
    apply,
    get_pod,
    in_cache,
    kubeconfig_with,
    pod_in,
    queue_in_runway,
    tenant_pod,
    token_for,
)
from tests.helm_chart import render

RUNWAY_NS, A, B, Q = "runway-system", "tenant-a", "tenant-b", "tenant-q"
SCHEDULER = "runway-e2e-nobody"
CONFIG: dict[str, Any] = {
    "queues": [
        {"name": "org-a", "namespaces": [A, Q]},
        {"name": "qa", "parent": "org-a"},
        {"name": "org-b", "namespaces": [B]},
        {"name": "qb", "parent": "org-b"},
        {"name": "strict-b", "parent": "org-b", "queueingStrategy": "StrictFIFO"},
        # a victim's own queue protects it for an hour against any other queue (row 2)
        {"name": "guarded", "parent": "org-b", "reclaimMinRuntime": "1h"},
        {"name": "shared", "namespaces": [A, B], "queueingStrategy": "StrictFIFO"},
        {"name": "fifo", "namespaces": [A, B], "queueingStrategy": "StrictFIFO"},
    ],
    "waitForPodsReady": {
        "enable": True,
        "timeout": "3s",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffBaseSeconds": 600, "backoffLimitCount": 5},
    },
    # records of gone workloads that hold nothing go quickly (the default is 10m)
    "kubernetes": {"leaderElection": {"enable": False}, "recordRetention": "15s"},
    "preemption": {"async": True, "schedulerNames": [SCHEDULER]},  # takeover: its reply is {}
    "logging": {"level": "info"},
}


@pytest.fixture(scope="module")
def world(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    plane = dedicated_plane
    for ns in (RUNWAY_NS, A, B, Q):
        plane.ensure_namespace(ns)
    for name, value in (("low", 10), ("mid", 500), ("high", 1000)):
        plane.ensure_priority_class(name, value)
    plane.create_node("n1")
    objects = render({"config": {"kubernetes": {"leaderElection": {"enable": False}}}})
    roles = [o for o in objects if o["kind"] == "ClusterRole"]
    for role in roles:
        apply(plane, role)
    runway_role = next(r for r in roles if r["metadata"]["name"] == "rw-runway")
    viewer_role = next(r for r in roles if r["metadata"]["name"].endswith("-workloadrecords-view"))
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
    tmp = tmp_path_factory.mktemp("tenant36")
    kubeconfig = kubeconfig_with(
        tmp / "runway.kubeconfig", plane.url, token_for(plane, RUNWAY_NS, "runway")
    )
    for ns in (A, Q):
        apply(plane, tenant_role(ns))
    for ns, name, kind in (
        (A, "tenant", "Role"),
        (A, viewer_role["metadata"]["name"], "ClusterRole"),
        (Q, "tenant", "Role"),
    ):
        apply(
            plane,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"tenant-{kind.lower()}", "namespace": ns},
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


def post(w: World, url: str, headers: dict[str, str]) -> httpx.Response:
    """POST to runway's REST API; a 429 (a token not checked yet while the source's failed
    checks are spent, e.g. after the made-up-token test) is asked again after its Retry-After."""

    def answer() -> httpx.Response | None:
        r = w.runway.client.post(url, headers=headers)
        return None if r.status_code == 429 else r

    found: httpx.Response = poll(answer, within=30, what=f"an answer to POST {url}")
    return found


def tenant_role(namespace: str) -> dict[str, Any]:
    """Pods and Jobs in ``namespace``: what a tenant's CI account has."""
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "tenant", "namespace": namespace},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": verbs},
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": verbs},
        ],
    }


def gone_or_going(w: World, ns: str, name: str) -> bool:
    pod = get_pod(w, ns, name)
    return pod is None or pod["metadata"].get("deletionTimestamp") is not None


def preempt(w: World, pod: dict[str, Any], victims: dict[str, list[str]]) -> dict[str, Any]:
    """kube-scheduler's preempt call for ``pod`` with the victims it found."""
    r = w.runway.client.post(
        "/scheduler/preempt",
        json={
            "Pod": pod,
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
                for node, uids in victims.items()
            },
        },
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def failed_record_writes(w: World) -> float:
    text = w.runway.client.get("/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("runway_record_write_failures_total{")
    )


# --------------------------------------------------------------------------------------------


def test_a_300_character_owner_name_exempts_nothing(world: World) -> None:
    """Row 1: a never-ready pod whose controller reference has a 300-character name (the API
    server takes it; the record's schema allows 253) is evicted at its PodsReady timeout, and
    runway does not storm the API server with refused record writes."""
    w = world
    before = failed_record_writes(w)
    owner = {
        "apiVersion": "rt.example/v1",
        "kind": "Job",
        "name": "x" * 300,
        "uid": "6f1c0000-0000-0000-0000-000000000001",
        "controller": True,
    }
    tenant_pod(w, "longowner", labels={"runway.dev/queue": "qa"}, owner=owner)
    w.plane.bind("longowner", "n1", A)
    w.plane.set_pod_running("longowner", A, ready=False)
    poll(lambda: gone_or_going(w, A, "longowner"), within=60, what="the pod evicted")
    w.plane.delete_pod("longowner", A)
    records = [r for r in w.plane.records(A) if r["spec"]["workload"]["name"] == "longowner"]
    assert records and records[0]["status"]["eviction"]["reason"] == "PodsReadyTimeout"
    assert "ownerReferences" not in records[0]["metadata"]
    assert failed_record_writes(w) == before


def test_a_victim_and_its_preemptor_read_nothing_of_each_other(world: World) -> None:
    """Rows 9-10: tenant-b's preemptor evicts the tenant's pod; the tenant reads its pod's
    DisruptionTarget, its Events and its record, the preemptor's record is tenant-b's: no
    namespace, name, UID, queue or priority of the other side in any of them."""
    w = world
    victim = tenant_pod(w, "prey", labels={"runway.dev/queue": "qa"}, priority="low")
    w.plane.bind("prey", "n1", A)
    w.plane.set_pod_running("prey", A)
    boss = pod_in(w, B, "boss", queue="qb", priority="high")
    poll(lambda: in_cache(w, B, "boss") and in_cache(w, A, "prey"), within=30, what="cache")
    answer = preempt(w, boss, {"n1": [victim["metadata"]["uid"]]})
    assert answer == {"NodeNameToMetaVictims": {}}, answer  # taken over
    poll(lambda: gone_or_going(w, A, "prey"), within=30, what="the victim evicted")
    got = get_pod(w, A, "prey")
    secrets = (B, "boss", boss["metadata"]["uid"], "qb", "1000")
    if got is not None:
        (mark,) = [c for c in got["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert "higher-priority workload" in mark["message"], mark
        assert not any(s in mark["message"] for s in secrets), mark
    events = poll(
        lambda: [
            e
            for e in w.plane.api.get(f"/api/v1/namespaces/{A}/events").json()["items"]
            if e["reason"] == "Preempted"
        ],
        within=30,
        what="the victim's Preempted Event",
    )
    for event in events:
        assert not any(s in event["message"] for s in secrets), event
    (record,) = [
        r
        for r in w.tenant.get(f"{GROUP}/namespaces/{A}/workloadrecords").json()["items"]
        if r["spec"]["workload"]["name"] == "prey"
    ]
    assert not any(s in json.dumps(record["status"]) for s in (B, "boss", boss["metadata"]["uid"]))
    # tenant-b's preemptor's record (read by tenant-b) names no pod of the tenant's
    mine = [r for r in w.plane.records(B) if r["spec"]["workload"]["name"] == "boss"]
    for r in mine:
        text = json.dumps(r.get("status", {}))
        assert "prey" not in text and victim["metadata"]["uid"] not in text and A not in text


def create_pod(
    w: World,
    namespace: str,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    priority: str = "low",
) -> dict[str, Any]:
    """A pod the tenant creates with its own token in ``namespace``."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": SCHEDULER,
            "priorityClassName": priority,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }
    r = w.tenant.post(f"/api/v1/namespaces/{namespace}/pods", json=body)
    assert r.status_code == 201, r.text
    pod: dict[str, Any] = r.json()
    return pod


def record_failures(w: World, reason: str) -> float:
    return w.metric("runway_record_write_failures_total", {"reason": reason})


def test_churn_is_bounded_by_the_tenants_quota(world: World) -> None:
    """Rows 11: a ResourceQuota on ``count/workloadrecords.runway.dev`` caps the records
    runway writes in the tenant's namespace (runway's creates count against the tenant's
    quota); the workloads refused a record gain nothing (the never-ready one is evicted all the
    same) and cause no retry storm; records of gone workloads that hold nothing expire quickly
    (``recordRetention``, 15 s here)."""
    w = world
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "records", "namespace": Q},
        "spec": {"hard": {"count/workloadrecords.runway.dev": "3"}},
    }
    r = w.plane.api.post(f"/api/v1/namespaces/{Q}/resourcequotas", json=quota)
    assert r.status_code == 201, r.text
    # No kube-controller-manager on this plane: the administrator's quota status is set by hand
    # (the quota admission plugin then counts every create itself).
    status = {
        **r.json(),
        "status": {
            "hard": quota["spec"]["hard"],
            "used": {"count/workloadrecords.runway.dev": "0"},
        },
    }
    r = w.plane.api.put(f"/api/v1/namespaces/{Q}/resourcequotas/records/status", json=status)
    assert r.status_code == 200, r.text
    before = record_failures(w, "forbidden")
    names = [f"churn-{i}" for i in range(6)]
    for name in names:
        create_pod(w, Q, name, labels={"runway.dev/queue": "qa", "runway.dev/workload": name})
        w.plane.bind(name, "n1", Q)
        w.plane.set_pod_running(name, Q)
    poll(lambda: record_failures(w, "forbidden") > before, within=30, what="a refused record")
    create_pod(w, Q, "stuck", labels={"runway.dev/queue": "qa", "runway.dev/workload": "stuck"})
    w.plane.bind("stuck", "n1", Q)
    w.plane.set_pod_running("stuck", Q, ready=False)
    poll(lambda: gone_or_going(w, Q, "stuck"), within=60, what="the never-ready pod evicted")
    assert len(w.plane.records(Q)) <= 3
    refused = record_failures(w, "forbidden") - before
    assert 1 <= refused <= 30, refused  # backed off per workload, not one per pass
    # The tenant deletes everything: the records holding nothing expire.
    for name in [*names, "stuck"]:
        w.plane.delete_pod(name, Q)
    poll(
        lambda: not [r for r in w.plane.records(Q) if r["spec"]["workload"]["name"] in names],
        within=90,
        what="the records of gone workloads that hold nothing deleted",
    )


def test_made_up_tokens_cost_the_api_server_a_bounded_number_of_reviews(world: World) -> None:
    """Row 12: 300 made-up bearer tokens on the REST port were 300 TokenReviews; now a source
    gets 20 (and one a second back), then 429 without a review; a token runway has accepted
    still passes."""
    w = world
    tenant_token = w.tenant.headers["Authorization"].split(" ", 1)[1]
    url = f"/v1/workloads/{A}/nothing:activate"
    r = w.runway.client.post(url, headers={"Authorization": f"Bearer {tenant_token}"})
    assert r.status_code == 403, r.text  # known now: the tenant may not activate
    reviews_before = tokenreviews(w)
    statuses = [
        w.runway.client.post(url, headers={"Authorization": f"Bearer made-up-{i:04d}"}).status_code
        for i in range(300)
    ]
    assert statuses.count(401) <= 40 and statuses.count(429) >= 250, statuses
    assert set(statuses) <= {401, 429}
    assert tokenreviews(w) - reviews_before <= 40
    r = w.runway.client.post(url, headers={"Authorization": f"Bearer {tenant_token}"})
    assert r.status_code == 403, r.text  # not 429: a known token is not limited


def tokenreviews(w: World) -> float:
    text = w.runway.client.get("/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("runway_kube_api_requests_total{") and 'resource="tokenreviews"' in line
    )


def test_a_namespace_admin_cannot_lift_an_operators_deactivation(world: World) -> None:
    """Row 8: a namespace admin holding the chart's admin role in its namespace (a RoleBinding,
    what aggregation into ``admin`` used to give) may not ``:activate`` a workload an operator
    deactivated, nor ``:deactivate``; the operator may; the requeue limit's deactivation the
    namespace admin may lift."""
    w = world
    apply(
        w.plane,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "ns-admin-runway", "namespace": A},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "rw-runway-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "nsadmin", "namespace": A}],
        },
    )
    nsadmin = {"Authorization": f"Bearer {token_for(w.plane, A, 'nsadmin')}"}
    operator = {"Authorization": f"Bearer {w.plane.env['TOKEN']}"}
    tenant_pod(w, "locked", labels={"runway.dev/queue": "qa", "runway.dev/workload": "locked"})
    poll(lambda: in_cache(w, A, "locked"), within=30, what="the pod in runway's cache")
    url = f"/v1/workloads/{A}/locked"
    r = post(w, f"{url}:deactivate", headers=nsadmin)
    assert r.status_code == 403 and "only an operator" in r.text, r.text
    r = post(w, f"{url}:deactivate", headers=operator)
    assert r.status_code == 200 and r.json()["deactivatedBy"] == "operator", r.text
    r = post(w, f"{url}:activate", headers=nsadmin)
    assert r.status_code == 403 and "deactivated by an operator" in r.text, r.text
    (record,) = [x for x in w.plane.records(A) if x["spec"]["workload"]["name"] == "locked"]
    assert record["spec"]["active"] is False
    assert record["status"]["deactivatedBy"] == "operator"
    r = post(w, f"{url}:activate", headers=operator)
    assert r.status_code == 200 and r.json()["state"] != "deactivated", r.text


def test_a_planted_eviction_time_never_heads_a_shared_queue_after_the_migration(
    world: World,
) -> None:
    """Row 7: the tenant plants ``eviction-time: 2000-01-01`` on its pending Job before an
    operator runs the documented annotation migration; the import never orders the workload
    before its pods' creation, so tenant-b's older workload stays the head."""
    w = world
    first = pod_in(w, B, "first-in-line", queue="shared", priority="low")
    poll(lambda: in_cache(w, B, "first-in-line"), within=30, what="tenant-b's pod in the cache")
    # Creation times have a one-second resolution: the tenant's pods come a second later.
    born = first["metadata"]["creationTimestamp"]
    poll(lambda: rfc3339_now() > born, within=5, what="the next second")
    annotations = {
        "runway.dev/eviction-reason": "PodsReadyTimeout",
        "runway.dev/eviction-time": "2000-01-01T00:00:00Z",
        "runway.dev/eviction-count": "1",
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "cutter", "annotations": annotations},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
            }
        },
    }
    r = w.tenant.post(f"/apis/batch/v1/namespaces/{A}/jobs", json=job)
    assert r.status_code == 201, r.text
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "cutter",
        "uid": r.json()["metadata"]["uid"],
        "controller": True,
    }
    cutter = tenant_pod(w, "cutter-0", labels={"runway.dev/queue": "shared"}, owner=owner)
    poll(lambda: in_cache(w, A, "cutter"), within=30, what="the tenant's workload in the cache")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "migrate-annotations",
            "--kubeconfig",
            str(w.plane.kubeconfig),
            "--apply",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"{A}/cutter" in done.stdout, done.stdout

    def imported() -> dict[str, Any]:
        found = [r for r in w.plane.records(A) if r["spec"]["workload"]["name"] == "cutter"]
        return found[0]["status"]["eviction"] if found else {}

    eviction = poll(imported, within=30, what="the imported record")
    assert eviction["time"] >= cutter["metadata"]["creationTimestamp"], eviction
    poll(
        lambda: w.runway.get("/v1/queues/shared/pending")["head"] == f"{B}/first-in-line",
        within=30,
        what="tenant-b's older workload still the head",
    )
    held = w.verb("filter", cutter, ["n1"])
    assert held.get("NodeNames") in ([], None), held  # behind the head (or in its backoff)
    assert w.verb("filter", first, ["n1"]).get("NodeNames") == ["n1"]


def test_a_forged_daemonset_owner_exempts_nothing_a_real_one_does(world: World) -> None:
    """Row 3: a controller reference ``{kind: DaemonSet, apiVersion: rt.example/v1}`` on the
    tenant's never-ready pod no longer exempts it from PodsReady; a pod of a DaemonSet runway
    has read (apps/v1, its UID) still is (never evicted)."""
    w = world
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "pause"}]},
            },
        },
    }
    r = w.plane.api.post(f"/apis/apps/v1/namespaces/{A}/daemonsets", json=daemonset)
    assert r.status_code == 201, r.text
    real_uid = r.json()["metadata"]["uid"]
    poll(
        lambda: "runway_daemonsets_readable 1.0" in w.runway.client.get("/metrics").text,
        within=30,
        what="the DaemonSets listed",
    )
    forged = {
        "apiVersion": "rt.example/v1",
        "kind": "DaemonSet",
        "name": "log-agent",
        "uid": "6f1c0000-0000-0000-0000-00000000da01",
        "controller": True,
    }
    tenant_pod(w, "fake-agent", labels={"runway.dev/queue": "qa"}, owner=forged)
    real = w.plane.api.post(
        f"/api/v1/namespaces/{A}/pods",
        json={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "real-agent",
                "labels": {"app": "agent", "runway.dev/queue": "qa"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "agent",
                        "uid": real_uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "pause"}]},
        },
    )
    assert real.status_code == 201, real.text
    for name in ("fake-agent", "real-agent"):
        w.plane.bind(name, "n1", A)
        w.plane.set_pod_running(name, A, ready=False)
    poll(lambda: gone_or_going(w, A, "fake-agent"), within=60, what="the forged one evicted")
    # Both timed out together: the real DaemonSet's pod is still there, not marked.
    got = get_pod(w, A, "real-agent")
    assert got is not None and got["metadata"].get("deletionTimestamp") is None
    marks = [c for c in got["status"].get("conditions", []) if c["type"] == "DisruptionTarget"]
    assert not marks, marks
    w.plane.delete_pod("fake-agent", A)
    w.plane.delete_pod("real-agent", A)


def test_min_available_never_keeps_never_ready_pods_past_the_timeout(world: World) -> None:
    """Row 4: ``runway.dev/min-available: "1"`` on a 4-pod gang with 3 never-ready pods: every
    bound pod counts for PodsReady (as Kueue's partial admission), so the gang times out and is
    evicted like the same gang without the annotation — also when its first pod was Ready
    before the other three bound (then each must be Ready within the timeout of its bind: the
    recovery clock, unset here, would keep them forever)."""
    w = world
    names = [f"gang-{i}" for i in range(4)]
    for name in names:
        tenant_pod(
            w,
            name,
            labels={"runway.dev/queue": "qa", "runway.dev/workload": "gang"},
            annotations={"runway.dev/min-available": "1"},
        )
    w.plane.bind(names[0], "n1", A)
    w.plane.set_pod_running(names[0], A, ready=True)

    def reached() -> bool:
        found = [r for r in w.plane.records(A) if r["spec"]["workload"]["name"] == "gang"]
        return bool(found and (found[0].get("status") or {}).get("life", {}).get("ready"))

    poll(reached, within=30, what="the floor's PodsReady recorded")
    for name in names[1:]:
        w.plane.bind(name, "n1", A)
        w.plane.set_pod_running(name, A, ready=False)
    poll(
        lambda: all(gone_or_going(w, A, n) for n in names),
        within=60,
        what="the whole gang evicted at its stragglers' timeout",
    )
    (record,) = [r for r in w.plane.records(A) if r["spec"]["workload"]["name"] == "gang"]
    assert record["status"]["eviction"]["reason"] == "PodsReadyTimeout"
    for name in names:
        w.plane.delete_pod(name, A)


def test_new_members_of_an_admitted_workload_queue_again(world: World) -> None:
    """Row 5: the tenant keeps one pod of ``runway.dev/workload=anchor`` bound, then adds new
    pods with that label: they no longer bind past the StrictFIFO head (tenant-b's older pending
    workload); they queue again, at their own creation time."""
    w = world
    labels = {"runway.dev/queue": "fifo", "runway.dev/workload": "anchor"}
    tenant_pod(w, "anchor-0", labels=labels)
    w.plane.bind("anchor-0", "n1", A)
    w.plane.set_pod_running("anchor-0", A)

    def admitted() -> bool:
        found = [r for r in w.plane.records(A) if r["spec"]["workload"]["name"] == "anchor"]
        return bool(found and (found[0].get("status") or {}).get("life", {}).get("admitted"))

    poll(admitted, within=30, what="the anchor's admission recorded")
    waiting = pod_in(w, B, "waiting-b", queue="fifo", priority="low")
    poll(lambda: in_cache(w, B, "waiting-b"), within=30, what="tenant-b's pod in the cache")
    born = waiting["metadata"]["creationTimestamp"]
    poll(lambda: rfc3339_now() > born, within=5, what="the next second")
    newcomer = tenant_pod(w, "anchor-1", labels=labels)
    poll(
        lambda: f"{A}/anchor" in json.dumps(w.runway.get("/v1/queues/fifo/pending")),
        within=30,
        what="the newcomer queued",
    )
    held = w.verb("filter", newcomer, ["n1"])
    assert held.get("NodeNames") in ([], None), held
    assert "StrictFIFO" in json.dumps(held), held
    assert w.verb("filter", waiting, ["n1"]).get("NodeNames") == ["n1"]
    pending = w.runway.get("/v1/queues/fifo/pending")
    assert pending["head"] == f"{B}/waiting-b", pending


GUARDED_S = 3600.0
"""The ``guarded`` queue's reclaimMinRuntime."""


@pytest.mark.parametrize("method", ["lca", "queue"])
def test_a_preemptor_outside_the_tree_never_skips_the_victim_queues_reclaim_min_runtime(
    world: World, method: str
) -> None:
    """Row 2 (item 2), under both ``reclaimResolveMethod`` values: the tenant's preemptor —
    labelled with a queue its namespace may not use (``guarded`` is tenant-b's), unlabelled
    (``default``), or in a queue nobody declared — asks to preempt a victim of tenant-b's
    ``guarded`` queue started just now: the victim's own 1 h ``reclaimMinRuntime`` protects it
    (``minruntime.resolve_from_the_victims_side``); the decision says so and nothing is
    deleted. Under ``lca`` a preemptor in ``default`` once resolved from an implicit root with no
    setting: 0 s."""
    w = world
    w.runway.stop()
    config = {**CONFIG, "minRuntime": {"reclaimResolveMethod": method}}
    w.runway = w.factory.start(config, args=("--kubeconfig", str(w.kubeconfig)))
    made: list[tuple[str, str]] = []
    try:
        name = node = f"guarded-{method}"
        # the victim alone on it, and no room for a preemptor (100m) beside it (100m)
        w.plane.create_node(node, capacity={"cpu": "150m", "memory": "1Gi", "pods": "10"})
        victim = pod_in(w, B, name, queue="guarded", priority="low")
        made.append((B, name))
        w.plane.bind(name, node, B)
        w.plane.set_pod_running(name, B)
        poll(lambda: in_cache(w, B, name), within=30, what="the victim in runway's cache")
        cases = (
            ("forbidden", {"runway.dev/queue": "guarded"}, "default"),
            ("unlabelled", {}, "default"),
            ("undeclared", {"runway.dev/queue": "nowhere"}, "nowhere"),
        )
        for case, labels, queue in cases:
            mine = f"claim-{case}-{method}"
            preemptor = tenant_pod(w, mine, labels=labels, priority="high")  # the tenant's token
            made.append((A, mine))
            poll(lambda m=mine: in_cache(w, A, m), within=30, what=f"{case}: the preemptor cached")
            assert queue_in_runway(w, A, mine) == queue, case
            answer = preempt(w, preemptor, {node: [victim["metadata"]["uid"]]})
            assert answer == {"NodeNameToMetaVictims": {}}, (case, answer)

            def judged(m: str = mine) -> dict[str, Any] | None:
                for d in w.runway.get(f"/v1/preemptions/decisions?preemptor={A}/{m}")["decisions"]:
                    for n in d["nodes"]:
                        for v in n["pods"]:
                            if v["pod"] == f"{B}/{name}":
                                return {"chosen": d["chosenNode"], **v}
                return None

            seen = poll(judged, within=30, what=f"{case}: the decision on the guarded victim")
            assert seen["chosen"] is None, (case, seen["reason"])
            assert seen["outcome"] == "dropped", (case, seen["reason"])
            assert seen["action"] == "reclaim" and seen["protected"], (case, seen)
            assert seen["minRuntimeSeconds"] == GUARDED_S, (case, seen)
            assert "guarded" in seen["rule"], (case, seen)
            got = get_pod(w, B, name)
            assert got is not None and not got["metadata"].get("deletionTimestamp"), case
            # the rule alone, as an operator asks it: the victim's side whatever the preemptor
            rule = w.runway.get(f"/v1/resolve?preemptorQueue={queue}&victimQueue=guarded")
            assert rule["minRuntimeSeconds"] == GUARDED_S, (case, rule)
    finally:
        for ns, pod_name in made:
            w.plane.delete_pod(pod_name, ns)
        w.runway.stop()
        w.runway = w.factory.start(CONFIG, args=("--kubeconfig", str(w.kubeconfig)))


def bind_role(w: World, namespace: str | None, role: str, account: tuple[str, str]) -> None:
    """A RoleBinding of ClusterRole ``role`` in ``namespace`` (None: a ClusterRoleBinding) to
    the ServiceAccount ``account`` = (namespace, name)."""
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta: dict[str, Any] = {"name": f"e2e-{role}-{account[1]}"}
    if namespace:
        meta["namespace"] = namespace
    apply(
        w.plane,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": meta,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account[1], "namespace": account[0]}],
        },
    )


def test_three_users_see_what_their_bindings_grant(world: World) -> None:
    """Issue #35 item 4 on the real plane (TokenReview and SubjectAccessReview by the real
    kube-apiserver, reads protected as the chart's REST port has them): the cluster operator
    (the chart's admin role, cluster-wide) reads and acts everywhere; team-a's viewer (the
    chart's viewer role bound in team-a — what `view` carries by aggregation) reads team-a and
    nothing else; team-b's admin (the admin role bound in team-b) reads and activates in team-b,
    never in team-a, and deactivates nowhere."""
    w = world
    operator = token_for(w.plane, RUNWAY_NS, "e2e-operator")
    viewer = token_for(w.plane, A, "e2e-viewer")
    admin = token_for(w.plane, B, "e2e-admin")
    bind_role(w, None, "rw-runway-admin", (RUNWAY_NS, "e2e-operator"))
    bind_role(w, A, "rw-runway-viewer", (A, "e2e-viewer"))
    bind_role(w, B, "rw-runway-admin", (B, "e2e-admin"))
    w.runway.stop()
    config = {**CONFIG, "auth": {"mode": "kubernetes", "protectReadOnly": True}}
    w.runway = w.factory.start(config, args=("--kubeconfig", str(w.kubeconfig)))
    made = [(A, "view-a"), (B, "view-b")]
    try:
        for ns, name in made:
            pod_in(w, ns, name, queue="fifo", priority="low")

        def reads(token: str, path: str) -> int:
            r = w.runway.client.get(path, headers={"Authorization": f"Bearer {token}"})
            return r.status_code

        def cached() -> bool:
            return all(reads(operator, f"/v1/workloads/{ns}/{n}") == 200 for ns, n in made)

        poll(cached, within=30, what="both workloads in runway's cache")
        cases = [
            (operator, "/v1/workloads", 200),
            (operator, f"/v1/workloads?namespace={A}", 200),
            (operator, "/v1/preemptions/decisions", 200),
            (viewer, f"/v1/workloads?namespace={A}", 200),
            (viewer, f"/v1/workloads/{A}/view-a", 200),
            (viewer, "/v1/workloads", 403),
            (viewer, f"/v1/workloads?namespace={B}", 403),
            (viewer, f"/v1/workloads/{B}/view-b", 403),
            (viewer, "/v1/preemptions/decisions", 403),
            (admin, f"/v1/workloads/{B}/view-b", 200),
            (admin, f"/v1/workloads/{A}/view-a", 403),
        ]
        for token, path, expected in cases:
            who = {operator: "operator", viewer: "viewer", admin: "admin"}[token]
            assert reads(token, path) == expected, (who, path)
        [item] = [
            i
            for i in w.runway.client.get(
                f"/v1/workloads?namespace={A}", headers={"Authorization": f"Bearer {viewer}"}
            ).json()["items"]
            if i["name"] == "view-a"
        ]
        assert item["namespace"] == A

        def acts(token: str, ns: str, name: str, verb: str) -> int:
            return post(
                w, f"/v1/workloads/{ns}/{name}:{verb}", {"Authorization": f"Bearer {token}"}
            ).status_code

        assert acts(viewer, A, "view-a", "activate") == 403
        assert acts(admin, B, "view-b", "activate") == 200
        assert acts(admin, A, "view-a", "activate") == 403
        assert acts(admin, B, "view-b", "deactivate") == 403  # an operator's
        assert acts(operator, A, "view-a", "deactivate") == 200
        assert acts(admin, A, "view-a", "activate") == 403
        assert acts(operator, A, "view-a", "activate") == 200
    finally:
        for ns, name in made:
            w.plane.delete_pod(name, ns)
        w.runway.stop()
        w.runway = w.factory.start(CONFIG, args=("--kubeconfig", str(w.kubeconfig)))
