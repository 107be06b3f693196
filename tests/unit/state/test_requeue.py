"""The requeue view over the cache (app.state.requeue): not-ready-since derived from the pods,
blockers, gate holds, scoring facts, and memoisation per cache generation."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.clock import ManualClock
from app.model import Pod
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.gate import GateEntry, PodRef
from app.model.lifecycle import Life
from app.model.namespace import Namespace
from app.model.timestamps import format_time
from app.policy import admission
from app.policy.podsready import blocks_admission, loss_time
from app.policy.wakeup import hold_of
from app.policy.workload import WorkloadKey, is_member
from app.state import records
from app.wiring import Runway, build
from tests.builders import condition, job, raw_pod, runway_config, write_life, write_record
from tests.builders import pod as build_pod

T0 = 1_800_000_000.0


def pod(
    name: str,
    *,
    bound_at: float | None = None,
    ready: bool | None = None,
    ready_at: float | None = None,
    started: float | None = None,
    workload: str = "w",
    uid: str | None = None,
    job: str | None = None,
) -> Pod:
    """A pod of workload ``workload`` (its label), or of Job ``job`` (its controller)."""
    conditions: list[dict[str, Any]] = []
    start = None
    if bound_at is not None:
        start = format_time(started if started is not None else bound_at)
        conditions.append(condition("PodScheduled", True, format_time(bound_at)))
    if ready is not None:
        t = format_time(ready_at if ready_at is not None else bound_at or T0)
        conditions.append(condition("Ready", ready, t))
    obj = raw_pod(
        name,
        namespace="ns",
        uid=uid,
        labels=None if job else {"runway.dev/workload": workload},
        job=job,
        node="n1" if bound_at is not None else None,
        start_time=start,
        conditions=conditions,
    )
    return build_pod(obj)


def runtime(config: dict[str, Any] | None = None) -> Runway:
    return build(runway_config(config), clock=ManualClock(T0))


def test_a_loss_needs_a_flip_after_the_pods_start() -> None:
    rt = runtime()
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=False, ready_at=T0))
    rt.cache.upsert_pod(pod("b", bound_at=T0, ready=True, ready_at=T0 + 5))
    view = rt.cache.workload_of_pod(pod("a"))
    assert view is not None
    # the kubelet's first Ready=False, written when it starts the pod, is no loss
    assert loss_time(view.pods, T0) is None
    # a Ready=False transition well after the pod's start means it flipped
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=False, ready_at=T0 + 30))
    view = rt.cache.workload_of_pod(pod("a"))
    assert view is not None and loss_time(view.pods, T0) == T0 + 30
    # ...but not when it came before the workload was last PodsReady (it recovered since)
    assert loss_time(view.pods, T0 + 31) is None


def test_blockers_only_with_block_admission_and_memoised_per_generation() -> None:
    rt = runtime({"waitForPodsReady": {"enable": True, "blockAdmission": True, "timeout": "60s"}})
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=False))
    first = rt.requeue.blockers(T0)
    assert [(b.workload, b.timeout_at) for b in first] == [("ns/w", T0 + 60)]
    assert rt.requeue.blockers(T0) is first  # same generation: memo
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=True, ready_at=T0 + 1))
    assert rt.requeue.blockers(T0) == ()
    assert runtime().requeue.blockers(T0) == ()


def test_gate_hold_counts_outstanding_victims_and_opens_at_the_bound() -> None:
    rt = runtime()
    preemptor = pod("p", workload="p")
    victim = PodRef("uid-v", "ns", "v")
    rt.gate.hold(GateEntry(PodRef("uid-p", "ns", "p"), "n1", (victim,), T0, T0 + 30))
    hold = rt.requeue.gate_hold(preemptor, T0 + 1)
    assert hold is not None and hold.nominated_node == "n1" and hold.outstanding_victims == 1
    assert hold.victims == ("ns/v",)
    facts = rt.requeue.filter_input(preemptor, T0 + 1)
    assert facts.gate == hold and facts.workload == "ns/p" and not facts.admitted
    # At the bound the gate opens; reading never writes: the entry stays until the gate
    # keeper releases it (tests/integration/tasks/test_gatekeeper.py), then it is gone for good.
    assert rt.requeue.gate_hold(preemptor, T0 + 30) is None
    assert rt.gate.get("uid-p") is not None
    rt.gate.release("uid-p")
    assert rt.requeue.gate_hold(preemptor, T0 + 1) is None


def test_scoring_input_lists_the_nodes_of_the_workload() -> None:
    rt = runtime({"minRuntime": {"poolLabel": "pool"}, "prioritize": {"locality": True}})
    rt.cache.upsert_pod(pod("a", bound_at=T0))
    rt.cache.upsert_pod(pod("b"))
    facts = rt.requeue.scoring_input(pod("b"))
    assert set(facts.workload_nodes) == {"n1"} and facts.pool_label == "pool"
    assert tuple(facts.failed_pools) == ()


def test_scoring_input_is_uniform_with_no_preference_on() -> None:
    """The defaults without waitForPodsReady: nothing to prefer, prioritize answers []."""
    rt = runtime({})
    rt.cache.upsert_pod(pod("a", bound_at=T0))
    rt.cache.upsert_pod(pod("b"))
    assert rt.requeue.scoring_input(pod("b")).uniform


def test_pending_workloads_skip_admitted_ones() -> None:
    rt = runtime()
    rt.cache.upsert_pod(pod("a", workload="run", bound_at=T0))
    rt.cache.upsert_pod(pod("b", workload="half", bound_at=T0))
    # a gang half bound is admitted (its first bind, DESIGN §2.3): its other pod is not pending
    rt.cache.upsert_pod(pod("c", workload="half"))
    rt.cache.upsert_pod(pod("d", workload="wait"))
    names = [w.name for w in rt.requeue.pending_workloads("default")]
    assert sorted(names) == ["ns/wait"]


async def test_a_pending_replacement_runs_the_recovery_clock_not_the_start_clock() -> None:
    # A gang of 2, started and Ready; b is lost and its replacement c is pending.
    rt = runtime({"waitForPodsReady": {"enable": True, "timeout": "60s", "recoveryTimeout": "30s"}})
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=True, ready_at=T0 + 5))
    rt.cache.upsert_pod(pod("b", bound_at=T0 + 1, ready=True, ready_at=T0 + 5))
    view = rt.cache.workload_of_pod(pod("a"))
    assert view is not None
    rt.cache.delete_pod(pod("b"))
    c = msgspec.structs.replace(
        pod("c"),
        metadata=msgspec.structs.replace(
            pod("c").metadata, creationTimestamp=format_time(T0 + 500)
        ),
    )
    rt.cache.upsert_pod(c)
    view = rt.cache.workload_of_pod(pod("a"))
    assert view is not None
    life = rt.records.life(view).life
    assert (life.admitted, life.started) == (T0, None)  # derived now: only a is bound
    state = rt.requeue.pods_ready_state(view)
    assert state.not_ready_since is None  # nothing persisted: no started, so no recovery clock
    assert await write_life(rt.records, view.key, Life(None, T0, T0 + 1))  # as the leader had
    state = rt.requeue.pods_ready_state(view)
    assert state.admitted_at == T0 and state.not_ready_since == T0 + 500
    _, check = rt.requeue.evaluate(view, T0 + 510)
    assert check.cause == "WaitForRecovery" and not check.due  # not the start timeout (60 s)


# --- PodsReady as KEP-349 defines it (issue #27 items 5, 6) ------------------------------------

POD_READY_CONFIG = {"enable": True, "timeout": "60s", "blockAdmission": True}


def failed(p: Pod) -> Pod:
    return msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, phase="Failed"))


@pytest.mark.parametrize("recovery", [None, "30s"])
@pytest.mark.parametrize("crashed", ["not-ready", "failed"])
async def test_a_gang_never_pods_ready_stays_on_the_start_clock(
    recovery: str | None, crashed: str
) -> None:
    # A gang of 2: a was Ready, then crashed (Ready=False well after its start, or Failed);
    # b never became Ready. One pod having been Ready is not the workload having been PodsReady.
    cfg: dict[str, Any] = dict(POD_READY_CONFIG)
    if recovery is not None:
        cfg["recoveryTimeout"] = recovery
    rt = runtime({"waitForPodsReady": cfg})
    a = pod("a", bound_at=T0, ready=False, ready_at=T0 + 30)
    rt.cache.upsert_pod(a if crashed == "not-ready" else failed(a))
    rt.cache.upsert_pod(pod("b", bound_at=T0, ready=False, ready_at=T0))
    # The leader persisted the gang's facts at its binds, its size (2 members) with them.
    assert await write_life(rt.records, WorkloadKey("ns", "w", "label"), Life(None, T0, T0, 2))
    view = rt.cache.workload_of_pod(a)
    assert view is not None
    state, check = rt.requeue.evaluate(view, T0 + 61)
    assert (state.was_ready, state.not_ready_since) == (False, None)
    assert check.cause == "WaitForStart" and check.due and check.deadline == T0 + 60
    # ...and blockAdmission counts it as not ready
    assert [b.workload for b in rt.requeue.blockers(T0 + 1)] == ["ns/w"]


def test_a_gang_that_was_pods_ready_runs_the_recovery_clock() -> None:
    rt = runtime({"waitForPodsReady": {**POD_READY_CONFIG, "recoveryTimeout": "30s"}})
    a = pod("a", bound_at=T0, ready=False, ready_at=T0 + 30)
    rt.cache.upsert_pod(a)
    rt.cache.upsert_pod(pod("b", bound_at=T0, ready=True, ready_at=T0 + 5))
    view = rt.cache.workload_of_pod(a)
    assert view is not None
    state, check = rt.requeue.evaluate(view, T0 + 40)
    assert state.was_ready and state.not_ready_since == T0 + 30
    assert check.cause == "WaitForRecovery" and check.deadline == T0 + 60
    # recovering blocks admission until it recovers or its recoveryTimeout runs out (Kueue)
    blockers = rt.requeue.blockers(T0 + 40)
    assert [(b.workload, b.timeout_at) for b in blockers] == [("ns/w", T0 + 60)]


@pytest.mark.parametrize(
    ("c_was_ready", "cause"),
    [(True, "WaitForRecovery"), (False, "WaitForStart")],
)
async def test_a_failed_pod_does_not_shrink_the_target(c_was_ready: bool, cause: str) -> None:
    # A Job of 3: 2 Ready, 1 Failed, no replacement yet. Not PodsReady (KEP-349: failed pods
    # are not taken into account); which clock runs depends on whether the whole Job had been.
    rt = runtime({"waitForPodsReady": {**POD_READY_CONFIG, "recoveryTimeout": "30s"}})
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=True, ready_at=T0 + 5))
    rt.cache.upsert_pod(pod("b", bound_at=T0, ready=True, ready_at=T0 + 5))
    c = failed(pod("c", bound_at=T0, ready=False, ready_at=T0 + (40 if c_was_ready else 0)))
    rt.cache.upsert_pod(c)
    view = rt.cache.workload_of_pod(c)
    assert view is not None
    assert view.pods_ready  # the pods alone (2 members, 2 ready) would say ready
    facts = rt.records.life(view)
    assert (facts.size, facts.pods_ready) == (2, True)  # size unknown: the members now
    # The size it has had (persisted by the leader when it saw 3 members)
    assert await write_life(rt.records, view.key, Life(None, T0, T0, 3))
    view = rt.cache.workload_of_pod(c)
    assert view is not None
    facts = rt.records.life(view)
    assert (facts.size, facts.size_source, facts.pods_ready) == (3, "members", False)
    state, check = rt.requeue.evaluate(view, T0 + 41)
    assert not state.pods_ready and check.cause == cause


@pytest.mark.parametrize(
    ("c_was_ready", "cause"),
    [(True, "WaitForRecovery"), (False, "WaitForStart")],
)
async def test_a_failed_pod_does_not_shrink_a_jobs_parallelism(
    c_was_ready: bool, cause: str
) -> None:
    # The same Job of 3, its size from its parallelism (Kueue's podsCount): nothing persisted
    # needed (the third pod failed before the leader saw 3 members, or runway restarted).
    rt = runtime({"waitForPodsReady": {**POD_READY_CONFIG, "recoveryTimeout": "30s"}})
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=True, ready_at=T0 + 5, job="train"))
    rt.cache.upsert_pod(pod("b", bound_at=T0, ready=True, ready_at=T0 + 5, job="train"))
    c = pod("c", bound_at=T0, ready=False, ready_at=T0 + (40 if c_was_ready else 0), job="train")
    rt.cache.upsert_pod(failed(c))
    view = rt.cache.workload_of_pod(c)
    assert view is not None and view.key == WorkloadKey("ns", "train", "owner:Job")
    facts = rt.records.life(view)
    assert (facts.size, facts.size_source, facts.pods_ready) == (2, "members", True)
    generation = rt.requeue.index.facts
    rt.jobs.upsert(job("train", "ns", parallelism=3))
    assert rt.requeue.index.facts > generation  # the memos that read PodsReady are stale
    facts = rt.records.life(view)  # the same view: its memo knows the Job's size moved
    assert (facts.size, facts.size_source, facts.pods_ready) == (3, "parallelism", False)
    state, check = rt.requeue.evaluate(view, T0 + 41)
    assert not state.pods_ready and check.cause == cause
    # the Job scaled down to the pods it has left: PodsReady
    rt.jobs.upsert(job("train", "ns", parallelism=2))
    facts = rt.records.life(view)
    assert (facts.size, facts.size_source, facts.pods_ready) == (2, "parallelism", True)
    # a Job of that name re-created (another UID): not this workload's size
    rt.jobs.upsert(job("train", "ns", uid="uid-new", parallelism=3))
    assert rt.records.life(view).size_source == "members"


def test_a_job_short_of_its_parallelism_blocks_admission() -> None:
    # A Job of 3 whose third pod was never created (a quota): its 2 pods are Ready, and the pods
    # alone would say PodsReady; its parallelism says not, so blockAdmission holds the others.
    rt = runtime({"waitForPodsReady": POD_READY_CONFIG})
    for name in ("a", "b"):
        rt.cache.upsert_pod(pod(name, bound_at=T0, ready=True, ready_at=T0 + 5, job="train"))
    assert rt.requeue.blockers(T0 + 10) == ()  # its size unknown: the members it has
    rt.jobs.upsert(job("train", "ns", parallelism=3))
    assert [b.workload for b in rt.requeue.blockers(T0 + 10)] == ["ns/train"]
    rt.jobs.upsert(job("train", "ns", parallelism=3, completions=2))  # two to run: ready
    assert rt.requeue.blockers(T0 + 10) == ()


def test_a_job_known_before_its_pods_tells_no_one() -> None:
    # Jobs come and go far more often than they matter: a Job with no pod in the cache bumps no
    # memo (its pods' arrival makes a new view).
    rt = runtime()
    generation = rt.requeue.index.facts
    rt.jobs.upsert(job("train", "ns", parallelism=3))
    assert rt.requeue.index.facts == generation
    rt.cache.upsert_pod(pod("a", bound_at=T0, ready=True, job="train"))
    view = rt.cache.workload_of_pod(pod("a", job="train"))
    assert view is not None
    facts = rt.records.life(view)
    assert (facts.size, facts.size_source, facts.pods_ready) == (3, "parallelism", False)


@pytest.mark.parametrize(
    ("persisted_ready", "cause"), [(T0 + 5, "WaitForRecovery"), (None, "WaitForStart")]
)
async def test_the_persisted_ready_fact_keeps_the_recovery_clock_across_a_restart(
    persisted_ready: float | None, cause: str
) -> None:
    # A gang of 2 reached PodsReady (the leader persisted when); a's Ready=False came within the
    # flip margin of its start, so its pods alone cannot show it had been Ready. A new process
    # (nothing in memory) must still run the recovery clock: the record says it was PodsReady.
    rt = runtime({"waitForPodsReady": {**POD_READY_CONFIG, "recoveryTimeout": "30s"}})
    a = pod("a", bound_at=T0, ready=False, ready_at=T0 + 1)
    rt.cache.upsert_pod(a)
    rt.cache.upsert_pod(pod("b", bound_at=T0, ready=True, ready_at=T0 + 5))
    key = WorkloadKey("ns", "w", "label")
    assert await write_life(rt.records, key, Life(None, T0, T0, 2, persisted_ready))
    view = rt.cache.workload_of_pod(a)
    assert view is not None
    state, check = rt.requeue.evaluate(view, T0 + 40)
    assert check.cause == cause
    assert state.was_ready is (persisted_ready is not None)


async def test_lost_pods_ready_with_no_trace_counts_from_when_it_is_first_seen() -> None:
    # A Job of 3 was PodsReady; c is deleted and its replacement not created yet: nothing on the
    # pods says when PodsReady was lost, so the recovery clock runs from the first evaluation.
    rt = runtime({"waitForPodsReady": {**POD_READY_CONFIG, "recoveryTimeout": "30s"}})
    for name in ("a", "b"):
        rt.cache.upsert_pod(pod(name, bound_at=T0, ready=True, ready_at=T0 + 5))
    assert await write_life(rt.records, WorkloadKey("ns", "w", "label"), Life(None, T0, T0, 3))
    view = rt.cache.workload_of_pod(pod("a"))
    assert view is not None
    assert isinstance(rt.clock, ManualClock)
    rt.clock.set(T0 + 1000)
    state, check = rt.requeue.evaluate(view, T0 + 1000)
    assert state.was_ready and state.not_ready_since == T0 + 1000
    assert check.cause == "WaitForRecovery" and check.deadline == T0 + 1030 and not check.due
    rt.clock.set(T0 + 1031)
    _, later = rt.requeue.evaluate(view, T0 + 1031)
    assert later.due  # the first sighting is kept, not moved


POD_STATES = st.sampled_from(["ready", "crashed", "never", "failed-after", "failed-never"])


@settings(max_examples=60, deadline=None)
@given(st.lists(POD_STATES, min_size=1, max_size=4))
async def test_the_recovery_clock_needs_the_whole_gang_to_have_been_ready(
    states: list[str],
) -> None:
    # KEP-349: recovery only once the workload as a whole was PodsReady. Every pod it started
    # with is still seen here, so it was iff each of them shows it had been Ready.
    rt = runtime({"waitForPodsReady": {**POD_READY_CONFIG, "recoveryTimeout": "30s"}})
    for i, state in enumerate(states):
        flip = T0 + (0 if state.endswith("never") else 30)
        p = pod(
            f"p{i}",
            bound_at=T0,
            ready=state == "ready",
            ready_at=T0 + 5 if state == "ready" else flip,
        )
        rt.cache.upsert_pod(failed(p) if state.startswith("failed") else p)
    assert await write_life(
        rt.records, WorkloadKey("ns", "w", "label"), Life(None, T0, T0, len(states))
    )
    view = rt.cache.workload_of_pod(pod("p0"))
    assert view is not None
    state, check = rt.requeue.evaluate(view, T0 + 40)
    every_one_was = all(s in ("ready", "crashed", "failed-after") for s in states)
    assert state.pods_ready is all(s == "ready" for s in states)
    if all(s.startswith("failed") for s in states):
        # no member left bound: a full eviction (DESIGN §2.3), no clock runs
        assert state.admitted_at is None and check.cause == ""
    elif state.pods_ready:
        assert check.cause == ""
    elif every_one_was:
        assert state.was_ready and check.cause == "WaitForRecovery"
    else:
        assert not state.was_ready and check.cause == "WaitForStart"


# --- the waker's pass remembers free pods ------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "add",
                "bind",
                "delete",
                "move",
                "record",
                "deactivate",
                "clear",
                "gate",
                "ungate",
                "tick",
            ]
        ),
        st.integers(0, 5),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(OPS, st.booleans())
def test_pending_holds_with_its_memo_always_agrees_with_asking_every_pod(
    ops: list[tuple[str, int]], strict: bool
) -> None:
    """Whatever changes between two passes (pods added, bound, deleted or moved between
    workloads, records, gates, time, the blockers of blockAdmission), the incremental pass
    answers what the filter answers for every pod now."""
    _memo_agrees(ops, strict, [])


@settings(max_examples=150, deadline=None)
@given(OPS, st.booleans(), st.lists(st.integers(0, 4), max_size=25))
# p1 binds and blocks admission, so p2 is held and asked on every pass; a pass under way has
# asked p2 when p0 arrives: the next pass must ask p0 (a change during a pass is not lost).
@example([("add", 1), ("add", 2), ("bind", 1), ("add", 0)], False, [0, 0, 0, 1])
def test_pending_holds_agrees_when_the_cluster_changes_in_the_middle_of_a_pass(
    ops: list[tuple[str, int]], strict: bool, pauses: list[int]
) -> None:
    """The waker's pass gives the loop turns (``pending_holds_steps``): each change lands while
    a pass is under way, after some of its pods were asked. The pass after it still answers
    what the filter answers for every pod."""
    _memo_agrees(ops, strict, pauses)


def _memo_agrees(ops: list[tuple[str, int]], strict: bool, pauses: list[int]) -> None:
    """Apply ``ops``; after each, one waker pass must equal the whole rule chain. With
    ``pauses``, op ``n`` lands after ``pauses[n]`` steps of a pass begun before it."""
    config: dict[str, Any] = {
        "waitForPodsReady": {"enable": True, "blockAdmission": True, "timeout": "60s"},
        "queues": [{"name": "q", "queueingStrategy": "StrictFIFO" if strict else "BestEffortFIFO"}],
    }
    rt = runtime(config)
    clock = rt.clock
    assert isinstance(clock, ManualClock)

    moved: set[int] = set()

    def the_pod(i: int, *, bound: bool = False) -> Pod:
        # Pods share workloads (w0: p0 and p3...), and a pod may move to another workload: a
        # change of one pod changes what its siblings' rules read.
        workload = f"w{(i + 1) % 3}" if i in moved else f"w{i % 3}"
        obj = raw_pod(
            f"p{i}",
            namespace="ns",
            labels={"runway.dev/workload": workload, "runway.dev/queue": "q" if i % 2 else "other"},
            node="n1" if bound else None,
            start_time=format_time(T0) if bound else None,
            conditions=[condition("PodScheduled", True, format_time(T0))] if bound else None,
        )
        return build_pod(obj)

    for n, (op, i) in enumerate(ops):
        now = clock.now()
        key = WorkloadKey("ns", f"w{i % 3}", "label")
        under_way = None
        if n < len(pauses):
            under_way = rt.requeue.pending_holds_steps(now)
            for _ in range(pauses[n]):
                if next(under_way, StopIteration) is StopIteration:
                    break
        if op == "add":
            rt.cache.upsert_pod(the_pod(i))
        elif op == "bind" and rt.cache.pod(f"uid-p{i}") is not None:
            rt.cache.upsert_pod(the_pod(i, bound=True))
        elif op == "delete" and (gone := rt.cache.pod(f"uid-p{i}")) is not None:
            rt.cache.delete_pod(gone)
        elif op == "move" and (there := rt.cache.pod(f"uid-p{i}")) is not None:
            moved.symmetric_difference_update({i})
            rt.cache.upsert_pod(the_pod(i, bound=bool(there.spec.nodeName)))
        elif op == "record":
            record = EvictionRecord(PODS_READY_TIMEOUT, now, count=1, requeue_at=now + 7)
            asyncio.run(write_record(rt.records, key, record))
        elif op == "deactivate":
            asyncio.run(
                write_record(
                    rt.records, key, EvictionRecord(PODS_READY_TIMEOUT, now, deactivated=True)
                )
            )
        elif op == "clear":
            asyncio.run(rt.records.activate(key))
        elif op == "gate":
            victim = PodRef("uid-v", "ns", "v")  # not in the cache: outstanding while running
            rt.gate.hold(
                GateEntry(PodRef(f"uid-p{i}", "ns", f"p{i}"), "n1", (victim,), now, now + 5)
            )
        elif op == "ungate":
            rt.gate.release(f"uid-p{i}")
        elif op == "tick":
            clock.advance(3)
        if under_way is not None:
            for _ in under_way:  # the interrupted pass ends on what it had begun with
                pass
        now = clock.now()
        pending = [p for p in rt.cache.pending_pods() if p.metadata.deletionTimestamp is None]
        # The whole rule chain, asked about every pod: what the shortcuts must agree with.
        chain = {
            p.uid: admission.admit(rt.requeue.filter_input(p, now), now, rt.requeue.policy)
            for p in pending
        }
        assert rt.requeue.pending_holds(now) == {u: hold_of(v) for u, v in chain.items()}
        assert {p.uid: rt.requeue.admit(p, now) for p in pending} == chain


BLOCKER_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "bind", "ready", "unready", "fail", "delete", "move", "record", "life", "tick"]
        ),
        st.integers(0, 5),
    ),
    max_size=30,
)


def blockers_of_every_workload(rt: Runway) -> tuple[admission.Blocker, ...]:
    """``RequeueView.blockers`` as it was before it kept its workloads up to date: a pass over
    every workload."""
    cfg = rt.requeue.pods_ready
    found = []
    for key in rt.cache.workload_keys():
        view = rt.cache.workload(key)
        if view is None or not view.bound:
            continue
        if view.pods_ready and all(is_member(p) for p in view.pods):
            continue
        state = rt.requeue.pods_ready_state(view)
        admitted = state.admitted_at
        if admitted is not None and blocks_admission(state, admitted, cfg):
            found.append(admission.Blocker(str(key), admitted + cfg.timeout))
    return tuple(sorted(found, key=lambda b: (b.workload, b.timeout_at)))


@settings(max_examples=200, deadline=None)
@given(BLOCKER_OPS, st.integers(0, 3))
def test_blockers_kept_up_to_date_agree_with_a_pass_over_every_workload(
    ops: list[tuple[str, int]], every: int
) -> None:
    """``blockers`` evaluates the unsettled workloads and those whose pods changed since its
    last call (a filter after a pod event costs what changed): whatever changed, and however
    many changes came between two calls, it answers what a pass over every workload answers."""
    rt = runtime({"waitForPodsReady": {"enable": True, "blockAdmission": True, "timeout": "60s"}})
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    pods: dict[int, tuple[bool, bool | None, bool]] = {}  # i -> (bound, ready, failed)
    moved: set[int] = set()

    def put(i: int) -> None:
        bound, ready, failed = pods[i]
        obj = raw_pod(
            f"p{i}",
            namespace="ns",
            labels={"runway.dev/workload": f"w{(i + 1) % 3}" if i in moved else f"w{i % 3}"},
            node="n1" if bound else None,
            phase="Failed" if failed else None,
            start_time=format_time(T0) if bound else None,
            conditions=(
                [condition("PodScheduled", True, format_time(T0))]
                + ([condition("Ready", ready, format_time(T0 + 1))] if ready is not None else [])
            )
            if bound
            else None,
        )
        rt.cache.upsert_pod(build_pod(obj))

    for n, (op, i) in enumerate(ops):
        key = WorkloadKey("ns", f"w{i % 3}", "label")
        old = pods.get(i)
        if op == "add" and old is None:
            pods[i] = (False, None, False)
        elif op == "bind" and old is not None:
            pods[i] = (True, old[1], old[2])
        elif op in ("ready", "unready") and old is not None and old[0]:
            pods[i] = (True, op == "ready", old[2])
        elif op == "fail" and old is not None:
            pods[i] = (old[0], old[1], True)
        elif op == "move" and old is not None:
            moved.symmetric_difference_update({i})
        elif op == "delete" and old is not None:
            del pods[i]
            gone = rt.cache.pod(f"uid-p{i}")
            assert gone is not None
            rt.cache.delete_pod(gone)
        elif op == "record":
            now = clock.now()
            record = EvictionRecord(PODS_READY_TIMEOUT, now, count=1, requeue_at=now + 7)
            asyncio.run(write_record(rt.records, key, record))
        elif op == "life":
            asyncio.run(write_life(rt.records, key, Life(created=T0, admitted=T0 - 30)))
        elif op == "tick":
            clock.advance(20)
        if i in pods and op not in ("record", "life", "tick", "delete"):
            put(i)
        if every == 0 or n % every == 0:  # some calls see one change, others several
            assert rt.requeue.blockers(clock.now()) == blockers_of_every_workload(rt)
    assert rt.requeue.blockers(clock.now()) == blockers_of_every_workload(rt)


def test_a_pass_over_more_workloads_than_the_memo_limit_finds_their_life_facts_memoised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The life-facts memo holds every workload there is (41,000 at 150,000 pods): a pass over
    all of them (the PodsReady evictor, the blockers, /v1/queues) must not clear it."""
    monkeypatch.setattr(records, "MEMO_LIMIT", 3)
    rt = runtime()
    for i in range(20):
        rt.cache.upsert_pod(pod(f"p{i}", bound_at=T0, ready=True, workload=f"w{i}"))
    views = [rt.cache.workload(k) for k in rt.cache.workload_keys()]
    first = [rt.records.life(v) for v in views if v is not None]
    derived: list[object] = []
    monkeypatch.setattr(records, "facts_of", lambda *a, **k: derived.append(a))
    assert [rt.records.life(v) for v in views if v is not None] == first
    assert derived == []


def test_pending_holds_asks_the_rule_chain_only_about_pods_something_could_hold() -> None:
    rt = runtime()
    for i in range(3):
        rt.cache.upsert_pod(pod(f"p{i}", workload=f"w{i}"))
    in_backoff = EvictionRecord(PODS_READY_TIMEOUT, T0, count=1, requeue_at=T0 + 30)
    asyncio.run(write_record(rt.records, WorkloadKey("ns", "w1", "label"), in_backoff))
    asked: list[str] = []
    admit = rt.requeue._admit_by_rules

    def counting(p: Pod, now: float) -> Any:
        asked.append(p.metadata.name)
        return admit(p, now)

    rt.requeue._admit_by_rules = counting  # type: ignore[method-assign]
    holds = rt.requeue.pending_holds(T0)
    assert asked == ["p1"]  # no record, gate, blocker or FIFO head could hold p0 or p2
    assert holds["uid-p1"] is not None and holds["uid-p0"] is None
    asked.clear()
    rt.cache.upsert_pod(pod("p0", workload="w0", ready=False))  # a new object for p0
    holds = rt.requeue.pending_holds(T0 + 60)
    assert asked == ["p1"]  # a held pod is asked every pass (its hold ends with time)
    assert holds["uid-p1"] is None


def test_pending_holds_sees_a_new_blocker_hold_a_pod_it_found_free() -> None:
    rt = runtime({"waitForPodsReady": {"enable": True, "blockAdmission": True, "timeout": "60s"}})
    rt.cache.upsert_pod(pod("waiting", workload="waiting"))
    rt.cache.upsert_pod(pod("starter", workload="starter"))
    assert rt.requeue.pending_holds(T0) == {"uid-waiting": None, "uid-starter": None}
    # starter binds and is not Ready: admitted and blocking; waiting's own objects are unchanged
    rt.cache.upsert_pod(pod("starter", workload="starter", bound_at=T0, ready=False))
    holds = rt.requeue.pending_holds(T0 + 1)
    assert holds["uid-waiting"] is not None and holds["uid-waiting"].rule == "block-admission"


def test_a_relabelled_namespace_moves_its_pods_and_the_strict_fifo_head_follows() -> None:
    """A namespace given the label a queue's ``namespaceSelector`` asks for: its older pod joins
    the StrictFIFO queue (no pod event) and is its head from then on; every memo agrees."""
    rt = runtime(
        {
            "queues": [
                {
                    "name": "strict",
                    "queueingStrategy": "StrictFIFO",
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                }
            ]
        }
    )
    labelled = {"metadata": {"name": "ns-a", "resourceVersion": "1", "labels": {"team": "a"}}}
    rt.cache.upsert_namespace(msgspec.convert(labelled, Namespace))
    other = {"metadata": {"name": "ns-b", "resourceVersion": "1", "labels": {"team": "b"}}}
    rt.cache.upsert_namespace(msgspec.convert(other, Namespace))

    def pending(name: str, namespace: str, created: float) -> Pod:
        obj = raw_pod(
            name,
            namespace=namespace,
            labels={"runway.dev/queue": "strict"},
            created=format_time(created),
        )
        return build_pod(obj)

    older, newer = pending("older", "ns-b", T0 - 100), pending("newer", "ns-a", T0)
    rt.cache.replace_pods([older, newer])
    assert rt.requeue.pending_holds(T0) == {older.uid: None, newer.uid: None}
    assert rt.requeue.admit(newer, T0) == admission.ADMIT  # the head: ns-b may not use it
    relabelled = {"metadata": {"name": "ns-b", "resourceVersion": "2", "labels": {"team": "a"}}}
    rt.cache.upsert_namespace(msgspec.convert(relabelled, Namespace))
    assert rt.cache.queue_of_pod(older) == "strict"
    holds = rt.requeue.pending_holds(T0)
    assert holds[older.uid] is None and holds[newer.uid] is not None
    assert rt.requeue.admit(newer, T0) != admission.ADMIT


# --- issue #36 item 4: an admission covers what was admitted ------------------------------------


def queued(
    name: str,
    queue: str,
    *,
    created: float,
    bound_at: float | None = None,
    workload: str | None = None,
    namespace: str = "ns",
    phase: str | None = None,
) -> Pod:
    obj = raw_pod(
        name,
        namespace=namespace,
        labels={"runway.dev/queue": queue, "runway.dev/workload": workload or name},
        node="n1" if bound_at is not None else None,
        conditions=[condition("PodScheduled", True, format_time(bound_at))] if bound_at else [],
        phase=phase,
    )
    obj["metadata"]["creationTimestamp"] = format_time(created)
    return build_pod(obj)


STRICT = {"queues": [{"name": "strict", "queueingStrategy": "StrictFIFO"}]}


async def persist_life(rt: Runway, member: Pod) -> None:
    """What the leader's life recorder writes at the first bind."""
    view = rt.cache.workload_of_pod(member)
    assert view is not None
    assert await write_life(rt.records, view.key, rt.records.life(view).life)


async def test_new_members_of_an_admitted_workload_queue_again() -> None:
    """The issue's anchor: a workload bound long ago; new pods with its label bound past the
    StrictFIFO head. Now they are a new admission: in the pending order at their own creation
    time, held while an older workload heads the queue; a replacement of a failed member is
    covered by the admission and not held."""
    rt = runtime(STRICT)
    rt.cache.pods_synced = True
    anchor = [
        queued(f"anchor-{i}", "strict", created=T0 - 3600, bound_at=T0 - 3500, workload="anchor")
        for i in range(2)
    ]
    for member in anchor:
        rt.cache.upsert_pod(member)
    await persist_life(rt, anchor[0])  # the leader's life recorder, at the first bind: size 2
    first = queued("first", "strict", created=T0 - 60, namespace="other")
    rt.cache.upsert_pod(first)
    extra = queued("anchor-2", "strict", created=T0, workload="anchor")
    rt.cache.upsert_pod(extra)
    order = rt.requeue.pending_workloads("strict")
    assert [w.name for w in order] == ["other/first", "ns/anchor"]
    assert order[1].creation_time == T0  # its own creation, not the workload's (T0 - 3600)
    verdict = rt.requeue.admit(extra, T0 + 1)
    assert not verdict.allowed and verdict.rule == "strict-fifo", verdict
    # once the head is gone, the new members are the head
    rt.cache.delete_pod(first)
    assert rt.requeue.admit(extra, T0 + 2).allowed
    # a replacement is covered: a bound member failed, the pending one replaces it
    rt.cache.upsert_pod(first)
    failed = queued(
        "anchor-1",
        "strict",
        created=T0 - 3600,
        bound_at=T0 - 3500,
        workload="anchor",
        phase="Failed",
    )
    rt.cache.upsert_pod(failed)
    assert rt.requeue.admit(extra, T0 + 3).allowed
    assert [w.name for w in rt.requeue.pending_workloads("strict")] == ["other/first"]


async def test_new_members_wait_for_block_admission_too() -> None:
    rt = runtime({"waitForPodsReady": {"enable": True, "timeout": "60s", "blockAdmission": True}})
    rt.cache.pods_synced = True
    a0 = pod("a0", bound_at=T0 - 600, ready=True, ready_at=T0 - 590, workload="a")
    rt.cache.upsert_pod(a0)
    await persist_life(rt, a0)
    rt.cache.upsert_pod(pod("b0", bound_at=T0, ready=False, workload="b"))  # admitted, not ready
    extra = pod("a1", workload="a")
    rt.cache.upsert_pod(extra)
    verdict = rt.requeue.admit(extra, T0 + 1)
    assert not verdict.allowed and verdict.rule == "block-admission", verdict
