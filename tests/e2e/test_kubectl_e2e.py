"""``kubectl runway`` against the real control plane, through kube-apiserver's service proxy.

runway runs with ``auth.mode: kubernetes`` and its REST API on a port of its own
(``--rest-port``) bound to a non-loopback address of this machine (the API server refuses to
proxy to loopback); a selector-less Service ``runway/runway-rest`` with a hand-written
Endpoints object (and an EndpointSlice from 1.21: newer API servers proxy through slices) points
there, as the chart's Service would in a cluster. The people are
ServiceAccounts with TokenRequest tokens, bound to the chart's own ClusterRoles (rendered from
helm/runway): alice views, bob administers, mallory has nothing. The plugin is the installed
``kubectl-runway`` console script, each user with a kubeconfig of their own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.kubectl.errors import EXIT_FORBIDDEN, EXIT_NOT_FOUND, EXIT_OK
from tests.e2e.conftest import ControlPlane, RunwayFactory, RunwayHandle, poll
from tests.helm_chart import find, render
from tests.runway_process import free_port

pytestmark = pytest.mark.e2e

NS = "kubectl-e2e"
RUNWAY_NS = "runway"
CONFIG = {
    # As the chart configures it with the REST port: reads need a token too.
    "auth": {"mode": "kubernetes", "cacheTTL": "0s", "protectReadOnly": True},
    "queues": [
        {"name": "research", "preemptMinRuntime": "30m"},
        {"name": "vision", "parent": "research", "queueingStrategy": "StrictFIFO"},
    ],
}
PLUGIN = Path(sys.executable).parent / "kubectl-runway"


def routable_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (the API server proxies to no
    loopback or link-local address)."""
    if not shutil.which("ip"):
        return None
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in out.splitlines():
        address = line.split()[3].split("/")[0]
        if not address.startswith(("127.", "169.254.")):
            return address
    return None


@dataclass
class Setup:
    plane: ControlPlane
    runway: RunwayHandle
    rest_url: str
    kubeconfigs: dict[str, Path]
    tokens: dict[str, str]


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def create(plane: ControlPlane, path: str, body: dict[str, Any]) -> None:
    r = plane.api.post(path, json=body)
    assert r.status_code in (201, 409), r.text


def token_for(plane: ControlPlane, name: str) -> str:
    create(
        plane,
        f"/api/v1/namespaces/{RUNWAY_NS}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    review = ok(
        plane.api.post(
            f"/api/v1/namespaces/{RUNWAY_NS}/serviceaccounts/{name}/token",
            json={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
    )
    token: str = review["status"]["token"]
    return token


def bind(plane: ControlPlane, user: str, role: str) -> None:
    create(
        plane,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"e2e-{user}-{role}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": RUNWAY_NS}],
        },
    )


def write_kubeconfig(tmp: Path, plane: ControlPlane, user: str, token: str) -> Path:
    path = tmp / f"kubeconfig-{user}"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "e2e",
                        "cluster": {"server": plane.url, "insecure-skip-tls-verify": True},
                    }
                ],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [
                    {"name": "e2e", "context": {"cluster": "e2e", "user": user, "namespace": NS}}
                ],
                "current-context": "e2e",
            }
        )
    )
    return path


@pytest.fixture
def setup(control_plane: ControlPlane, runway: RunwayFactory, tmp_path: Path) -> Iterator[Setup]:
    address = routable_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address: the API server proxies to no loopback address")
    plane = control_plane
    for ns in (NS, RUNWAY_NS):
        plane.ensure_namespace(ns)
    rest_port = free_port()
    handle = runway.start(CONFIG, args=("--host", "0.0.0.0", "--rest-port", str(rest_port)))
    # runway's REST Service, as the chart makes it, but pointing at this process.
    create(
        plane,
        f"/api/v1/namespaces/{RUNWAY_NS}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "runway-rest"},
            "spec": {"ports": [{"name": "rest", "port": 8889, "protocol": "TCP"}]},
        },
    )
    # The proxy only goes to an endpoint address that is a Pod's IP (targetRef checked): a pod
    # object standing for runway's, its status written as a kubelet would.
    plane.create_pod("runway-0", RUNWAY_NS)
    r = plane.api.patch(
        f"/api/v1/namespaces/{RUNWAY_NS}/pods/runway-0/status",
        json={"status": {"podIP": address, "podIPs": [{"ip": address}]}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    target = {"kind": "Pod", "name": "runway-0", "namespace": RUNWAY_NS}
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "runway-rest"},
        "subsets": [
            {
                "addresses": [{"ip": address, "targetRef": target}],
                "ports": [{"name": "rest", "port": rest_port}],
            }
        ],
    }
    # PUT creates or replaces (Endpoints allow create on update).
    r = plane.api.put(f"/api/v1/namespaces/{RUNWAY_NS}/endpoints/runway-rest", json=endpoints)
    assert r.status_code in (200, 201), r.text
    if plane.at_least("1.21"):
        # newer API servers proxy through the Service's EndpointSlices (1.37 reads only them);
        # there is no controller-manager to mirror the Endpoints: written by hand as well
        slices = f"/apis/discovery.k8s.io/v1/namespaces/{RUNWAY_NS}/endpointslices"
        plane.api.delete(f"{slices}/runway-rest")  # a slice is not created on PUT: replace it
        r = plane.api.post(
            slices,
            json={
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "runway-rest",
                    "labels": {"kubernetes.io/service-name": "runway-rest"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address], "targetRef": target}],
                "ports": [{"name": "rest", "port": rest_port, "protocol": "TCP"}],
            },
        )
        assert r.status_code in (200, 201), r.text
    # The chart's own people roles (release "runway": the Service is runway-rest).
    for role in find(render(release="runway", namespace=RUNWAY_NS), "ClusterRole"):
        if role["metadata"]["name"] in ("runway-viewer", "runway-admin"):
            plane.api.delete(
                f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}"
            )
            create(plane, "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    tokens = {user: token_for(plane, user) for user in ("alice", "bob", "mallory")}
    bind(plane, "alice", "runway-viewer")
    bind(plane, "bob", "runway-admin")
    kubeconfigs = {u: write_kubeconfig(tmp_path, plane, u, t) for u, t in tokens.items()}
    # Workloads: three pending in the StrictFIFO queue, one bound.
    labels = {"runway.dev/queue": "vision"}
    for name in ("resnet-a", "resnet-b", "resnet-c"):
        plane.create_pod(name, NS, labels={**labels, "runway.dev/workload": name})
    plane.create_node("kubectl-e2e-node")
    plane.create_pod("running", NS, labels={**labels, "runway.dev/workload": "running"})
    plane.bind("running", "kubectl-e2e-node", NS)
    handle.wait_ready()
    rest_url = f"http://127.0.0.1:{rest_port}"  # the verbs' port answers no REST
    admin = {"Authorization": f"Bearer {plane.env['TOKEN']}"}
    poll(
        lambda: (
            len(ok(httpx.get(f"{rest_url}/v1/workloads?namespace={NS}", headers=admin))["items"])
            == 4
        ),
        within=30,
        what="runway sees the four workloads",
    )
    try:
        yield Setup(plane, handle, rest_url, kubeconfigs, tokens)
    finally:
        for name in ("resnet-a", "resnet-b", "resnet-c", "running"):
            plane.delete_pod(name, NS)
        plane.delete_pod("runway-0", RUNWAY_NS)
        plane.delete_node("kubectl-e2e-node")


def kubectl_runway(setup: Setup, user: str, *args: str) -> tuple[int, str, str]:
    """The console script as ``kubectl runway`` runs it, as ``user``, through the proxy."""
    done = subprocess.run(
        [
            str(PLUGIN),
            *args,
            "--kubeconfig",
            str(setup.kubeconfigs[user]),
            "--runway-namespace",
            RUNWAY_NS,
            "--scheme",
            "http",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_viewer_sees_queues_workloads_and_explanations_through_the_proxy(setup: Setup) -> None:
    code, out, err = kubectl_runway(setup, "alice", "workloads")
    assert code == EXIT_OK, err
    rows = [line.split() for line in out.splitlines()[1:]]
    # The context's namespace; in the queue, the pending ones first in StrictFIFO order (the
    # second and third wait for the head), then the admitted one.
    assert [r[0] for r in rows] == ["resnet-a", "resnet-b", "resnet-c", "running"], out
    assert [r[5] for r in rows[1:3]] == ["strict-fifo", "strict-fifo"], out
    assert rows[3][2] == "admitted", out
    code, out, err = kubectl_runway(
        setup, "alice", "workloads", "-A", "-o", "json", "--chunk-size", "1"
    )
    assert code == EXIT_OK, err
    paged = [w["name"] for w in json.loads(out)["items"] if w["namespace"] == NS]
    assert paged == ["resnet-a", "resnet-b", "resnet-c", "running"]
    code, out, err = kubectl_runway(setup, "alice", "queues")
    assert code == EXIT_OK, err
    vision = next(line.split() for line in out.splitlines() if line.strip().startswith("vision"))
    assert vision[1:3] == ["StrictFIFO", "30m"] and vision[5:7] == ["3", "1"], out
    code, out, err = kubectl_runway(setup, "alice", "explain", "resnet-b")
    assert code == EXIT_OK, err
    assert "Held by:          strict-fifo" in out and f"{NS}/resnet-a" in out
    code, out, _ = kubectl_runway(setup, "alice", "explain", "nope")
    assert code == EXIT_NOT_FOUND
    # The page, through the same proxy and the same role.
    proxy = f"{setup.plane.url}/api/v1/namespaces/{RUNWAY_NS}/services/http:runway-rest:rest/proxy"
    bearer = {"Authorization": f"Bearer {setup.tokens['alice']}"}
    page = httpx.get(f"{proxy}/ui/", headers=bearer, verify=False, timeout=10)
    assert page.status_code == 200 and "<title>runway</title>" in page.text
    # Straight at the REST port without a token: runway itself refuses the read.
    done = subprocess.run(
        [str(PLUGIN), "queues", "--url", setup.rest_url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == EXIT_FORBIDDEN and "runway refused" in done.stderr, done.stderr


def test_someone_without_a_role_is_refused_by_the_api_server(setup: Setup) -> None:
    code, _, err = kubectl_runway(setup, "mallory", "workloads")
    assert code == EXIT_FORBIDDEN, err
    assert "the API server refused" in err and "services/proxy" in err


def test_activation_needs_the_admin_role_at_the_proxy_and_at_runway(setup: Setup) -> None:
    # A workload of this test's own: its WorkloadRecord outlives the pod (recordRetention),
    # and what is done to it here must not reorder the other tests' queue.
    plane, name = setup.plane, "toggled"
    plane.create_pod(name, NS, labels={"runway.dev/queue": "vision", "runway.dev/workload": name})
    try:
        poll(
            lambda: kubectl_runway(setup, "alice", "explain", name)[0] == EXIT_OK,
            within=30,
            what=f"runway sees {name}",
        )
        # alice may read, not create through the proxy: the API server refuses.
        code, _, err = kubectl_runway(setup, "alice", "activate", name)
        assert code == EXIT_FORBIDDEN and "the API server refused" in err, err
        # bob holds runway-admin: the API server lets the POST through, and runway checks bob
        # himself (his token forwarded in X-Runway-Authorization: TokenReview + SAR).
        code, out, err = kubectl_runway(setup, "bob", "activate", name)
        assert code == EXIT_OK, err + setup.runway.logs()[-3000:]
        assert out == f"workload {NS}/{name} activated (state: pending)\n"
        assert "system:serviceaccount:runway:bob" in setup.runway.logs()
        # bob deactivates it (spec.active: false on its WorkloadRecord) and activates it again.
        code, out, err = kubectl_runway(setup, "bob", "deactivate", name)
        assert code == EXIT_OK and "(state: deactivated)" in out, err
        code, out, err = kubectl_runway(setup, "bob", "activate", name)
        assert code == EXIT_OK and "(state: pending)" in out, err
        # Straight at runway's REST port with alice's own token: runway's SubjectAccessReview
        # refuses her (no update on workloads.runway.dev).
        done = subprocess.run(
            [str(PLUGIN), "activate", name, "-n", NS, "--url", setup.rest_url,
             "--token", setup.tokens["alice"]],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == EXIT_FORBIDDEN and "runway refused" in done.stderr, done.stderr
    finally:
        plane.delete_pod(name, NS)


class KubectlProxy:
    """What `kubectl proxy` does: a local plain-HTTP port that forwards every request to the
    API server with the user's credentials (here a bearer token)."""

    def __init__(self, apiserver: str, token: str) -> None:
        self.apiserver = apiserver
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request
        from starlette.responses import Response

        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "authorization")}
        headers["authorization"] = f"Bearer {self.token}"
        async with httpx.AsyncClient(base_url=self.apiserver, verify=False, timeout=30) as client:
            answer = await client.request(
                request.method, request.url.path, params=request.query_params,
                headers=headers, content=await request.body(),
            )  # fmt: skip
        kept = {
            k: v
            for k, v in answer.headers.items()
            if k.lower() in ("content-type", "content-security-policy")
        }
        await Response(answer.content, answer.status_code, headers=kept)(scope, receive, send)


def test_the_page_through_the_api_servers_proxy_in_a_browser(setup: Setup, tmp_path: Path) -> None:
    from tests.browser import cells, chromium, require_chromium, shot, sign_in
    from tests.served import serve_in_thread

    require_chromium()
    alice = setup.tokens["alice"]
    path = f"/api/v1/namespaces/{RUNWAY_NS}/services/http:runway-rest:rest/proxy/ui/"
    with (
        serve_in_thread(KubectlProxy(setup.plane.url, alice)) as local,
        chromium(tmp_path) as browser,
    ):
        browser.get(local + path)
        # runway asks for a token on reads (protectReadOnly): alice gives hers, the page sends
        # it as X-Runway-Authorization, which the API server forwards.
        sign_in(browser, alice)
        shot(browser, "through-the-api-server")
        rows = cells(browser, "#pending-vision")
        assert [r[1] for r in rows] == [f"{NS}/resnet-a", f"{NS}/resnet-b", f"{NS}/resnet-c"]
        assert [r[4] for r in rows] == ["-", "strict-fifo", "strict-fifo"]
