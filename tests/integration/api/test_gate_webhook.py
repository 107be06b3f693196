"""runway's mutating webhook (``POST /webhooks/gate``, DESIGN §5.8, issue #34) over real HTTP on
loopback: an AdmissionReview v1 of a pod CREATE is answered allowed, with a JSONPatch appending
``runway.dev/admission`` to a pod runway will manage, and nothing for any other pod; a bad body
is a 400 (kube-apiserver then applies ``failurePolicy: Ignore``); no credentials needed."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app import metrics
from app.api import webhook
from app.api.listeners import side_of
from app.connections import bounded_protocol
from app.policy.schedgate import GATE
from app.server import create_app
from tests.builders import raw_pod, runway_config
from tests.jsonpatch import apply_patch
from tests.served import serve_in_thread

TOKEN = "0123456789abcdef0123456789abcdef"
BASE: dict[str, Any] = {
    "kubernetes": {"schedulerVersion": "1.34.4"},
    "preemption": {"schedulerNames": ["runway-scheduler"]},
    "scope": {"namespaceQueues": {"mapped": "research"}},
    "auth": {"mode": "static", "staticTokens": [TOKEN], "protectReadOnly": True},
}


def serve(config: dict[str, Any]) -> Iterator[str]:
    app = create_app(runway_config(config))
    # no lifespan here: take the release from the config as `start` does
    asyncio.run(app.state.runway.detect_release())
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture
def url() -> Iterator[str]:
    yield from serve(BASE)


def review(
    namespace: str = "team-a",
    *,
    labels: dict[str, str] | None = None,
    scheduler: str = "runway-scheduler",
    gates: list[str] | None = None,
    operation: str = "CREATE",
    object_namespace: bool = False,
) -> dict[str, Any]:
    pod = raw_pod(
        "p", namespace=namespace, labels={"runway.dev/queue": "research"} | (labels or {})
    )
    pod["spec"]["schedulerName"] = scheduler
    del pod["spec"]["nodeName"]
    if not object_namespace:
        del pod["metadata"]["namespace"]  # a CREATE body often names none: the URL does
    if gates is not None:
        pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "review-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": pod,
        },
    }


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = httpx.post(f"{url}/webhooks/gate", json=body, timeout=5)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "review-1" and answer["response"]["allowed"] is True
    return answer["response"]


def patched(body: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = apply_patch(body["request"]["object"], patch)
    return result


def test_a_pod_runway_manages_is_gated(url: str) -> None:
    gated = metrics.WEBHOOK_REVIEWS.labels("gated")
    before = gated._value.get()
    body = review()
    pod = patched(body, post(url, body))
    assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
    assert gated._value.get() == before + 1


def test_the_gate_is_appended_after_the_pods_own_gates(url: str) -> None:
    body = review(gates=["example.com/quota"])
    pod = patched(body, post(url, body))
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == ["example.com/quota", GATE]


@pytest.mark.parametrize(
    ("case", "body"),
    [
        ("another scheduler's pod", review(scheduler="default-scheduler")),
        ("kube-system", review("kube-system", object_namespace=True)),
        ("no queue and the namespace unmapped", review(labels={"runway.dev/queue": ""})),
        ("gated already (a reinvocation)", review(gates=[GATE])),
        ("not a CREATE", review(operation="UPDATE")),
    ],
)
def test_any_other_pod_passes_untouched(url: str, case: str, body: dict[str, Any]) -> None:
    response = post(url, body)
    assert "patch" not in response, case


def test_the_namespace_comes_from_the_request_when_the_pod_names_none(url: str) -> None:
    body = review("mapped", labels={"runway.dev/queue": ""})
    assert "namespace" not in body["request"]["object"]["metadata"]
    assert patched(body, post(url, body))["spec"]["schedulingGates"] == [{"name": GATE}]


@pytest.mark.parametrize(
    "change",
    [
        {"kubernetes": {"schedulerVersion": "1.20.2"}},  # no gates on the release
        {"kubernetes": {"schedulerVersion": "1.37.2"}, "admission": {"schedulingGates": False}},
    ],
)
def test_no_gate_where_holds_are_not_gates(change: dict[str, Any]) -> None:
    for url in serve(BASE | change):
        assert "patch" not in post(url, review())


def test_a_bad_review_is_a_400_and_no_credentials_are_asked(url: str) -> None:
    bad = metrics.WEBHOOK_REVIEWS.labels("bad_request")
    before = bad._value.get()
    for body in (b"{not json", b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "X"}'):
        resp = httpx.post(f"{url}/webhooks/gate", content=body, timeout=5)
        assert resp.status_code == 400 and "webhook" in resp.json()["error"]
    assert bad._value.get() == before + 2
    # protectReadOnly guards /v1; the webhook (kube-apiserver sends no token) is open
    assert httpx.get(f"{url}/v1/config", timeout=5).status_code == 401


def test_a_burst_of_reviews_is_answered_fast(url: str) -> None:
    """A loose bound here (a shared 2-core machine); bench/gates.py measures the p99."""
    body = json.dumps(review()).encode()
    times = []
    with httpx.Client(base_url=url, timeout=5) as client:
        for _ in range(200):
            resp = client.post("/webhooks/gate", content=body)
            assert resp.status_code == 200
            times.append(resp.elapsed.total_seconds())
    times.sort()
    assert times[int(len(times) * 0.5)] < 0.05


def test_with_a_rest_port_the_webhook_is_served_there() -> None:
    """kube-apiserver presents no client certificate: the REST port (no client certificate
    required) serves the webhook, the verbs' port (mutual TLS in the chart) does not."""
    assert side_of("/webhooks/gate", "/scheduler") == "rest"


def test_the_connection_answers_the_webhook_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under runway's own HTTP protocol the review never enters ASGI (its route is made to fail
    here), with kube-apiserver's ``?timeout=2s`` query and all; a verb with a query still takes
    the ASGI path."""
    app = create_app(runway_config(BASE))
    asyncio.run(app.state.runway.detect_release())

    async def not_here(request: Any) -> Any:
        raise AssertionError("the ASGI route answered")

    monkeypatch.setattr(webhook, "serve_review", not_here)
    server = app.state.runway.config.server
    protocol = bounded_protocol(server, direct=app.direct_verbs())
    with serve_in_thread(app, http=protocol) as url:
        body = review()
        for path in ("/webhooks/gate", "/webhooks/gate?timeout=2s"):
            resp = httpx.post(f"{url}{path}", json=body, timeout=5)
            assert resp.status_code == 200, resp.text
            assert patched(body, resp.json()["response"])["spec"]["schedulingGates"]
        resp = httpx.post(f"{url}/webhooks/gate", content=b"{", timeout=5)
        assert resp.status_code == 400 and "webhook" in resp.json()["error"]
    rest_only = app.direct_verbs(verbs=False)
    assert set(rest_only.paths) == {b"/webhooks/gate"}
    assert b"/webhooks/gate" not in app.direct_verbs(webhook=False).paths
