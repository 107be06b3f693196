"""Simulator benchmark: a generated 10,000-workload trace replayed on 1,000 nodes.

    python -m bench.simulate                  # 10,000 workloads, 1,000 nodes, two configs
    python -m bench.simulate --workloads 2000 --nodes 200 --quick

The trace comes from ``python -m app simulate --generate``'s generator (seed 1; median duration
6 h so the trace spans several days); each config (``bench/configs/*.yaml``: a baseline, and
the same with a min-runtime and a preemption budget) is replayed in a fresh process with the
real policy calls, timed from the parsed trace to the summary. Prints the simulator's table and
the wall time per config; writes ``bench/out/simulate.json``. The bar (issue #16): under a
minute per replay of 10,000 workloads on 1,000 nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BAR_SECONDS = 60.0
CONFIGS = Path(__file__).parent / "configs"


def replay(trace: str, config: str, seed: int) -> dict[str, object]:
    """One replay, in this process; the summary plus wall and CPU seconds."""
    from app.config import load_config
    from app.simulator.engine import SimOptions, simulate
    from app.simulator.report import summarize
    from app.simulator.trace import load_trace

    parsed = load_trace(trace)
    cfg = load_config(config)
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = simulate(cfg, parsed, options=SimOptions(seed=seed))
    summary = summarize(Path(config).stem, outcome)
    summary.pop("series")
    return {
        "summary": summary,
        "wallSeconds": round(time.perf_counter() - wall, 2),
        "cpuSeconds": round(time.process_time() - cpu, 2),
    }


def main() -> int:
    """Generate the trace, replay it per config in fresh processes, print and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--duration-median", type=float, default=6 * 3600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--configs", nargs="+", default=[str(p) for p in sorted(CONFIGS.glob("*.yaml"))]
    )
    parser.add_argument("--quick", action="store_true", help="only the first config")
    parser.add_argument("--output", default="bench/out/simulate.json")
    parser.add_argument("--replay", nargs=2, metavar=("TRACE", "CONFIG"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.replay:
        print(json.dumps(replay(ns.replay[0], ns.replay[1], ns.seed)))
        return 0
    configs = ns.configs[:1] if ns.quick else ns.configs
    results = []
    with tempfile.TemporaryDirectory(prefix="runway-sim-") as tmp:
        trace = str(Path(tmp) / "trace.jsonl")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "app",
                "simulate",
                "--generate",
                trace,
                "--workloads",
                str(ns.workloads),
                "--nodes",
                str(ns.nodes),
                "--duration-median",
                str(ns.duration_median),
                "--seed",
                str(ns.seed),
            ],
            check=True,
        )
        for config in configs:
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.simulate",
                    "--seed",
                    str(ns.seed),
                    "--replay",
                    trace,
                    config,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    from app.simulator.report import table

    summaries = [r["summary"] for r in results]
    for s in summaries:
        s["series"] = {}
    sys.stdout.write(table(summaries))
    print()
    print(f"{'config':<12} {'wall s':>7} {'cpu s':>7} {'bar':>5}")
    for r in results:
        ok = r["wallSeconds"] < BAR_SECONDS
        name = r["summary"]["config"]
        verdict = "ok" if ok else "FAIL"
        print(f"{name:<12} {r['wallSeconds']:>7} {r['cpuSeconds']:>7} {verdict:>5}")
    doc = {
        "benchmark": "simulate",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "workloads": ns.workloads,
        "nodes": ns.nodes,
        "seed": ns.seed,
        "barSeconds": BAR_SECONDS,
        "results": results,
    }
    Path(ns.output).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.output).write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(r["wallSeconds"] < BAR_SECONDS for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
