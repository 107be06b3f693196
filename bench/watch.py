"""Watch-path CPU: what one pod event costs runway, through its real socket path.

A TLS server in a child process plays the API server's pod watch: ``--pods`` pods ADDED
(pending), then the same pods MODIFIED (bound to a node), one event per chunk, paced at
``--rate`` events/s (a scheduler binding 100-150 pods/s sends 200-300). In this process: runway's
own cache and background loops (``wiring.build`` on the embedded default) fed by the real
``Reflector`` and ``KubeClient`` (a kubeconfig pointing at the child, TLS verified against a
throwaway CA). Measured: this process's CPU from the first event to the last, less its idle
rate, per event — once per ``--windows`` value of ``kubernetes.watchBatchWindow``.

    python -m bench.watch [--pods 500] [--rate 250] [--windows 0s,20ms,50ms]

Prints a table and writes ``bench/out/watch.json``. Issue #13: the cost of a wake dominates an
event's own handling on small VMs, so what the window buys shows only with paced events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

OUT = Path(__file__).resolve().parent / "out" / "watch.json"
LIST_BODY = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}'


# --------------------------------------------------------------------------- the API server


def events(pods: int) -> list[bytes]:
    """The stream's lines: every pod ADDED pending, then every pod MODIFIED bound."""
    from bench.ingest import realistic_pod

    lines = []
    for kind, bound, base in (("ADDED", False, 10), ("MODIFIED", True, 10 + pods)):
        for i in range(pods):
            obj = realistic_pod(i, base + i, bound=bound)
            lines.append(msgspec.json.encode({"type": kind, "object": obj}) + b"\n")
    return lines


def serve(port_file: str, cert: str, key: str, pods: int, rate: float) -> None:
    """The child: answer LISTs with no pods and the pod watch with the paced stream, once
    the parent writes a line on stdin."""
    lines = events(pods)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        start = asyncio.Event()
        threading.Thread(
            target=lambda: (sys.stdin.readline(), loop.call_soon_threadsafe(start.set)),
            daemon=True,
        ).start()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            if b"watch=true" not in head.split(b"\r\n", 1)[0]:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(LIST_BODY), LIST_BODY)
                )
                await writer.drain()
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b"transfer-encoding: chunked\r\n\r\n")
            await writer.drain()
            if b"/pods" not in head:
                await asyncio.sleep(3600)  # nodes: a quiet watch
            await start.wait()
            gap, due = 1.0 / rate, time.monotonic()
            for line in lines:
                writer.write(b"%x\r\n%s\r\n" % (len(line), line))
                await writer.drain()
                due += gap
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            await asyncio.sleep(3600)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        await loop.run_in_executor(None, Path(port_file).write_text, str(port))
        await server.serve_forever()

    asyncio.run(main())


# --------------------------------------------------------------------------- runway's side


class _Counting:
    """The cache's pod store, counting what the reflector applies (the clock starts at the
    first event and stops at the last)."""

    def __init__(self, store: Any, total: int) -> None:
        self.store, self.total, self.applied = store, total, 0
        self.first, self.last = asyncio.Event(), asyncio.Event()
        self.prepare = store.prepare

    def replace(self, items: Any) -> None:
        self.store.replace(items)

    def upsert(self, obj: Any) -> None:
        self.store.upsert(obj)
        self.applied += 1
        if self.applied == 1:
            self.first.set()
        if self.applied == self.total:
            self.last.set()

    def delete(self, obj: Any) -> None:
        self.store.delete(obj)


def start_server(
    tmp: Path, name: str, pods: int, rate: float
) -> tuple[subprocess.Popen[bytes], int]:
    """The child API server and its port."""
    port_file = tmp / f"port-{name}"
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.watch", "--serve", str(port_file), str(tmp / "tls.crt"),
         str(tmp / "tls.key"), "--pods", str(pods), "--rate", str(rate)],
        stdin=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or child.poll() is not None:
            child.kill()
            raise RuntimeError("the watch server did not start")
        time.sleep(0.05)  # polling the child's port file
    return child, int(port_file.read_text())


def write_kubeconfig(path: Path, port: int, ca: Path) -> None:
    """A kubeconfig for the child, its certificate checked against ``ca``."""
    cluster = {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca)}
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "bench"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )


async def measure(
    kubeconfig: Path, child: subprocess.Popen[bytes], window: float, pods: int, rate: float
) -> dict[str, Any]:
    """One run: a fresh runway cache reading the child's stream with ``window``."""
    from app.config import LoggingConfig, RunwayConfig
    from app.config.kubernetes import KubernetesConfig
    from app.kube.client import connect
    from app.kube.reflector import Reflector
    from app.kube.resources import PODS
    from app.logs import configure_logging
    from app.model import Pod
    from app.wiring import build

    configure_logging(LoggingConfig(level="warning"))
    runway = build(RunwayConfig())
    client = connect(KubernetesConfig(), kubeconfig=str(kubeconfig))
    assert client is not None
    total = 2 * pods
    store = _Counting(runway.cache.pod_store, total)
    reflector = Reflector(client, PODS, Pod, store, batch_window=window)
    task = asyncio.create_task(reflector.run())
    try:
        runway.cache.replace_nodes([])
        await asyncio.wait_for(reflector.synced.wait(), 30)
        await runway.start()
        await asyncio.sleep(1.0)
        c0, w0 = time.process_time(), time.monotonic()
        await asyncio.sleep(1.0)
        idle = (time.process_time() - c0) / (time.monotonic() - w0)
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
        await asyncio.wait_for(store.first.wait(), 30)
        c0, w0 = time.process_time(), time.monotonic()
        await asyncio.wait_for(store.last.wait(), total / rate * 3 + 30)
        cpu, wall = time.process_time() - c0, time.monotonic() - w0
        counted = total - 1
        return {
            "window_s": window,
            "events": counted,
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 4),
            "idle_cpu_per_s": round(idle, 5),
            "cpu_us_per_event": round((cpu - idle * wall) / counted * 1e6, 1),
            "cached_pods": len(runway.cache),
        }
    finally:
        task.cancel()
        await runway.stop()
        await client.aclose()


def main(argv: list[str] | None = None) -> int:
    """Run the windows, print the table, write the JSON."""
    from app.config.durations import format_duration, parse_duration
    from tests.certs import CA

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--rate", type=float, default=250.0, help="events per second")
    parser.add_argument("--windows", default="0s,20ms,50ms")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--serve", nargs=3, metavar=("PORT_FILE", "CERT", "KEY"))
    args = parser.parse_args(argv)
    if args.serve:
        serve(*args.serve, pods=args.pods, rate=args.rate)
        return 0
    windows = [parse_duration(w) for w in args.windows.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ca = CA("bench-watch")
        leaf = ca.issue("127.0.0.1", server=True)
        (tmp / "ca.pem").write_bytes(ca.pem)
        (tmp / "tls.crt").write_bytes(leaf.cert)
        (tmp / "tls.key").write_bytes(leaf.key)
        for n, window in enumerate(windows):
            child, port = start_server(tmp, str(n), args.pods, args.rate)
            try:
                write_kubeconfig(tmp / f"kubeconfig-{n}", port, tmp / "ca.pem")
                run = measure(tmp / f"kubeconfig-{n}", child, window, args.pods, args.rate)
                results.append(asyncio.run(run))
            finally:
                child.kill()
                child.wait(timeout=10)
    print(f"pod watch, {args.pods} pods ADDED then MODIFIED, {args.rate:g} events/s, TLS")
    print(f"{'watchBatchWindow':>16}  {'events':>6}  {'wall s':>6}  {'CPU s':>6}  {'µs/event':>8}")
    for r in results:
        print(
            f"{format_duration(r['window_s']):>16}  {r['events']:>6}  {r['wall_s']:>6.2f}  "
            f"{r['cpu_s']:>6.3f}  {r['cpu_us_per_event']:>8.1f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
    }
    args.out.write_text(json.dumps({"machine": machine, "runs": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
