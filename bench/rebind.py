"""From "last victim gone" to "preemptor bound", on the real kube-scheduler 1.20 (issue #12).

Run ``python -m bench.rebind [--rounds 3] [--retries 0,6] [--backoff 1,10]``.

One control plane (``control-plane.sh up``, always ``down``), runway in takeover
(``preemption.async: true``) and kube-scheduler 1.20 with runway as its extender and the given
``podInitialBackoffSeconds,podMaxBackoffSeconds`` (default: 1.20's defaults, 1 s and 10 s).
Per round, in a namespace and on a 2-CPU node of its own: a low-priority victim of 1.5 CPUs bound
and Running (the bench plays the kubelet), then a high-priority preemptor of 1.5 CPUs. runway
nominates it and deletes the victim, which stays Terminating (no kubelet) while the preemptor
is retried ``N`` times (``--retries``: each node update moves the unschedulable pods back,
every attempt fails on cpu and lengthens the preemptor's backoff: 1 s doubling to the max).
Then the bench force-deletes the victim and measures, polling every 20 ms, the time from the
DELETE's answer to the preemptor's ``spec.nodeName``. Also reported: the preemptor's
failed attempts (kube-scheduler's ``scheduler_schedule_attempts_total{result="unschedulable"}``
while it is the only pending pod) and runway's wake-up touches after the victim is gone.

Prints a table and writes ``bench/out/rebind.json``. Not a test: no bar, numbers for
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.extender import OUT, machine, print_table
from bench.throughput import samples, scheduler_attempts
from tests.e2e.conftest import (
    ControlPlane,
    RunwayFactory,
    control_plane_up,
    poll,
    write_scheduler_config,
)

SCHEDULER = "runway-bench-rebind"


def pod_body(name: str, priority: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"runway.dev/queue": "team", "runway.dev/workload": name},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "priorityClassName": priority,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu}},
                }
            ],
        },
    }


def get(plane: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    r = plane.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return None if r.status_code == 404 else r.raise_for_status().json()


def failed_attempts(scheduler_metrics: str) -> float:
    """kube-scheduler's unschedulable attempts so far (one pod pending at a time)."""
    return scheduler_attempts(scheduler_metrics, SCHEDULER).get("unschedulable", 0.0)


def wakeups(url: str) -> float:
    """runway's wake-up touches so far."""
    return sum(
        value
        for name, labels, value in samples(f"{url}/metrics")
        if name == "runway_requeue_wakeups_total" and labels.get("result") == "touched"
    )


def one_round(
    plane: ControlPlane, runway_url: str, scheduler_metrics: str, retries: int
) -> dict[str, Any]:
    ns = f"rebind-{uuid.uuid4().hex[:6]}"
    plane.ensure_namespace(ns)
    for n in plane.nodes():  # earlier rounds' nodes: out of the way
        plane.delete_node(n["metadata"]["name"])
    node = f"{ns}-n0"
    plane.create_node(node, capacity={"cpu": "2", "memory": "8Gi", "pods": "20"})
    plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=pod_body("low", "low", "1500m"))

    def low_bound() -> bool:
        p = get(plane, ns, "low")
        if not (p and p["spec"].get("nodeName")):
            return False
        plane.set_pod_running("low", ns)
        return True

    poll(low_bound, within=60, what="victim bound")
    first = failed_attempts(scheduler_metrics)
    plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=pod_body("high", "high", "1500m"))

    def nominated_and_going() -> bool:
        high, low = get(plane, ns, "high"), get(plane, ns, "low")
        return bool(
            high
            and high["status"].get("nominatedNodeName") == node
            and low
            and low["metadata"].get("deletionTimestamp")
        )

    poll(nominated_and_going, within=60, what="nominated, victim terminating")
    for i in range(retries):
        # A node update: kube-scheduler moves unschedulable pods back (to the backoff queue
        # while they back off); each attempt fails (the victim still counts) and doubles it.
        before = failed_attempts(scheduler_metrics)
        plane.api.patch(
            f"/api/v1/nodes/{node}",
            json={"metadata": {"labels": {"bench/nudge": str(i)}}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()
        poll(
            lambda before=before: failed_attempts(scheduler_metrics) > before,
            within=30,
            what="one more failed attempt",
        )
    attempts = failed_attempts(scheduler_metrics) - first
    touched = wakeups(runway_url)
    plane.delete_pod("low", ns)
    gone = time.monotonic()

    def bound() -> float | None:
        p = get(plane, ns, "high")
        return time.monotonic() if p and p["spec"].get("nodeName") == node else None

    t = poll(bound, within=60, every=0.02, what="preemptor bound")
    return {
        "retries": retries,
        "failed_attempts": attempts,
        "gone_to_bound_s": round(t - gone, 3),
        "touches_after_gone": wakeups(runway_url) - touched,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--retries", default="0,6", help="comma-separated: attempts forced per case")
    ap.add_argument("--backoff", default="1,10", help="podInitial,podMax backoff seconds")
    ap.add_argument("--out", type=Path, default=OUT / "rebind.json")
    args = ap.parse_args(argv)
    initial, maximum = (int(x) for x in args.backoff.split(","))
    cases = [int(x) for x in args.retries.split(",")]
    results: list[dict[str, Any]] = []
    with control_plane_up() as plane, tempfile.TemporaryDirectory() as tmp:
        for name, value in (("low", 100), ("high", 1000)):
            plane.ensure_priority_class(name, value)
        factory = RunwayFactory(plane, Path(tmp))
        try:
            rw = factory.start(
                {
                    "queues": [{"name": "team"}],
                    "kubernetes": {"leaderElection": {"enable": False}},
                    "preemption": {"gateTimeout": "120s", "schedulerNames": [SCHEDULER]},
                }
            )
            config = write_scheduler_config(
                Path(tmp) / "scheduler.yaml",
                rw.url,
                release=plane.release,
                scheduler_name=SCHEDULER,
                extra={"podInitialBackoffSeconds": initial, "podMaxBackoffSeconds": maximum},
            )
            scheduler_metrics = plane.start_scheduler(config)
            for _ in range(args.rounds):
                for retries in cases:
                    r = one_round(plane, rw.url, scheduler_metrics, retries)
                    print(r, flush=True)
                    results.append(r)
        finally:
            factory.close()
    rows = []
    for retries in cases:
        mine = [r for r in results if r["retries"] == retries]
        times = [r["gone_to_bound_s"] for r in mine]
        rows.append(
            [
                str(retries),
                "/".join(f"{r['failed_attempts']:g}" for r in mine),
                f"{statistics.median(times):.2f}",
                f"{max(times):.2f}",
                "/".join(f"{r['touches_after_gone']:g}" for r in mine),
            ]
        )
    print_table(
        f"victim gone -> preemptor bound (backoff {initial}s..{maximum}s, {args.rounds} rounds)",
        ["forced retries", "failed attempts", "p50 s", "max s", "touches after gone"],
        rows,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"machine": machine(), "backoff": [initial, maximum], "results": results}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
