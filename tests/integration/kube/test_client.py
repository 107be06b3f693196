"""The verb-family client over respx: typed errors, retries and their bounds, Retry-After,
per-request tokens that follow a rotated token file, request shapes and metrics."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from app import metrics
from app.config.kubernetes import KubernetesConfig
from app.kube.access import load_access
from app.kube.client import KubeClient, connect
from app.kube.errors import (
    AlreadyExists,
    ApiUnavailable,
    Conflict,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)
from app.kube.resources import LEASES, NODES, PODS
from app.kube.retry import Backoff, RetryPolicy
from app.model import Pod
from tests.integration.kube_fake import status
from tests.integration.kube_helpers import access

BASE = "https://kube.test"
POD_PATH = "/api/v1/namespaces/ns1/pods/p1"


POD = {"metadata": {"name": "p1", "namespace": "ns1", "uid": "u1", "resourceVersion": "7"}}


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(base_url=BASE, assert_all_called=False)


def make(router: respx.Router, total: float = 30.0, sleeps: Sleeps | None = None) -> KubeClient:
    policy = RetryPolicy(
        total=total, backoff=Backoff(base=0.01, cap=0.02), sleep=sleeps or Sleeps()
    )
    return KubeClient(access(), transport=httpx.MockTransport(router.async_handler), retry=policy)


def count(verb: str, resource: str, code: str) -> float:
    value: float = metrics.KUBE_API_REQUESTS.labels(verb, resource, code)._value.get()
    return value


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (422, "Invalid", Invalid),
        (500, "InternalError", ServerError),
    ],
)
async def test_errors_are_typed_from_the_status_body(
    router: respx.Router, code: int, reason: str, error: type[Exception]
) -> None:
    router.post("/api/v1/namespaces/ns1/pods").respond(
        code, json=status(code, reason, f'pods "p1" {reason}')
    )
    kube = make(router)
    with pytest.raises(error) as info:
        await kube.create(PODS, POD, "ns1", into=Pod)
    assert info.value.code == code  # type: ignore[attr-defined]
    assert reason in str(info.value) and 'pods "p1"' in str(info.value)
    await kube.aclose()


async def test_429_retry_after_is_honoured(router: respx.Router) -> None:
    route = router.get(POD_PATH)
    route.side_effect = [
        httpx.Response(
            429, headers={"Retry-After": "3"}, json=status(429, "TooManyRequests", "slow down")
        ),
        httpx.Response(200, json=POD),
    ]
    sleeps = Sleeps()
    kube = make(router, sleeps=sleeps)
    pod = await kube.get(PODS, "p1", "ns1", into=Pod)
    assert pod.uid == "u1" and route.call_count == 2
    assert sleeps.waits == [3.0]
    await kube.aclose()


async def test_429_retry_after_really_waits(router: respx.Router) -> None:
    route = router.get(POD_PATH)
    route.side_effect = [
        httpx.Response(429, headers={"Retry-After": "1"}, json=status(429, "TooManyRequests", "x")),
        httpx.Response(200, json=POD),
    ]
    kube = KubeClient(access(), transport=httpx.MockTransport(router.async_handler))
    start = time.monotonic()
    await kube.get(PODS, "p1", "ns1", into=Pod)
    assert time.monotonic() - start >= 1.0
    await kube.aclose()


async def test_429_beyond_the_retry_bound_fails_at_once(router: respx.Router) -> None:
    router.get(POD_PATH).respond(
        429, headers={"Retry-After": "60"}, json=status(429, "TooManyRequests", "x")
    )
    sleeps = Sleeps()
    kube = make(router, total=5, sleeps=sleeps)
    with pytest.raises(TooManyRequests) as info:
        await kube.get(PODS, "p1", "ns1", into=Pod)
    assert info.value.retry_after == 60 and sleeps.waits == []
    await kube.aclose()


async def test_idempotent_calls_retry_5xx_but_create_does_not(router: respx.Router) -> None:
    get = router.get(POD_PATH)
    get.side_effect = [
        httpx.Response(503),
        httpx.ConnectError("refused"),
        httpx.Response(200, json=POD),
    ]
    post = router.post("/api/v1/namespaces/ns1/pods").respond(500, json=status(500, "", "etcd"))
    kube = make(router)
    assert (await kube.get(PODS, "p1", "ns1", into=Pod)).uid == "u1"
    assert get.call_count == 3
    with pytest.raises(ServerError):
        await kube.create(PODS, POD, "ns1", into=Pod)
    assert post.call_count == 1
    await kube.aclose()


async def test_retries_stop_at_the_total_bound(router: respx.Router) -> None:
    route = router.get(POD_PATH).respond(503)
    kube = KubeClient(
        access(),
        transport=httpx.MockTransport(router.async_handler),
        retry=RetryPolicy(total=0.3, backoff=Backoff(base=0.05, cap=0.05)),
    )
    start = time.monotonic()
    with pytest.raises(ServerError):
        await kube.get(PODS, "p1", "ns1", into=Pod)
    assert time.monotonic() - start < 1.0
    assert 2 <= route.call_count <= 12
    await kube.aclose()


async def test_connection_failure_is_typed(router: respx.Router) -> None:
    router.get(POD_PATH).mock(side_effect=httpx.ConnectError("refused"))
    kube = make(router, total=0)
    with pytest.raises(ApiUnavailable):
        await kube.get(PODS, "p1", "ns1", into=Pod)
    await kube.aclose()


async def test_request_shapes_and_metrics(router: respx.Router) -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=POD)

    router.route().mock(side_effect=record)
    kube = make(router)
    before = count("patch", "pods/status", "200")
    await kube.patch(
        PODS,
        "p1",
        {"status": {"conditions": [{"type": "DisruptionTarget"}]}},
        "ns1",
        into=Pod,
        subresource="status",
    )
    await kube.patch(
        PODS, "p1", {"metadata": {"labels": {"a": "b"}}}, "ns1", into=Pod, patch_type="merge"
    )
    await kube.patch(
        PODS, "p1", [{"op": "add", "path": "/x", "value": 1}], "ns1", into=Pod, patch_type="json"
    )
    await kube.delete(PODS, "p1", "ns1", uid="u1", grace_period_seconds=0)
    await kube.get(NODES, "n1", into=dict[str, Any])
    await kube.get(LEASES, "runway", "kube-system", into=dict[str, Any])
    await kube.create(
        PODS,
        {"target": {"name": "n1"}},
        "ns1",
        name="p1",
        subresource="binding",
        into=dict[str, Any],
    )
    assert [(r.method, r.url.path, r.headers.get("content-type")) for r in seen] == [
        (
            "PATCH",
            "/api/v1/namespaces/ns1/pods/p1/status",
            "application/strategic-merge-patch+json",
        ),
        ("PATCH", "/api/v1/namespaces/ns1/pods/p1", "application/merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/ns1/pods/p1", "application/json-patch+json"),
        ("DELETE", "/api/v1/namespaces/ns1/pods/p1", "application/json"),
        ("GET", "/api/v1/nodes/n1", None),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/runway", None),
        ("POST", "/api/v1/namespaces/ns1/pods/p1/binding", "application/json"),
    ]
    delete_options = json.loads(seen[3].content)
    assert delete_options["preconditions"] == {"uid": "u1"}
    assert delete_options["gracePeriodSeconds"] == 0
    assert all(r.headers["authorization"] == "Bearer t0k3n" for r in seen)
    assert count("patch", "pods/status", "200") == before + 1
    await kube.aclose()


def _kubeconfig(tmp_path: Path, user: str, cluster_extra: str = "") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{BASE}"{cluster_extra}}}
users:
- name: u
  user: {user}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
"""
    )
    return path


async def test_rotated_token_file_is_used_by_the_next_request(
    tmp_path: Path, router: respx.Router
) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    config = _kubeconfig(tmp_path, "{tokenFile: token}", ", insecure-skip-tls-verify: true")
    seen: list[str] = []
    router.get(POD_PATH).mock(
        side_effect=lambda r: (
            seen.append(r.headers["authorization"]),
            httpx.Response(200, json=POD),
        )[1]
    )
    kube = connect(
        KubernetesConfig(kubeconfig=str(config)),
        transport=httpx.MockTransport(router.async_handler),
        environ={},
    )
    assert kube is not None
    await kube.get(PODS, "p1", "ns1", into=Pod)
    # The kubelet rotates a projected token by replacing the file.
    replacement = tmp_path / "token.new"
    replacement.write_text("second-and-longer\n")
    replacement.replace(token)
    await kube.get(PODS, "p1", "ns1", into=Pod)
    assert seen == ["Bearer first", "Bearer second-and-longer"]
    await kube.aclose()


async def test_in_cluster_token_rotation(tmp_path: Path, router: respx.Router) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("one")
    (sa / "ca.crt").write_text("not really a cert")
    (sa / "namespace").write_text("runway-system")
    env = {"KUBERNETES_SERVICE_HOST": "kube.test", "KUBERNETES_SERVICE_PORT": "443"}
    found = load_access(environ=env, service_account_dir=str(sa))
    assert found is not None
    assert found.source == "in-cluster" and found.namespace == "runway-system"
    assert found.host == "https://kube.test:443"
    assert found.authorization() == "Bearer one"
    (sa / "token.tmp").write_text("two")
    (sa / "token.tmp").replace(sa / "token")
    assert found.authorization() == "Bearer two"


def test_access_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = _kubeconfig(tmp_path, '{token: "abc"}')
    assert load_access(None, environ={}) is None
    got = load_access(str(explicit), environ={"KUBECONFIG": "/does/not/exist"})
    assert got is not None and got.source == f"kubeconfig {explicit}"
    assert got.authorization() == "Bearer abc"
    via_env = load_access(None, environ={"KUBECONFIG": str(explicit)})
    assert via_env is not None and via_env.host == BASE
    # TLS verification is on unless the kubeconfig says otherwise.
    assert via_env.ssl_context().verify_mode.name == "CERT_REQUIRED"


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    config = _kubeconfig(tmp_path, '{token: "abc"}', ", insecure-skip-tls-verify: true")
    got = load_access(str(config), environ={})
    assert got is not None
    ctx = got.ssl_context()
    assert ctx.verify_mode.name == "CERT_NONE" and not ctx.check_hostname


def test_unusable_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    from app.config import ConfigError

    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ConfigError, match="cannot use kubeconfig"):
        connect(KubernetesConfig(), kubeconfig=str(bad), environ={})
    with pytest.raises(ConfigError, match="cannot use kubeconfig"):
        connect(KubernetesConfig(), kubeconfig=str(tmp_path / "missing"), environ={})


async def test_an_answer_is_freed_as_soon_as_it_is_read_not_by_the_cyclic_gc() -> None:
    """httpx's Response and its stream refer to each other: unbroken, every LIST page (4 MB at
    500 pods) waits for a cyclic collection, and a resync piled up 600 MB of them
    (bench.scale). The client breaks the cycle once the body is read. (A plain transport:
    respx keeps every answer in its call history.)"""
    body = json.dumps({"items": [POD] * 50}).encode()

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body)

    kube = KubeClient(access(), transport=httpx.MockTransport(answer))
    gc.collect()
    gc.disable()
    try:
        # Answers other tests keep (respx's call history) are not this test's business.
        before = {id(o) for o in gc.get_objects() if isinstance(o, httpx.Response)}
        for _ in range(5):
            await kube.list(PODS, "ns1", into=dict[str, Any], limit=50)
            await kube.get(PODS, "p1", "ns1", into=Pod)
        alive = [
            o for o in gc.get_objects() if isinstance(o, httpx.Response) and id(o) not in before
        ]
    finally:
        gc.enable()
        await kube.aclose()
    assert alive == []
