"""Preemption API calls against a faked API server (respx): faults, latency, the revert path."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx

from app.clock import ManualClock
from app.kube.pods import KubePodWriter
from app.model.gate import PodRef, PreemptionPlan
from app.state.gate import GateBook
from app.tasks.preemption import PreemptionExecutor
from tests.builders import cluster_cache, preemption_executor
from tests.integration.kube_helpers import client

P = PodRef("uid-p", "ns", "high")
V = (PodRef("uid-a", "ns", "low-a"), PodRef("uid-b", "ns", "low-b"))
PLAN = PreemptionPlan(P, "node-0", V, "Preempted by ns/high", "reclaim 0s")
POD_PATH = "https://kube.test/api/v1/namespaces/ns/pods"


def api_server(router: respx.Router, *, delete_status: dict[str, int] | None = None) -> None:
    """Every pod call succeeds (200), except DELETE answers per victim name."""
    statuses = delete_status or {}

    def delete(request: httpx.Request, name: str) -> httpx.Response:
        code = statuses.get(name, 200)
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "code": code,
            "reason": {404: "NotFound", 409: "Conflict", 500: "InternalError"}.get(code, ""),
            "message": f"pods {name!r} status {code}",
        }
        return httpx.Response(code, json=body if code != 200 else {"kind": "Pod"})

    router.patch(url__regex=rf"{POD_PATH}/[^/]+(/status)?$").mock(
        return_value=httpx.Response(200, json={"kind": "Pod"})
    )
    router.delete(url__regex=rf"{POD_PATH}/(?P<name>[^/]+)$").mock(side_effect=delete)


def executor(router: respx.Router) -> tuple[PreemptionExecutor, GateBook]:
    gate = GateBook(cluster_cache())
    transport = httpx.MockTransport(router.async_handler)
    pods = KubePodWriter(client(transport, retry_total=0.3))
    return preemption_executor(pods, gate, ManualClock(), revert_timeout_s=1), gate


def calls(router: respx.Router) -> list[tuple[str, str, object]]:
    out = []
    for call in router.calls:
        req = call.request
        body = json.loads(req.content) if req.content else None
        out.append((req.method, req.url.path, body))
    return out


async def test_the_calls_their_order_and_bodies() -> None:
    router = respx.Router(assert_all_called=False)
    api_server(router)
    ex, gate = executor(router)
    record = await ex.run(PLAN)
    assert record.result == "success", record.error
    seen = calls(router)
    # No write to the preemptor's metadata (the gate is mirrored on its WorkloadRecord, not on
    # the pod): first the nomination on the preemptor's status...
    assert not [c for c in seen if c[0] == "PATCH" and c[1] == "/api/v1/namespaces/ns/pods/high"]
    assert seen[0][1] == "/api/v1/namespaces/ns/pods/high/status"
    assert seen[0][2] == {"status": {"nominatedNodeName": "node-0"}}
    # ...then per victim: DisruptionTarget by strategic merge on pods/status, then DELETE
    # with a UID precondition...
    for victim in V:
        mine = [(m, p, b) for m, p, b in seen if victim.name in p]
        assert [m for m, _, _ in mine] == ["PATCH", "DELETE"]
        cond = mine[0][2]["status"]["conditions"][0]  # type: ignore[index]
        assert cond["type"] == "DisruptionTarget" and cond["reason"] == "PreemptionByScheduler"
        # the condition too carries the UID: never written on a pod re-created under that name
        assert mine[0][2]["metadata"] == {"uid": victim.uid}  # type: ignore[index]
        assert mine[1][2]["preconditions"] == {"uid": victim.uid}  # type: ignore[index]
    strategic = [
        c.request.headers["content-type"]
        for c in router.calls
        if c.request.url.path.endswith("low-a/status")
    ]
    assert strategic == ["application/strategic-merge-patch+json"]
    assert gate.get(P.uid) is not None


@pytest.mark.parametrize("code", [404, 409])
async def test_a_victim_already_gone_or_replaced_counts_as_done(code: int) -> None:
    router = respx.Router(assert_all_called=False)
    api_server(router, delete_status={"low-a": code})
    ex, _ = executor(router)
    record = await ex.run(PLAN)
    assert record.result == "success", record.error


UID_IMMUTABLE = 'Pod "low-a" is invalid: metadata.uid: Invalid value: "uid-a": field is immutable'


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [(404, "NotFound", "gone"), (409, "Conflict", "conflict"), (422, "Invalid", UID_IMMUTABLE)],
)
async def test_a_victim_gone_or_replaced_before_its_mark_is_neither_deleted_nor_announced(
    code: int, reason: str, message: str
) -> None:
    # 422 on the status patch (what kube-apiserver 1.20 answers when the body's metadata.uid is
    # not the pod's): the name belongs to another pod now — runway must not delete it, count its
    # workload evicted or tell its namespace it was.
    router = respx.Router(assert_all_called=False)
    router.patch(url__regex=rf"{POD_PATH}/low-a/status$").mock(  # before the catch-all routes
        return_value=httpx.Response(
            code, json={"kind": "Status", "code": code, "reason": reason, "message": message}
        )
    )
    api_server(router)
    ex, _ = executor(router)
    notes: list[object] = []
    ex._events.emit = notes.append  # type: ignore[method-assign]
    record = await ex.run(PLAN)
    assert record.result == "success", record.error
    seen = calls(router)
    assert [m for m, p, _ in seen if "low-a" in p] == ["PATCH"]
    assert [m for m, p, _ in seen if "low-b" in p] == ["PATCH", "DELETE"]
    about = [n.regarding.name for n in notes]  # type: ignore[attr-defined]
    assert "low-b" in about and "low-a" not in about


async def test_a_persistent_5xx_fails_the_task_and_reverts_the_nomination() -> None:
    router = respx.Router(assert_all_called=False)
    api_server(router, delete_status={"low-b": 500})
    ex, gate = executor(router)
    record = await ex.run(PLAN)
    assert record.result == "error"
    assert "500" in record.error or "InternalError" in record.error
    deletes = [
        c
        for c in router.calls
        if c.request.method == "DELETE" and c.request.url.path.endswith("low-b")
    ]
    assert len(deletes) > 1, "5xx on an idempotent call is retried within the bound"
    assert calls(router)[-1][2] == {"status": {"nominatedNodeName": None}}
    # The gate backs off (1 s after a first failure), then the gate keeper releases it and
    # removes the annotation.
    entry = gate.get(P.uid)
    assert entry is not None and gate.backing_off(P.uid)
    assert gate.check(entry, now=ManualClock().now() + 1).open


async def test_preempt_answers_before_any_call_completes_and_timeouts_fail_cleanly() -> None:
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()  # the API server hangs until the test lets it go
        return httpx.Response(200, json={"kind": "Pod"})

    router = respx.Router(assert_all_called=False)
    router.route().mock(side_effect=slow)
    ex, gate = executor(router)
    record = ex.submit(PLAN)
    await asyncio.sleep(0)
    assert record.result == "running" and router.calls.call_count <= 1
    assert gate.get(P.uid) is not None
    await ex.drain(0.05)  # shutdown: the hung task is cancelled, nothing left pending
    assert record.result == "cancelled"
    assert ex.pending_tasks() == 0
    release.set()
