"""The plain-HTTP health port (``server.healthPort``, like Kueue's ``:8081``) for kubelet probes.

Under mutual TLS kubelet cannot probe runway's port: it presents no client certificate, so the
chart's probes could only check that the port accepts connections, and a replica whose caches were
stale still got verbs. This port answers ``GET /healthz`` (the event loop runs) and ``GET
/readyz`` (``not_ready()``: the same answer as the main port's ``/readyz``, from runway's caches,
with the reason when it is not) and
nothing else: no verb, no metric, no REST call ever goes over plain HTTP. One request per
connection, a bounded head read in bounded time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.logs import get_logger

log = get_logger("health")

HEAD_LIMIT = 8192
"""Longest request head read (a probe's is ~150 bytes)."""
HEAD_TIMEOUT = 5.0
"""Seconds a client has to send its request head."""


def _response(status: str, body: str) -> bytes:
    data = body.encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode() + data


def answer(method: bytes, target: bytes, not_ready: str | None) -> bytes:
    """The whole response to ``method target`` given why runway is not ready (None: ready;
    pure, for tests)."""
    path = target.split(b"?", 1)[0]
    if path not in (b"/healthz", b"/readyz"):
        return _response("404 Not Found", "only /healthz and /readyz are served on this port")
    if method not in (b"GET", b"HEAD"):
        return _response("405 Method Not Allowed", "GET only")
    if path == b"/readyz" and not_ready is not None:
        return _response("503 Service Unavailable", not_ready)
    return _response("200 OK", "ok")


async def serve_health(host: str, port: int, not_ready: Callable[[], str | None]) -> asyncio.Server:
    """Listen on ``host:port``; returns the started server (close it at shutdown).
    ``not_ready``: why runway is not ready (None: ready)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) != 3:
                writer.write(_response("400 Bad Request", "bad request line"))
            else:
                reply = answer(parts[0], parts[1], not_ready())
                writer.write(
                    reply if parts[0] != b"HEAD" else reply.split(b"\r\n\r\n")[0] + b"\r\n\r\n"
                )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a client that went away or never sent a head: nothing to answer
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port, limit=HEAD_LIMIT)
    log.info("health port listening", host=host, port=port, paths="/healthz /readyz")
    return server
