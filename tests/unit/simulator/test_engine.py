"""The event loop, scenario by scenario: each rule comes from runway's policy code."""

from __future__ import annotations

from typing import Any

from app.simulator.engine import Decision, SimOptions, simulate
from tests.unit.simulator.helpers import config, cpu_nodes, trace_of

OPTIONS = SimOptions(record_binds=True, check_invariants=True)


def wl(name: str, arrival: float, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "arrival": arrival,
        "duration": 100,
        "requests": {"cpu": "4"},
    }
    return base | kw


def kinds(decisions: list[Decision], *wanted: str) -> list[tuple[float, str, str, str]]:
    return [(d.time, d.kind, d.workload, d.detail) for d in decisions if d.kind in wanted]


def test_a_higher_priority_workload_preempts_and_binds_in_the_same_instant() -> None:
    trace = trace_of(cpu_nodes(1), wl("low", 0), wl("high", 10, priority=10, duration=50))
    out = simulate(config(), trace, options=OPTIONS)
    assert kinds(out.decisions, "preempted", "finished") == [
        (10.0, "preempted", "low", "high"),
        (60.0, "finished", "high", ""),
        (160.0, "finished", "low", ""),
    ]
    assert out.preemptions == 1 and out.evicted_pods == 1
    assert out.work_lost == 10.0
    low = out.workloads[0]
    assert low.record is not None and low.record.reason == "Preempted"
    assert low.wait == 50.0  # evicted at 10, started again at 60
    assert out.bad_nodes == []


def test_equal_priority_never_preempts() -> None:
    trace = trace_of(cpu_nodes(1), wl("a", 0), wl("b", 10))
    out = simulate(config(), trace, options=OPTIONS)
    assert kinds(out.decisions, "preempted") == []
    assert [w.state for w in out.workloads] == ["finished", "finished"]
    assert out.workloads[1].wait == 90.0


def test_min_runtime_protects_until_it_ends_then_the_flush_retries() -> None:
    cfg = config({"minRuntime": {"defaultPreemptMinRuntime": "30s"}})
    trace = trace_of(cpu_nodes(1), wl("low", 0), wl("high", 10, priority=10))
    out = simulate(cfg, trace, options=OPTIONS)
    (preempted,) = kinds(out.decisions, "preempted")
    # Protected until 30 s; kube-scheduler retries the unschedulable pod on its 60 s flush.
    assert preempted == (70.0, "preempted", "low", "high")


def test_reclaim_min_runtime_comes_from_the_queue_tree() -> None:
    cfg = config(
        {
            "queues": [
                {"name": "root", "reclaimMinRuntime": "1000s"},
                {"name": "a", "parent": "root"},
                {"name": "b", "parent": "root"},
            ]
        }
    )
    trace = trace_of(
        cpu_nodes(1), wl("low", 0, queue="a", duration=5000), wl("high", 10, priority=10, queue="b")
    )
    out = simulate(cfg, trace, options=OPTIONS)
    (preempted,) = kinds(out.decisions, "preempted")
    assert 1000 <= preempted[0] <= 1060


def test_a_gang_is_evicted_whole_and_its_pods_wait_together() -> None:
    trace = trace_of(
        cpu_nodes(2),
        wl("gang", 0, pods=2),
        wl("high", 10, priority=10),
    )
    out = simulate(config(), trace, options=OPTIONS)
    assert kinds(out.decisions, "preempted") == [(10.0, "preempted", "gang", "high")]
    assert out.evicted_pods == 2
    assert out.work_lost == 20.0


def test_the_budget_protects_a_workload_preempted_too_often() -> None:
    cfg = config(
        {"queues": [{"name": "q", "preemptionBudget": {"maxPreemptions": 1, "window": "1h"}}]}
    )
    trace = trace_of(
        cpu_nodes(1),
        wl("victim", 0, queue="q", duration=1000),
        wl("p1", 10, priority=10, duration=10),
        wl("p2", 30, priority=10, duration=10),
    )
    out = simulate(cfg, trace, options=OPTIONS)
    assert kinds(out.decisions, "preempted") == [(10.0, "preempted", "victim", "p1")]
    victim = out.workloads[0]
    assert victim.record is not None and victim.record.preemption_history == (10.0,)


def test_never_ready_is_evicted_backs_off_and_is_deactivated() -> None:
    cfg = config(
        {
            "waitForPodsReady": {
                "enable": True,
                "timeout": "30s",
                "requeuingStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 10},
            }
        }
    )
    # "later" keeps the run going: it ends once every workload that can get ready is done.
    trace = trace_of(
        cpu_nodes(1), wl("bad", 0, readyAfter=None), wl("ok", 5), wl("later", 1000, duration=1)
    )
    out = simulate(cfg, trace, options=OPTIONS)
    events = kinds(out.decisions, "evicted", "deactivated", "started")
    assert events[0] == (0.0, "started", "bad", "")
    assert events[1] == (30.0, "evicted", "bad", "PodsReadyTimeout")
    assert events[2] == (30.0, "started", "ok", "")
    # ok runs 100 s; bad, out of backoff at ~40 s, waits for room, times out again: deactivated.
    assert events[3:] == [
        (130.0, "started", "bad", ""),
        (160.0, "evicted", "bad", "PodsReadyTimeout"),
        (
            160.0,
            "deactivated",
            "bad",
            "RequeuingLimitExceeded: exceeding the maximum number of re-queuing retries "
            "(backoffLimitCount 1)",
        ),
        (1000.0, "started", "later", ""),
    ]
    assert out.pods_ready_evictions == 2 and out.deactivations == 1
    assert [w.state for w in out.workloads] == ["deactivated", "finished", "finished"]


def test_the_run_ends_when_only_never_ready_workloads_are_left() -> None:
    trace = trace_of(cpu_nodes(2), wl("stuck", 0, readyAfter=None), wl("ok", 5))
    out = simulate(config(), trace, options=OPTIONS)
    assert out.end == 105.0
    assert [w.state for w in out.workloads] == ["active", "finished"]


def test_strict_fifo_holds_a_small_workload_behind_the_head() -> None:
    queues = [{"name": "q", "queueingStrategy": "StrictFIFO"}]
    trace = trace_of(
        cpu_nodes(1),
        wl("first", 0, queue="q", requests={"cpu": "3"}),
        wl("big", 1, queue="q", requests={"cpu": "4"}),
        wl("small", 2, queue="q", requests={"cpu": "1"}),
    )
    strict = simulate(config({"queues": queues}), trace, options=OPTIONS)
    best_effort = simulate(config(), trace, options=OPTIONS)
    assert kinds(strict.decisions, "started")[1:] == [
        (100.0, "started", "big", ""),
        (200.0, "started", "small", ""),
    ]
    assert kinds(best_effort.decisions, "started")[1] == (2.0, "started", "small", "")


def test_the_same_seed_gives_the_same_decisions() -> None:
    cfg = config({"waitForPodsReady": {"enable": True, "timeout": "20s"}})
    trace = trace_of(
        cpu_nodes(2),
        *[
            wl(f"w{i}", i * 3, priority=i % 3, readyAfter=None if i % 4 == 0 else 1)
            for i in range(12)
        ],
    )
    a = simulate(cfg, trace, options=SimOptions(seed=7, record_binds=True))
    b = simulate(cfg, trace, options=SimOptions(seed=7, record_binds=True))
    assert a.decisions == b.decisions and a.work_lost == b.work_lost


def test_until_stops_the_clock() -> None:
    trace = trace_of(cpu_nodes(1), wl("a", 0), wl("b", 500))
    out = simulate(config(), trace, options=SimOptions(until=50))
    assert out.end == 50
    assert [w.state for w in out.workloads] == ["active", "waiting"]
