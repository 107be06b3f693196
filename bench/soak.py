"""Soak benchmark: runway's HTTP server under hostile connections (issue 14 rows 6, 7, 8).

Starts ``python -m app serve`` on a free 127.0.0.1 port with the default ``server.*`` bounds
(or ``--config``), then plays, one case after the other, each bounded in count and time:

* ``big-header``: one request head growing to 150 MB on ``GET /healthz``;
* ``many-headers``: 10 connections each sending 100 MB of unfinished headers;
* ``connections``: 3,000 idle + 300 half-sent heads + 200 slow bodies (1 byte/s), held up to
  70 s, counting how many the server still keeps open over time;
* ``sigterm``: SIGTERM while a client sends its body at 1 byte/s: time to exit and exit code.

During each case a prober measures ``/healthz`` latency (kube-scheduler's extender timeout is
5 s); the server's RSS is sampled from ``/proc``. Loopback only; stops by itself (about 2-3
minutes). Writes ``bench/out/soak.json`` and prints a table.

    python -m bench.soak [--config FILE] [--hold 70] [--idle 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.runway_process import free_port, wait_until_healthy

OUT = Path(__file__).parent / "out"


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Prober:
    """``GET /healthz`` every 100 ms on a fresh connection; latencies and failures."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.latencies: list[float] = []
        self.failures = 0
        self._task: asyncio.Task[None] | None = None

    async def _once(self) -> None:
        start = time.perf_counter()
        try:
            async with asyncio.timeout(10):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                await writer.drain()
                data = await reader.read(1024)
                writer.close()
            if not data.startswith(b"HTTP/1.1 200"):
                self.failures += 1
                return
        except (OSError, TimeoutError):
            self.failures += 1
            return
        self.latencies.append(time.perf_counter() - start)

    async def _run(self) -> None:
        while True:
            await self._once()
            await asyncio.sleep(0.1)  # probe interval

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        lat = sorted(self.latencies) or [float("nan")]
        return {
            "probes": len(self.latencies) + self.failures,
            "failures": self.failures,
            "p50_ms": round(statistics.median(lat) * 1000, 1),
            "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1),
            "max_ms": round(lat[-1] * 1000, 1),
        }


async def send_header(port: int, total: int, budget: float) -> dict[str, Any]:
    """Send a request head growing to ``total`` bytes; how much got through before the close."""
    sent = 0
    start = time.monotonic()
    reply = b""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        chunk = b"a" * (1 << 20)
        while sent < total and time.monotonic() - start < budget:
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)
        async with asyncio.timeout(5):
            reply = await reader.read(200)
        writer.close()
    except (OSError, TimeoutError):
        pass
    return {"sent_mb": round(sent / 2**20, 1), "status": reply[:40].decode(errors="replace")}


async def case_big_header(port: int, pid: int) -> dict[str, Any]:
    result = await send_header(port, 150 << 20, budget=30)
    return {**result, "rss_mb_after": round(rss_mb(pid), 1)}


async def case_many_headers(port: int, pid: int) -> dict[str, Any]:
    results = await asyncio.gather(*(send_header(port, 100 << 20, budget=30) for _ in range(10)))
    return {
        "max_sent_mb": max(r["sent_mb"] for r in results),
        "statuses": sorted({r["status"] for r in results}),
        "rss_mb_after": round(rss_mb(pid), 1),
    }


async def open_many(port: int, count: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(count):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
        except OSError:
            break
    return writers


async def still_open(writers: list[asyncio.StreamWriter]) -> int:
    await asyncio.sleep(0)  # let the transports see the closes
    return sum(1 for w in writers if not w.transport.is_closing() and not _peer_closed(w))


def _peer_closed(writer: asyncio.StreamWriter) -> bool:
    reader = writer._protocol._stream_reader  # type: ignore[attr-defined]
    return bool(reader is not None and reader.at_eof())


async def case_connections(port: int, pid: int, idle: int, hold: float) -> dict[str, Any]:
    idle_w = await open_many(port, idle)
    half_w = await open_many(port, 300)
    for w in half_w:
        w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    slow_w = await open_many(port, 200)
    for w in slow_w:
        w.write(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
    groups = {"idle": idle_w, "half_sent": half_w, "slow_body": slow_w}
    timeline = []
    start = time.monotonic()
    while time.monotonic() - start < hold:
        await asyncio.sleep(1)  # the slow clients' pace (1 byte/s) and the sampling period
        for w in slow_w:
            if not w.transport.is_closing():
                w.write(b" ")
        t = round(time.monotonic() - start)
        if t in (1, 5, 15, 30, 45, 60, 70) or time.monotonic() - start >= hold:
            sample: dict[str, Any] = {"t_s": t, "rss_mb": round(rss_mb(pid), 1)}
            for name, ws in groups.items():
                sample[name] = await still_open(ws)
            timeline.append(sample)
            if all(sample[n] == 0 for n in groups):
                break
    for ws in groups.values():
        for w in ws:
            w.close()
    opened = {name: len(ws) for name, ws in groups.items()}
    return {"opened": opened, "timeline": timeline}


async def case_sigterm(port: int, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
    await writer.drain()
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    while proc.poll() is None and time.monotonic() - start < 40:
        if not writer.transport.is_closing():
            writer.write(b" ")
        await asyncio.sleep(1)  # 1 byte/s
    writer.close()
    return {
        "exited_after_s": round(time.monotonic() - start, 1) if proc.poll() is not None else None,
        "exit_code": proc.poll(),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    OUT.mkdir(exist_ok=True)
    port = free_port()
    log = (OUT / "soak-server.log").open("wb")
    cmd = [sys.executable, "-m", "app", "serve", "--port", str(port)]
    if args.config:
        cmd += ["--config", args.config]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)  # noqa: ASYNC220
    results: dict[str, Any] = {}
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", proc)
        results["rss_mb_start"] = round(rss_mb(proc.pid), 1)
        for name, make in (
            ("big-header", lambda: case_big_header(port, proc.pid)),
            ("many-headers", lambda: case_many_headers(port, proc.pid)),
            ("connections", lambda: case_connections(port, proc.pid, args.idle, args.hold)),
        ):
            prober = Prober(port)
            prober.start()
            started = time.monotonic()
            outcome = await make()
            outcome["healthz"] = await prober.stop()
            outcome["seconds"] = round(time.monotonic() - started, 1)
            results[name] = outcome
            print(name, json.dumps(outcome), flush=True)
        results["sigterm"] = await case_sigterm(port, proc)
        print("sigterm", json.dumps(results["sigterm"]), flush=True)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="runway config file (default: the embedded default)")
    parser.add_argument("--hold", type=float, default=70.0, help="seconds to hold connections")
    parser.add_argument("--idle", type=int, default=3000, help="idle connections to open")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.idle + 2000)), hard))
    results = asyncio.run(run(args))
    (OUT / "soak.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
