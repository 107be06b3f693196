"""Bounded HTTP connections: what uvicorn does not bound by itself.

uvicorn's httptools protocol accepts any header size (a 150 MB header value is buffered whole),
has no header or body read timeout (a client sending one byte a second holds its connection, and
the shutdown, forever) and accepts every connection the listen socket hands it. ``bounded_protocol``
returns a subclass with, from ``server.*``:

* ``maxHeaderBytes``: a request whose headers are still incomplete past this many bytes gets a
  431 and the connection is closed (no more than one read beyond the limit is ever buffered);
* ``headerTimeout``: a connection that sends no complete request head this long after it opened
  (or after the first byte of a keep-alive request) is closed;
* ``bodyTimeout``: a request whose body is not complete this long after its head is closed;
* ``maxConnections``: at the cap, a new connection closes the oldest one that has no request in
  flight (idle, or still sending its head); when every connection has a request in flight, the
  new one is closed at once.

Idle keep-alive connections are closed by uvicorn's own ``timeout_keep_alive``.

It also writes each response with a known length in one ``write`` (``OneWrite``): uvicorn
writes the head and the body separately, two syscalls and two wake-ups of kube-scheduler's
reader per verb call, which on a loaded machine cost more than answering the call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.config.model import ServerConfig
from app.logs import get_logger

log = get_logger("connections")

_431_BODY = b'{"error":"request header fields too large"}'
_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(_431_BODY)
) + _431_BODY


class OneWrite:
    """A transport that holds a response head (with a ``content-length``) until the first body
    write and sends both in one ``write``; everything else goes straight through. ``flush``
    (at the end of a response: a HEAD or an empty body writes nothing after the head) and
    ``close`` send what is held."""

    __slots__ = ("head", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.head: bytes | None = None

    def write(self, data: bytes) -> None:
        """Hold a fixed-length response head; send anything else (after what is held)."""
        if self.head is not None:
            data, self.head = self.head + data, None
        elif (
            data.startswith(b"HTTP/1.1 ")
            and not data.startswith(b"HTTP/1.1 100 ")
            and b"content-length:" in data.lower()  # a stream's head goes out at once
        ):
            self.head = data
            return
        self.transport.write(data)

    def flush(self) -> None:
        """Send the held head, if any."""
        if self.head is not None:
            data, self.head = self.head, None
            self.transport.write(data)

    def close(self) -> None:
        """Send what is held, then close."""
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


def bounded_protocol(server: ServerConfig) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``server``'s header, time and connection bounds."""
    max_header_bytes = server.max_header_bytes
    header_timeout = server.header_timeout
    body_timeout = server.body_timeout
    max_connections = server.max_connections

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True
        _opened = 0.0
        _timer: asyncio.TimerHandle | None = None

        def _arm(self, seconds: float, why: str) -> None:
            self._disarm()
            self._timer = self.loop.call_later(seconds, self._expire, why)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expire(self, why: str) -> None:
            self._timer = None
            if not self.transport.is_closing():
                log.info("closing a slow connection", client=_peer(self.client), reason=why)
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._opened = self.loop.time()
            if len(self.connections) > max_connections and not self._make_room():
                log.warning("connection refused: too many open", limit=max_connections)
                transport.close()
                return
            self._arm(header_timeout, "no request head in time")

        def _make_room(self) -> bool:
            """At the cap: close the oldest connection that has no request in flight (idle or
            still sending its head), so idle sockets cannot lock everyone else out."""
            waiting = [
                c
                for c in self.connections
                if c is not self
                and isinstance(c, BoundedHttpToolsProtocol)
                and c._in_head
                and not c.transport.is_closing()
            ]
            if not waiting:
                return False
            oldest = min(waiting, key=lambda c: c._opened)
            oldest.transport.close()
            return True

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self._in_head:
                super().data_received(data)
                return
            if self._timer is None:  # the first byte of a keep-alive request
                self._arm(header_timeout, "no request head in time")
            self._head_bytes += len(data)
            super().data_received(data)
            if self._in_head and self._head_bytes > max_header_bytes:
                self._disarm()
                if not self.transport.is_closing():
                    self.transport.write(_431)
                    self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            self._arm(body_timeout, "request body not complete in time")
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and not isinstance(cycle.transport, OneWrite):
                cycle.transport = OneWrite(cycle.transport)  # type: ignore[assignment]

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            cycle = self.cycle
            if cycle is not None and isinstance(cycle.transport, OneWrite):
                cycle.transport.flush()
            self._in_head = True
            self._head_bytes = 0
            super().on_response_complete()

    return BoundedHttpToolsProtocol


def _peer(client: Any) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"
