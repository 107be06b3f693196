"""Two small loopback proxies for the replica tests, each stopped by its ``close`` (also on
failure, as context managers):

* ``AlternatingProxy``: kube-scheduler's extender calls sent to several runway replicas in turn,
  every call to the next one (the spread a Service gives the scheduler's connections over time);
  a replica that refuses the connection (killed) is skipped.
* ``DelayProxy``: a TCP proxy in front of kube-apiserver that holds every chunk a client sends for
  ``delay_s`` before passing it on (TLS goes through untouched): each of runway's API calls is
  ``delay_s`` late, as on a loaded API server.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class AlternatingProxy:
    """HTTP proxy on a free loopback port; ``url`` goes in the scheduler's ``urlPrefix``."""

    def __init__(self, targets: list[str]) -> None:
        self.targets = list(targets)
        self.sent: dict[str, int] = dict.fromkeys(self.targets, 0)
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=10)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, reply = proxy.forward(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def forward(self, path: str, body: bytes) -> tuple[int, bytes]:
        """Send one call to the next replica (the one after, if it refuses the connection)."""
        with self._lock:
            start = next(self._turn)
        for i in range(len(self.targets)):
            target = self.targets[(start + i) % len(self.targets)]
            try:
                r = self._client.post(
                    target + path, content=body, headers={"Content-Type": "application/json"}
                )
            except httpx.TransportError:
                continue  # a killed replica: the Service would not route there either
            with self._lock:
                self.sent[target] += 1
            return r.status_code, r.content
        return 503, b'{"error": "no runway replica answers"}'

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def __enter__(self) -> AlternatingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DelayProxy:
    """TCP proxy to ``host:port`` adding ``delay_s`` to every chunk a client sends."""

    def __init__(self, host: str, port: int, delay_s: float) -> None:
        self.upstream = (host, port)
        self.delay_s = delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        port: int = self._listener.getsockname()[1]
        return port

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, delayed: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if delayed:
                    time.sleep(self.delay_s)  # the injected latency itself, not a wait
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
