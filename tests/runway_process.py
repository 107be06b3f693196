"""Start ``python -m app serve`` as a real process on loopback and always stop it by its pid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """Stop ``proc`` by its pid: SIGTERM, up to ``grace_s`` to exit, then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class RunwayProcess:
    """A running runway: its URL, pid and captured log file."""

    def __init__(
        self, proc: subprocess.Popen[bytes], port: int, log: Path, scheme: str = "http"
    ) -> None:
        self.proc = proc
        self.port = port
        self.log = log
        self.url = f"{scheme}://127.0.0.1:{port}"

    def logs(self) -> str:
        """Everything the process wrote to stderr/stdout so far."""
        return self.log.read_text(errors="replace")


def wait_until_healthy(
    url: str,
    proc: subprocess.Popen[bytes],
    deadline_s: float = 30,
    client_options: Mapping[str, Any] | None = None,
) -> None:
    """Poll ``/healthz`` until it answers 200, the process dies, or the deadline passes.

    ``client_options`` go to ``httpx.get`` (``verify``/``cert`` for HTTPS).
    """
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"runway exited with {proc.returncode} before becoming healthy")
        try:
            if httpx.get(f"{url}/healthz", timeout=1, **(client_options or {})).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # polling interval, not a wait for a condition
    raise TimeoutError(f"runway at {url} not healthy within {deadline_s}s")


@contextmanager
def run_runway(
    tmp: Path,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    *,
    scheme: str = "http",
    client_options: Mapping[str, Any] | None = None,
    tree: Path | None = None,
) -> Iterator[RunwayProcess]:
    """Run ``python -m app serve --port <free> *args``; stop it by pid on exit, even on failure.

    ``scheme="https"`` with ``client_options`` (httpx ``verify``/``cert``) for a TLS runway.
    ``tree``: run the ``app`` package of that checkout (a benchmark's A/B): the process starts
    there, since ``python -m`` puts its working directory first on ``sys.path``, before
    ``PYTHONPATH`` (which alone would still run this tree's ``app``).
    """
    port = free_port()
    log = tmp / f"runway-{port}.log"
    full_env = {**os.environ, **(env or {})}
    full_env.pop("KUBECONFIG", None) if env is None or "KUBECONFIG" not in env else None
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=tree,
        )
    try:
        wait_until_healthy(f"{scheme}://127.0.0.1:{port}", proc, client_options=client_options)
        yield RunwayProcess(proc, port, log, scheme)
    finally:
        stop(proc)
