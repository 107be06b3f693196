"""Holds by filter vs holds by gate, on the real kube-scheduler and kube-apiserver (issue #34).

Run ``python -m bench.gates [--release 1.37.2] [--held 1000] [--fit 200] [--burst 500]``.

One control plane of ``--release`` (``tools/kube up``, always ``down``), runway with its gate
webhook behind a loopback HTTPS front (``tests/e2e/webhook.GateWebhook``), kube-scheduler with
runway as its extender; the same run measures both ways of holding, each in a namespace of its
own on the same nodes:

* **filter**: the webhook not registered. ``--held`` pods of 50 workloads whose WorkloadRecords
  say requeue backoff for 30 minutes (a mass eviction's aftermath) are created; runway's filter
  rejects them and kube-scheduler keeps cycling them. Then ``--fit`` pods nothing holds are
  created at once: the time until all are bound.
* **gate**: the webhook registered; the same. The held pods are created gated and stay gated.

Per mode, during the backoff (from the held pods' creation to the last fitting pod's bind):
the held pods an autoscaler counts as demand (pending, ``PodScheduled=False`` reason
``Unschedulable``), runway's filter rejections of held pods per held pod per minute, and
kube-scheduler's unschedulable attempts. Then a burst of ``--burst`` pod CREATEs (16 at once)
with the webhook up: runway's answer time per review (p50/p99 over loopback HTTP, measured by
the front) and the creates' own p99; and 100 serial creates with the webhook registered but
runway down (the front closes the connection: ``failurePolicy: Ignore``) against none. Last,
the burst again as the chart wires the webhook: kube-apiserver calling runway's own HTTPS REST
port (no front), runway alone on the plane, timed by kube-apiserver's own
``apiserver_admission_webhook_admission_duration_seconds`` (what an operator monitors; its first
bucket is 5 ms: the share of calls within it is the issue's bar) and runway's handler histogram.

Prints tables and writes ``bench/out/gates.json``. Not a test: no bar, numbers for
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.extender import OUT, build_go, machine, print_table
from bench.throughput import samples
from tests.certs import CA
from tests.e2e.conftest import (
    ControlPlane,
    RunwayFactory,
    control_plane_up,
    harness_config,
    poll,
    rfc3339_now,
    write_scheduler_config,
)
from tests.e2e.webhook import GateWebhook, register_gate_webhook, unregister_gate_webhook
from tests.runway_process import free_port, run_runway

SCHEDULER = "runway-bench-gates"
GATE = "runway.dev/admission"
RUNWAY_CONFIG: dict[str, Any] = {
    "queues": [{"name": "team"}],
    "kubernetes": {"leaderElection": {"enable": False}},
    "preemption": {"schedulerNames": [SCHEDULER]},
    # blockAdmission off: one workload at a time is not what this measures
    "waitForPodsReady": {"enable": True, "timeout": "30m", "blockAdmission": False},
    "logging": {"level": "warning"},
}
WORKLOADS = 50
NODES = 8


def pod_body(name: str, workload: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"runway.dev/queue": "team", "runway.dev/workload": workload},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "10m"}},
                }
            ],
        },
    }


class Created(NamedTuple):
    """One pod CREATE: how long it took, and whether the API server's answer (the pod as the
    webhooks left it) carries runway's gate."""

    seconds: float
    gated: bool


def create_many(plane: ControlPlane, ns: str, bodies: list[dict[str, Any]]) -> list[Created]:
    """Create ``bodies`` 16 at a time."""

    def one(body: dict[str, Any]) -> Created:
        start = time.perf_counter()
        r = plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=body)
        seconds = time.perf_counter() - start
        assert r.status_code == 201, r.text
        gates = r.json()["spec"].get("schedulingGates") or []
        return Created(seconds, any(g.get("name") == GATE for g in gates))

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, bodies))


def pods_of(plane: ControlPlane, ns: str) -> list[dict[str, Any]]:
    r = plane.api.get(f"/api/v1/namespaces/{ns}/pods")
    items: list[dict[str, Any]] = r.raise_for_status().json()["items"]
    return items


def demand(pods: list[dict[str, Any]]) -> int:
    """Pending pods a cluster autoscaler counts (``PodScheduled=False``, ``Unschedulable``)."""
    return sum(
        1
        for p in pods
        if not p["spec"].get("nodeName")
        and any(
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    )


def unschedulable_attempts(url: str) -> float:
    """kube-scheduler's ``scheduler_schedule_attempts_total{result="unschedulable"}`` of the
    bench's profile (its metrics are https with a self-signed certificate from 1.21)."""
    text = httpx.get(url, timeout=10, verify=False).raise_for_status().text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "scheduler_schedule_attempts_total"
        and s.labels.get("profile") == SCHEDULER
        and s.labels.get("result") == "unschedulable"
    )


def backoff_rejections(url: str) -> float:
    return sum(
        v
        for name, labels, v in samples(f"{url}/metrics")
        if name == "runway_filter_rejections_total" and labels.get("reason") == "backoff"
    )


def held_gauge(url: str) -> dict[str, float]:
    return {
        labels["hold"]: v
        for name, labels, v in samples(f"{url}/metrics")
        if name == "runway_held_pods"
    }


def one_mode(
    plane: ControlPlane, rw_url: str, scheduler_metrics: str, mode: str, held: int, fit: int
) -> dict[str, Any]:
    ns = f"gates-{mode}"
    plane.ensure_namespace(ns)
    requeue_at = time.time() + 1800
    for i in range(WORKLOADS):
        plane.write_record(
            ns,
            f"held-{i}",
            "label",
            {
                "eviction": {
                    "reason": "PodsReadyTimeout",
                    "time": rfc3339_now(),
                    "count": 1,
                    "requeueAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(requeue_at)),
                }
            },
        )
    time.sleep(2)  # runway's record watch has them (a poll would need runway's view per record)
    rejections0 = backoff_rejections(rw_url)
    attempts0 = unschedulable_attempts(scheduler_metrics)
    start = time.monotonic()
    create_many(plane, ns, [pod_body(f"held-{i}", f"held-{i % WORKLOADS}") for i in range(held)])
    time.sleep(5)  # the held pods settle: cycled by the scheduler, or gated
    fit_start = time.monotonic()
    create_many(plane, ns, [pod_body(f"fit-{i}", f"fit-{i}") for i in range(fit)])

    def all_bound() -> float | None:
        r = plane.api.get(
            f"/api/v1/namespaces/{ns}/pods", params={"fieldSelector": "spec.nodeName!="}
        )
        pods = r.raise_for_status().json()["items"]
        bound = sum(
            1
            for p in pods
            if p["metadata"]["name"].startswith("fit-") and p["spec"].get("nodeName")
        )
        return time.monotonic() if bound == fit else None

    done = poll(all_bound, within=600, every=0.25, what=f"{fit} pods bound ({mode})")
    time.sleep(max(0.0, 60 - (time.monotonic() - start)))  # at least a minute of backoff
    minutes = (time.monotonic() - start) / 60
    pods = pods_of(plane, ns)
    held_pods = [p for p in pods if p["metadata"]["name"].startswith("held-")]
    gated = sum(1 for p in held_pods if (p["spec"].get("schedulingGates") or []))
    result = {
        "mode": mode,
        "held": held,
        "fit": fit,
        "fit_bound_s": round(done - fit_start, 2),
        "held_gated": gated,
        "held_bound": sum(1 for p in held_pods if p["spec"].get("nodeName")),
        "autoscaler_demand": demand(held_pods),
        "filter_calls_per_held_pod_per_min": round(
            (backoff_rejections(rw_url) - rejections0) / held / minutes, 3
        ),
        "scheduler_unschedulable_attempts": unschedulable_attempts(scheduler_metrics) - attempts0,
        "window_min": round(minutes, 2),
        "held_gauge": held_gauge(rw_url),
    }
    print(result, flush=True)
    empty(plane, ns)
    return result


def empty(plane: ControlPlane, ns: str) -> None:
    """Delete every pod of ``ns`` (a collection DELETE of 1,200 pods may outlast the client's
    timeout on a loaded machine: the API server goes on, the bench waits for the list)."""
    with contextlib.suppress(httpx.TimeoutException):
        plane.api.request(
            "DELETE",
            f"/api/v1/namespaces/{ns}/pods",
            params={"gracePeriodSeconds": "0"},
            timeout=300,
        ).raise_for_status()
    poll(lambda: not pods_of(plane, ns), within=300, every=2, what=f"{ns} emptied")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def handler_buckets(url: str) -> dict[float, float]:
    """runway's own ``runway_gate_webhook_duration_seconds`` buckets (le → count so far)."""
    return {
        float(labels["le"]): v
        for name, labels, v in samples(f"{url}/metrics")
        if name == "runway_gate_webhook_duration_seconds_bucket"
    }


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The upper bound of the bucket holding the ``q`` quantile of what was observed between."""
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts[max(counts)]
    for le, cumulative in counts.items():
        if cumulative >= q * total:
            return le
    return float("inf")


def burst(plane: ControlPlane, hook: GateWebhook, n: int, rw_url: str) -> dict[str, Any]:
    ns = "gates-burst"
    plane.ensure_namespace(ns)
    hook.latencies.clear()
    before = handler_buckets(rw_url)
    creates = create_many(plane, ns, [pod_body(f"b-{i}", f"b-{i}") for i in range(n)])
    after = handler_buckets(rw_url)
    runway = list(hook.latencies)
    out = {
        "pods": n,
        "reviews": len(runway),
        "gated_at_creation": sum(c.gated for c in creates),
        "runway_p50_ms": round(percentile(runway, 0.5) * 1e3, 2),
        "runway_p99_ms": round(percentile(runway, 0.99) * 1e3, 2),
        # in runway's handler, from its own histogram: the bucket's upper bound
        "handler_p99_le_ms": bucket_quantile(before, after, 0.99) * 1e3,
        "create_p50_ms": round(percentile([c.seconds for c in creates], 0.5) * 1e3, 2),
        "create_p99_ms": round(percentile([c.seconds for c in creates], 0.99) * 1e3, 2),
    }
    empty(plane, ns)
    return out


def apiserver_webhook_buckets(plane: ControlPlane) -> dict[float, float]:
    """kube-apiserver's own ``apiserver_admission_webhook_admission_duration_seconds`` buckets
    for runway's gate webhook (le → count so far): the call as the API server times it, the
    connection, TLS and runway's answer included. Its first bucket is 5 ms."""
    text = plane.api.get("/metrics").raise_for_status().text
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (
                s.name == "apiserver_admission_webhook_admission_duration_seconds_bucket"
                and s.labels.get("name") == "gate.runway.dev"
                and s.labels.get("operation") == "CREATE"
            ):
                le = float(s.labels["le"])
                out[le] = out.get(le, 0.0) + s.value
    return out


class Https(NamedTuple):
    """A webhook server on loopback HTTPS: its URL, and runway's metrics URL (None: not runway)."""

    url: str
    metrics: str | None


def _serving_certificate(tmp: Path) -> tuple[CA, Path, Path]:
    """A CA and a 127.0.0.1 serving certificate signed by it, written under ``tmp``."""
    ca = CA("runway-bench-gates-ca")
    leaf = ca.issue("127.0.0.1", server=True)
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    cert.write_bytes(leaf.cert)
    key.write_bytes(leaf.key)
    return ca, cert, key


@contextlib.contextmanager
def runway_https(
    plane: ControlPlane, tmp: Path, config: dict[str, Any], ca: CA, cert: Path, key: Path
) -> Iterator[Https]:
    """runway as the chart runs it: HTTPS, the REST API (and the webhook) on a port of its own."""
    path = tmp / "runway-direct.yaml"
    tls = {"certFile": str(cert), "keyFile": str(key)}
    path.write_text(yaml.safe_dump(harness_config({**config, "server": {"tls": tls}})))
    verify = ssl.create_default_context()
    verify.load_verify_locations(cadata=ca.pem.decode())
    rest_port = free_port()
    args = ("--kubeconfig", str(plane.kubeconfig), "--config", str(path))
    with run_runway(
        tmp,
        (*args, "--rest-port", str(rest_port)),
        scheme="https",
        client_options={"verify": verify},
    ) as rw:
        yield Https(f"https://127.0.0.1:{rest_port}/webhooks/gate", rw.url)


@contextlib.contextmanager
def go_floor(tmp: Path, cert: Path, key: Path) -> Iterator[Https | None]:
    """The floor: ``bench/go_webhook`` (the same answer from Go, nothing decided), built with the
    machine's Go; None where there is no Go. Stopped by its pid."""
    binary = build_go(Path(__file__).parent / "go_webhook", tmp / "go-webhook")
    if binary is None:
        yield None
        return
    port = free_port()
    proc = subprocess.Popen(
        [str(binary), "-cert", str(cert), "-key", str(key), "-addr", f"127.0.0.1:{port}"]
    )
    try:

        def listening() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                return True
            return False

        poll(listening, within=30, what="the Go webhook listening", every=0.1)
        yield Https(f"https://127.0.0.1:{port}/webhooks/gate", None)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def https_burst(plane: ControlPlane, name: str, server: Https, ca: CA, n: int) -> dict[str, Any]:
    """``n`` pod CREATEs (16 at once) through the webhook at ``server`` as the chart registers
    it, timed by kube-apiserver's histogram (and runway's, when it is runway)."""
    ns = f"gates-{name}"
    plane.ensure_namespace(ns)
    hook = f"runway-bench-gate-{name}"
    register_gate_webhook(plane, hook, server.url, ca.pem, [ns], scheduler=SCHEDULER)

    def handler() -> dict[float, float]:
        return handler_buckets(server.metrics) if server.metrics else {}

    try:
        api0, handler0 = apiserver_webhook_buckets(plane), handler()
        creates = create_many(plane, ns, [pod_body(f"d-{i}", f"d-{i}") for i in range(n)])
        api1, handler1 = apiserver_webhook_buckets(plane), handler()
    finally:
        unregister_gate_webhook(plane, hook)
    within_5ms = api1.get(0.005, 0.0) - api0.get(0.005, 0.0)
    calls = api1[max(api1)] - api0.get(max(api1), 0.0)
    out = {
        "server": name,
        "pods": n,
        "gated_at_creation": sum(c.gated for c in creates),
        "apiserver_calls": calls,
        "apiserver_within_5ms": within_5ms,
        "apiserver_share_within_5ms": round(within_5ms / calls, 4) if calls else 0.0,
        "apiserver_p99_le_ms": bucket_quantile(api0, api1, 0.99) * 1e3,
        "apiserver_p50_le_ms": bucket_quantile(api0, api1, 0.5) * 1e3,
        "handler_p99_le_ms": bucket_quantile(handler0, handler1, 0.99) * 1e3 if handler1 else None,
        "create_p50_ms": round(percentile([c.seconds for c in creates], 0.5) * 1e3, 2),
        "create_p99_ms": round(percentile([c.seconds for c in creates], 0.99) * 1e3, 2),
    }
    empty(plane, ns)
    return out


def chart_bursts(
    plane: ControlPlane, tmp: Path, n: int, config: dict[str, Any], rounds: int
) -> list[dict[str, Any]]:
    """The burst as the chart wires the webhook — kube-apiserver calling runway's own HTTPS REST
    port, no relay — and against the Go floor, alternating ``rounds`` times; nothing else runs
    on the plane (no scheduler)."""
    ca, cert, key = _serving_certificate(tmp)
    out: list[dict[str, Any]] = []
    with runway_https(plane, tmp, config, ca, cert, key) as runway, go_floor(tmp, cert, key) as go:
        for _ in range(rounds):
            out.append(https_burst(plane, "runway", runway, ca, n))
            print(out[-1], flush=True)
            if go is not None:
                out.append(https_burst(plane, "go-floor", go, ca, n))
                print(out[-1], flush=True)
    return out


def serial_creates(plane: ControlPlane, ns: str, n: int = 100) -> float:
    """p50 ms of ``n`` serial pod creates in ``ns`` (then deleted)."""
    plane.ensure_namespace(ns)
    times = []
    for i in range(n):
        start = time.perf_counter()
        r = plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=pod_body(f"s-{i}", f"s-{i}"))
        assert r.status_code == 201, r.text
        times.append(time.perf_counter() - start)
    empty(plane, ns)
    return round(statistics.median(times) * 1e3, 2)


def print_chart(direct: list[dict[str, Any]], burst: int) -> None:
    print_table(
        f"webhook as the chart wires it: {burst} CREATEs (16 at once), kube-apiserver to "
        "HTTPS on loopback; go-floor: the same answer from Go",
        [
            "server",
            "calls",
            "within 5 ms",
            "apiserver p50 <= ms",
            "apiserver p99 <= ms",
            "handler p99 <= ms",
            "create p50 ms",
            "create p99 ms",
        ],
        [
            [
                d["server"],
                f"{d['apiserver_calls']:g}",
                f"{d['apiserver_share_within_5ms']:.1%}",
                f"{d['apiserver_p50_le_ms']:g}",
                f"{d['apiserver_p99_le_ms']:g}",
                "-" if d["handler_p99_le_ms"] is None else f"{d['handler_p99_le_ms']:g}",
                f"{d['create_p50_ms']:.2f}",
                f"{d['create_p99_ms']:.2f}",
            ]
            for d in direct
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--release", default="1.37.2")
    ap.add_argument("--held", type=int, default=1000)
    ap.add_argument("--fit", type=int, default=200)
    ap.add_argument("--burst", type=int, default=500)
    ap.add_argument(
        "--chart-rounds", type=int, default=2, help="bursts as the chart wires the webhook"
    )
    ap.add_argument("--out", type=Path, default=OUT / "gates.json")
    ap.add_argument(
        "--chart-only", action="store_true", help="only the bursts as the chart wires the webhook"
    )
    args = ap.parse_args(argv)
    if args.chart_only:
        with control_plane_up(args.release) as plane, tempfile.TemporaryDirectory() as tmp:
            direct = chart_bursts(plane, Path(tmp), args.burst, RUNWAY_CONFIG, args.chart_rounds)
        print_chart(direct, args.burst)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"machine": machine(), "release": args.release, "burst_chart": direct}
        args.out.write_text(json.dumps(record, indent=2))
        return 0
    modes: list[dict[str, Any]] = []
    with (
        control_plane_up(args.release) as plane,
        tempfile.TemporaryDirectory() as tmp,
        GateWebhook() as hook,
    ):
        for n in range(NODES):
            plane.create_node(f"gates-n{n}", capacity={"cpu": "8", "memory": "32Gi", "pods": "110"})
        factory = RunwayFactory(plane, Path(tmp))
        try:
            rw = factory.start(RUNWAY_CONFIG)
            config = write_scheduler_config(
                Path(tmp) / "scheduler.yaml",
                rw.url,
                release=plane.release,
                scheduler_name=SCHEDULER,
                prioritize=False,
            )
            scheduler_metrics = plane.start_scheduler(config)
            modes.append(one_mode(plane, rw.url, scheduler_metrics, "filter", args.held, args.fit))
            hook.target = rw.url
            plane.ensure_namespace("gates-probe")
            hook.register(
                plane,
                ["gates-probe"],
                every_namespace=True,
                scheduler=SCHEDULER,
            )
            modes.append(one_mode(plane, rw.url, scheduler_metrics, "gate", args.held, args.fit))
            burst_result = burst(plane, hook, args.burst, rw.url)
            print(burst_result, flush=True)
            hook.target = None  # registered, runway not answering
            down_ms = serial_creates(plane, "gates-down")
            hook.stop()  # unregistered
            none_ms = serial_creates(plane, "gates-none")
            # the burst again as the chart wires it, runway alone on the plane
            plane.stop_scheduler()
            factory.close()
            direct = chart_bursts(plane, Path(tmp), args.burst, RUNWAY_CONFIG, args.chart_rounds)
        finally:
            factory.close()
            plane.stop_scheduler()
    print_table(
        f"{args.held} pods in backoff + {args.fit} that fit, kube-scheduler {args.release}",
        [
            "holds by",
            "200 bound s",
            "held gated",
            "autoscaler demand",
            "filter calls/held pod/min",
            "sched. unschedulable attempts",
        ],
        [
            [
                m["mode"],
                f"{m['fit_bound_s']:.2f}",
                str(m["held_gated"]),
                str(m["autoscaler_demand"]),
                f"{m['filter_calls_per_held_pod_per_min']:.3f}",
                f"{m['scheduler_unschedulable_attempts']:g}",
            ]
            for m in modes
        ],
    )
    print_table(
        f"webhook: a burst of {args.burst} pod CREATEs (16 at once)",
        [
            "reviews",
            "runway p50 ms",
            "runway p99 ms",
            "handler p99 <= ms",
            "create p50 ms",
            "create p99 ms",
        ],
        [
            [
                str(burst_result["reviews"]),
                f"{burst_result['runway_p50_ms']:.2f}",
                f"{burst_result['runway_p99_ms']:.2f}",
                f"{burst_result['handler_p99_le_ms']:g}",
                f"{burst_result['create_p50_ms']:.2f}",
                f"{burst_result['create_p99_ms']:.2f}",
            ]
        ],
    )
    print_chart(direct, args.burst)
    print_table(
        "pod CREATE p50, 100 serial",
        ["no webhook ms", "webhook registered, runway down ms"],
        [[f"{none_ms:.2f}", f"{down_ms:.2f}"]],
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": machine(),
                "release": args.release,
                "modes": modes,
                "burst": burst_result,
                "burst_chart": direct,
                "create_p50_ms": {"no_webhook": none_ms, "runway_down": down_ms},
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
