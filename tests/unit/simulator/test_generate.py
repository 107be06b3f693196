"""The synthetic trace generator: deterministic, shaped by its knobs."""

from __future__ import annotations

import re

import pytest

from app.simulator.generate import GPU, GenerateSpec, QueueRate, generate


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    spec = GenerateSpec(workloads=50, nodes=10)
    assert generate(spec, 1) == generate(spec, 1)
    assert generate(spec, 1) != generate(spec, 2)


def test_knobs_shape_the_trace() -> None:
    spec = GenerateSpec(
        workloads=400,
        nodes=12,
        pools=3,
        queues=(QueueRate("x", 30.0), QueueRate("y", 10.0)),
        high_fraction=0.0,
        never_ready=1.0,
    )
    trace = generate(spec, 5)
    assert len(trace.workloads) == 400
    assert {w.priority for w in trace.workloads} == {0}
    assert all(w.ready_after is None for w in trace.workloads)
    assert [(g.pool, g.count) for g in trace.cluster] == [
        ("pool-0", 4),
        ("pool-1", 4),
        ("pool-2", 4),
    ]
    x = sum(1 for w in trace.workloads if w.queue == "x")
    assert 250 < x < 350  # three times y's rate
    arrivals = [w.arrival for w in trace.workloads]
    assert arrivals == sorted(arrivals)
    # 40 per hour: 400 workloads in about 10 hours.
    assert 8 * 3600 < arrivals[-1] < 12 * 3600
    assert all(w.requests[GPU] <= 8 for w in trace.workloads)


def test_load_sets_the_rate_when_no_queue_has_one() -> None:
    light = generate(GenerateSpec(workloads=300, nodes=10, load=0.5), 3)
    heavy = generate(GenerateSpec(workloads=300, nodes=10, load=1.0), 3)
    assert light.workloads[-1].arrival == pytest.approx(2 * heavy.workloads[-1].arrival, rel=0.01)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (GenerateSpec(workloads=0), "workloads: must be at least 1"),
        (GenerateSpec(load=0), "load: must be in (0, 10]"),
        (GenerateSpec(never_ready=2), "never-ready: must be in [0, 1]"),
        (GenerateSpec(queues=(QueueRate("a", 1.0), QueueRate("b"))), "give every queue a rate"),
        (GenerateSpec(node_cpu=8, node_gpus=8), "node-cpu: 8 cores cannot hold 8 GPUs"),
    ],
)
def test_bad_knobs_are_named(spec: GenerateSpec, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        generate(spec)
