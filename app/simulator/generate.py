"""A synthetic trace from a few knobs (``python -m app simulate --generate``).

Arrivals are a Poisson process, each arrival assigned to a queue in proportion to its rate.
Either every queue names its rate (workloads per hour), or the total rate is set so the offered
GPU load (the sum of pods x GPUs x duration over the trace's span) is ``load`` times the
cluster's GPUs. Per workload: priority ``high_priority`` with probability ``high_fraction``
(else 0); pods and GPUs per pod drawn from small weighted tables; duration log-normal around
``duration_median`` (clamped to [60 s, 7 d]); ready ``U[0, ready_max]`` seconds after a bind,
or never with probability ``never_ready``. Deterministic for a seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.simulator.trace import NodeGroup, Trace, WorkloadSpec

GPU = "nvidia.com/gpu"
CPU_PER_GPU_MILLI = 8000
"""Each pod asks for 8 cores per GPU (and 8 cores when it asks for no GPU)."""
POD_COUNTS = ((1, 0.55), (2, 0.2), (4, 0.15), (8, 0.1))
GPUS_PER_POD = ((1, 0.4), (2, 0.25), (4, 0.2), (8, 0.15))
MIN_DURATION = 60.0
MAX_DURATION = 7 * 86400.0


@dataclass(frozen=True)
class QueueRate:
    """A leaf queue and its arrival rate (workloads per hour; None = share of ``load``)."""

    name: str
    rate_per_hour: float | None = None


@dataclass(frozen=True)
class GenerateSpec:
    """The knobs."""

    workloads: int = 1000
    nodes: int = 100
    node_gpus: int = 8
    node_cpu: int = 64
    pools: int = 1
    """Nodes are split round-robin into this many pools named ``pool-<i>`` (1: no pool)."""
    queues: Sequence[QueueRate] = field(
        default_factory=lambda: (QueueRate("team-a"), QueueRate("team-b"))
    )
    load: float = 0.9
    high_fraction: float = 0.2
    high_priority: int = 100
    duration_median: float = 3600.0
    duration_sigma: float = 1.0
    never_ready: float = 0.02
    ready_max: float = 120.0

    def problems(self) -> list[str]:
        """What is wrong with the knobs (empty when they make sense)."""
        out = []
        if self.workloads < 1:
            out.append(f"workloads: must be at least 1 (got {self.workloads})")
        if self.nodes < 1:
            out.append(f"nodes: must be at least 1 (got {self.nodes})")
        if self.node_gpus < 0 or self.node_cpu < 1:
            out.append(
                f"node size: need cpu >= 1 and gpus >= 0 (got {self.node_cpu}, {self.node_gpus})"
            )
        if self.node_gpus and self.node_gpus * CPU_PER_GPU_MILLI > self.node_cpu * 1000:
            out.append(
                f"node-cpu: {self.node_cpu} cores cannot hold {self.node_gpus} GPUs' pods "
                f"({CPU_PER_GPU_MILLI // 1000} cores per GPU)"
            )
        if self.pools < 1:
            out.append(f"pools: must be at least 1 (got {self.pools})")
        if not self.queues:
            out.append("queues: at least one queue")
        if not 0 < self.load <= 10:
            out.append(f"load: must be in (0, 10] (got {self.load})")
        for name, value in (
            ("high-fraction", self.high_fraction),
            ("never-ready", self.never_ready),
        ):
            if not 0 <= value <= 1:
                out.append(f"{name}: must be in [0, 1] (got {value})")
        if self.duration_median <= 0 or self.duration_sigma < 0:
            out.append("duration: median must be positive and sigma not negative")
        rates = [q.rate_per_hour for q in self.queues]
        if any(r is not None for r in rates) and any(r is None for r in rates):
            out.append("queues: give every queue a rate, or none (then --load sets them)")
        if any(r is not None and r <= 0 for r in rates):
            out.append("queues: a rate must be positive")
        return out


def _pick(rng: random.Random, table: Sequence[tuple[int, float]]) -> int:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def cluster_of(spec: GenerateSpec) -> tuple[NodeGroup, ...]:
    """The generated cluster: ``nodes`` identical nodes, round-robin into pools."""
    alloc: dict[str, int] = {"cpu": spec.node_cpu * 1000}
    if spec.node_gpus:
        alloc[GPU] = spec.node_gpus
    if spec.pools == 1:
        return (NodeGroup("node", spec.nodes, alloc),)
    groups = []
    for i in range(spec.pools):
        count = spec.nodes // spec.pools + (1 if i < spec.nodes % spec.pools else 0)
        if count:
            groups.append(NodeGroup(f"pool{i}", count, alloc, pool=f"pool-{i}"))
    return tuple(groups)


def generate(spec: GenerateSpec, seed: int = 0) -> Trace:
    """The synthetic trace (``ValueError`` naming the knob when the knobs make no sense)."""
    problems = spec.problems()
    if problems:
        raise ValueError("; ".join(problems))
    rng = random.Random(seed)
    gpus_per_node = spec.node_gpus
    max_gpus = gpus_per_node
    shapes = []
    for _ in range(spec.workloads):
        pods = _pick(rng, POD_COUNTS)
        if gpus_per_node:
            gpus = min(_pick(rng, GPUS_PER_POD), max_gpus)
            requests = {"cpu": gpus * CPU_PER_GPU_MILLI, GPU: gpus}
        else:
            gpus = 0
            requests = {"cpu": min(CPU_PER_GPU_MILLI, spec.node_cpu * 1000)}
        duration = spec.duration_median * math.exp(rng.gauss(0.0, spec.duration_sigma))
        duration = round(min(max(duration, MIN_DURATION), MAX_DURATION), 1)
        high = rng.random() < spec.high_fraction
        never = rng.random() < spec.never_ready
        ready = None if never else round(rng.uniform(0.0, spec.ready_max), 1)
        shapes.append((pods, requests, duration, high, ready))
    rates = [q.rate_per_hour for q in spec.queues]
    if all(r is not None for r in rates):
        total_rate = sum(r for r in rates if r is not None) / 3600.0
        weights = [r or 0.0 for r in rates]
    else:
        unit = GPU if gpus_per_node else "cpu"
        capacity = sum(g.count * g.allocatable.get(unit, 0) for g in cluster_of(spec))
        work = sum(p * r.get(unit, 0) * d for p, r, d, _, _ in shapes)
        span = work / (spec.load * capacity)
        total_rate = spec.workloads / span
        weights = [1.0] * len(spec.queues)
    names = [q.name for q in spec.queues]
    width = len(str(spec.workloads - 1))
    t = 0.0
    out = []
    for i, (pods, requests, duration, high, ready) in enumerate(shapes):
        t += rng.expovariate(total_rate)
        queue = rng.choices(names, weights=weights)[0]
        out.append(
            WorkloadSpec(
                name=f"w{i:0{width}d}",
                arrival=round(t, 1),
                duration=duration,
                queue=queue,
                priority=spec.high_priority if high else 0,
                pods=pods,
                requests=requests,
                ready_after=ready,
            )
        )
    return Trace(tuple(out), cluster_of(spec))
