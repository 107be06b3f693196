"""The preemption executor with a fake API: latency, faults, the gate, shutdown."""

from __future__ import annotations

import pytest

from app import metrics
from app.clock import ManualClock
from app.model.gate import (
    GateEntry,
    PodRef,
    PreemptionPlan,
)
from app.policy.gate import VictimState, check_gate
from app.state.gate import GateBook
from app.tasks.preemption import MIRROR_KEPT_S, PreemptionExecutor
from tests.builders import cluster_cache, preemption_executor
from tests.preemption_fakes import FakeApi

P = PodRef("uid-p", "default", "high-0")
VICTIMS = tuple(PodRef(f"uid-v{i}", "default", f"low-{i}") for i in range(3))
PLAN = PreemptionPlan(
    preemptor=P,
    node="node-0",
    victims=VICTIMS,
    message="preempted by default/high-0",
    rule="reclaim: team-a reclaimMinRuntime 0s",
)


def executor(api: FakeApi, clock: ManualClock | None = None) -> tuple[PreemptionExecutor, GateBook]:
    gate = GateBook(cluster_cache())
    return preemption_executor(
        api, gate, clock or ManualClock(), gate_bound_s=60, revert_timeout_s=0.1, recorder=api
    ), gate


async def test_submit_returns_before_any_call_completes() -> None:
    api = FakeApi()
    api.release.clear()
    ex, gate = executor(api)
    record = ex.submit(PLAN)
    assert record.result == "running"
    assert gate.get(P.uid) is not None
    await api.started.wait()
    assert api.calls == []
    api.release.set()
    await ex.drain(5)
    assert record.result == "success"


async def test_calls_per_victim_in_order_then_nomination() -> None:
    api = FakeApi()
    ex, gate = executor(api)
    record = await ex.run(PLAN)
    assert record.result == "success", record.error
    ops = [(op, key) for op, key, _ in api.calls]
    # Nominate first: the victims' deletion wakes kube-scheduler, whose nominator must then
    # already reserve the node for the preemptor.
    assert ops[:2] == [("mirror", P.key), ("nominate", P.key)]
    for v in VICTIMS:
        mine = [op for op, key in ops if key == v.key]
        assert mine == ["condition", "record", "delete"]
    assert ("nominate", P.key, "node-0") in api.calls
    # Success keeps the gate: it opens when the cache shows the victims gone.
    assert gate.get(P.uid) is not None
    await ex.drain(1)


async def test_failure_clears_nomination_and_the_gate_backs_off_then_opens() -> None:
    api = FakeApi()
    api.fail = lambda op, pod: (
        RuntimeError("500 from API") if op == "delete" and pod == VICTIMS[1] else None
    )
    clock = ManualClock(1000.0)
    ex, gate = executor(api, clock)
    before = metrics.PREEMPTION_EXECUTIONS.labels("error")._value.get()
    record = await ex.run(PLAN)
    assert record.result == "error"
    assert "500 from API" in record.error
    assert ("nominate", P.key, None) in api.calls
    # The gate stays closed for the first failure's back-off (1 s), claims nothing meanwhile,
    # then opens (a read sees it open; the gate keeper releases it and removes the annotation:
    # tests/integration/tasks/test_gatekeeper.py).
    entry = gate.get(P.uid)
    assert entry is not None and gate.backing_off(P.uid) and gate.failures(P.uid) == 1
    closed = gate.check(entry, now=1000.5)
    assert not closed.open and "failed (1 in a row)" in closed.why, closed
    assert gate.claims(1000.5) == ()
    assert gate.check(entry, now=1001.0).open
    assert gate.check(entry, now=1001.0).why == "preemption failed"
    assert metrics.PREEMPTION_EXECUTIONS.labels("error")._value.get() == before + 1
    assert ex.recent()[0] is record
    await ex.drain(1)


async def test_consecutive_failures_back_off_longer_and_a_success_resets() -> None:
    api = FakeApi()
    api.fail = lambda op, pod: RuntimeError("403 webhook") if op == "delete" else None
    clock = ManualClock(1000.0)
    ex, gate = executor(api, clock)
    waits = []
    for _ in range(4):
        await ex.run(PLAN)
        entry = gate.get(P.uid)
        assert entry is not None
        opens = next(t for t in range(0, 200) if gate.check(entry, clock.now() + t).open)
        waits.append(opens)
        gate.release(P.uid)
    assert waits == [1, 2, 4, 8], waits
    api.fail = lambda op, pod: None
    assert (await ex.run(PLAN)).result == "success"
    assert gate.failures(P.uid) == 0
    await ex.drain(1)


async def test_drain_cancels_stuck_tasks_and_leaves_none_pending() -> None:
    api = FakeApi()
    api.release.clear()
    ex, gate = executor(api)
    record = ex.submit(PLAN)
    await api.started.wait()
    await ex.drain(0.05)
    assert ex.pending_tasks() == 0
    assert record.result == "cancelled"
    entry = gate.get(P.uid)
    assert entry is not None and gate.check(entry, now=0).open
    with pytest.raises(RuntimeError, match="shutting down"):
        ex.submit(PLAN)


async def test_many_concurrent_tasks_are_bounded_and_all_finish() -> None:
    api = FakeApi(latency=0.001)
    gate = GateBook(cluster_cache())
    ex = preemption_executor(api, gate, ManualClock(), concurrency=4, recorder=api)
    plans = [PreemptionPlan(PodRef(f"p{i}", "ns", f"p{i}"), "n", VICTIMS, "m") for i in range(40)]
    records = [ex.submit(p) for p in plans]
    assert len(gate) == 40
    await ex.drain(10)
    assert all(r.result == "success" for r in records)
    assert len(ex.in_flight()) == 0


def test_gate_opens_when_victims_gone_or_terminating() -> None:
    entry = GateEntry(P, "node-0", VICTIMS, since=100, deadline=160)
    states = {
        VICTIMS[0].uid: VictimState.GONE,
        VICTIMS[1].uid: VictimState.TERMINATING,
        VICTIMS[2].uid: VictimState.PRESENT,
    }
    check = check_gate(entry, states.__getitem__, now=120)
    assert not check.open and check.outstanding == (VICTIMS[2],)
    states[VICTIMS[2].uid] = VictimState.GONE
    assert check_gate(entry, states.__getitem__, now=120).open


def test_gate_opens_at_its_bound() -> None:
    entry = GateEntry(P, "node-0", VICTIMS, since=100, deadline=160)
    check = check_gate(entry, lambda uid: VictimState.PRESENT, now=160)
    assert check.open and "bound passed" in check.why


def test_without_a_cache_only_task_completion_opens() -> None:
    entry = GateEntry(P, "node-0", VICTIMS, since=100, deadline=160)
    assert not check_gate(entry, lambda uid: VictimState.UNKNOWN, now=110).open
    assert check_gate(entry, lambda uid: VictimState.UNKNOWN, now=110, task_done=True).open


# --- many preemptions at once (issue #27) ----------------------------------------------------


async def test_awaited_victims_are_held_but_never_touched() -> None:
    api = FakeApi()
    ex, gate = executor(api)
    going = PodRef("uid-going", "default", "going")
    plan = PreemptionPlan(
        preemptor=P,
        node="node-0",
        victims=VICTIMS[:1],
        message="m",
        awaited=(going,),
        counted=(VICTIMS[0].uid,),
    )
    record = await ex.run(plan)
    assert record.result == "success", record.error
    ops = [(op, key) for op, key, _ in api.calls]
    assert ("delete", VICTIMS[0].key) in ops
    # Counted already by the preemption in flight that evicts its workload: not recorded again.
    assert ("record", VICTIMS[0].key) not in ops
    assert not [op for op, key in ops if key == going.key]  # one victim, one preemption
    assert record.to_dict()["awaited"] == [going.key]
    held = gate.get(P.uid)
    assert held is not None and {v.uid for v in held.victims} == {VICTIMS[0].uid, going.uid}
    await ex.drain(1)


async def test_a_displaced_preemption_keeps_deleting_but_never_nominates() -> None:
    api = FakeApi()
    api.release.clear()
    ex, gate = executor(api)
    low = ex.submit(PLAN)  # its task waits on the API
    await api.started.wait()
    higher = PodRef("uid-h", "default", "higher")
    taking = PreemptionPlan(
        preemptor=higher,
        node="node-0",
        victims=(),
        message="m",
        priority=9,
        awaited=VICTIMS,
        displaced=(P,),
        unnominate=(P,),
    )
    ex.hold(taking)
    assert gate.check(gate.get(P.uid), 0.0).open  # type: ignore[arg-type]
    assert [c.preemptor for c in gate.claims(1.0)] == [higher.key]
    assert gate.reserved(1.0) == {v.uid: higher.key for v in VICTIMS}
    api.release.set()
    await ex.drain(5)
    assert low.result == "success"
    # The victims went once (its task), the lower preemptor was never nominated.
    assert [key for op, key, _ in api.calls if op == "delete"] == [v.key for v in VICTIMS]
    assert ("nominate", P.key, "node-0") not in api.calls
    assert any("not nominated" in step for step in low.steps)


async def test_scheduler_executes_the_same_claim_retried_is_mirrored_once_per_window() -> None:
    """kube-scheduler retries a refused preemption many times a second, and runway decides each
    retry again: the same claim (node, victims) is mirrored once per ``MIRROR_KEPT_S``, a
    different claim at once, and again once the gate keeper removed the mirror."""
    api = FakeApi()
    clock = ManualClock(1_000.0)
    ex, _ = executor(api, clock)
    ex.takeover = False

    def mirrors() -> int:
        return sum(1 for c in api.calls if c[0] == "mirror" and c[2] is True)

    for _ in range(5):
        await ex.run(PLAN)
    assert mirrors() == 1
    assert "gate mirror kept" in ex.recent()[0].steps[0]
    await ex.run(PreemptionPlan(P, "node-1", VICTIMS, message="m"))  # another node: written
    assert mirrors() == 2
    clock.advance(MIRROR_KEPT_S)
    await ex.run(PreemptionPlan(P, "node-1", VICTIMS, message="m"))  # the window passed
    assert mirrors() == 3
    ex.mirror_removed(P.uid)
    await ex.run(PreemptionPlan(P, "node-1", VICTIMS, message="m"))  # its mirror was removed
    assert mirrors() == 4
    # takeover: every run mirrors (its retries follow a back-off)
    ex.takeover = True
    await ex.run(PLAN)
    await ex.run(PLAN)
    assert mirrors() == 6
