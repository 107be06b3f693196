"""Where runway's CPU goes while kube-scheduler schedules: py-spy samples, sorted by subsystem.

``bench.throughput --profile DIR`` runs ``py-spy record --format raw`` on the runway process for
the measured window of each runway run (its own rounds, not the timed ones: sampling costs the
target some CPU) and this module turns the collapsed stacks into a table: the share of samples
per subsystem, scaled to CPU-µs per scheduled pod with the process's measured CPU time.

A sample belongs to the first rule that matches one of its frames, scanning the rules in order
(so a metrics call inside a verb counts as the verb's metrics, and the watch's decode as the
watch). ``python -m bench.profile FILE.txt [--cpu-s S --pods N]`` prints the table of one file.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

# (category, regex over one frame "function (path:line)"); a sample takes the first category
# whose regex matches any of its frames, scanning categories in this order.
VERB = r"app/api/(fastpath|extender)\.py"
RULES: tuple[tuple[str, str, str], ...] = (
    # (category, must match some frame, and then the leaf-side frame that decides the sub-part)
    ("verb: decode/encode (msgspec)", VERB, r"app/wire/|msgspec"),
    ("verb: decision (policy, state)", VERB, r"app/(policy|state)/"),
    ("verb: metrics + logging", VERB, r"app/(metrics|logs)\.py|prometheus_client|structlog"),
    ("verb: glue (fast path, handler)", VERB, r""),
    (
        "HTTP server (uvicorn, httptools, connections)",
        r"uvicorn|httptools|app/connections\.py",
        r"",
    ),
    ("pod/node watch: decode", r"app/kube/(watch|reflector)\.py", r"app/wire/|msgspec|json"),
    ("pod/node watch: cache + indexes", r"app/kube/(watch|reflector)\.py", r""),
    ("background loops (tasks)", r"app/tasks/", r""),
    ("Kubernetes client (httpx, h11, ssl)", r"httpx|httpcore|h11|h2|ssl\.py|anyio", r""),
    ("asyncio / event loop", r"asyncio|uvloop|selectors", r""),
)
_FRAME_COUNT = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def categorize(lines: Iterable[str]) -> Counter[str]:
    """Samples per category from py-spy's raw (collapsed) output: ``f1;f2;...;leaf COUNT``."""
    out: Counter[str] = Counter()
    compiled = [(name, re.compile(owner), re.compile(part)) for name, owner, part in RULES]
    for line in lines:
        m = _FRAME_COUNT.match(line.strip())
        if not m:
            continue
        frames = m["stack"].split(";")
        count = int(m["count"])
        for name, owner, part in compiled:
            idx = next((i for i, f in enumerate(frames) if owner.search(f)), None)
            if idx is None:
                continue
            below = frames[idx:]
            if part.pattern and not any(part.search(f) for f in below):
                continue
            out[name] += count
            break
        else:
            out["other (GC, interpreter, startup)"] += count
    return out


def table(samples: Counter[str], cpu_s: float | None, pods: int | None) -> list[tuple[str, ...]]:
    """Rows ``(category, share %, CPU-µs per pod)`` in rule order, then a total row."""
    total = sum(samples.values()) or 1
    names = [name for name, _, _ in RULES] + ["other (GC, interpreter, startup)"]
    rows = []
    for name in names:
        share = samples.get(name, 0) / total
        per_pod = "-" if not (cpu_s and pods) else f"{share * cpu_s / pods * 1e6:.0f}"
        rows.append((name, f"{share * 100:.1f}", per_pod))
    per_pod_total = "-" if not (cpu_s and pods) else f"{cpu_s / pods * 1e6:.0f}"
    rows.append(("total", "100.0", per_pod_total))
    return rows


def print_rows(title: str, rows: Sequence[tuple[str, ...]]) -> None:
    """A plain-text table."""
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    print(f"  {'subsystem':{width}s}  {'share %':>8s}  {'CPU µs/pod':>10s}")
    for name, share, per_pod in rows:
        print(f"  {name:{width}s}  {share:>8s}  {per_pod:>10s}")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table of one py-spy raw file."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("raw", type=Path)
    parser.add_argument("--cpu-s", type=float, default=None, help="the process's CPU seconds")
    parser.add_argument("--pods", type=int, default=None, help="pods scheduled in the window")
    ns = parser.parse_args(argv)
    samples = categorize(ns.raw.read_text().splitlines())
    print_rows(str(ns.raw), table(samples, ns.cpu_s, ns.pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
