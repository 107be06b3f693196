"""The gate keeper: gates mirrored on WorkloadRecords by a previous run or another replica are
resumed (after the same cross-check against the cache a live ``preempt`` gets) or released at
startup, and held gates open as the cache sees the victims go."""

from __future__ import annotations

from typing import Any

from app.clock import ManualClock
from app.config import RunwayConfig
from app.model import Pod
from app.model.gate import GateEntry, PodRef, PreemptionPlan
from app.tasks.gatekeeper import GateKeeper
from app.wiring import Runway, build
from tests.builders import pod as build_pod
from tests.builders import preemption_executor, raw_pod
from tests.preemption_fakes import FakeApi

NOW = 1_800_000_000.0
P = PodRef("uid-p", "ns", "high")
V = (PodRef("uid-a", "ns", "a"), PodRef("uid-b", "ns", "b"))


def pod(ref: PodRef, node: str | None = "n1", priority: int = 0) -> Pod:
    raw = raw_pod(ref.name, namespace=ref.namespace, uid=ref.uid, node=node)
    raw["spec"]["priority"] = priority
    return build_pod(raw)


def preemptor() -> Pod:
    return pod(P, node=None, priority=10)


def runtime_with(api: FakeApi, pods: list[Pod]) -> Runway:
    rt = build(RunwayConfig(), clock=ManualClock(NOW))
    rt.cache.replace_pods(pods)
    rt.executor = preemption_executor(api, rt.gate, rt.clock, recorder=api)
    return rt


def keeper(rt: Runway, api: FakeApi, **options: Any) -> GateKeeper:
    return GateKeeper(rt.gate, rt.cache, rt.executor, api, rt.clock, mirror=api, **options)


def mirror(rt: Runway, deadline: float, victims: tuple[PodRef, ...] = V, node: str = "n1") -> None:
    """A gate another replica (or an earlier run) recorded on the preemptor's WorkloadRecord."""
    entry = GateEntry(P, node, victims, since=NOW - 10, deadline=deadline, holder="old-replica")
    rt.gate.set_mirrored(P.uid, entry)


async def test_a_gate_left_in_flight_is_resumed_for_the_victims_still_there() -> None:
    api = FakeApi()
    rt = runtime_with(api, [preemptor(), pod(V[0])])  # b is gone
    mirror(rt, NOW + 30)
    keeper(rt, api).resume_mirrored()
    assert rt.executor is not None
    await rt.executor.drain(5)
    record = rt.executor.recent()[0]
    assert record.result == "success"
    assert record.plan.victims == (V[0],)  # only the outstanding one
    assert record.plan.priority == 10  # the cache's priority, not the record's
    assert ("delete", "ns/a", None) in api.calls
    assert rt.gate.get(P.uid) is not None  # held until the cache sees ns/a go


async def test_a_finished_or_expired_gate_is_released_with_its_mirror() -> None:
    api = FakeApi()
    rt = runtime_with(api, [preemptor(), pod(V[0]), pod(V[1])])
    mirror(rt, NOW - 1)
    gk = keeper(rt, api)
    gk.resume_mirrored()
    await gk.stop()
    await rt.executor.drain(5)
    assert rt.executor.recent() == []
    assert ("mirror", "ns/high", False) in api.calls  # the stale mirror is removed
    assert rt.gate.get(P.uid) is None


async def test_a_mirrored_gate_that_fails_the_cross_check_is_released_and_nothing_called() -> None:
    """Whatever a record says, runway deletes only what a live ``preempt`` would: a victim of
    another namespace with a higher priority, or one on another node, is never touched."""
    other = PodRef("uid-x", "tenant-b", "important")
    for victims, node, pods in (
        ((other,), "n1", [preemptor(), pod(other, priority=1000)]),  # priority above
        ((V[0],), "n1", [preemptor(), pod(V[0], node="n2")]),  # not on that node
        ((V[0],), "n1", [pod(V[0])]),  # preemptor unknown to the cache
    ):
        api = FakeApi()
        rt = runtime_with(api, pods)
        mirror(rt, NOW + 30, victims, node)
        gk = keeper(rt, api)
        gk.resume_mirrored()
        await gk.stop()
        await rt.executor.drain(5)
        assert rt.executor.recent() == []
        assert not [c for c in api.calls if c[0] in ("delete", "condition", "record")]


async def test_a_held_gate_opens_when_the_cache_sees_the_victims_go() -> None:
    api = FakeApi()
    rt = runtime_with(api, [preemptor(), pod(V[0]), pod(V[1])])
    gk = keeper(rt, api)
    rt.gate.hold(GateEntry(P, "n1", V, since=NOW, deadline=NOW + 60))
    rt.cache.delete_pod(pod(V[0]))
    assert gk.sweep() == 0 and rt.gate.get(P.uid) is not None
    rt.cache.delete_pod(pod(V[1]))
    assert rt.gate.held(preemptor(), NOW) is None  # reads see it open at once
    assert gk.sweep() == 1 and rt.gate.get(P.uid) is None  # the keeper releases it
    await gk.stop()
    assert rt.executor is not None
    await rt.executor.drain(5)


async def test_the_end_of_a_failed_preemptions_back_off_wakes_the_preemptor() -> None:
    """kube-scheduler parks the preemptor while ``preempt`` is vetoed during the back-off; the
    mirror's removal writes a WorkloadRecord, not the pod, so the keeper asks for a touch
    (``on_retry``) when it releases the gate — and only then, not for a gate that held."""
    api = FakeApi()
    api.fail = lambda op, pod: RuntimeError("refused") if op == "delete" else None
    rt = runtime_with(api, [preemptor(), pod(V[0]), pod(V[1])])
    gk = keeper(rt, api)
    woken: list[str] = []
    gk.on_retry = woken.append
    assert rt.executor is not None
    await rt.executor.run(PreemptionPlan(P, "n1", V, message="m"))
    assert rt.executor.recent()[0].result == "error"
    assert gk.sweep() == 0 and woken == []  # backing off: the gate holds
    assert isinstance(rt.clock, ManualClock)
    rt.clock.advance(1.0)  # the first failure's back-off (1 s)
    assert gk.sweep() == 1 and rt.gate.get(P.uid) is None
    assert woken == [P.uid]
    # A gate released because its victims went asks for nothing (the waker's freed_by does).
    api.fail = lambda op, pod: None
    rt.gate.hold(GateEntry(P, "n1", V, since=rt.clock.now(), deadline=rt.clock.now() + 60))
    rt.gate.finish(P.uid, ok=True)
    rt.cache.delete_pod(pod(V[0]))
    rt.cache.delete_pod(pod(V[1]))
    assert gk.sweep() == 1 and woken == [P.uid]
    await gk.stop()
    await rt.executor.drain(5)


async def test_where_a_touch_requeues_nothing_the_end_of_the_back_off_reruns_the_calls() -> None:
    """Takeover from 1.32 (``rerun_failed``): kube-scheduler re-queues a preemptor rejected by
    NodeResourcesFit only on a resource event, so a touch would not bring it back; the keeper
    re-runs the failed preemption's calls for the victims still running instead. Once the
    refusal ends, the DELETE that succeeds is the event that re-queues the preemptor."""
    api = FakeApi()
    api.fail = lambda op, pod: RuntimeError("refused") if op == "delete" else None
    rt = runtime_with(api, [preemptor(), pod(V[0]), pod(V[1])])
    gk = keeper(rt, api, rerun_failed=lambda: True)
    woken: list[str] = []
    gk.on_retry = woken.append
    assert rt.executor is not None and isinstance(rt.clock, ManualClock)
    await rt.executor.run(PreemptionPlan(P, "n1", V, message="m"))
    rt.cache.delete_pod(pod(V[1]))  # b went anyway; a still runs
    rt.clock.advance(1.0)
    api.fail = lambda op, pod: None  # the refusal ended
    assert gk.sweep() == 1
    assert woken == []  # re-run, not touched
    await rt.executor.drain(5)
    rerun = rt.executor.recent()[0]  # newest first
    assert rerun.result == "success" and rerun.plan.victims == (V[0],)
    assert "retried after a refused call" in rerun.plan.message
    assert [c for c in api.calls if c[0] == "delete"][-1] == ("delete", "ns/a", None)
    # the re-run mirrored its own entry; the released one's mirror was not removed under it
    assert ("mirror", "ns/high", False) not in api.calls
    await gk.stop()


async def test_a_rerun_the_cross_check_refuses_wakes_the_preemptor_instead() -> None:
    """The preemptor bound elsewhere meanwhile (or gone): nothing is called; it is woken as on
    any release (the waker skips a pod that is not pending)."""
    api = FakeApi()
    api.fail = lambda op, pod: RuntimeError("refused") if op == "delete" else None
    rt = runtime_with(api, [preemptor(), pod(V[0])])
    gk = keeper(rt, api, rerun_failed=lambda: True)
    woken: list[str] = []
    gk.on_retry = woken.append
    assert rt.executor is not None and isinstance(rt.clock, ManualClock)
    await rt.executor.run(PreemptionPlan(P, "n1", (V[0],), message="m"))
    rt.cache.replace_pods([pod(P, node="n2", priority=10), pod(V[0])])  # bound elsewhere
    rt.clock.advance(1.0)
    calls = len(api.calls)
    assert gk.sweep() == 1 and woken == [P.uid]
    await rt.executor.drain(5)
    assert len(rt.executor.recent()) == 1 and len(api.calls) == calls
    await gk.stop()
