"""Preempt latency, takeover vs scheduler-executes, with the API server faked at a fixed latency.

    python -m bench.preempt [--quick] [--out bench/out/preempt.json]

For each API latency (0/10/50/200 ms) and victim count (1/10/50), the preempt verb is called
in-process through the ASGI app (decode → facts → decision → executor) with runway's real
``KubePodWriter`` and ``KubeClient`` over an ``httpx.MockTransport`` that answers every call
after the latency.

* "async" is the takeover (``preemption.async: true``): the verb answers ``{}`` before any call
  completes; runway's background task makes the calls. Its time is what kube-scheduler waits.
* "sync" is what kube-scheduler's cycle waits when it executes the preemption itself
  (``preemption.async: false``, or no extender): the verb's answer, then — as kube-scheduler 1.20
  does inside its cycle — one DELETE per victim in turn and the nomination, made here with the
  same client at the same latency.

Printed: p50/p99 per mode and the sync/async ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import kubernetes.client
import msgspec

from app import metrics
from app.clock import SystemClock
from app.config import LoggingConfig, parse_config
from app.kube.access import ClusterAccess
from app.kube.client import KubeClient
from app.kube.pods import KubePodWriter
from app.logs import configure_logging
from app.model import Pod
from app.model.gate import PodRef
from app.model.timestamps import format_time
from app.server import create_app
from app.wiring import Runway


def _pod(name: str, uid: str, node: str | None, priority: int, queue: str) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": uid,
            "labels": {"runway.dev/queue": queue},
        },
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        },
        "status": {
            "phase": "Running" if node else "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": format_time(time.time() - 7200),
                }
            ],
        },
    }
    return msgspec.convert(raw, Pod)


def _kube(latency: float) -> KubeClient:
    async def handler(request: httpx.Request) -> httpx.Response:
        if latency:
            await asyncio.sleep(latency)  # the faked API server's latency
        return httpx.Response(200, json={"kind": "Pod", "apiVersion": "v1"})

    cfg = kubernetes.client.Configuration()
    cfg.host = "https://api.bench"
    access = ClusterAccess(configuration=cfg, source="bench")
    return KubeClient(access=access, transport=httpx.MockTransport(handler))


async def _measure(
    latency: float, victims: int, async_mode: bool, iterations: int
) -> tuple[list[float], list[float]]:
    config = parse_config(
        {
            "preemption": {
                "async": async_mode,
                "victimParallelism": 8,
                "maxConcurrentTasks": 10_000,
            },
            "queues": [{"name": "low"}, {"name": "high"}],
        }
    )
    app = create_app(config, clock=SystemClock())
    runtime: Runway = app.state.runway
    # The preemption's pod writes go to a fake API server with this latency (no watches).
    kube = _kube(latency)
    writer = KubePodWriter(kube)
    runtime.executor.pods = writer
    pods = [_pod(f"v{i}", f"uid-v{i}", "node-0", 1, "low") for i in range(victims)]
    runtime.cache.replace_pods(pods)
    times: list[float] = []
    server: list[float] = []
    # Server-side time (what the scheduler waits for, minus the transport): the verb's own
    # duration histogram sees every call; capture its observations.
    original = metrics.VERB_CALLS.record

    def record(verb: str, outcome: str, seconds: float | None = None) -> None:
        if verb == "preempt" and seconds is not None:
            server.append(seconds)
        original(verb, outcome, seconds)

    metrics.VERB_CALLS.record = record  # type: ignore[method-assign]
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://runway") as client,
    ):
        for it in range(iterations):
            body = json.dumps(
                {
                    "Pod": {
                        "metadata": {
                            "name": f"p{it}",
                            "namespace": "bench",
                            "uid": f"uid-p{it}",
                            "labels": {"runway.dev/queue": "high"},
                        },
                        "spec": {"priority": 1000},
                    },
                    "NodeNameToMetaVictims": {
                        "node-0": {
                            "Pods": [{"UID": p.metadata.uid} for p in pods],
                            "NumPDBViolations": 0,
                        }
                    },
                }
            ).encode()
            start = time.perf_counter()
            resp = await client.post("/scheduler/preempt", content=body)
            assert resp.status_code == 200, resp.text
            chosen = resp.json()["NodeNameToMetaVictims"]
            if async_mode:
                assert chosen == {}, resp.text  # takeover: kube-scheduler has nothing to do
            else:
                # kube-scheduler's own execution, in its cycle: each victim, then the nomination.
                ((node, victims_of_node),) = chosen.items()
                for v in victims_of_node["Pods"]:
                    await writer.delete(PodRef(v["UID"], "bench", v["UID"]))
                await writer.nominate(PodRef(f"uid-p{it}", "bench", f"p{it}"), node)
            times.append(time.perf_counter() - start)
            runtime.gate.release(f"uid-p{it}")  # each iteration is a fresh preemptor
        await runtime.executor.drain(600)
        results = [r.result for r in runtime.executor.recent()]
        assert all(r == "success" for r in results), results
    metrics.VERB_CALLS.record = original  # type: ignore[method-assign]
    await kube.aclose()
    return server, times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main_async(quick: bool) -> list[dict[str, Any]]:
    rows = []
    print(
        f"{'API ms':>7} {'victims':>7} | {'async p50':>9} {'async p99':>9} {'rt p99':>8} | "
        f"{'sync p50':>9} {'sync p99':>9} | {'ratio':>6}"
    )
    for latency_ms in (0, 10, 50, 200):
        for victims in (1, 10, 50):
            n_async = 60 if quick else 300
            n_sync = 3 if latency_ms >= 50 else (10 if quick else 40)
            a, a_rt = await _measure(latency_ms / 1000, victims, True, n_async)
            # Scheduler executes: its wait is the round trip plus its own calls (client side).
            _, s = await _measure(latency_ms / 1000, victims, False, n_sync)
            row = {
                "api_latency_ms": latency_ms,
                "victims": victims,
                "async_p50_ms": _pct(a, 0.5) * 1e3,
                "async_p99_ms": _pct(a, 0.99) * 1e3,
                "async_roundtrip_p50_ms": _pct(a_rt, 0.5) * 1e3,
                "async_roundtrip_p99_ms": _pct(a_rt, 0.99) * 1e3,
                "sync_p50_ms": _pct(s, 0.5) * 1e3,
                "sync_p99_ms": _pct(s, 0.99) * 1e3,
                "ratio_p50": statistics.median(s) / statistics.median(a_rt),
                "iterations": {"async": n_async, "sync": n_sync},
            }
            rows.append(row)
            print(
                f"{latency_ms:>7} {victims:>7} | {row['async_p50_ms']:>7.2f}ms "
                f"{row['async_p99_ms']:>7.2f}ms {row['async_roundtrip_p99_ms']:>6.1f}ms | "
                f"{row['sync_p50_ms']:>7.1f}ms {row['sync_p99_ms']:>7.1f}ms | "
                f"{row['ratio_p50']:>5.0f}x"
            )
    return rows


def main() -> None:
    """Run the benchmark, print the table, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="bench/out/preempt.json")
    ns = parser.parse_args()
    configure_logging(LoggingConfig(level="warning"))
    rows = asyncio.run(main_async(ns.quick))
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": {
                    "python": platform.python_version(),
                    "cpu": platform.processor() or platform.machine(),
                },
                "rows": rows,
            },
            indent=2,
        )
    )
    bar = next(r for r in rows if r["api_latency_ms"] == 50 and r["victims"] == 10)
    worst = max(r["async_p99_ms"] for r in rows)
    print(
        f"\nbars: async p99 max {worst:.2f} ms (≤ 5 ms); sync/async at 50 ms x 10 victims "
        f"{bar['ratio_p50']:.0f}x (≥ 100x)"
    )


if __name__ == "__main__":
    main()
