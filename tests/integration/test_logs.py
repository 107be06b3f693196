"""Logs of the real process: in JSON mode every line is JSON (uvicorn's too), and "runway
started" is logged once the port is bound, with the URL."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.runway_process import free_port, run_runway, stop

FILTER = {"Pod": {"metadata": {"name": "p", "namespace": "default"}}, "NodeNames": ["n1"]}


def json_lines(text: str) -> list[dict[str, object]]:
    """Every line as JSON; fails naming the first line that is not."""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
    return out


def test_every_line_is_json_in_json_mode(tmp_path: Path) -> None:
    with run_runway(tmp_path, ["--log-format", "json", "--log-level", "debug"]) as proc:
        httpx.post(f"{proc.url}/scheduler/filter", content=json.dumps(FILTER))
        # a request uvicorn itself rejects: its warning must come out as JSON too
        with socket.create_connection(("127.0.0.1", proc.port), timeout=5) as raw:
            raw.sendall(b"NOT-HTTP \x00\r\n\r\n")
            raw.recv(1024)
        proc.proc.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal once it has shut down cleanly
        assert proc.proc.wait(timeout=20) in (0, -signal.SIGTERM)
        lines = json_lines(proc.logs())
    events = [(e.get("component"), e.get("event")) for e in lines]
    assert ("server", "runway started") in events
    assert any(e.get("event") == "extender call" and e.get("level") == "debug" for e in lines)
    uvicorn = [e for e in lines if str(e.get("component", "")).startswith("uvicorn")]
    assert uvicorn and all("level" in e and "timestamp" in e for e in uvicorn), events
    assert ("server", "runway stopped") in events


def test_log_level_flag_overrides_the_config(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("logging:\n  level: debug\n  format: text\n")
    args = ["--config", str(config), "--log-level", "warning", "--log-format", "json"]
    with run_runway(tmp_path, args) as proc:
        httpx.post(f"{proc.url}/scheduler/filter", content=json.dumps(FILTER))
        logs = proc.logs()
    assert all(e.get("level") != "debug" for e in json_lines(logs))
    assert "extender call" not in logs and "runway started" not in logs  # info is below warning


def test_started_is_logged_after_the_bind_with_the_url(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "runway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port), "--log-format", "json"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        started = None
        while started is None and time.monotonic() < deadline and proc.poll() is None:
            lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
            started = next((e for e in lines if e.get("event") == "runway started"), None)
            time.sleep(0.02)  # polling interval, not a wait for a condition
        assert started is not None, log.read_text()
        assert started["url"] == f"http://127.0.0.1:{port}"
        # the moment it is logged, the port answers (no retry: it must already be bound)
        assert httpx.get(f"{started['url']}/healthz", timeout=5).status_code == 200
    finally:
        stop(proc)


def test_bad_flags_are_config_errors_not_binds(tmp_path: Path) -> None:
    for flag, value, field in (
        ("--port", "99999", "server.port"),
        ("--log-level", "loud", "logging.level"),
        ("--log-format", "xml", "logging.format"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "app", "serve", flag, value],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert f"command line: {field}:" in result.stderr and value in result.stderr
        assert "Uvicorn running" not in result.stderr and "runway started" not in result.stderr
