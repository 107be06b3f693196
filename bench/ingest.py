"""Ingest benchmark: 50,000 realistic pods into runway's cache through the real reflector.

A fake transport (``httpx.MockTransport``) plays the API server: a paginated LIST of pods as a
Job controller and a kubelet would leave them (labels, owner references, managedFields, env,
volumes, container statuses...), generated page by page so the fake holds one page at a time,
then a WATCH stream of MODIFIED/ADDED/DELETED events. Each scenario runs in a fresh process so
its peak RSS is its own.

    python -m bench.ingest                    # 50,000 pods, pages of 500 and one unpaginated LIST
    python -m bench.ingest --pods 5000 --quick

Writes ``bench/out/ingest.json``; the bar (DESIGN §10) is ≤ 300 MB RSS with 50,000 cached pods.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec

from tests.builders import cluster_cache

BAR_MB = 300.0
OUT = Path(__file__).resolve().parent / "out" / "ingest.json"


def _rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MB, from /proc."""
    values: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kb, _ = line.split()
                values[key] = int(kb) / 1024
    return values["VmRSS:"], values["VmHWM:"]


def realistic_pod(i: int, rv: int, *, bound: bool = True) -> dict[str, Any]:
    """A pod of a 8-pod Job as the API server returns it (about 6 KB of JSON)."""
    job = f"train-{i // 8:05d}"
    ns = f"team-{(i // 8) % 40:02d}"
    uid = f"{i:08d}-7a3c-4b1e-9f2d-{i:012d}"
    node = f"gpu-node-{i % 2000:04d}" if bound else None
    ts = "2026-11-20T10:00:00Z"
    env = [{"name": f"VAR_{k}", "value": f"value-{k}-{i}"} for k in range(8)]
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{job}-{i % 8}-x7k2p",
            "generateName": f"{job}-{i % 8}-",
            "namespace": ns,
            "uid": uid,
            "resourceVersion": str(rv),
            "creationTimestamp": ts,
            "labels": {
                "batch.kubernetes.io/controller-uid": f"ctrl-{i // 8:08d}",
                "batch.kubernetes.io/job-name": job,
                "controller-uid": f"ctrl-{i // 8:08d}",
                "job-name": job,
                "batch.kubernetes.io/job-completion-index": str(i % 8),
                "runway.dev/queue": f"team-{(i // 8) % 40:02d}-batch",
                "app.kubernetes.io/name": "trainer",
            },
            "annotations": {
                "batch.kubernetes.io/job-completion-index": str(i % 8),
                "runway.dev/min-available": "8",
                "prometheus.io/scrape": "true",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"ctrl-{i // 8:08d}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {f"f:l{k}": {} for k in range(7)}},
                        "f:spec": {"f:containers": {'k:{"name":"main"}': {}}},
                    },
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {
                        "f:status": {
                            "f:conditions": {},
                            "f:containerStatuses": {},
                            "f:hostIP": {},
                            "f:phase": {},
                            "f:podIP": {},
                        }
                    },
                },
            ],
        },
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{job}"}},
                {
                    "name": "kube-api-access-abcde",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                },
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/ml/trainer:2026.11.3",
                    "command": ["python", "-m", "trainer"],
                    "args": ["--epochs", "90", "--batch-size", "256"],
                    "env": env,
                    "resources": {
                        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "priorityClassName": "batch-low",
            "priority": 100,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "preemptionPolicy": "PreemptLowerPriority",
            "enableServiceLinks": True,
        },
        "status": {
            "phase": "Running" if bound else "Pending",
            "conditions": conditions if bound else None,
            "hostIP": f"10.0.{i % 250}.{i % 200}" if bound else None,
            "podIP": f"10.244.{i % 250}.{i % 200}" if bound else None,
            "startTime": ts if bound else None,
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {"running": {"startedAt": ts}},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example.com/ml/trainer:2026.11.3",
                    "imageID": "registry.example.com/ml/trainer@sha256:" + "ab" * 32,
                    "containerID": "containerd://" + "cd" * 32,
                    "started": True,
                }
            ]
            if bound
            else None,
            "qosClass": "Guaranteed",
        },
    }


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            yield chunk


LIST_RV = 1_000_000


def prepare(directory: Path, pods: int, events: int) -> None:
    """Write the pods (one JSON object per line) and the watch events the fake will serve.

    Generated up front, in the parent process: the scenario process then only handles bytes,
    so its heap holds what runway allocates, not the generator's garbage.
    """
    encoder = msgspec.json.Encoder()
    with open(directory / "pods.jsonl", "wb") as f:
        for i in range(pods):
            f.write(encoder.encode(realistic_pod(i, LIST_RV - pods + i, bound=i % 10 != 0)))
            f.write(b"\n")
    with open(directory / "events.jsonl", "wb") as f:
        rv = LIST_RV
        for k in range(events):
            rv += 1
            i, kind = k % pods, "MODIFIED"
            if k % 50 == 49:
                kind = "DELETED"
            elif k % 50 == 48:
                kind, i = "ADDED", pods + k
            obj = realistic_pod(i, rv, bound=True)
            f.write(encoder.encode({"type": kind, "object": obj}))
            f.write(b"\n")


class FakeApi:
    """LIST pages cut from pods.jsonl (continue = byte offset), then the WATCH stream of
    events.jsonl, then EOF."""

    def __init__(self, directory: Path) -> None:
        self.pods_file = open(directory / "pods.jsonl", "rb")  # noqa: SIM115
        self.events_path = directory / "events.jsonl"
        self.bytes_served = 0
        self.seconds = 0.0
        """Time spent serving (file reads): subtracted to get runway's own time."""

    def close(self) -> None:
        """Close the pods file."""
        self.pods_file.close()

    def handler(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if params.get("watch") == "true":
            return httpx.Response(200, stream=_Stream(self._watch()))
        t0 = time.perf_counter()
        limit = int(params.get("limit") or 0) or 10**9
        self.pods_file.seek(int(params.get("continue") or 0))
        lines = []
        for line in self.pods_file:
            lines.append(line.rstrip(b"\n"))
            if len(lines) == limit:
                break
        offset = self.pods_file.tell()
        more = bool(self.pods_file.read(1))
        cont = f',"continue":"{offset}"' if more else ""
        body = (
            b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"'
            + str(LIST_RV).encode()
            + b'"'
            + cont.encode()
            + b'},"items":['
            + b",".join(lines)
            + b"]}"
        )
        self.bytes_served += len(body)
        self.seconds += time.perf_counter() - t0
        return httpx.Response(200, content=body)

    async def _watch(self) -> AsyncIterator[bytes]:
        with open(self.events_path, "rb") as f:  # noqa: ASYNC230 (the fake, not runway)
            while True:
                t0 = time.perf_counter()
                chunk = f.read(1 << 20)
                self.seconds += time.perf_counter() - t0
                if not chunk:
                    return
                self.bytes_served += len(chunk)
                yield chunk


async def run_scenario(directory: Path, page_size: int) -> dict[str, Any]:
    """One ingest in this process: LIST then WATCH; returns timings and memory."""
    from app.kube.access import ClusterAccess
    from app.kube.client import KubeClient
    from app.kube.reflector import Reflector
    from app.kube.resources import PODS
    from app.model import Pod
    from app.server import GC_THRESHOLDS

    class Config:
        host = "https://bench.invalid"
        verify_ssl = True
        ssl_ca_cert = cert_file = key_file = username = password = None

        def get_api_key_with_prefix(self, _: str) -> str:
            return "Bearer bench"

    gc.collect()
    base_rss, _ = _rss_mb()
    fake = FakeApi(directory)
    client = KubeClient(
        ClusterAccess(Config(), "bench"), transport=httpx.MockTransport(fake.handler)
    )
    cache = cluster_cache()
    reflector: Reflector[Pod] = Reflector(client, PODS, Pod, cache.pod_store, page_size=page_size)
    t0 = time.perf_counter()
    await reflector.list_once()
    t_list = time.perf_counter() - t0 - fake.seconds
    serve_list = fake.seconds
    listed = len(cache)
    t1 = time.perf_counter()
    applied = await reflector.watch_once(reflector.resource_version)
    t_watch = time.perf_counter() - t1 - (fake.seconds - serve_list)
    await client.aclose()
    fake.close()
    gc.collect()
    rss, peak = _rss_mb()
    # The indexes must be usable, and quick, right after the ingest.
    t2 = time.perf_counter()
    views = [cache.workload(k) for k in cache.workload_keys()]
    t_workloads = time.perf_counter() - t2
    # A resync (the watch expired: LIST again) while the loop must keep answering the verbs:
    # the longest the event loop went without running another task (a verb's wait). The heap
    # is tuned as the service tunes it (app.server.settle_heap, and the freeze after the sync).
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    pauses: list[float] = []
    done = asyncio.Event()
    last = time.perf_counter()

    async def probe() -> None:
        nonlocal last
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            pauses.append(now - last)
            last = now

    async def network(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0)  # a real API server's answer arrives on the socket: the loop runs
        return fake.handler(request)

    fake = FakeApi(directory)
    client = KubeClient(ClusterAccess(Config(), "bench"), transport=httpx.MockTransport(network))
    reflector.client = client
    reflector.resource_version = None
    prober = asyncio.get_running_loop().create_task(probe())
    await asyncio.sleep(0)
    last = time.perf_counter()
    t3 = time.perf_counter()
    await reflector.list_once()
    t_resync = time.perf_counter() - t3
    done.set()
    await prober
    await client.aclose()
    fake.close()
    return {
        "pods_listed": listed,
        "pods_cached": len(cache),
        "page_size": page_size,
        "watch_events": applied,
        "list_seconds": round(t_list, 3),
        "note": "seconds exclude the fake server's file reads",
        "list_pods_per_second": round(listed / t_list),
        "watch_seconds": round(t_watch, 3),
        "watch_events_per_second": round(applied / t_watch) if t_watch else None,
        "workloads": len(views),
        "derive_all_workloads_seconds": round(t_workloads, 3),
        "resync_seconds": round(t_resync, 3),
        "resync_max_pause_ms": round(max(pauses, default=0.0) * 1000, 1),
        "bar_resync_pause_ms": 50.0,
        "json_mb_served": round(fake.bytes_served / 2**20, 1),
        "rss_before_mb": round(base_rss, 1),
        "rss_after_mb": round(rss, 1),
        "peak_rss_mb": round(peak, 1),
        "cache_mb_approx": round(rss - base_rss, 1),
        "bar_peak_rss_mb": BAR_MB,
        "pass": peak <= BAR_MB,
    }


def main() -> int:
    """Run each scenario in a fresh process, print a table, write bench/out/ingest.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--page-sizes", default="500,5000", help="comma list (0 = one LIST)")
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--page-size", type=int, default=500, help=argparse.SUPPRESS)
    parser.add_argument("--output", default=str(OUT))
    ns = parser.parse_args()
    if ns.scenario:
        result = asyncio.run(run_scenario(Path(ns.scenario), ns.page_size))
        print(json.dumps(result))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="runway-ingest-") as tmp:
        t0 = time.perf_counter()
        prepare(Path(tmp), ns.pods, ns.events)
        print(f"generated {ns.pods} pods and {ns.events} events in {time.perf_counter() - t0:.1f}s")
        for size in (int(s) for s in ns.page_sizes.split(",")):
            out = subprocess.run(
                [sys.executable, "-m", "bench.ingest", "--scenario", tmp, "--page-size", str(size)],
                capture_output=True,
                text=True,
                check=True,
            )
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    header = (
        f"{'page':>6} {'pods':>7} {'list s':>7} {'pods/s':>8} {'events':>7} {'watch s':>8} "
        f"{'ev/s':>7} {'peak RSS':>9} {'cache':>7} {'resync s':>8} {'max pause':>9} {'bar':>5}"
    )
    print(header)
    for r in results:
        print(
            f"{r['page_size'] or 'all':>6} {r['pods_cached']:>7} {r['list_seconds']:>7} "
            f"{r['list_pods_per_second']:>8} {r['watch_events']:>7} {r['watch_seconds']:>8} "
            f"{r['watch_events_per_second']:>7} {r['peak_rss_mb']:>7}MB "
            f"{r['cache_mb_approx']:>5}MB {r['resync_seconds']:>8} "
            f"{r['resync_max_pause_ms']:>7}ms {'ok' if r['pass'] else 'FAIL':>5}"
        )
    doc = {
        "benchmark": "ingest",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "pods": ns.pods,
        "events": ns.events,
        "results": results,
    }
    Path(ns.output).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.output).write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(r["pass"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
