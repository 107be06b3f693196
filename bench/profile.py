"""Where runway's CPU goes while kube-scheduler schedules: py-spy samples, sorted by subsystem.

``bench.throughput --profile DIR`` runs ``py-spy record --format raw`` on the runway process for
the measured window of each runway run (its own rounds, not the timed ones: sampling costs the
target some CPU) and this module turns the collapsed stacks into a table: the share of samples
per subsystem, scaled to CPU-µs per scheduled pod with the process's measured CPU time.

A sample belongs to the subsystem of the first frame the event loop called (a verb request,
an HTTP protocol callback, the pod watch, a background loop), refined by its leaf-most frame
(a verb's time in msgspec is its decode, in policy its decision). Only samples holding the GIL
are taken (``--gil``), so a thread waiting in epoll is not counted as busy.
``python -m bench.profile FILE.txt [--cpu-s S --pods N]`` prints the table of one file.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

_ROOT = re.compile(r"Runner\.run \(asyncio/runners\.py|run_until_complete|run_forever")
_VERB = re.compile(r"app/api/(fastpath|extender)\.py|_reply \(app/connections")
_VERB_PARTS = (
    ("verb: HTTP send (uvicorn)", re.compile(r"uvicorn/|_reply \(app/connections")),
    ("verb: metrics + logging", re.compile(r"app/(metrics|logs)\.py|prometheus_client|structlog")),
    ("verb: decode/encode (msgspec)", re.compile(r"app/wire/|msgspec")),
    ("verb: decision (policy, state)", re.compile(r"app/(policy|state)/")),
)
_WATCH_PARTS = (
    ("watch: network (httpx, TLS)", re.compile(r"httpx|httpcore|anyio|ssl\.py|h11")),
    ("watch: decode", re.compile(r"app/wire/|msgspec|json")),
)
_LOOP = re.compile(r"^(\w+)\.(run_once|tick_once|_loop|run)\b")
CATEGORIES = (
    "verb: decision (policy, state)",
    "verb: decode/encode (msgspec)",
    "verb: metrics + logging",
    "verb: HTTP send (uvicorn)",
    "verb: glue (fast path, handler)",
    "HTTP server (uvicorn, httptools)",
    "REST API and /metrics (FastAPI)",
    "watch: network (httpx, TLS)",
    "watch: decode",
    "watch: cache + indexes",
    "event loop (uvloop, C)",
    "other",
)
"""Categories in table order; background loops add ``background: <class>`` rows."""
_FRAME_COUNT = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def _leafmost(frames: list[str], parts: tuple[tuple[str, re.Pattern[str]], ...]) -> str | None:
    """The part whose pattern matches the frame nearest the leaf (None: no frame matches)."""
    for frame in reversed(frames):
        for name, pattern in parts:
            if pattern.search(frame):
                return name
    return None


def category(frames: list[str]) -> str:
    """The subsystem a sample belongs to: decided by the first frame the event loop called
    (a request, a protocol callback, a supervised loop), refined by the leaf-most frame."""
    roots = [i for i, f in enumerate(frames) if _ROOT.search(f)]
    below = frames[roots[-1] + 1 :] if roots else frames
    if not below:
        return "event loop (uvloop, C)"
    top = below[0]
    if any(_VERB.search(f) for f in below):  # through ASGI, or answered by the protocol
        return _leafmost(below, _VERB_PARTS) or "verb: glue (fast path, handler)"
    if "run_asgi" in top:
        return "REST API and /metrics (FastAPI)"
    if "uvicorn/" in top or "app/connections.py" in top or "httptools" in top:
        return "HTTP server (uvicorn, httptools)"
    if any("app/kube/reflector.py" in f or "app/kube/watch.py" in f for f in below):
        return _leafmost(below, _WATCH_PARTS) or "watch: cache + indexes"
    loops = [m.group(1) for f in below if (m := _LOOP.match(f)) and "app/tasks/" in f]
    named = [name for name in loops if name != "Ticker"]  # the subclass, not the base loop
    if named or loops:
        return f"background: {(named or loops)[0]}"
    return "other"


def categorize(lines: Iterable[str]) -> Counter[str]:
    """Samples per category from py-spy's raw (collapsed) output: ``f1;f2;...;leaf COUNT``."""
    out: Counter[str] = Counter()
    for line in lines:
        m = _FRAME_COUNT.match(line.strip())
        if m:
            out[category(m["stack"].split(";"))] += int(m["count"])
    return out


def table(samples: Counter[str], cpu_s: float | None, pods: int | None) -> list[tuple[str, ...]]:
    """Rows ``(category, share %, CPU-µs per pod)`` in rule order, then a total row."""
    total = sum(samples.values()) or 1
    loops = sorted(k for k in samples if k.startswith("background: "))
    names = [*CATEGORIES[:-1], *loops, CATEGORIES[-1]]
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
