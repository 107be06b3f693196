"""Issue 14 rows 6, 7, 8 against a real ``python -m app serve`` on 127.0.0.1: header size,
header/body timeouts, the connection cap, and SIGTERM with a slow client (clean exit, in time)."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.runway_process import RunwayProcess, run_runway

CONFIG = """
server:
  maxHeaderBytes: 65536
  headerTimeout: 1s
  bodyTimeout: 2s
  idleTimeout: 2s
  maxConnections: 40
  shutdownTimeout: 2s
preemption:
  shutdownGrace: 1s
"""


@pytest.fixture
def runway(tmp_path: Path) -> Iterator[RunwayProcess]:
    config = tmp_path / "runway.yaml"
    config.write_text(CONFIG)
    with run_runway(tmp_path, ["--config", str(config)]) as proc:
        yield proc


@pytest.fixture
def capped_runway(tmp_path: Path) -> Iterator[RunwayProcess]:
    """Only the connection cap can close an idle connection here (header timeout 5 min)."""
    config = tmp_path / "runway.yaml"
    config.write_text("server:\n  maxConnections: 40\n  headerTimeout: 5m\n")
    with run_runway(tmp_path, ["--config", str(config)]) as proc:
        yield proc


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return sock


def closed_by_server(sock: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing ``sock`` within ``within`` s; None if still open."""
    deadline = time.monotonic() + within
    got = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    return None


def healthy(proc: RunwayProcess) -> bool:
    return httpx.get(f"{proc.url}/healthz", timeout=2).status_code == 200


def test_row6_oversized_header_is_431_and_closed(runway: RunwayProcess) -> None:
    sock = connect(runway.port)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 20 * 1024 * 1024:  # the server must stop us long before 20 MB
                sock.sendall(b"a" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sent < 20 * 1024 * 1024
        reply = closed_by_server(sock, within=5)
        assert reply is not None and (reply == b"" or reply.startswith(b"HTTP/1.1 431"))
    finally:
        sock.close()
    assert healthy(runway)


def test_row7_idle_and_half_sent_connections_are_closed(runway: RunwayProcess) -> None:
    idle = [connect(runway.port) for _ in range(10)]
    half = [connect(runway.port) for _ in range(10)]
    try:
        for s in half:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
        for s in idle + half:
            assert closed_by_server(s, within=5) is not None  # headerTimeout 1s
        assert healthy(runway)
    finally:
        for s in idle + half:
            s.close()


def test_row7_idle_connections_at_the_cap_cannot_lock_others_out(
    capped_runway: RunwayProcess,
) -> None:
    socks = [connect(capped_runway.port) for _ in range(60)]
    try:
        # The cap is 40: a health check gets through (it closes the oldest idle connection)
        # instead of being refused until the idle ones time out.
        assert healthy(capped_runway)
        # The newest sockets closed older idle ones to make room (20, + 1 for the check).
        assert sum(1 for s in socks if closed_by_server(s, within=0.05) is not None) >= 20
    finally:
        for s in socks:
            s.close()


def test_row7_slow_body_is_cut_by_the_body_timeout(runway: RunwayProcess) -> None:
    sock = connect(runway.port)
    try:
        sock.sendall(
            b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        deadline = time.monotonic() + 6
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                sock.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = closed_by_server(sock, within=0.5) is not None
        assert closed, "a body at 2 bytes/s held its connection past bodyTimeout"
    finally:
        sock.close()


def test_row8_sigterm_with_a_slow_client_exits_cleanly_in_time(runway: RunwayProcess) -> None:
    sock = connect(runway.port)
    try:
        sock.sendall(
            b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        sock.sendall(b" ")
        runway.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        deadline = started + 25  # the chart's grace is 30 s
        while runway.proc.poll() is None:
            assert time.monotonic() < deadline, "still running 25 s after SIGTERM"
            with contextlib.suppress(OSError):
                sock.sendall(b" ")
            time.sleep(0.2)  # the slow client's pace, and the polling interval
        assert runway.proc.returncode == 0, runway.logs()[-2000:]
    finally:
        sock.close()


def test_keep_alive_head_and_100_continue_through_one_write(runway: RunwayProcess) -> None:
    """Responses written in one piece still frame right: a verb, a HEAD (no body) and an
    Expect: 100-continue request on one keep-alive connection."""
    body = b'{"Pod":{"metadata":{"uid":"u"}},"NodeNames":["n1"]}'
    with contextlib.closing(connect(runway.port)) as sock:
        sock.sendall(
            b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        sock.sendall(b"HEAD /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        got = b""
        deadline = time.monotonic() + 10
        while b"HTTP/1.1 405" not in got and time.monotonic() < deadline:
            got += sock.recv(65536)
        # HEAD has no body: its head (405: the route is GET only) is sent when it completes
        assert got.startswith(b"HTTP/1.1 200 OK") and b'"NodeNames":["n1"]' in got
        assert got.endswith(b"\r\n\r\n") and b"HTTP/1.1 405 Method Not Allowed" in got
        sock.sendall(
            b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        rest = first.split(b"\r\n\r\n", 1)[1]
        while b'"NodeNames":["n1"]' not in rest and time.monotonic() < deadline:
            rest += sock.recv(65536)
        assert rest.startswith(b"HTTP/1.1 200 OK") and b'"NodeNames":["n1"]' in rest


def test_a_body_bound_shorter_than_the_header_bound_still_cuts_in_time(tmp_path: Path) -> None:
    """One timer per connection: arming the body's 1 s bound after the head's 30 s one must
    not leave the connection to the 30 s timer."""
    config = tmp_path / "runway.yaml"
    config.write_text("server:\n  headerTimeout: 30s\n  bodyTimeout: 1s\n")
    with run_runway(tmp_path, ["--config", str(config)]) as proc:
        sock = connect(proc.port)
        try:
            sock.sendall(
                b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"
            )
            assert closed_by_server(sock, within=8) is not None
        finally:
            sock.close()


def test_a_verb_connection_is_idle_between_calls_and_closed_at_the_idle_timeout(
    runway: RunwayProcess,
) -> None:
    """After a verb's reply (answered by the connection itself) the connection waits for the
    next call under ``idleTimeout`` (2 s here), not ``headerTimeout`` (1 s): a call 1.5 s later
    is answered on the same connection; 2 s after the last reply it is closed."""
    body = b'{"Pod":{"metadata":{"uid":"u"}},"NodeNames":["n1"]}'
    call = (
        b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )

    def answered(sock: socket.socket) -> float:
        sock.sendall(call)
        got = b""
        deadline = time.monotonic() + 10
        while b'"NodeNames":["n1"]' not in got and time.monotonic() < deadline:
            got += sock.recv(65536)
        assert got.startswith(b"HTTP/1.1 200 OK") and got.count(b"HTTP/1.1") == 1
        return time.monotonic()

    with contextlib.closing(connect(runway.port)) as sock:
        answered(sock)
        time.sleep(1.5)  # the idle gap under test: past headerTimeout, within idleTimeout
        last = answered(sock)
        assert closed_by_server(sock, within=10) is not None
        waited = time.monotonic() - last
        assert 1.8 <= waited < 6, f"closed {waited:.2f} s after the last reply (idleTimeout 2s)"
