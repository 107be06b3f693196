"""Extender speed benchmark (DESIGN §10): decoders, in-process verbs, and loopback HTTP.

Run ``python -m bench.extender [--quick] [--out bench/out/extender.json]``. Three parts:

1. decoders: ways to decode the 5,000-node ``NodeList`` filter body (pydantic, orjson, json,
   msgspec with full structs, runway's lean decode);
2. in-process: ``handle_filter/handle_prioritize/handle_preempt`` on 100/1,000/5,000 nodes in
   both modes (bar: filter on 5,000 names p99 ≤ 5 ms);
3. http: runway, the transport floor (``bench.floor``) and the Go peer each as a subprocess on a
   free loopback port, driven by one keep-alive curl per batch, in interleaved rounds so that
   machine noise hits every server alike (bar: 5,000-node NodeList filter ≤ 1.5x the floor).

Every process started here is stopped by its pid, even on failure.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec
import orjson
from pydantic import BaseModel

from app.api.context import ApiContext
from app.api.extender import handle_filter, handle_preempt, handle_prioritize
from app.config import RunwayConfig
from app.server import settle_heap
from app.wire import ArgsReader, decode_extender_args
from app.wiring import build
from bench import payloads
from tests.runway_process import stop

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
GO_PEER = Path.home() / ".cache" / "runway-k8s" / "bin" / "goextender"
GO_BUILD = Path("/work/shared/tools/go-peer/build.sh")
SIZES = (100, 1_000, 5_000)
MODES = ("names", "list")
MB = 1_000_000
IN_PROCESS_BAR_S = 0.005
HTTP_BAR_RATIO = 1.5
SLOW_CALL_S = 2.0  # an in-process call slower than this is timed cold, not repeated
GO_TOOLCHAIN = Path("/usr/local/go/bin/go")


def go_command() -> str | None:
    """The machine's ``go`` (on PATH, else ``/usr/local/go/bin/go``) for the benchmarks' Go
    floors (``bench/go_webhook``, ``bench/go_extender``); None where there is none."""
    return shutil.which("go") or (str(GO_TOOLCHAIN) if GO_TOOLCHAIN.exists() else None)


def build_go(source: Path, binary: Path) -> Path | None:
    """Build the Go module in ``source`` (a benchmark's floor) to ``binary`` with the machine's
    Go (``go_command``); the binary, or None where there is no Go."""
    go = go_command()
    if go is None:
        return None
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=source, check=True, timeout=600)
    return binary


# --------------------------------------------------------------------------- statistics


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q`` percentile (0..100) by linear interpolation between closest ranks."""
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Stats:
    """Latency summary of one measured case (seconds) and its throughput."""

    n: int
    p50: float
    p99: float
    min: float
    max: float
    mean: float
    mb_per_s: float

    @classmethod
    def of(cls, samples: Sequence[float], size: int) -> Stats:
        """Summarise ``samples`` for a request of ``size`` bytes (MB/s at the median)."""
        p50 = percentile(samples, 50)
        return cls(
            n=len(samples),
            p50=p50,
            p99=percentile(samples, 99),
            min=min(samples),
            max=max(samples),
            mean=statistics.fmean(samples),
            mb_per_s=size / MB / p50 if p50 > 0 else 0.0,
        )


def ms(seconds: float) -> str:
    """Seconds as milliseconds with a precision fit for a table."""
    value = seconds * 1e3
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain aligned table on stdout."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


# --------------------------------------------------------------------------- payloads


@dataclass(frozen=True)
class Payload:
    """One request body, kept in memory and on disk (for curl)."""

    verb: str
    n: int
    mode: str
    body: bytes
    path: Path


class Payloads:
    """Builds each body once (a 5,000-node NodeList takes a second or so) and caches it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cache: dict[tuple[str, int, str], Payload] = {}

    def get(self, verb: str, n: int, mode: str) -> Payload:
        """The ``verb`` body for ``n`` nodes in ``mode`` (``names`` or ``list``)."""
        key = (verb, n, mode)
        if key not in self._cache:
            if verb == "preempt":
                body = payloads.preemption_args(n, mode)
                stem = f"preempt-{mode}-{n}"
            else:  # filter and prioritize share ExtenderArgs
                shared = self._cache.get(("filter", n, mode)) or self._cache.get(
                    ("prioritize", n, mode)
                )
                body = shared.body if shared else payloads.extender_args(n, mode)
                stem = f"args-{mode}-{n}"
            path = self.directory / f"{stem}.json"
            if not path.exists() or path.stat().st_size != len(body):
                self.directory.mkdir(parents=True, exist_ok=True)
                path.write_bytes(body)
            self._cache[key] = Payload(verb, n, mode, body, path)
        return self._cache[key]


# --------------------------------------------------------------------------- 1. decoders


class _PydMeta(BaseModel):
    name: str


class _PydNode(BaseModel):
    metadata: _PydMeta


class _PydNodeList(BaseModel):
    items: list[_PydNode]


class PydanticArgs(BaseModel):
    """The smallest pydantic model of ``ExtenderArgs`` that yields the nodes' names."""

    Pod: dict[str, Any]
    Nodes: _PydNodeList | None = None
    NodeNames: list[str] | None = None


# msgspec with full structs: every field the synthetic Node carries, typed like the Go types.
class _FMeta(msgspec.Struct):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _FSpec(msgspec.Struct):
    podCIDR: str = ""
    providerID: str = ""


class _FCondition(msgspec.Struct):
    type: str = ""
    status: str = ""
    lastHeartbeatTime: str | None = None
    lastTransitionTime: str | None = None
    reason: str = ""
    message: str = ""


class _FAddress(msgspec.Struct):
    type: str = ""
    address: str = ""


class _FPort(msgspec.Struct):
    Port: int = 0


class _FEndpoints(msgspec.Struct):
    kubeletEndpoint: _FPort | None = None


class _FInfo(msgspec.Struct):
    machineID: str = ""
    systemUUID: str = ""
    bootID: str = ""
    kernelVersion: str = ""
    osImage: str = ""
    containerRuntimeVersion: str = ""
    kubeletVersion: str = ""
    kubeProxyVersion: str = ""
    operatingSystem: str = ""
    architecture: str = ""


class _FImage(msgspec.Struct):
    names: list[str] | None = None
    sizeBytes: int = 0


class _FStatus(msgspec.Struct):
    capacity: dict[str, str] | None = None
    allocatable: dict[str, str] | None = None
    conditions: list[_FCondition] | None = None
    addresses: list[_FAddress] | None = None
    daemonEndpoints: _FEndpoints | None = None
    nodeInfo: _FInfo | None = None
    images: list[_FImage] | None = None


class _FNode(msgspec.Struct):
    metadata: _FMeta | None = None
    spec: _FSpec | None = None
    status: _FStatus | None = None


class _FNodeList(msgspec.Struct):
    metadata: dict[str, Any] | None = None
    items: list[_FNode] | None = None


class FullArgs(msgspec.Struct):
    """``ExtenderArgs`` with every node fully typed (what a Go extender builds)."""

    Pod: dict[str, Any] | None = None
    Nodes: _FNodeList | None = None
    NodeNames: list[str] | None = None


_full_decoder = msgspec.json.Decoder(FullArgs)


def _pydantic(body: bytes) -> int:
    args = PydanticArgs.model_validate_json(body)
    assert args.Nodes is not None
    return len([n.metadata.name for n in args.Nodes.items])


def _orjson(body: bytes) -> int:
    return len([n["metadata"]["name"] for n in orjson.loads(body)["Nodes"]["items"]])


def _stdlib(body: bytes) -> int:
    return len([n["metadata"]["name"] for n in json.loads(body)["Nodes"]["items"]])


def _msgspec_full(body: bytes) -> int:
    args = _full_decoder.decode(body)
    assert args.Nodes is not None and args.Nodes.items is not None
    return len([n.metadata.name for n in args.Nodes.items if n.metadata])


def _msgspec_any(body: bytes) -> int:
    return len([n["metadata"]["name"] for n in msgspec.json.decode(body)["Nodes"]["items"]])


def _runway(body: bytes) -> int:
    args = decode_extender_args(body)
    assert args.nodes is not None
    return len(args.nodes.items)


def _runway_names(body: bytes) -> int:
    return len(decode_extender_args(body).names())


DECODERS: tuple[tuple[str, str, Callable[[bytes], int]], ...] = (
    ("pydantic model_validate_json", "names only, Pod as dict", _pydantic),
    ("stdlib json.loads", "dicts", _stdlib),
    ("orjson.loads", "dicts", _orjson),
    ("msgspec.json.decode (untyped)", "dicts", _msgspec_any),
    ("msgspec full structs", "every Node field typed", _msgspec_full),
    ("runway decode_extender_args", "Pod struct, nodes raw", _runway),
    ("runway decode + names()", "plus name and labels", _runway_names),
)


def bench_decoders(store: Payloads, quick: bool) -> list[dict[str, Any]]:
    """Time each decoder on the 5,000-node NodeList filter body."""
    payload = store.get("filter", 5_000, "list")
    body = payload.body
    rounds = 3 if quick else 7
    results: list[dict[str, Any]] = []
    for name, what, fn in DECODERS:
        assert fn(body) == 5_000  # warm-up and a check that it decoded every node
        samples = []
        for _ in range(rounds):
            gc.collect()
            start = time.perf_counter()
            fn(body)
            samples.append(time.perf_counter() - start)
        stats = Stats.of(samples, len(body))
        results.append({"decoder": name, "builds": what, **asdict(stats)})
    base = next(r["p50"] for r in results if r["decoder"].startswith("runway decode_"))
    print_table(
        f"1. decoders: 5,000-node NodeList filter body ({len(body) / MB:.1f} MB), {rounds} runs",
        ("decoder", "builds", "p50 ms", "min ms", "MB/s", "x runway"),
        [
            (
                r["decoder"],
                r["builds"],
                ms(r["p50"]),
                ms(r["min"]),
                f"{r['mb_per_s']:.0f}",
                f"{r['p50'] / base:.1f}",
            )
            for r in results
        ],
    )
    return results


# --------------------------------------------------------------------------- 2. in-process

Handler = Callable[[ApiContext, bytes], bytes]
HANDLERS: dict[str, Handler] = {
    "filter": handle_filter,
    "prioritize": handle_prioritize,
    "preempt": handle_preempt,
}


def _iterations(warm_s: float, quick: bool) -> int:
    """Runs for one case: 200+ when a call is under 10 ms, 30+ above, within a time budget.

    ``warm_s`` is the slowest warm-up call; the budget (6 s, 1.5 s quick) only trims the count
    between those floors and 1,000.
    """
    floor = 200 if warm_s < 0.010 else 30
    budget = 1.5 if quick else 6.0
    if quick:
        floor = max(20, floor // 5)
    return max(floor, min(1_000, int(budget / max(warm_s, 1e-6))))


def bench_in_process(store: Payloads, quick: bool) -> list[dict[str, Any]]:
    """p50/p99 of each verb called as a function (decode → policy → encode, no HTTP), with the
    garbage collector tuned as the server tunes it at startup."""
    # Every call decodes: one body is repeated here, which the one-entry memo that spares
    # prioritize a second decode of filter's body would otherwise answer from memory.
    runtime = replace(build(RunwayConfig()).api_context(), read_args=ArgsReader(memo_bytes=0))
    settle_heap()
    results: list[dict[str, Any]] = []
    for verb, handler in HANDLERS.items():
        for mode in MODES:
            for n in SIZES:
                payload = store.get(verb, n, mode)
                note = ""
                samples, cpu = [], []
                for _ in range(3):  # warm-up, and an estimate of a call's cost
                    start, start_cpu = time.perf_counter(), time.thread_time()
                    reply = handler(runtime, payload.body)
                    cpu.append(time.thread_time() - start_cpu)
                    samples.append(time.perf_counter() - start)
                    if samples[-1] > SLOW_CALL_S:
                        break
                if max(samples) > SLOW_CALL_S:
                    # A pathological case: report the cold calls rather than stall the run.
                    note = f"{len(samples)} cold call(s) only: slower than {SLOW_CALL_S:.0f} s"
                else:
                    iterations = _iterations(max(samples), quick)
                    samples, cpu = [], []
                    for _ in range(iterations):
                        start, start_cpu = time.perf_counter(), time.thread_time()
                        reply = handler(runtime, payload.body)
                        cpu.append(time.thread_time() - start_cpu)
                        samples.append(time.perf_counter() - start)
                stats = Stats.of(samples, len(payload.body))
                results.append(
                    {
                        "verb": verb,
                        "mode": mode,
                        "nodes": n,
                        "request_bytes": len(payload.body),
                        "reply_bytes": len(reply),
                        **asdict(stats),
                        "cpu_p50": percentile(cpu, 50),
                        "cpu_p99": percentile(cpu, 99),
                        "note": note,
                    }
                )
                if note:
                    print(f"  in-process {verb} {mode} {n}: {note}", flush=True)
    print_table(
        "2. in-process: handle_<verb>(runtime, body) → reply bytes (gc on)",
        (
            "verb",
            "mode",
            "nodes",
            "req MB",
            "runs",
            "p50 ms",
            "p99 ms",
            "max ms",
            "MB/s",
            "cpu p50",
            "cpu p99",
        ),
        [
            (
                r["verb"],
                r["mode"],
                f"{r['nodes']:,}",
                f"{r['request_bytes'] / MB:.2f}",
                str(r["n"]),
                ms(r["p50"]),
                ms(r["p99"]),
                ms(r["max"]),
                f"{r['mb_per_s']:.0f}",
                ms(r["cpu_p50"]),
                ms(r["cpu_p99"]),
            )
            for r in results
        ],
    )
    return results


# --------------------------------------------------------------------------- 3. http


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """One server under test, running as a subprocess."""

    name: str
    url: str
    pid: int
    log: Path


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: exited with {proc.returncode} before answering /healthz")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)  # polling interval
    raise TimeoutError(f"{url} did not answer /healthz within {deadline_s}s")


@contextmanager
def serve(name: str, argv: Sequence[str], port: int, logs: Path) -> Iterator[Server]:
    """Start ``argv`` (listening on ``port``), wait for /healthz, stop it by pid on exit."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "RUNWAY_CONFIG")}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc)
        yield Server(name, url, proc.pid, log)
    finally:
        stop(proc)


def ensure_go_peer() -> Path | None:
    """The Go peer's binary, built by ``build.sh`` when missing; None when it cannot be had."""
    if GO_PEER.exists():
        return GO_PEER
    if not GO_BUILD.exists():
        return None
    print(f"building the Go peer with {GO_BUILD} (a few minutes)...", flush=True)
    done = subprocess.run(["bash", str(GO_BUILD)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"Go peer build failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return Path(done.stdout.strip().splitlines()[-1])


def curl_batch(url: str, payload: Path, count: int) -> list[float]:
    """POST ``payload`` ``count`` + 1 times over one keep-alive connection; per-request seconds.

    One curl process drives the whole batch (a URL glob), so neither process startup nor the
    TCP handshake is in the measure: the first transfer, which connects, is dropped.
    """
    argv = [
        "curl",
        "-s",
        "--fail-with-body",
        "-H",
        "Content-Type: application/json",
        "-H",
        "Expect:",  # no 100-continue round trip on large bodies (kube-scheduler sends none)
        "--data-binary",
        f"@{payload}",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{time_total} %{size_download}\\n",
        f"{url}?i=[0-{count}]",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900)
    lines = done.stdout.split()
    samples = []
    for code, total, _size in zip(lines[0::3], lines[1::3], lines[2::3], strict=True):
        if code != "200":
            raise RuntimeError(f"{url}: HTTP {code} (curl exit {done.returncode})")
        samples.append(float(total))
    if len(samples) != count + 1:
        raise RuntimeError(f"{url}: {len(samples)} of {count + 1} transfers ({done.stderr})")
    return samples[1:]


@dataclass
class HttpCase:
    """One verb/size/mode over loopback, measured on every server."""

    verb: str
    n: int
    mode: str
    samples: dict[str, list[float]] = field(default_factory=dict)


def _http_plan(quick: bool) -> list[tuple[str, int, str, int, int]]:
    """(verb, nodes, mode, samples per server, batch size) of every loopback case."""
    plan = []
    for verb, modes in (("filter", MODES), ("prioritize", ("names",))):
        for mode in modes:
            for n in SIZES:
                big = mode == "list" and n >= 1_000
                # 100 samples even for 50 MB bodies: with fewer, "p99" is just the max.
                samples = 100 if big else 300
                if quick:
                    samples = max(10, samples // 5)
                batch = 5 if big else 50
                plan.append((verb, n, mode, samples, min(batch, samples)))
    return plan


def bench_http(store: Payloads, quick: bool, with_go: bool, logs: Path) -> list[dict[str, Any]]:
    """Every loopback case on the floor, runway and the Go peer, in interleaved rounds."""
    go = ensure_go_peer() if with_go else None
    if with_go and go is None:
        print("Go peer unavailable: measuring runway and the floor only", file=sys.stderr)
    if shutil.which("curl") is None:
        raise RuntimeError("curl is required for the loopback benchmark")
    ports = {name: free_port() for name in ("floor", "runway", "go")}
    py = sys.executable
    specs: list[tuple[str, list[str]]] = [
        ("floor", [py, "-m", "bench.floor", "--port", str(ports["floor"])]),
        ("runway", [py, "-m", "app", "serve", "--port", str(ports["runway"])]),
    ]
    if go is not None:
        specs.append(("go", [str(go), "--port", str(ports["go"])]))
    cases: list[HttpCase] = []
    with ExitStack() as stack:
        servers = [
            stack.enter_context(serve(name, argv, ports[name], logs)) for name, argv in specs
        ]
        for verb, n, mode, samples, batch in _http_plan(quick):
            payload = store.get(verb, n, mode)
            case = HttpCase(verb, n, mode, {s.name: [] for s in servers})
            for s in servers:  # warm-up: imports, first-call caches, allocator growth
                curl_batch(f"{s.url}/scheduler/{verb}", payload.path, min(batch, 5))
            rounds = 0
            while any(len(v) < samples for v in case.samples.values()):
                # Rotate the order so that no server always runs right after another one.
                order = servers[rounds % len(servers) :] + servers[: rounds % len(servers)]
                for s in order:
                    want = min(batch, samples - len(case.samples[s.name]))
                    if want > 0:
                        url = f"{s.url}/scheduler/{verb}"
                        case.samples[s.name] += curl_batch(url, payload.path, want)
                rounds += 1
            cases.append(case)
            print(f"  http {verb} {mode} {n}: done", flush=True)
    results: list[dict[str, Any]] = []
    for case in cases:
        payload = store.get(case.verb, case.n, case.mode)
        floor = Stats.of(case.samples["floor"], len(payload.body))
        for name, measured in case.samples.items():
            stats = Stats.of(measured, len(payload.body))
            results.append(
                {
                    "verb": case.verb,
                    "mode": case.mode,
                    "nodes": case.n,
                    "server": name,
                    "request_bytes": len(payload.body),
                    **asdict(stats),
                    "ratio_p50": stats.p50 / floor.p50,
                    "ratio_p99": stats.p99 / floor.p99,
                }
            )
    print_table(
        "3. loopback HTTP: one keep-alive curl per batch, interleaved rounds; ratio = / floor",
        ("verb", "mode", "nodes", "server", "runs", "p50 ms", "p99 ms", "MB/s", "x50", "x99"),
        [
            (
                r["verb"],
                r["mode"],
                f"{r['nodes']:,}",
                r["server"],
                str(r["n"]),
                ms(r["p50"]),
                ms(r["p99"]),
                f"{r['mb_per_s']:.0f}",
                f"{r['ratio_p50']:.2f}",
                f"{r['ratio_p99']:.2f}",
            )
            for r in results
        ],
    )
    return results


# --------------------------------------------------------------------------- machine and bars


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = ""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str | None] = {}
    for dist in (
        "msgspec",
        "orjson",
        "pydantic",
        "pydantic-core",
        "fastapi",
        "starlette",
        "uvicorn",
        "uvloop",
        "httptools",
    ):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    curl = subprocess.run(["curl", "--version"], capture_output=True, text=True, check=False)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "packages": versions,
        "curl": curl.stdout.split("\n", 1)[0],
        "go_peer": str(GO_PEER) if GO_PEER.exists() else None,
        "loadavg_start": os.getloadavg(),
    }


def bars(in_process: list[dict[str, Any]], http: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The speed bars (DESIGN §10), met or not, with the measured values."""
    out: list[dict[str, Any]] = []
    for r in in_process:
        if (r["verb"], r["mode"], r["nodes"]) == ("filter", "names", 5_000):
            out.append(
                {
                    "bar": "filter, 5,000 node names, in-process p99 <= 5 ms",
                    "measured": f"p99 {ms(r['p99'])} ms",
                    "met": r["p99"] <= IN_PROCESS_BAR_S,
                }
            )
    for r in http:
        if (r["verb"], r["mode"], r["nodes"]) == ("filter", "list", 5_000) and r[
            "server"
        ] != "floor":
            out.append(
                {
                    "bar": f"filter, 5,000-node NodeList, loopback <= {HTTP_BAR_RATIO}x floor "
                    f"({r['server']})",
                    "measured": f"p50 {r['ratio_p50']:.2f}x, p99 {r['ratio_p99']:.2f}x",
                    "met": r["ratio_p50"] <= HTTP_BAR_RATIO and r["ratio_p99"] <= HTTP_BAR_RATIO,
                    "informative": r["server"] != "runway",
                }
            )
    if out:
        print("\nbars (DESIGN §10)")
        for b in out:
            verdict = "n/a" if b.get("informative") else ("MET" if b["met"] else "MISSED")
            print(f"  [{verdict:6s}] {b['bar']}: {b['measured']}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected parts, print tables, write the JSON results."""
    parser = argparse.ArgumentParser(prog="python -m bench.extender", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs (about 2 minutes)")
    parser.add_argument("--out", type=Path, default=OUT / "extender.json", help="JSON results")
    parser.add_argument(
        "--parts",
        default="decoders,inprocess,http",
        help="comma-separated subset of decoders,inprocess,http",
    )
    parser.add_argument("--no-go", action="store_true", help="skip the Go peer over HTTP")
    ns = parser.parse_args(argv)
    parts = set(ns.parts.split(","))
    unknown = parts - {"decoders", "inprocess", "http"}
    if unknown:
        parser.error(f"unknown part(s) {', '.join(sorted(unknown))}")
    store = Payloads(OUT / "payloads")
    info = machine()
    print(
        f"{info['cpu']}, {info['cores']} cores, Python {info['python']}, "
        f"load {info['loadavg_start'][0]:.2f}{' (quick)' if ns.quick else ''}"
    )
    started = time.time()
    results: dict[str, Any] = {"machine": info, "quick": ns.quick, "started": started}
    # In-process first: the decoders part leaves gigabytes of freed dicts behind, which slows
    # every later large allocation in this process (the HTTP part runs in fresh processes).
    if "inprocess" in parts:
        results["in_process"] = bench_in_process(store, ns.quick)
    if "decoders" in parts:
        results["decoders"] = bench_decoders(store, ns.quick)
    if "http" in parts:
        results["http"] = bench_http(store, ns.quick, not ns.no_go, OUT / "logs")
    results["bars"] = bars(results.get("in_process", []), results.get("http", []))
    info["loadavg_end"] = os.getloadavg()
    results["seconds"] = round(time.time() - started, 1)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {ns.out} ({results['seconds']} s)")
    return 0 if all(b["met"] or b.get("informative") for b in results["bars"]) else 1


if __name__ == "__main__":
    sys.exit(main())
