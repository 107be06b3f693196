"""Scheduling throughput on the real kube-scheduler (DESIGN §10): runway vs the Go peer.

Run ``python -m bench.throughput [--nodes 200] [--pods 1000] [--rounds 2] [--modes cache,list]
[--extenders runway,go] [--release 1.20.2,1.34.4,1.37.2]``; issue #29's four-way comparison:
``--modes cache --extenders stock,go,runway-filter,runway``; issue #39's per-release one:
``--start backlog --modes cache --extenders stock,go-floor,runway-filter,runway --release
1.20.2,1.34.4,1.37.2``.

Per release (``--release``, comma-separated; default ``$RUNWAY_K8S_RELEASES``, else the e2e
matrix's default), one after the other: one control plane of that release (``tools/kube up`` in a
temporary directory, always ``down``) with
``--nodes`` production-sized Node objects (``bench.payloads.node``: 32 CPUs, 110 pods, ~10 KB of
JSON each). Then, for each round, mode and extender (the order alternates every round so that
neither extender always runs first):

1. start the extender by itself: runway (``python -m app serve --kubeconfig <plane> --config``,
   leader election off, so it watches the plane's pods and nodes as in production) or the Go peer
   (``tools/go-peer``: official Kubernetes types, encoding/json); ``runway-filter`` is runway with
   the stanza runway documents when no preference needs ``prioritize`` (no ``prioritizeVerb``:
   one call per cycle); ``go-floor`` is ``bench/go_extender`` (Go, stdlib: filter passes every
   node, nothing decided) registered with that filter-only stanza, built once per run with the
   machine's Go (skipped, with a line saying so, where there is none): what the extender call
   itself costs the cycle; ``stock`` is no extender at all (kube-scheduler alone);
2. start a kube-scheduler whose only profile (a schedulerName unique to the run) calls that
   extender for filter and prioritize, ``nodeCacheCapable`` true (mode ``cache``: node names) or
   false (mode ``list``: full NodeList bodies), with ``clientConnection`` qps/burst 1000 so that
   client-side throttling caps neither;
3. create ``--pods`` pending pods (10m CPU, that schedulerName) from a thread pool, and measure
   from the first create to the moment the scheduler's ``scheduler_schedule_attempts_total
   {result="scheduled"}`` for the profile reaches ``--pods`` (counted there once its binding
   succeeded); polled with a deadline, then checked against a LIST of the namespace. The
   scheduler's /metrics is the URL ``ControlPlane.start_scheduler`` returns: plain http on 1.20,
   https with a self-signed certificate from 1.21 (read without verification);
4. stop the scheduler and the extender by pid; delete the pods (grace 0: there is no kubelet).

Prints a table and the verdict (runway pods/s >= Go pods/s, per mode, mean over the rounds),
and with ``stock`` each configuration against kube-scheduler alone: the bar (runway filter-only
>= ``FILTER_ONLY_BAR`` x stock) and, with ``go-floor``, the floor's ratio beside runway's (how
much of the gap is the call itself). Writes ``bench/out/throughput.json`` with the machine info.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench import payloads
from bench import profile as cpu_profile
from bench.extender import GO_PEER, GO_TOOLCHAIN, OUT, build_go, machine, print_table
from tests.e2e.conftest import (
    ControlPlane,
    control_plane_up,
    poll,
    resolve_release,
    rfc3339_now,
    write_scheduler_config,
)
from tests.e2e.conftest import releases as e2e_releases
from tests.runway_process import free_port, run_runway, stop

EXTENDERS = ("runway", "go")
"""The pair issue #13's bars compare."""
KINDS = ("stock", "go", "go-floor", "runway-filter", "runway", "runway-managed", "runway-base")
"""Every configuration a run can measure (``--extenders``). ``stock``: kube-scheduler alone;
``go``: the Go peer (both verbs); ``go-floor``: ``bench/go_extender``, the cheapest extender
(Go, stdlib, every node passes) with the filter-only stanza — what any extender's call costs
here; ``runway-filter``: runway with the filter-only stanza; ``runway``: both verbs;
``runway-managed``: runway's filter-only stanza with ``managedResources: [nvidia.com/gpu]`` —
kube-scheduler calls it only for pods requesting a GPU (``--gpu-pods``); ``runway-base``: runway
(both verbs) from another tree (``--base-tree``: a same-run A/B of a change)."""
FILTER_ONLY = frozenset({"go-floor", "runway-filter", "runway-managed"})
"""The kinds registered without ``prioritizeVerb`` (the stanza runway documents when no
preference needs prioritize: one call per cycle)."""
GO_FLOOR_SOURCE = Path(__file__).resolve().parent / "go_extender"
GPU = "nvidia.com/gpu"
GPUS_PER_NODE = "8"
FILTER_ONLY_BAR = 0.9
"""Issue #39 (was 0.75 in #29): pods/s with runway filter-only >= this x the same release's
kube-scheduler alone (cache mode)."""
MODES = {"cache": True, "list": False}  # mode -> nodeCacheCapable
RUN_DEADLINE_S = 600.0
CREATE_THREADS = 8


@dataclass
class Run:
    """One measured run: an extender, a mode, a round."""

    release: str
    extender: str
    mode: str
    round: int
    pods: int
    seconds: float
    create_seconds: float
    pods_per_s: float
    unschedulable: float
    errors: float
    extender_cpu_s: float
    runway_filter_p50_ms: float | None = None
    runway_prioritize_p50_ms: float | None = None
    watch_events: float | None = None
    runway_filter_calls: float | None = None
    """filter calls runway answered during the run (managedResources: only GPU pods')."""
    profile: dict[str, float] | None = None
    extender_create_cpu_s: float | None = None
    """backlog: the part of ``extender_cpu_s`` spent while the pods were created (runway
    watches them arrive; the Go peer idles)."""
    scheduler_cpu_s: float | None = None
    apiserver_cpu_s: float | None = None
    algorithm_ms: float | None = None
    e2e_ms: float | None = None
    runway_api_calls: dict[str, float] | None = None
    """The Kubernetes API calls runway made during the run, by verb and resource."""
    loadavg: float | None = None
    """The machine's 1-minute load average when the run started (other sessions share it)."""
    steal_s: float | None = None
    """CPU time the hypervisor gave other guests while this run's VM wanted it (``/proc/stat``
    steal, both cores): how noisy the host was during the run."""


@contextmanager
def sampling(pid: int, out: Path | None) -> Iterator[None]:
    """``py-spy record`` on ``pid`` into ``out`` (raw collapsed stacks) while the block runs;
    nothing when ``out`` is None. Stopped with SIGINT (py-spy writes the file on it)."""
    if out is None:
        yield
        return
    spy = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "200",
            "--nonblocking",
            "--gil",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(timeout=5)


# --------------------------------------------------------------------------- cluster objects


def create_nodes(plane: ControlPlane, count: int, gpus: bool = False) -> None:
    """``count`` production-sized nodes, status set through the status subresource (``gpus``:
    each with ``GPUS_PER_NODE`` of the extended resource ``GPU``)."""

    def one(i: int) -> None:
        node = payloads.node(i)
        if gpus:
            for key in ("capacity", "allocatable"):
                node["status"][key] = {**node["status"][key], GPU: GPUS_PER_NODE}
        meta = {k: node["metadata"][k] for k in ("name", "labels", "annotations")}
        r = plane.api.post(
            "/api/v1/nodes",
            json={"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": node["spec"]},
        )
        if r.status_code not in (201, 409):
            raise RuntimeError(f"create node {meta['name']}: {r.status_code} {r.text}")
        status = node["status"]
        now = rfc3339_now()
        for cond in status["conditions"]:
            cond["lastHeartbeatTime"] = cond["lastTransitionTime"] = now
        r = plane.api.patch(
            f"/api/v1/nodes/{meta['name']}/status",
            json={"status": status},
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        if r.status_code != 200:
            raise RuntimeError(f"node {meta['name']} status: {r.status_code} {r.text}")

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(one, range(count)))


def pod_body(name: str, scheduler_name: str, gpu: bool = False) -> dict[str, Any]:
    """A small pending pod for ``scheduler_name`` (``gpu``: it also requests one ``GPU``)."""
    resources: dict[str, Any] = {"requests": {"cpu": "10m", "memory": "16Mi"}}
    if gpu:  # an extended resource: requests == limits
        resources = {"requests": {**resources["requests"], GPU: "1"}, "limits": {GPU: "1"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "throughput"}},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": resources,
                }
            ],
        },
    }


def create_pods(
    plane: ControlPlane, namespace: str, scheduler_name: str, count: int, gpu_pods: int = 0
) -> None:
    """Create ``count`` pods as fast as the API server takes them (a thread pool); ``gpu_pods``
    of them, spread evenly, request a GPU."""
    client = httpx.Client(
        base_url=plane.url,
        headers={"Authorization": f"Bearer {plane.env['TOKEN']}"},
        verify=False,
        timeout=60,
        limits=httpx.Limits(max_connections=CREATE_THREADS),
    )

    def one(i: int) -> None:
        gpu = (i * gpu_pods) // count != ((i + 1) * gpu_pods) // count  # spread evenly
        body = pod_body(f"tp-{i:05d}", scheduler_name, gpu=gpu)
        r = client.post(f"/api/v1/namespaces/{namespace}/pods", json=body)
        if r.status_code != 201:
            raise RuntimeError(f"create pod {i}: {r.status_code} {r.text}")

    with client, ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(one, range(count)))


def bound_count(plane: ControlPlane, namespace: str) -> int:
    """Pods of ``namespace`` with a node (one LIST)."""
    r = plane.api.get(
        f"/api/v1/namespaces/{namespace}/pods", params={"fieldSelector": "spec.nodeName!="}
    )
    return len(r.raise_for_status().json()["items"])


def delete_pods(plane: ControlPlane, namespace: str) -> None:
    """Delete every pod of ``namespace`` at once (grace 0) and the namespace; poll until the
    pods are gone (the namespace itself stays Terminating: no controller-manager here)."""
    r = plane.api.request(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods",
        json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
    )
    r.raise_for_status()

    def empty() -> bool:
        got = plane.api.get(f"/api/v1/namespaces/{namespace}/pods", params={"limit": 1})
        return not got.raise_for_status().json()["items"]

    poll(empty, within=120, what=f"pods of {namespace} deleted", every=0.2)
    plane.api.delete(f"/api/v1/namespaces/{namespace}")


# --------------------------------------------------------------------------- metrics


def samples(url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every (name, labels, value) sample of a Prometheus endpoint."""
    # verify=False: kube-scheduler from 1.21 serves /metrics only on its secure port, with a
    # self-signed certificate (tools/kube); 1.20 and runway serve plain http.
    text = httpx.get(url, timeout=10, verify=False).raise_for_status().text
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def scheduler_attempts(url: str, profile: str) -> dict[str, float]:
    """``scheduler_schedule_attempts_total`` of ``profile`` by result."""
    out: dict[str, float] = {}
    for name, labels, value in samples(url):
        if name == "scheduler_schedule_attempts_total" and labels.get("profile") == profile:
            out[labels.get("result", "")] = value
    return out


def histogram_mean_ms(url: str, metric: str) -> float | None:
    """The mean of a Prometheus histogram over every label set, in milliseconds."""
    total = {"sum": 0.0, "count": 0.0}
    for name, _, value in samples(url):
        for part in total:
            if name == f"{metric}_{part}":
                total[part] += value
    return total["sum"] / total["count"] * 1e3 if total["count"] else None


def plane_cpu(plane: ControlPlane, name: str) -> float:
    """CPU seconds used so far by the control plane's process ``name`` (its pid file)."""
    return cpu_seconds(int((plane.dir / f"{name}.pid").read_text().strip()))


def histogram_p50(url: str, metric: str, verb: str) -> float | None:
    """The median of a Prometheus histogram (linear within the bucket), in seconds."""
    buckets: list[tuple[float, float]] = []
    for name, labels, value in samples(url):
        if name == f"{metric}_bucket" and labels.get("verb") == verb:
            buckets.append((float(labels["le"]), value))
    buckets.sort()
    if not buckets or buckets[-1][1] == 0:
        return None
    half = buckets[-1][1] / 2
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= half:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (half - below) / max(count - below, 1e-9)
        lower, below = le, count
    return None


# --------------------------------------------------------------------------- extenders


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time used so far by process ``pid`` (Linux /proc); 0 for no process."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def steal_seconds() -> float:
    """The host's steal time so far, all CPUs (Linux ``/proc/stat``; 0 where it is not kept)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def build_go_floor(into: Path) -> Path | None:
    """Build ``bench/go_extender`` into ``into`` with the machine's Go (``build_go``); the
    binary, or None where there is no Go."""
    return build_go(GO_FLOOR_SOURCE, into / "go-extender")


@contextmanager
def go_server(command: Sequence[str], url: str, log: Path, what: str) -> Iterator[int]:
    """Run a Go extender (``command``, serving at ``url``) with its output in ``log``; yield
    its pid once ``/readyz`` answers; stop it by pid (SIGTERM, then SIGKILL)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT)
    try:
        poll(lambda: proc.poll() is None and _healthy(url), within=30, what=f"{what} ready")
        yield proc.pid
    finally:
        stop(proc, grace_s=10)


@contextmanager
def go_floor_server(binary: Path, tmp: Path) -> Iterator[tuple[str, int]]:
    """The built ``bench/go_extender`` on a free loopback port: its URL and pid."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(binary), "-addr", f"127.0.0.1:{port}"]
    with go_server(command, url, tmp / f"go-floor-{port}.log", "the Go floor") as pid:
        yield url, pid


@contextmanager
def start_extender(
    name: str,
    plane: ControlPlane,
    tmp: Path,
    runway_config: dict[str, Any] | None = None,
    base_tree: Path | None = None,
    go_floor: Path | None = None,
) -> Iterator[tuple[str, int | None]]:
    """Run extender ``name`` on a free loopback port; yield its URL and pid; stop it by pid.
    runway reads ``runway_config`` (default: leader election off); ``runway-base`` runs the
    ``app`` package of ``base_tree``; ``go-floor`` runs the binary ``go_floor``
    (``build_go_floor``). ``stock``: nothing runs (yields ``("", None)``)."""
    if name == "stock":
        yield "", None
        return
    if name == "go-floor":
        if go_floor is None:
            raise ValueError("go-floor needs the bench/go_extender binary (build_go_floor)")
        with go_floor_server(go_floor, tmp) as (url, pid):
            yield url, pid
        return
    if name.startswith("runway"):
        config = tmp / "runway.yaml"
        default = {"kubernetes": {"leaderElection": {"enable": False}}}
        config.write_text(yaml.safe_dump(runway_config or default))
        args = ["--kubeconfig", str(plane.kubeconfig), "--config", str(config)]
        tree = None
        if name == "runway-base":
            if base_tree is None:
                raise ValueError("runway-base needs --base-tree")
            tree = base_tree.resolve()
        with run_runway(tmp, args, tree=tree) as proc:
            poll(lambda: _healthy(proc.url), within=60, what="runway ready")
            yield proc.url, proc.proc.pid
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(GO_PEER), "--port", str(port)]
    with go_server(command, url, tmp / f"go-{port}.log", "Go peer") as pid:
        yield url, pid


# --------------------------------------------------------------------------- one run


def scheduler_metrics_url(plane: ControlPlane) -> str | None:
    """The /metrics URL of the kube-scheduler being started, as soon as its process exists
    (``start_scheduler`` returns it only once /healthz answers, and a backlog is half bound by
    then): 1.20 serves it on plain http at the config's ``metricsBindAddress``; later releases
    on the ``--secure-port`` of its command line, https with a self-signed certificate."""
    pid_file = plane.dir / "scheduler.pid"
    try:
        pid = int(pid_file.read_text().strip())
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except (OSError, ValueError):
        return None  # not started yet, or gone
    config = plane.dir / "scheduler-config.yaml"
    address = yaml.safe_load(config.read_text()).get("metricsBindAddress")
    if address:
        return f"http://{address}/metrics"
    if "--secure-port" in args:
        return f"https://127.0.0.1:{args[args.index('--secure-port') + 1]}/metrics"
    return None


@dataclass
class Progress:
    """What the polling loop saw: the first bind and the last."""

    first_at: float
    first_count: float
    end_at: float
    attempts: dict[str, float]


def wait_scheduled(
    plane: ControlPlane,
    tag: str,
    pods: int,
    failure: list[BaseException],
    deadline: float,
) -> Progress:
    """Poll the scheduler's metrics until ``pods`` pods of profile ``tag`` are bound."""
    first: tuple[float, float] | None = None
    attempts: dict[str, float] = {}
    while True:
        url = scheduler_metrics_url(plane)
        try:
            attempts = scheduler_attempts(url, tag) if url else {}
        except httpx.TransportError:
            attempts = {}  # not listening yet
        now = time.monotonic()
        scheduled = attempts.get("scheduled", 0)
        if first is None and scheduled > 0:
            first = (now, scheduled)
        if scheduled >= pods:
            assert first is not None
            return Progress(first[0], first[1], now, attempts)
        if failure:
            raise RuntimeError(f"{tag}: {failure[0]}") from failure[0]
        if now > deadline:
            raise RuntimeError(f"{tag}: {attempts} at the deadline (see {plane.dir}/*.log)")
        time.sleep(0.02)  # polling interval, not a wait for a condition


def api_calls(url: str) -> dict[str, float]:
    """runway's ``runway_kube_api_requests_total`` by ``verb resource``."""
    calls: dict[str, float] = {}
    for name, labels, value in samples(f"{url}/metrics"):
        if name == "runway_kube_api_requests_total":
            key = f"{labels['verb']} {labels['resource']}"
            calls[key] = calls.get(key, 0.0) + value
    return calls


def verb_calls(url: str, verb: str) -> float:
    """runway's ``runway_extender_requests_total`` for ``verb`` (every outcome)."""
    return sum(
        v
        for n, labels, v in samples(f"{url}/metrics")
        if n == "runway_extender_requests_total" and labels.get("verb") == verb
    )


def watch_events(url: str) -> float:
    """runway's ``runway_watch_events_total`` over every resource and type."""
    return sum(v for n, _, v in samples(f"{url}/metrics") if n == "runway_watch_events_total")


def scheduler_config(
    path: Path, extender: str, url: str, release: str, mode: str, scheduler_name: str
) -> Path:
    """The KubeSchedulerConfiguration of one run, written to ``path``: profile
    ``scheduler_name`` calling extender ``extender`` at ``url`` (``nodeCacheCapable`` by
    ``mode``) with filter and prioritize, or filter only (``FILTER_ONLY``); for ``stock`` no
    extender; for ``runway-managed`` only pods requesting a GPU reach it. Client-side throttling
    off (qps/burst 1000), so that it caps nothing."""
    config = write_scheduler_config(
        path,
        url or "http://unused",
        release=release,
        node_cache_capable=MODES[mode],
        scheduler_name=scheduler_name,
        http_timeout="30s",
        extra={"clientConnection": {"qps": 1000, "burst": 1000}},
        prioritize=extender not in FILTER_ONLY,
    )
    if extender in ("stock", "runway-managed"):
        stanza = yaml.safe_load(config.read_text())
        if extender == "stock":  # kube-scheduler alone
            del stanza["extenders"]
        else:  # only pods requesting a GPU reach the extender
            stanza["extenders"][0]["managedResources"] = [
                {"name": GPU, "ignoredByScheduler": False}
            ]
        config.write_text(yaml.safe_dump(stanza, sort_keys=False))
    return config


def measure(
    plane: ControlPlane,
    tmp: Path,
    extender: str,
    mode: str,
    rnd: int,
    pods: int,
    start: str,
    profile_dir: Path | None = None,
    runway_config: dict[str, Any] | None = None,
    gpu_pods: int = 0,
    base_tree: Path | None = None,
    go_floor: Path | None = None,
) -> Run:
    """Start the extender and a scheduler pointing at it, schedule ``pods`` pods, clean up.

    ``start="stream"``: the scheduler runs first, pods are created while it schedules; the time
    is from the first create to the last bind. ``start="backlog"``: the pods are created first
    (1,000 pending pods), then the scheduler starts; the time is from the first bind seen to the
    last (the scheduler's start-up excluded).
    """
    tag = f"tp-r{rnd}-{extender}-{mode}"
    plane.ensure_namespace(tag)
    with start_extender(extender, plane, tmp, runway_config, base_tree, go_floor) as (url, pid):
        config = scheduler_config(tmp / f"{tag}.yaml", extender, url, plane.release, mode, tag)
        failure: list[BaseException] = []
        created_at: list[float] = []
        metrics_at: list[str] = []  # the scheduler's /metrics URL, once it serves

        def in_thread(work: Any) -> threading.Thread:
            def body() -> None:
                try:
                    work()
                    created_at.append(time.monotonic())
                except BaseException as exc:  # reported by the polling loop
                    failure.append(exc)

            thread = threading.Thread(target=body, daemon=True)
            thread.start()
            return thread

        is_runway = extender.startswith("runway")
        spy = profile_dir / f"{tag}.txt" if profile_dir and is_runway else None
        try:
            filters0 = verb_calls(url, "filter") if is_runway else 0.0
            events0 = watch_events(url) if is_runway else 0.0
            calls0 = api_calls(url) if is_runway else {}
            create_cpu: float | None = None
            cpu0 = cpu_seconds(pid)
            api0 = plane_cpu(plane, "apiserver")
            steal0 = steal_seconds()
            load0 = os.getloadavg()[0]
            t0 = time.monotonic()
            with sampling(pid or 0, spy):
                if start == "stream":
                    metrics_at.append(plane.start_scheduler(config))
                    t0 = time.monotonic()
                    thread = in_thread(lambda: create_pods(plane, tag, tag, pods, gpu_pods))
                else:
                    create_pods(plane, tag, tag, pods, gpu_pods)
                    created_at.append(time.monotonic())
                    create_cpu = cpu_seconds(pid) - cpu0
                    thread = in_thread(lambda: metrics_at.append(plane.start_scheduler(config)))
                seen = wait_scheduled(plane, tag, pods, failure, t0 + RUN_DEADLINE_S)
                cpu = cpu_seconds(pid) - cpu0
                api_cpu = plane_cpu(plane, "apiserver") - api0
                steal = steal_seconds() - steal0
                scheduler_cpu = plane_cpu(plane, "scheduler")
                sched_url = metrics_at[0] if metrics_at else scheduler_metrics_url(plane)
                assert sched_url is not None
                algorithm = histogram_mean_ms(
                    sched_url, "scheduler_scheduling_algorithm_duration_seconds"
                )
                e2e = histogram_mean_ms(
                    sched_url, "scheduler_e2e_scheduling_duration_seconds"
                ) or histogram_mean_ms(  # its name from 1.23 (the old one gone by 1.28)
                    sched_url, "scheduler_scheduling_attempt_duration_seconds"
                )
            thread.join(timeout=120)
            if failure:
                raise RuntimeError(f"{tag}: {failure[0]}") from failure[0]
            bound = bound_count(plane, tag)
            if bound != pods:
                raise RuntimeError(f"{tag}: the scheduler counted {pods} but {bound} are bound")
            if start == "stream":
                seconds, counted = seen.end_at - t0, float(pods)
            else:
                seconds, counted = seen.end_at - seen.first_at, pods - seen.first_count
            run = Run(
                loadavg=load0,
                release=plane.release,
                extender=extender,
                mode=mode,
                round=rnd,
                pods=pods,
                seconds=seconds,
                create_seconds=created_at[0] - t0,
                pods_per_s=counted / seconds,
                unschedulable=seen.attempts.get("unschedulable", 0),
                errors=seen.attempts.get("error", 0),
                extender_cpu_s=cpu,
                extender_create_cpu_s=create_cpu,
                scheduler_cpu_s=scheduler_cpu,
                apiserver_cpu_s=api_cpu,
                algorithm_ms=algorithm,
                e2e_ms=e2e,
                steal_s=steal,
            )
            if is_runway:
                run.runway_filter_calls = verb_calls(url, "filter") - filters0
                run.watch_events = watch_events(url) - events0
                run.runway_api_calls = {
                    k: v - calls0.get(k, 0.0)
                    for k, v in api_calls(url).items()
                    if v - calls0.get(k, 0.0)
                }
                if spy is not None and spy.exists():
                    counted_samples = cpu_profile.categorize(spy.read_text().splitlines())
                    total = sum(counted_samples.values()) or 1
                    run.profile = {
                        k: round(v / total * cpu / pods * 1e6, 1)
                        for k, v in counted_samples.items()
                    }
                metric = "runway_extender_request_duration_seconds"
                for verb in ("filter", "prioritize"):
                    p50 = histogram_p50(f"{url}/metrics", metric, verb)
                    setattr(run, f"runway_{verb}_p50_ms", None if p50 is None else p50 * 1e3)
        finally:
            plane.stop_scheduler()
        delete_pods(plane, tag)
    print(
        f"  {plane.release} round {rnd} {extender:13s} {mode:5s}: {run.seconds:6.2f} s, "
        f"{run.pods_per_s:6.1f} pods/s (creates done at {run.create_seconds:.2f} s)",
        flush=True,
    )
    return run


# --------------------------------------------------------------------------- main


# Issue #13's bars: pods/s with runway >= with the Go peer in cache mode (median of the rounds),
# >= 1.5x in list mode; runway's CPU per 1,000 pods <= 1.5x the Go peer's in cache mode.
PODS_RATIO_BAR = {"cache": 1.0, "list": 1.5}
CPU_RATIO_BAR = 1.5


def summarise(runs: Sequence[Run], modes: Sequence[str]) -> list[dict[str, Any]]:
    """Per mode: the median pods/s (and CPU-s per 1,000 pods) of each extender over the
    rounds, and the verdicts."""
    out: list[dict[str, Any]] = []
    for mode in modes:
        mine = {ext: [r for r in runs if r.extender == ext and r.mode == mode] for ext in EXTENDERS}
        if not all(mine.values()):
            continue
        rate = {ext: statistics.median(r.pods_per_s for r in rs) for ext, rs in mine.items()}
        cpu = {
            ext: statistics.median(r.extender_cpu_s / r.pods * 1000 for r in rs)
            for ext, rs in mine.items()
        }
        bar = PODS_RATIO_BAR[mode]
        go_in = {r.round: r.pods_per_s for r in mine["go"]}
        paired = [r.pods_per_s / go_in[r.round] for r in mine["runway"] if r.round in go_in]
        out.append(
            {
                "bar": f"pods/s with runway >= {bar}x with the Go peer (nodeCacheCapable "
                f"{str(MODES[mode]).lower()}, median of {len(mine['runway'])} rounds)",
                "runway_pods_per_s": rate["runway"],
                "go_pods_per_s": rate["go"],
                "ratio": rate["runway"] / rate["go"],
                "met": rate["runway"] >= bar * rate["go"],
                "paired_ratios": paired,
                "runway_ahead": sum(1 for x in paired if x > 1.0),
                "paired_median_interval": median_interval(paired),
            }
        )
        if mode == "cache":
            out.append(
                {
                    "bar": f"runway CPU-s per 1,000 pods <= {CPU_RATIO_BAR}x the Go peer's "
                    "(nodeCacheCapable true, median)",
                    "runway_cpu_per_1000": cpu["runway"],
                    "go_cpu_per_1000": cpu["go"],
                    "ratio": cpu["runway"] / cpu["go"],
                    "met": cpu["runway"] <= CPU_RATIO_BAR * cpu["go"],
                }
            )
    return out


def against_stock(runs: Sequence[Run], mode: str = "cache") -> dict[str, Any] | None:
    """Issue #29: each configuration's pods/s as a ratio to kube-scheduler alone in the same
    round (median over the rounds), CPU-s per 1,000 pods of the extender and of the scheduler,
    and the bar: runway filter-only >= ``FILTER_ONLY_BAR`` x stock (``filter_only``), beside the
    Go floor's ratio (``floor``: None without go-floor runs). None without stock runs."""
    mine = [r for r in runs if r.mode == mode]
    stock = {r.round: r.pods_per_s for r in mine if r.extender == "stock"}
    if not stock:
        return None
    rows: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        of_kind = [r for r in mine if r.extender == kind]
        if not of_kind:
            continue
        ratios = [r.pods_per_s / stock[r.round] for r in of_kind if r.round in stock]
        rows[kind] = {
            "pods_per_s": statistics.median(r.pods_per_s for r in of_kind),
            "ratio_to_stock": statistics.median(ratios) if ratios else None,
            "same_round_ratios": ratios,
            "interval": median_interval(ratios),
            "extender_cpu_per_1000": statistics.median(
                r.extender_cpu_s / r.pods * 1000 for r in of_kind
            ),
            "scheduler_cpu_per_1000": statistics.median(
                (r.scheduler_cpu_s or 0.0) / r.pods * 1000 for r in of_kind
            ),
            "filter_calls": statistics.median(r.runway_filter_calls or 0.0 for r in of_kind),
        }
    filter_only = rows.get("runway-filter", {}).get("ratio_to_stock")
    return {
        "mode": mode,
        "rows": rows,
        "bar": f"pods/s with runway filter-only >= {FILTER_ONLY_BAR}x kube-scheduler alone "
        "(same-round ratio, median over the rounds)",
        "met": filter_only is not None and filter_only >= FILTER_ONLY_BAR,
        "filter_only": filter_only,
        "floor": rows.get("go-floor", {}).get("ratio_to_stock"),
    }


def floor_line(four_way: dict[str, Any]) -> str | None:
    """The filter-only ratio beside the Go floor's (``against_stock``), in one line: how much
    of runway's gap to kube-scheduler alone any extender's call costs on this machine. None
    unless both were measured."""
    mine, floor = four_way.get("filter_only"), four_way.get("floor")
    if mine is None or floor is None:
        return None
    if mine >= FILTER_ONLY_BAR:
        verdict = f"runway meets the {FILTER_ONLY_BAR}x bar"
    elif floor >= FILTER_ONLY_BAR:
        verdict = f"the floor meets the {FILTER_ONLY_BAR}x bar: the rest of the gap is runway's own"
    else:
        verdict = (
            f"the floor is under the {FILTER_ONLY_BAR}x bar too: the call itself costs more "
            "than the bar allows on this machine"
        )
    return (
        f"runway filter-only {mine:.2f}x stock; the Go floor (bench/go_extender) {floor:.2f}x; "
        f"runway {mine / floor:.2f}x the floor; {verdict}"
    )


def median_interval(
    values: Sequence[float], level: float = 0.9, draws: int = 4000
) -> tuple[float, float] | None:
    """A bootstrap interval (``level``, percentile method, fixed seed) of the median of
    ``values``: how far the rounds' own spread leaves the median uncertain. None under 3."""
    if len(values) < 3:
        return None
    rng = random.Random(13)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    tail = (1.0 - level) / 2
    return medians[int(tail * draws)], medians[min(draws - 1, int((1.0 - tail) * draws))]


def fmt_opt(value: float | None) -> str:
    """Two decimals for the table, or a dash."""
    return "-" if value is None else f"{value:.2f}"


def measure_release(
    release: str,
    ns: argparse.Namespace,
    chosen: Sequence[str],
    modes: Sequence[str],
    runway_config: dict[str, Any] | None,
    go_floor: Path | None,
) -> list[Run]:
    """Every round, mode and configuration of ``chosen`` on one control plane of ``release``
    (``--nodes`` nodes; the order reversed every other round)."""
    mine: list[Run] = []
    with (
        tempfile.TemporaryDirectory(prefix="runway-throughput-") as tmp,
        control_plane_up(release) as plane,
    ):
        create_nodes(plane, ns.nodes, gpus=ns.gpu_pods > 0)
        print(f"{release}: control plane up at {plane.url}; {ns.nodes} nodes", flush=True)
        for rnd in range(ns.rounds):
            for mode in modes:
                order = list(chosen) if rnd % 2 == 0 else list(chosen)[::-1]
                for ext in order:
                    mine.append(
                        measure(
                            plane,
                            Path(tmp),
                            ext,
                            mode,
                            rnd,
                            ns.pods,
                            ns.start,
                            ns.profile,
                            runway_config,
                            ns.gpu_pods,
                            ns.base_tree,
                            go_floor,
                        )
                    )
    return mine


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rounds, print the table and the verdict, write the JSON results."""
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="cache,list", help="comma-separated: cache,list")
    parser.add_argument(
        "--start",
        choices=("stream", "backlog"),
        default="stream",
        help="stream: create pods while the scheduler runs (time from the first create); "
        "backlog: create them first, then start the scheduler (time from the first bind)",
    )
    parser.add_argument(
        "--gpu-pods",
        type=int,
        default=0,
        help=f"of --pods, how many request a GPU ({GPU}; every node gets {GPUS_PER_NODE}): "
        "issue #29's mixed cluster is --pods 1200 --gpu-pods 200 with runway-managed",
    )
    parser.add_argument(
        "--base-tree",
        type=Path,
        default=None,
        metavar="DIR",
        help="a checkout of another commit (git worktree add DIR REV): runway-base runs its "
        "app package, for a same-run A/B",
    )
    parser.add_argument("--out", type=Path, default=OUT / "throughput.json")
    parser.add_argument(
        "--release",
        default=None,
        help="comma-separated Kubernetes releases, measured one after the other (default: "
        "$RUNWAY_K8S_RELEASES, else the e2e matrix's default)",
    )
    parser.add_argument(
        "--extenders",
        default=",".join(EXTENDERS),
        help=f"comma-separated, of {','.join(KINDS)}",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="sample runway with py-spy during each run (raw stacks in DIR) and print where "
        "its CPU went; sampling costs CPU, so do not quote these runs' pods/s",
    )
    parser.add_argument(
        "--runway-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="runway's config file for the runs (leader election is switched off in it); "
        "default: leader election off, everything else default",
    )
    ns = parser.parse_args(argv)
    runway_config: dict[str, Any] | None = None
    if ns.runway_config:
        runway_config = yaml.safe_load(ns.runway_config.read_text()) or {}
        runway_config.setdefault("kubernetes", {})["leaderElection"] = {"enable": False}
    if ns.profile:
        ns.profile.mkdir(parents=True, exist_ok=True)
    modes = ns.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown mode(s) {', '.join(sorted(unknown))}")
    wanted = [e.strip() for e in ns.extenders.split(",") if e.strip()]
    if unknown := set(wanted) - set(KINDS):
        parser.error(f"unknown extender(s) {', '.join(sorted(unknown))}")
    if "go" in wanted and not GO_PEER.exists():
        parser.error(f"Go peer not built: run /work/shared/tools/go-peer/build.sh ({GO_PEER})")
    releases = bench_releases(ns.release)
    info = machine()
    print(
        f"{info['cpu']}, {info['cores']} cores, Python {info['python']}, "
        f"load {info['loadavg_start'][0]:.2f}; {ns.nodes} nodes, {ns.pods} pods, "
        f"{ns.rounds} rounds, modes {', '.join(modes)}, releases {', '.join(releases)}",
        flush=True,
    )
    started = time.time()
    runs: list[Run] = []
    per_release: dict[str, dict[str, Any]] = {}
    met = True
    with tempfile.TemporaryDirectory(prefix="runway-throughput-go-") as build:
        go_floor = build_go_floor(Path(build)) if "go-floor" in wanted else None
        if "go-floor" in wanted and go_floor is None:
            wanted.remove("go-floor")
            print(
                "go-floor skipped: no Go on this machine (neither `go` on PATH nor "
                f"{GO_TOOLCHAIN}) to build bench/go_extender",
                flush=True,
            )
        chosen = [e for e in KINDS if e in wanted]
        for release in releases:
            mine = measure_release(release, ns, chosen, modes, runway_config, go_floor)
            runs += mine
            bars, four_way = report(mine, modes, ns, release)
            per_release[release] = {"bars": bars, "against_stock": four_way}
            met = met and all(b["met"] for b in bars) and (four_way is None or four_way["met"])
    info["loadavg_end"] = os.getloadavg()
    result = {
        "machine": info,
        "nodes": ns.nodes,
        "pods": ns.pods,
        "rounds": ns.rounds,
        "gpu_pods": ns.gpu_pods,
        "start": ns.start,
        "releases": releases,
        "started": started,
        "seconds": round(time.time() - started, 1),
        "runs": [asdict(r) for r in runs],
        "per_release": per_release,
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {ns.out} ({result['seconds']} s)")
    return 0 if met else 1


def bench_releases(wanted: str | None) -> list[str]:
    """The releases to measure: ``--release`` (comma-separated, ``1.34`` or ``1.34.4``), else
    ``$RUNWAY_K8S_RELEASES``, else the e2e matrix's default."""
    if not wanted:
        return e2e_releases()
    return [resolve_release(r) for r in wanted.split(",") if r.strip()]


def report(
    runs: Sequence[Run], modes: Sequence[str], ns: argparse.Namespace, release: str
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Print one release's table, bars and comparison with kube-scheduler alone."""
    print_table(
        f"scheduling throughput: kube-scheduler {release}, {ns.nodes} nodes, "
        + ("first create -> last bind" if ns.start == "stream" else "backlog: first -> last bind"),
        (
            "extender",
            "mode",
            "round",
            "pods",
            "seconds",
            "pods/s",
            "load",
            "ext CPU s",
            "of which create",
            "sched CPU s",
            "apisrv CPU s",
            "algo ms",
            "e2e ms",
            "steal s",
            "filter p50 ms",
            "prio p50 ms",
        ),
        [
            (
                r.extender,
                r.mode,
                str(r.round),
                str(r.pods),
                f"{r.seconds:.2f}",
                f"{r.pods_per_s:.1f}",
                fmt_opt(r.loadavg),
                f"{r.extender_cpu_s:.2f}",
                fmt_opt(r.extender_create_cpu_s),
                fmt_opt(r.scheduler_cpu_s),
                fmt_opt(r.apiserver_cpu_s),
                fmt_opt(r.algorithm_ms),
                fmt_opt(r.e2e_ms),
                fmt_opt(r.steal_s),
                fmt_opt(r.runway_filter_p50_ms),
                fmt_opt(r.runway_prioritize_p50_ms),
            )
            for r in runs
        ],
    )
    bars = summarise(runs, modes)
    if bars:
        print(f"\nbars (DESIGN §10, issue #13), {release}")
    for b in bars:
        unit = "pods/s" if "runway_pods_per_s" in b else "CPU-s/1000 pods"
        mine, go = (
            (b["runway_pods_per_s"], b["go_pods_per_s"])
            if unit == "pods/s"
            else (b["runway_cpu_per_1000"], b["go_cpu_per_1000"])
        )
        print(
            f"  [{'MET' if b['met'] else 'MISSED':6s}] {b['bar']}: runway {mine:.2f} vs Go "
            f"{go:.2f} {unit} ({b['ratio']:.2f}x)"
        )
        if b.get("paired_ratios"):
            interval = b["paired_median_interval"]
            print(
                f"           same-round ratios {', '.join(f'{x:.2f}' for x in b['paired_ratios'])};"
                f" runway ahead in {b['runway_ahead']}/{len(b['paired_ratios'])}"
                + (
                    f"; median {statistics.median(b['paired_ratios']):.3f}x, 90% bootstrap "
                    f"interval {interval[0]:.3f}-{interval[1]:.3f}x"
                    if interval
                    else ""
                )
            )
    for r in runs:
        if r.profile:
            cpu_profile.print_rows(
                f"runway CPU by subsystem, round {r.round} {r.mode} ({r.watch_events:.0f} watch "
                f"events, {r.extender_cpu_s:.2f} CPU-s for {r.pods} pods)",
                [
                    (k, f"{v / sum(r.profile.values()) * 100:.1f}", f"{v:.0f}")
                    for k, v in sorted(r.profile.items(), key=lambda kv: -kv[1])
                ],
            )
    four_way = against_stock(runs)
    if four_way is not None:
        print_table(
            f"against kube-scheduler {release} alone (same-round ratios, median of the rounds; "
            "CPU-s per 1,000 pods)",
            (
                "configuration",
                "pods/s",
                "x stock",
                "90% interval",
                "extender CPU",
                "scheduler CPU",
                "filter calls",
            ),
            [
                (
                    kind,
                    f"{row['pods_per_s']:.1f}",
                    fmt_opt(row["ratio_to_stock"]),
                    "-"
                    if row["interval"] is None
                    else f"{row['interval'][0]:.2f}-{row['interval'][1]:.2f}",
                    f"{row['extender_cpu_per_1000']:.2f}",
                    f"{row['scheduler_cpu_per_1000']:.2f}",
                    f"{row['filter_calls']:.0f}",
                )
                for kind, row in four_way["rows"].items()
            ],
        )
        print(f"  [{'MET' if four_way['met'] else 'MISSED':6s}] {four_way['bar']}")
        if line := floor_line(four_way):
            print(f"           {line}")
    return bars, four_way


if __name__ == "__main__":
    sys.exit(main())
