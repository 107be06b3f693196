"""Invariants of a replay, over random small traces (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.simulator.engine import SimOptions, simulate
from tests.unit.simulator.helpers import config, trace_of

MIN_RUNTIME = 40.0
BUDGET = {"maxPreemptions": 2, "window": "300s"}

CONFIG = config(
    {
        "queues": [
            {"name": "root", "preemptionBudget": BUDGET},
            {"name": "a", "parent": "root"},
            {"name": "b", "parent": "root"},
        ],
        "minRuntime": {
            "defaultPreemptMinRuntime": f"{MIN_RUNTIME:g}s",
            "defaultReclaimMinRuntime": f"{MIN_RUNTIME:g}s",
        },
        "waitForPodsReady": {
            "enable": True,
            "timeout": "60s",
            "requeuingStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 5},
        },
    }
)

workload = st.fixed_dictionaries(
    {
        "arrival": st.integers(0, 400),
        "queue": st.sampled_from(["a", "b"]),
        "priority": st.sampled_from([0, 5, 10]),
        "pods": st.integers(1, 3),
        "requests": st.fixed_dictionaries({"cpu": st.sampled_from(["1", "2", "3"])}),
        "duration": st.integers(5, 300),
        "readyAfter": st.one_of(st.none(), st.integers(0, 90)),
    }
)


def replay(items: list[dict[str, Any]], seed: int) -> Any:
    lines = [{"name": f"w{i}", **w} for i, w in enumerate(items)]
    trace = trace_of([{"name": "n", "count": 3, "allocatable": {"cpu": "4"}}], *lines)
    return simulate(CONFIG, trace, options=SimOptions(seed=seed, check_invariants=True))


# Found by hypothesis: w2 preempts w3, times out (PodsReadyTimeout), is re-created and preempts w3
# again, three times in 202 s. The budget saw one preemption: the simulator re-created w2's pod
# with the same UID, and a record naming the same preemptor is "the same preemption" (a gang's
# other pods). A re-created pod is a new pod (``SimPod.api_uid``).
SAME_PREEMPTOR_AGAIN = [
    {"arrival": 1, "queue": "a", "priority": 0, "pods": 1, "requests": {"cpu": "1"},
     "duration": 5, "readyAfter": None},
    {"arrival": 1, "queue": "a", "priority": 0, "pods": 1, "requests": {"cpu": "1"},
     "duration": 5, "readyAfter": None},
    {"arrival": 1, "queue": "a", "priority": 5, "pods": 1, "requests": {"cpu": "2"},
     "duration": 5, "readyAfter": None},
    {"arrival": 0, "queue": "a", "priority": 0, "pods": 3, "requests": {"cpu": "3"},
     "duration": 5, "readyAfter": 41},
]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(workload, min_size=1, max_size=14), st.integers(0, 3))
@example(SAME_PREEMPTOR_AGAIN, 0)
def test_replay_invariants(items: list[dict[str, Any]], seed: int) -> None:
    out = replay(items, seed)
    # No node is ever over capacity (checked after every instant).
    assert out.bad_nodes == []
    # Conservation: every workload ends finished, deactivated, or still active (pending or
    # running when the run stopped); none is lost, none finished twice.
    states = [w.state for w in out.workloads]
    assert set(states) <= {"finished", "deactivated", "active"}
    ready_capable = [w for w in out.workloads if w.spec.ready_after is not None]
    assert all(w.state in ("finished", "deactivated", "active") for w in ready_capable)
    finished = [d.workload for d in out.decisions if d.kind == "finished"]
    assert len(finished) == len(set(finished))
    # Never preempted while protected by min-runtime...
    preempted = [d for d in out.decisions if d.kind == "preempted"]
    for d in preempted:
        assert d.started is None or d.time >= d.started + MIN_RUNTIME
    # ... nor by the budget: at most 2 preemptions of one workload within any 300 s.
    times: dict[str, list[float]] = {}
    for d in preempted:
        times.setdefault(d.workload, []).append(d.time)
    for ts in times.values():
        for i in range(len(ts) - 2):
            assert ts[i + 2] - ts[i] >= 300 - 1e-6  # float sums of simulated times
    # Lost work is never negative and counts only preemptions.
    assert out.work_lost >= 0
    assert out.preempted_workloads == len(preempted)


@settings(max_examples=15, deadline=None)
@given(st.lists(workload, min_size=1, max_size=10), st.integers(0, 3))
def test_same_trace_config_and_seed_same_decisions(items: list[dict[str, Any]], seed: int) -> None:
    assert replay(items, seed).decisions == replay(items, seed).decisions
