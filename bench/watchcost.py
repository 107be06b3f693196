"""What a second pod watcher costs the API server: none, JSON (runway's) or protobuf.

Run ``python -m bench.watchcost [--pods 1000] [--rounds 3]``.

One control plane (no scheduler), one protobuf pod watcher always open (kube-scheduler's
informer watches pods in protobuf). Per round and variant (the order alternates each round):
open a second cluster-wide pod watch — none, ``application/json`` (what runway reads) or
``application/vnd.kubernetes.protobuf;stream=watch`` — then create ``--pods`` pods and patch a
label on each (one ADDED and one MODIFIED per pod, as a backlog and its binds make), and read
kube-apiserver's CPU seconds over that. The watchers read bytes and decode nothing: only the API
server's side is measured (its encoding of each event for each watcher; with two watchers of one
encoding it encodes once). Prints a table, writes ``bench/out/watchcost.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench.extender import OUT, machine, print_table
from bench.throughput import CREATE_THREADS, create_pods, delete_pods, plane_cpu
from tests.e2e.conftest import ControlPlane, control_plane_up, poll

PROTOBUF = "application/vnd.kubernetes.protobuf;stream=watch"
VARIANTS = {"none": None, "json": "application/json", "protobuf": PROTOBUF}


class Watcher:
    """A cluster-wide pod watch in a thread that reads bytes until stopped."""

    def __init__(self, plane: ControlPlane, accept: str) -> None:
        self.bytes = 0
        self.opened = threading.Event()
        self._stop = threading.Event()
        self._client = httpx.Client(
            base_url=plane.url,
            headers={"Authorization": f"Bearer {plane.env['TOKEN']}", "Accept": accept},
            verify=False,
            timeout=httpx.Timeout(30, read=None),
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        # The stream ends with an error when stop() closes the client: that is the way out.
        with (
            contextlib.suppress(httpx.HTTPError),
            self._client.stream("GET", "/api/v1/pods", params={"watch": "1"}) as resp,
        ):
            self.opened.set()
            for chunk in resp.iter_raw():
                self.bytes += len(chunk)
                if self._stop.is_set():
                    return

    def stop(self) -> None:
        """End the watch and wait for its thread."""
        self._stop.set()
        self._client.close()
        self._thread.join(timeout=10)


def patch_labels(plane: ControlPlane, namespace: str, count: int) -> None:
    """One MODIFIED event per pod: a label merge-patched in."""

    def one(i: int) -> None:
        plane.api.patch(
            f"/api/v1/namespaces/{namespace}/pods/tp-{i:05d}",
            json={"metadata": {"labels": {"patched": "yes"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(one, range(count)))


def measure(plane: ControlPlane, variant: str, rnd: int, pods: int) -> dict[str, Any]:
    """One round of one variant: API server CPU seconds for ``pods`` ADDED + MODIFIED events."""
    namespace = f"wc-{variant}-{rnd}"
    plane.ensure_namespace(namespace)
    accept = VARIANTS[variant]
    second = Watcher(plane, accept) if accept is not None else None
    try:
        if second is not None:
            poll(second.opened.is_set, within=30, what="second watch open")
        cpu0 = plane_cpu(plane, "apiserver")
        started = time.monotonic()
        create_pods(plane, namespace, "nobody", pods)
        patch_labels(plane, namespace, pods)
        cpu = plane_cpu(plane, "apiserver") - cpu0
        seconds = time.monotonic() - started
    finally:
        if second is not None:
            second.stop()
    delete_pods(plane, namespace)
    row = {
        "variant": variant,
        "round": rnd,
        "pods": pods,
        "apiserver_cpu_s": cpu,
        "seconds": seconds,
        "second_watch_bytes": second.bytes if second is not None else 0,
    }
    print(f"  round {rnd} {variant:8s}: API server {cpu:.2f} CPU-s in {seconds:.1f} s", flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.watchcost", description=__doc__.split("\n\n", 1)[0]
    )
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(OUT / "watchcost.json"))
    ns = parser.parse_args(argv)
    info = machine()
    print(f"{info['cpu']}, {info['cores']} cores; {ns.pods} pods, {ns.rounds} rounds")
    rows: list[dict[str, Any]] = []
    order = list(VARIANTS)
    with control_plane_up() as plane:
        first = Watcher(plane, PROTOBUF)  # kube-scheduler's informer
        try:
            poll(first.opened.is_set, within=30, what="protobuf watch open")
            for rnd in range(ns.rounds):
                for variant in order if rnd % 2 == 0 else order[::-1]:
                    rows.append(measure(plane, variant, rnd, ns.pods))
        finally:
            first.stop()
    medians = {
        v: statistics.median(r["apiserver_cpu_s"] for r in rows if r["variant"] == v)
        for v in VARIANTS
    }
    print_table(
        f"kube-apiserver CPU for {ns.pods} ADDED + {ns.pods} MODIFIED pod events, beside one "
        "protobuf watcher",
        ("second watcher", "CPU-s per round", "median", "bytes read"),
        [
            (
                v,
                ", ".join(f"{r['apiserver_cpu_s']:.2f}" for r in rows if r["variant"] == v),
                f"{medians[v]:.2f}",
                str(max(r["second_watch_bytes"] for r in rows if r["variant"] == v)),
            )
            for v in VARIANTS
        ],
    )
    out = {"machine": info, "pods": ns.pods, "rounds": ns.rounds, "runs": rows, "medians": medians}
    with open(ns.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2)
    print(f"\nwrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
