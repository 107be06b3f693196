"""What a run measured, as JSON and as a side-by-side table (docs/simulator.md, "Output").

Per config: preemptions (executed, one preemptor pod each), preempted workloads (workload
evictions by preemption; a workload preempted twice counts twice), evicted pods, work lost
(victim pod-seconds thrown away: the time each preempted pod had run), workloads preempted at
least twice, PodsReady timeout evictions, deactivations, utilisation per resource (allocated
resource-seconds over capacity x the simulated span), and per leaf queue and per priority the
p50/p95 of each workload's queue wait (the time from its arrival, or from an eviction that reset
its start, to its start — the minAvailable-th bind; a workload still waiting at the end counts
until then).
Times are seconds of simulated time; every number is rounded to 3 decimals so the JSON of a
trace, a config and a seed is byte-identical from run to run.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from app.simulator.engine import Outcome

SERIES_BUCKET_SECONDS = 3600.0


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q`` percentile (0..100) by linear interpolation (``statistics.quantiles``)."""
    if not samples:
        return 0.0
    if len(samples) == 1:
        return float(samples[0])
    if q >= 100:
        return float(max(samples))
    return statistics.quantiles(samples, n=100, method="inclusive")[max(int(q), 1) - 1]


def _r(value: float) -> float:
    return round(float(value), 3)


def series(outcome: Outcome, bucket: float = SERIES_BUCKET_SECONDS) -> dict[str, Any]:
    """Per bucket of simulated time: the mean queue wait of the workloads that started in it,
    and the work lost so far (cumulative), for the plot."""
    count = int(outcome.end // bucket) + 1 if outcome.end > 0 else 1
    waits: list[list[float]] = [[] for _ in range(count)]
    for at, _queue, waited in outcome.wait_series:
        waits[min(int(at // bucket), count - 1)].append(waited)
    lost = [0.0] * count
    for at, amount in outcome.lost_series:
        lost[min(int(at // bucket), count - 1)] += amount
    cumulative = []
    total = 0.0
    for amount in lost:
        total += amount
        cumulative.append(_r(total))
    return {
        "bucketSeconds": bucket,
        "queueWaitMeanSeconds": [_r(sum(w) / len(w)) if w else None for w in waits],
        "workLostCumulativeSeconds": cumulative,
    }


def _waits(samples: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(samples),
        "p50Seconds": _r(percentile(samples, 50)),
        "p95Seconds": _r(percentile(samples, 95)),
    }


def summarize(name: str, outcome: Outcome, *, decisions: bool = False) -> dict[str, Any]:
    """The JSON object of one run."""
    states: dict[str, int] = {"finished": 0, "deactivated": 0, "pending": 0, "running": 0}
    per_queue: dict[str, list[float]] = {}
    per_priority: dict[int, list[float]] = {}
    for w in outcome.workloads:
        if w.state == "waiting":
            continue
        if w.state == "active":
            states[
                "running" if not w.has_pending and w.life.started is not None else "pending"
            ] += 1
        else:
            states[w.state] += 1
        per_queue.setdefault(w.spec.queue, []).append(w.wait)
        per_priority.setdefault(w.spec.priority, []).append(w.wait)
    span = outcome.end
    utilisation = {
        k: _r(outcome.used_seconds.get(k, 0.0) / (cap * span)) if cap and span > 0 else 0.0
        for k, cap in sorted(outcome.capacity.items())
    }
    out: dict[str, Any] = {
        "config": name,
        "simulatedSeconds": _r(span),
        "workloads": dict(sorted(states.items())),
        "preemptions": outcome.preemptions,
        "preemptedWorkloads": outcome.preempted_workloads,
        "evictedPods": outcome.evicted_pods,
        "workLostSeconds": _r(outcome.work_lost),
        "workloadsPreemptedTwiceOrMore": sum(
            1 for w in outcome.workloads if w.times_preempted >= 2
        ),
        "podsReadyTimeoutEvictions": outcome.pods_ready_evictions,
        "deactivations": outcome.deactivations,
        "utilisation": utilisation,
        "queueWait": {q: _waits(v) for q, v in sorted(per_queue.items())},
        "queueWaitByPriority": {str(p): _waits(v) for p, v in sorted(per_priority.items())},
        "series": series(outcome),
    }
    if decisions:
        out["decisions"] = [d.to_dict() for d in outcome.decisions]
    return out


def to_json(trace: str, seed: int, results: Sequence[Mapping[str, Any]]) -> str:
    """The output document: byte-identical for the same inputs."""
    doc = {"trace": trace, "seed": seed, "results": list(results)}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def table(results: Sequence[Mapping[str, Any]]) -> str:
    """The results side by side, one column per config (Markdown)."""
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cell: Any) -> None:
        rows.append((label, [cell(r) for r in results]))

    row("preemptions", lambda r: f"{r['preemptions']:,}")
    row("preempted workloads", lambda r: f"{r['preemptedWorkloads']:,}")
    row("work lost (victim pod-hours)", lambda r: _hours(r["workLostSeconds"]))
    row("workloads preempted ≥ 2 times", lambda r: f"{r['workloadsPreemptedTwiceOrMore']:,}")
    row("evictions (PodsReady timeout)", lambda r: f"{r['podsReadyTimeoutEvictions']:,}")
    row("deactivations", lambda r: f"{r['deactivations']:,}")
    resources = sorted({k for r in results for k in r["utilisation"]})
    for k in resources:
        row(f"utilisation {k}", lambda r, k=k: f"{100 * r['utilisation'].get(k, 0.0):.1f} %")
    queues = sorted({q for r in results for q in r["queueWait"]})
    priorities = sorted({int(p) for r in results for p in r["queueWaitByPriority"]})
    for key, label, group in (
        *(("queueWait", q, q) for q in queues),
        *(("queueWaitByPriority", f"priority {p}", str(p)) for p in priorities),
    ):
        for pct in ("p50", "p95"):
            row(
                f"queue wait {label} {pct}",
                lambda r, key=key, g=group, pct=pct: (
                    _duration(r[key][g][f"{pct}Seconds"]) if g in r[key] else "-"
                ),
            )
    row(
        "finished / deactivated / left",
        lambda r: (
            f"{r['workloads']['finished']:,} / {r['workloads']['deactivated']:,} / "
            f"{r['workloads']['pending'] + r['workloads']['running']:,}"
        ),
    )
    row("simulated time", lambda r: f"{r['simulatedSeconds'] / 86400:.2f} d")
    header = ["", *[str(r["config"]) for r in results]]
    lines = [
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * len(results),
    ]
    lines += ["| " + " | ".join([label, *cells]) + " |" for label, cells in rows]
    return "\n".join(lines) + "\n"
