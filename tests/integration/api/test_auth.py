"""REST authentication over HTTP: the ``require_auth`` dependency on a tiny mutating router, the
read-only/metrics middleware, static tokens, and TokenReview/SubjectAccessReview faked with respx
behind the real ``KubeClient``. One test runs runway as a process with a token file."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import respx
from fastapi import APIRouter, Depends, FastAPI
from kubernetes.client import Configuration

from app.api.auth import Principal, require_auth
from app.config import parse_config
from app.kube.access import ClusterAccess
from app.kube.client import KubeClient
from app.kube.retry import RetryPolicy
from app.server import create_app
from tests.asgi import asgi_client as client
from tests.reference import wire_cases
from tests.runway_process import run_runway

GOOD = "g" * 40
BAD = "b" * 40
KUBE = "https://kube.test"
FILTER = next(c for c in wire_cases() if c["name"] == "nodecache-filter")["request"]

# A stand-in for the mutating endpoints other modules add (e.g. reactivating a workload).
tiny = APIRouter(prefix="/v1/test")


@tiny.post("/workloads/{namespace}/{name}:activate")
async def activate(
    namespace: str,
    name: str,
    principal: Annotated[Principal, Depends(require_auth("write"))],
) -> dict[str, Any]:
    return {"activated": f"{namespace}/{name}", "by": principal.user, "via": principal.via}


@tiny.delete("/things/{name}")
async def delete_thing(
    name: str, principal: Annotated[Principal, Depends(require_auth("write", verb="delete"))]
) -> dict[str, str]:
    return {"deleted": name, "by": principal.user}


def build(auth: dict[str, Any], kube: KubeClient | None = None) -> FastAPI:
    app = create_app(parse_config({"auth": auth}), kube=kube)
    app.include_router(tiny)
    return app


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ACTIVATE = "/v1/test/workloads/team-a/job-1:activate"


# --- static tokens ------------------------------------------------------------------------------


@pytest.fixture
async def static() -> AsyncIterator[httpx.AsyncClient]:
    async with client(build({"staticTokens": [GOOD]})) as http:
        yield http


async def test_static_good_token(static: httpx.AsyncClient) -> None:
    resp = await static.post(ACTIVATE, headers=bearer(GOOD))
    assert resp.status_code == 200
    assert resp.json() == {"activated": "team-a/job-1", "by": "static-token-0", "via": "static"}


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({}, "missing bearer token"),
        (bearer(BAD), "invalid bearer token"),
        ({"Authorization": f"Basic {GOOD}"}, "unsupported Authorization header"),
    ],
)
async def test_static_missing_or_bad_token_is_401(
    static: httpx.AsyncClient, headers: dict[str, str], error: str
) -> None:
    resp = await static.post(ACTIVATE, headers=headers)
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert error in resp.json()["error"]


async def test_static_does_not_protect_reads_metrics_probes_or_verbs_by_default(
    static: httpx.AsyncClient,
) -> None:
    for path in ("/v1/gate", "/metrics", "/healthz", "/readyz"):
        assert (await static.get(path)).status_code == 200, path
    resp = await static.post("/scheduler/filter", content=json.dumps(FILTER))
    assert resp.status_code == 200


@pytest.mark.parametrize(
    ("flags", "protected", "open_"),
    [
        ({"protectReadOnly": True}, ["/v1/gate", "/v1/preemptions"], ["/metrics"]),
        ({"protectMetrics": True}, ["/metrics"], ["/v1/gate"]),
        ({"protectReadOnly": True, "protectMetrics": True}, ["/v1/gate", "/metrics"], []),
        ({"protectReadOnly": False, "protectMetrics": False}, [], ["/v1/gate", "/metrics"]),
    ],
)
async def test_protect_read_only_and_metrics(
    flags: dict[str, bool], protected: list[str], open_: list[str]
) -> None:
    async with client(build({"staticTokens": [GOOD], **flags})) as http:
        for path in protected:
            resp = await http.get(path)
            assert resp.status_code == 401, path
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
            assert "error" in resp.json()
            assert (await http.get(path, headers=bearer(BAD))).status_code == 401, path
            assert (await http.get(path, headers=bearer(GOOD))).status_code == 200, path
        for path in open_:
            assert (await http.get(path)).status_code == 200, path
        # Probes and the extender verbs are never behind auth.
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200
        resp = await http.post("/scheduler/filter", content=json.dumps(FILTER))
        assert resp.status_code == 200


async def test_mode_none_lets_mutations_through() -> None:
    async with client(build({"mode": "none"})) as http:
        resp = await http.post(ACTIVATE)
        assert resp.status_code == 200 and resp.json()["by"] == "system:anonymous"


def test_openapi_declares_the_bearer_scheme_on_guarded_routes() -> None:
    doc = build({"staticTokens": [GOOD]}).openapi()
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    route = doc["paths"]["/v1/test/workloads/{namespace}/{name}:activate"]["post"]
    assert route["security"] == [{"HTTPBearer": []}]


# --- kubernetes: TokenReview + SubjectAccessReview faked with respx --------------------------


class FakeApiServer:
    """respx routes for the two review APIs; ``allowed`` holds (user, verb, namespace)."""

    def __init__(self) -> None:
        self.router = respx.Router(base_url=KUBE, assert_all_called=False)
        self.users = {GOOD: {"username": "alice", "uid": "u-1", "groups": ["team-a"]}}
        self.allowed: set[tuple[str, str, str | None]] = {("alice", "update", "team-a")}
        self.reviews = self.router.post("/apis/authentication.k8s.io/v1/tokenreviews")
        self.reviews.side_effect = self._token_review
        self.sars = self.router.post("/apis/authorization.k8s.io/v1/subjectaccessreviews")
        self.sars.side_effect = self._sar

    def _token_review(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["kind"] == "TokenReview"
        assert request.headers["Authorization"] == "Bearer runway-sa-token"
        user = self.users.get(body["spec"]["token"])
        status = (
            {"authenticated": True, "user": user}
            if user
            else {"authenticated": False, "error": "invalid bearer token"}
        )
        return httpx.Response(201, json={**body, "status": status})

    def _sar(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        attrs = body["spec"].get("resourceAttributes") or body["spec"]["nonResourceAttributes"]
        ok = (body["spec"]["user"], attrs["verb"], attrs.get("namespace")) in self.allowed
        status = {"allowed": ok} if ok else {"allowed": False, "reason": "no RoleBinding"}
        return httpx.Response(201, json={**body, "status": status})

    def kube(self) -> KubeClient:
        cfg = Configuration()
        cfg.host = KUBE
        cfg.api_key = {"BearerToken": "Bearer runway-sa-token"}
        return KubeClient(
            ClusterAccess(cfg, "test"),
            transport=httpx.MockTransport(self.router.async_handler),
            retry=RetryPolicy(total=0),
        )


@pytest.fixture
def api() -> FakeApiServer:
    return FakeApiServer()


async def test_kubernetes_accepted(api: FakeApiServer) -> None:
    async with client(build({}, api.kube())) as http:  # auto mode: a cluster → kubernetes
        resp = await http.post(ACTIVATE, headers=bearer(GOOD))
        assert resp.status_code == 200, resp.text
        assert resp.json()["by"] == "alice" and resp.json()["via"] == "kubernetes"
        sar = json.loads(api.sars.calls.last.request.content)["spec"]
        assert sar == {
            "user": "alice",
            "uid": "u-1",
            "groups": ["team-a"],
            "resourceAttributes": {
                "verb": "update",
                "group": "runway.dev",
                "resource": "workloads",
                "namespace": "team-a",
                "name": "job-1",
            },
        }
        # Cached: a second call asks the API server nothing.
        assert (await http.post(ACTIVATE, headers=bearer(GOOD))).status_code == 200
        assert (api.reviews.call_count, api.sars.call_count) == (1, 1)


async def test_kubernetes_rejected_token(api: FakeApiServer) -> None:
    async with client(build({"mode": "kubernetes"}, api.kube())) as http:
        resp = await http.post(ACTIVATE, headers=bearer(BAD))
        assert resp.status_code == 401
        assert resp.headers["WWW-Authenticate"] == 'Bearer realm="runway", error="invalid_token"'
        assert api.sars.call_count == 0
        assert (await http.post(ACTIVATE)).status_code == 401  # no token: no review either
        assert api.reviews.call_count == 1


async def test_kubernetes_denied_sar_names_the_permission(api: FakeApiServer) -> None:
    async with client(build({"mode": "kubernetes"}, api.kube())) as http:
        resp = await http.post("/v1/test/workloads/team-b/job-9:activate", headers=bearer(GOOD))
        assert resp.status_code == 403
        error = resp.json()["error"]
        assert "'alice'" in error
        assert "update workloads.runway.dev named 'job-9' in namespace 'team-b'" in error
        assert "no RoleBinding" in error
        # A route-specific verb from require_auth("write", verb="delete").
        resp = await http.delete("/v1/test/things/x", headers=bearer(GOOD))
        assert resp.status_code == 403 and "may not delete workloads.runway.dev" in resp.text


async def test_kubernetes_configured_sar(api: FakeApiServer) -> None:
    api.allowed = {("alice", "patch", "team-a")}
    sar = {"verb": "patch", "group": "kueue.x-k8s.io", "resource": "workloads"}
    async with client(build({"mode": "kubernetes", "sar": sar}, api.kube())) as http:
        assert (await http.post(ACTIVATE, headers=bearer(GOOD))).status_code == 200
        attrs = json.loads(api.sars.calls.last.request.content)["spec"]["resourceAttributes"]
        assert (attrs["verb"], attrs["group"]) == ("patch", "kueue.x-k8s.io")


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("connection refused"),
        httpx.Response(503, json={"kind": "Status", "message": "etcd unavailable", "code": 503}),
        httpx.Response(403, json={"kind": "Status", "message": "cannot create tokenreviews"}),
    ],
)
async def test_kubernetes_api_down_is_503(
    api: FakeApiServer, failure: httpx.Response | Exception
) -> None:
    if isinstance(failure, Exception):
        api.reviews.side_effect = failure
    else:
        api.reviews.side_effect = None
        api.reviews.return_value = failure
    async with client(build({"mode": "kubernetes"}, api.kube())) as http:
        resp = await http.post(ACTIVATE, headers=bearer(GOOD))
        assert resp.status_code == 503
        assert resp.headers["Retry-After"] == "5"
        assert "cannot check the token" in resp.json()["error"]


async def test_kubernetes_protects_reads_and_metrics(api: FakeApiServer) -> None:
    api.allowed = {("alice", "get", None)}
    flags = {"mode": "kubernetes", "protectReadOnly": True, "protectMetrics": True}
    async with client(build(flags, api.kube())) as http:
        assert (await http.get("/v1/gate", headers=bearer(GOOD))).status_code == 200
        assert (await http.get("/metrics", headers=bearer(GOOD))).status_code == 200
        assert (await http.get("/metrics")).status_code == 401
        specs = [json.loads(c.request.content)["spec"] for c in api.sars.calls]
        assert specs[0]["resourceAttributes"]["verb"] == "get"
        assert specs[1]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        # Writing needs `update`, which alice lacks.
        assert (await http.post(ACTIVATE, headers=bearer(GOOD))).status_code == 403


async def test_auth_decisions_are_counted(static: httpx.AsyncClient) -> None:
    await static.post(ACTIVATE, headers=bearer(BAD))
    text = (await static.get("/metrics")).text
    assert 'runway_auth_decisions_total{result="unauthenticated",scope="write"}' in text


# --- a real process with a token file ----------------------------------------------------------


def test_process_with_token_file_and_protected_metrics(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{GOOD},prometheus\n")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"auth:\n  mode: static\n  staticTokenFile: {tokens}\n  protectMetrics: true\n"
    )
    with run_runway(tmp_path, ["--config", str(config)]) as runway:
        assert httpx.get(f"{runway.url}/metrics", timeout=5).status_code == 401
        resp = httpx.get(f"{runway.url}/metrics", headers=bearer(GOOD), timeout=5)
        assert resp.status_code == 200
        tokens.write_text(f"{BAD},prometheus\n")  # rotated: the old token stops working
        assert (
            httpx.get(f"{runway.url}/metrics", headers=bearer(GOOD), timeout=5).status_code == 401
        )
        assert httpx.get(f"{runway.url}/metrics", headers=bearer(BAD), timeout=5).status_code == 200


def test_process_warns_when_unauthenticated_beyond_loopback(tmp_path: Path) -> None:
    with run_runway(tmp_path, ["--host", "0.0.0.0"]) as runway:
        assert "NOT authenticated" in runway.logs()


async def test_the_token_forwarded_through_the_service_proxy_is_checked_alike(
    api: FakeApiServer,
) -> None:
    # The API server's service proxy removes Authorization; kubectl runway also sends the
    # user's token as X-Runway-Authorization, and runway reviews it like any other.
    api.allowed = {("alice", "get", None)}
    flags = {"mode": "kubernetes", "protectReadOnly": True}
    async with client(build(flags, api.kube())) as http:
        forwarded = {"X-Runway-Authorization": f"Bearer {GOOD}"}
        assert (await http.get("/v1/gate", headers=forwarded)).status_code == 200
        assert (await http.get("/v1/gate")).status_code == 401
        assert (await http.post(ACTIVATE, headers=forwarded)).status_code == 403
        bad = {"X-Runway-Authorization": f"Bearer {BAD}"}
        assert (await http.get("/v1/gate", headers=bad)).status_code == 401
