"""The gate keeper: gates mirrored on pods by a previous run are resumed or released at startup,
and held gates open as the cache sees the victims go."""

from __future__ import annotations

from app.clock import ManualClock
from app.config import RunwayConfig
from app.model import Pod
from app.model.gate import GATE_ANNOTATION, GateEntry, PodRef, encode_entry
from app.tasks.gatekeeper import GateKeeper
from app.tasks.preemption import PreemptionExecutor
from app.wiring import Runway, build
from tests.builders import pod as build_pod
from tests.builders import raw_pod
from tests.preemption_fakes import FakeApi

NOW = 1_800_000_000.0
P = PodRef("uid-p", "ns", "high")
V = (PodRef("uid-a", "ns", "a"), PodRef("uid-b", "ns", "b"))


def pod(ref: PodRef, annotations: dict[str, str] | None = None, node: str | None = "n1") -> Pod:
    raw = raw_pod(
        ref.name, namespace=ref.namespace, uid=ref.uid, annotations=annotations or {}, node=node
    )
    return build_pod(raw)


def runtime_with(api: FakeApi, pods: list[Pod]) -> Runway:
    rt = build(RunwayConfig(), clock=ManualClock(NOW))
    rt.cache.replace_pods(pods)
    rt.executor = PreemptionExecutor(api, rt.gate, rt.clock, recorder=api)
    return rt


def keeper(rt: Runway, api: FakeApi) -> GateKeeper:
    return GateKeeper(rt.gate, rt.cache, rt.executor, api, rt.clock)


def mirrored(deadline: float) -> dict[str, str]:
    entry = GateEntry(P, "n1", V, since=NOW - 10, deadline=deadline, holder="old-replica")
    return {GATE_ANNOTATION: encode_entry(entry)}


async def test_a_gate_left_in_flight_is_resumed_for_the_victims_still_there() -> None:
    api = FakeApi()
    rt = runtime_with(api, [pod(P, mirrored(NOW + 30), node=None), pod(V[0])])  # b is gone
    keeper(rt, api).resume_mirrored()
    assert rt.executor is not None
    await rt.executor.drain(5)
    record = rt.executor.recent()[0]
    assert record.result == "success"
    assert record.plan.victims == (V[0],)  # only the outstanding one
    assert ("delete", "ns/a", None) in api.calls
    assert rt.gate.get(P.uid) is not None  # held until the cache sees ns/a go


async def test_a_finished_or_expired_gate_is_released_with_its_annotation() -> None:
    api = FakeApi()
    rt = runtime_with(api, [pod(P, mirrored(NOW - 1), node=None), pod(V[0]), pod(V[1])])
    gk = keeper(rt, api)
    gk.resume_mirrored()
    await gk.stop()
    await rt.executor.drain(5)
    assert rt.executor.recent() == []
    assert ("mirror", "ns/high", False) in api.calls  # the stale annotation is removed
    assert rt.gate.get(P.uid) is None


async def test_a_held_gate_opens_when_the_cache_sees_the_victims_go() -> None:
    api = FakeApi()
    rt = runtime_with(api, [pod(P, node=None), pod(V[0]), pod(V[1])])
    gk = keeper(rt, api)
    rt.gate.hold(GateEntry(P, "n1", V, since=NOW, deadline=NOW + 60))
    rt.cache.delete_pod(pod(V[0]))
    assert gk.sweep() == 0 and rt.gate.get(P.uid) is not None
    rt.cache.delete_pod(pod(V[1]))
    assert rt.gate.held(pod(P, node=None), NOW) is None  # reads see it open at once
    assert gk.sweep() == 1 and rt.gate.get(P.uid) is None  # the keeper releases it
    await gk.stop()
    assert rt.executor is not None
    await rt.executor.drain(5)
