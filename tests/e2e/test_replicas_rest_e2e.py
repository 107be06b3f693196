"""Issue 35 item 5: every replica answers the same, on the real control plane.

Two runway replicas configured as the chart runs them: HTTPS with mutual TLS on the verbs' port,
the REST API on a port of its own (``--rest-port``, no client certificate), reads guarded by a
bearer token (``auth.mode: kubernetes``, ``protectReadOnly``), ``POD_IP`` for the addresses the
leader writes on the Lease, ``forwardCAFile`` to verify it. kube-scheduler talks to the
*follower* only, which forwards ``preempt`` to the leader: the preemption is decided and run in
the leader's memory alone. Then both replicas are asked, with a viewer's token as ``kubectl
runway`` sends it (``X-Runway-Authorization``), for ``/v1/preemptions`` and
``/v1/preemptions/decisions``: the same answers, the follower's relayed from the leader; a user
with no rights is refused by both.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml

from app.wire.forwarding import (
    FORWARDED_HEADER,
    RELAYED_BY_HEADER,
    REPLICA_HEADER,
    SERVED_BY_HEADER,
)
from tests.certs import CA
from tests.e2e.conftest import ControlPlane, harness_config, poll, write_scheduler_config
from tests.e2e.kubelet import Kubelet
from tests.runway_process import RunwayProcess, free_port, run_runway

pytestmark = pytest.mark.e2e

SCHEDULER = "runway-e2e-replicas-rest"
NS = "replicas-rest"
PEOPLE_NS = "replicas-rest-people"


@dataclass
class Replica:
    """One runway process: its verbs' URL (mutual TLS) and its REST client (HTTPS, no
    client certificate)."""

    process: RunwayProcess
    rest: httpx.Client
    verbs: str

    def read(self, path: str, token: str, **headers: str) -> httpx.Response:
        """A GET as ``kubectl runway`` sends it through the service proxy."""
        return self.rest.get(path, headers={"X-Runway-Authorization": f"Bearer {token}", **headers})

    def logs(self) -> str:
        return self.process.logs()


@dataclass
class Stack:
    plane: ControlPlane
    leader: Replica
    follower: Replica
    viewer: str
    nobody: str


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def service_account_token(plane: ControlPlane, name: str) -> str:
    plane.api.post(
        f"/api/v1/namespaces/{PEOPLE_NS}/serviceaccounts",
        json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    review = ok(
        plane.api.post(
            f"/api/v1/namespaces/{PEOPLE_NS}/serviceaccounts/{name}/token",
            json={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
    )
    token: str = review["status"]["token"]
    return token


def grant_reads(plane: ControlPlane, user: str) -> None:
    """What the chart's viewer role grants runway to check: `get` on workloads.runway.dev."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "e2e-replicas-rest-viewer"},
        "rules": [{"apiGroups": ["runway.dev"], "resources": ["workloads"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-replicas-rest-viewer"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": PEOPLE_NS}],
    }
    for path, obj in ((f"{rbac}/clusterroles", role), (f"{rbac}/clusterrolebindings", binding)):
        r = plane.api.post(path, json=obj)
        assert r.status_code in (201, 409), r.text


def pod(name: str, priority: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"runway.dev/queue": "batch"}},
        "spec": {
            "schedulerName": SCHEDULER,
            "priorityClassName": priority,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    plane = dedicated_plane
    tmp = tmp_path_factory.mktemp("replicas-rest")
    for name, value in (("low", 100), ("high", 1000)):
        plane.ensure_priority_class(name, value)
    for ns in (NS, PEOPLE_NS):
        plane.ensure_namespace(ns)
    # The chart's certificates: one CA; runway's certificate serves and authenticates to the
    # leader; kube-scheduler's authenticates to runway.
    ca = CA("runway-e2e-ca")
    runway_cert = ca.issue("runway", server=True, client=True)
    scheduler_cert = ca.issue("kube-scheduler", server=False)
    files = {
        "ca.crt": ca.pem,
        "tls.crt": runway_cert.cert,
        "tls.key": runway_cert.key,
        "scheduler.crt": scheduler_cert.cert,
        "scheduler.key": scheduler_cert.key,
    }
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    path = {name: str(tmp / name) for name in files}
    config = harness_config(
        {
            "server": {
                "tls": {
                    "certFile": path["tls.crt"],
                    "keyFile": path["tls.key"],
                    "clientCAFile": path["ca.crt"],
                    "requireClientCert": True,
                }
            },
            "auth": {"mode": "kubernetes", "cacheTTL": "0s", "protectReadOnly": True},
            "queues": [{"name": "batch"}],
            "kubernetes": {
                "leaderElection": {
                    "leaseDuration": "6s",
                    "renewDeadline": "4s",
                    "retryPeriod": "1s",
                    "forwardCAFile": path["ca.crt"],
                }
            },
            "preemption": {"schedulerNames": [SCHEDULER]},
            "logging": {"level": "info"},
        }
    )
    config_file = tmp / "runway.yaml"
    config_file.write_text(yaml.safe_dump(config))
    # kube-scheduler's client certificate reaches the verbs (and /healthz) on mutual TLS.
    verbs_client = ssl.create_default_context(cafile=path["ca.crt"])
    verbs_client.load_cert_chain(path["scheduler.crt"], path["scheduler.key"])
    rest_client = ssl.create_default_context(cafile=path["ca.crt"])  # no certificate
    admin = plane.env["TOKEN"]
    with contextlib.ExitStack() as stack:

        def start() -> Replica:
            rest_port = free_port()
            process = stack.enter_context(
                run_runway(
                    tmp,
                    (
                        "--kubeconfig",
                        str(plane.kubeconfig),
                        "--config",
                        str(config_file),
                        "--rest-port",
                        str(rest_port),
                    ),
                    env={"POD_IP": "127.0.0.1"},
                    scheme="https",
                    client_options={"verify": verbs_client},
                )
            )
            rest = stack.enter_context(
                httpx.Client(
                    base_url=f"https://127.0.0.1:{rest_port}", verify=rest_client, timeout=30
                )
            )
            return Replica(process, rest, process.url)

        def leads(replica: Replica) -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return replica.read("/v1/cache/summary", admin).json().get("leader") is True
            return False

        # The first replica leads; the second starts once it does, and follows.
        first = start()
        poll(lambda: leads(first), within=60, what="the first replica leading")
        second = start()
        poll(
            lambda: (
                second.read("/v1/cache/summary", admin).status_code == 200
                and second.read("/v1/cache/summary", admin).json().get("leader") is False
            ),
            within=60,
            what="the second replica following",
        )
        # kube-scheduler reaches the follower only: every preempt is forwarded to the leader.
        scheduler = write_scheduler_config(
            tmp / "scheduler.yaml",
            second.verbs,
            release=plane.release,
            scheduler_name=SCHEDULER,
            extra={"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 2},
        )
        doc = yaml.safe_load(scheduler.read_text())
        doc["extenders"][0]["tlsConfig"] = {
            "caFile": path["ca.crt"],
            "certFile": path["scheduler.crt"],
            "keyFile": path["scheduler.key"],
        }
        scheduler.write_text(yaml.safe_dump(doc, sort_keys=False))
        plane.start_scheduler(scheduler)
        stack.callback(plane.stop_scheduler)
        viewer = service_account_token(plane, "viewer")
        grant_reads(plane, "viewer")
        nobody = service_account_token(plane, "nobody")
        try:
            yield Stack(plane, first, second, viewer, nobody)
        except BaseException:
            for name, r in (("leader", first), ("follower", second)):
                print(f"--- runway {name} {r.verbs} ---\n{r.logs()[-20000:]}")
            raise


def test_both_replicas_answer_the_leaders_preemptions_and_decisions(stack: Stack) -> None:
    plane, leader, follower = stack.plane, stack.leader, stack.follower
    plane.create_node("rest-n1", capacity={"cpu": "2", "memory": "8Gi", "pods": "110"})
    with Kubelet(plane, NS) as kubelet:
        r = plane.api.post(f"/api/v1/namespaces/{NS}/pods", json=pod("victim", "low", "2"))
        assert r.status_code == 201, r.text
        plane.bind("victim", "rest-n1", NS)
        poll(lambda: "victim" in kubelet.bound_at, within=60, what="the victim running")
        r = plane.api.post(f"/api/v1/namespaces/{NS}/pods", json=pod("preemptor", "high", "2"))
        assert r.status_code == 201, r.text
        poll(lambda: "preemptor" in kubelet.bound_at, within=120, what="the preemptor bound")
        if kubelet.error is not None:
            raise kubelet.error

    def settled() -> bool:
        tasks = leader.read("/v1/preemptions", stack.viewer).json()
        return not tasks["inFlight"] and any(t["result"] == "success" for t in tasks["recent"])

    poll(settled, within=60, what="the leader's preemption finished")
    for path in ("/v1/preemptions", "/v1/preemptions/decisions"):
        direct = leader.read(path, stack.viewer)
        relayed = follower.read(path, stack.viewer)
        assert direct.status_code == relayed.status_code == 200, (direct.text, relayed.text)
        assert relayed.json() == direct.json(), path
        assert direct.headers[SERVED_BY_HEADER] == relayed.headers[SERVED_BY_HEADER] == "leader"
        assert relayed.headers[REPLICA_HEADER] == direct.headers[REPLICA_HEADER]
        assert RELAYED_BY_HEADER in relayed.headers and RELAYED_BY_HEADER not in direct.headers
    tasks = leader.read("/v1/preemptions", stack.viewer).json()
    assert [t["preemptor"] for t in tasks["recent"]] == [f"{NS}/preemptor"]
    assert tasks["recent"][0]["victims"] == [f"{NS}/victim"]
    decisions = leader.read("/v1/preemptions/decisions", stack.viewer).json()["decisions"]
    assert decisions and decisions[0]["preemptor"]["pod"] == f"{NS}/preemptor"
    # What the follower holds itself: nothing of it (it forwarded preempt, decided nothing).
    own = follower.read("/v1/preemptions/decisions", stack.viewer, **{FORWARDED_HEADER: "e2e"})
    assert own.json()["decisions"] == []
    assert own.headers[SERVED_BY_HEADER] == "follower (forwarded to it)"
    # A user with no rights is refused by both.
    for replica in (leader, follower):
        refused = replica.read("/v1/preemptions", stack.nobody)
        assert refused.status_code == 403 and "may not" in refused.json()["error"], refused.text
    print(
        f"preemption decided by the leader through the follower; both replicas answered "
        f"{len(decisions)} decision(s) and {len(tasks['recent'])} preemption(s) alike"
    )
