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

Idle keep-alive connections are closed after ``idleTimeout`` (uvicorn's ``timeout_keep_alive``:
its timer after an ASGI response, the connection's own deadline after a verb call).

It also writes each response with a known length in one ``write`` (``OneWrite``): uvicorn
writes the head and the body separately, two syscalls and two wake-ups of kube-scheduler's
reader per verb call, which on a loaded machine cost more than answering the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app import metrics
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


Answer = Callable[[str, bytes | None], tuple[int, Sequence[bytes | memoryview]]]
"""A verb's answer to its whole body (None: past the cap): status and JSON body buffers."""

_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    413: b"Content Too Large",
    500: b"Internal Server Error",
}
_WRITE_JOINED_BELOW = 64 * 1024


@dataclass(frozen=True)
class DirectVerbs:
    """The extender verbs, answered by the connection itself (``bounded_protocol``).

    kube-scheduler makes two small POSTs per pod. Through ASGI each builds a scope, a task, an
    event, request and response objects and four awaits around a handler that is synchronous
    and takes 0.1 ms; here a complete ``POST <path>`` body goes straight to ``answer`` (the
    same handler the ASGI route calls: ``app.api.extender.answer_verb``) and its reply is
    written at once. Everything else — other paths and methods, ``Expect: 100-continue``,
    HTTP/1.0, a request pipelined behind an unfinished one — takes uvicorn's ASGI path.
    """

    paths: Mapping[bytes, str]
    """Request path → verb."""
    answer: Answer
    max_body_bytes: int
    close_after: Callable[[str], bool] = lambda verb: False
    """Whether to close the connection after answering ``verb`` (a follower's ``preempt``:
    kube-scheduler's next connection may reach the leader, which alone decides preemptions)."""
    declines: Callable[[str], bool] = lambda verb: False
    """Whether to leave a ``verb`` call to the ASGI path now (a follower's ``preempt`` it
    forwards to the leader: that waits for I/O, which the direct path does not do)."""
    query_ignored: frozenset[str] = frozenset()
    """Verbs whose query string is ignored (kube-apiserver calls a webhook with
    ``?timeout=2s``); any other call with a query takes the ASGI path."""


def record_peer_expiry(peer: dict[str, Any] | None) -> None:
    """Set ``runway_tls_certificate_expiry_timestamp_seconds{certificate="client"}`` from a
    verified client certificate (``getpeercert()``): the one kube-scheduler or Prometheus
    presents, which they read only at start."""
    text = (peer or {}).get("notAfter")
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            metrics.TLS_CERT_EXPIRY.labels("client").set(ssl.cert_time_to_seconds(text))


def bounded_protocol(
    server: ServerConfig, direct: DirectVerbs | None = None
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``server``'s header, time and connection bounds, and
    the verbs of ``direct`` answered without ASGI."""
    max_header_bytes = server.max_header_bytes
    header_timeout = server.header_timeout
    body_timeout = server.body_timeout
    max_connections = server.max_connections
    heads = _ReplyHeads()

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True
        _opened = 0.0
        _timer: asyncio.TimerHandle | None = None
        _deadline: float | None = None
        _why = ""

        # A deadline per phase, one timer per connection: arming only moves the deadline, and
        # the timer (when it fires early) re-schedules itself for the current one. A keep-alive
        # connection of kube-scheduler's then costs no timer creation or cancellation per call.
        _timer_at = 0.0
        _idle = False
        """Waiting for the next request after a verb's reply (``timeout_keep_alive``): the
        deadline that replaces uvicorn's keep-alive timer, one less timer per call."""

        def _arm(self, seconds: float, why: str) -> None:
            deadline = self.loop.time() + seconds
            self._deadline, self._why = deadline, why
            if self._timer is not None and deadline < self._timer_at:
                self._timer.cancel()  # a shorter bound than the one the timer waits for
                self._timer = None
            if self._timer is None:
                self._timer = self.loop.call_later(seconds, self._check)
                self._timer_at = deadline

        def _disarm(self) -> None:
            self._deadline = None

        def _check(self) -> None:
            self._timer = None
            deadline = self._deadline
            if deadline is None:
                return
            left = deadline - self.loop.time()
            if left > 0:
                self._timer = self.loop.call_later(left, self._check)
                self._timer_at = deadline
                return
            self._deadline = None
            if not self.transport.is_closing():
                if not self._idle:  # an idle keep-alive connection is closed quietly
                    log.info(
                        "closing a slow connection", client=_peer(self.client), reason=self._why
                    )
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._opened = self.loop.time()
            tls = transport.get_extra_info("ssl_object")
            if tls is not None:  # the handshake is over: the client's verified certificate
                record_peer_expiry(tls.getpeercert())
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
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self._in_head:
                super().data_received(data)
                return
            if self._idle or self._deadline is None:  # the first byte of a keep-alive request
                self._idle = False
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
            self._idle = False

        _verb: str | None = None
        _body: list[bytes] | None = None
        _body_size = 0

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            self._arm(body_timeout, "request body not complete in time")
            if direct is not None and self._take_direct(direct):
                return
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and not isinstance(cycle.transport, OneWrite):
                cycle.transport = OneWrite(cycle.transport)  # type: ignore[assignment]

        def _take_direct(self, direct: DirectVerbs) -> bool:
            """Whether this request is a verb call answered here (no ASGI cycle): kube-scheduler's
            ``POST <path>`` (origin form, no query; anything else takes the ASGI path, whose
            fast path answers the same verbs)."""
            verb = direct.paths.get(self.url)
            if verb is None and direct.query_ignored and b"?" in self.url:
                verb = direct.paths.get(self.url.split(b"?", 1)[0])
                if verb not in direct.query_ignored:
                    return False
            if verb is None or direct.declines(verb):
                return False
            parser = self.parser
            if (
                self.expect_100_continue
                or self.pipeline
                or (self.cycle is not None and not self.cycle.response_complete)
                or parser.get_method() != b"POST"
                or parser.get_http_version() != "1.1"
                or parser.should_upgrade()
            ):
                return False
            self._verb, self._body, self._body_size = verb, [], 0
            for name, value in self.headers:
                if name == b"content-length" and value.isdigit():
                    if int(value) > direct.max_body_bytes:
                        self._too_large(direct)
                    break
            return True

        def _too_large(self, direct: DirectVerbs) -> None:
            """Answer 413 and close: the rest of the body is not read."""
            verb = self._verb or ""
            self._verb, self._body = None, None
            self._disarm()
            status, parts = direct.answer(verb, None)
            self._reply(status, parts, keep_alive=False)

        def on_body(self, body: bytes) -> None:
            if self._body is None:
                if self._verb is None and self.cycle is not None:
                    super().on_body(body)
                return
            assert direct is not None
            self._body_size += len(body)
            if self._body_size > direct.max_body_bytes:
                self._too_large(direct)
                return
            self._body.append(body)

        def on_message_complete(self) -> None:
            self._disarm()
            if self._verb is None:
                if self.cycle is not None:
                    super().on_message_complete()
                return
            assert direct is not None and self._body is not None
            verb, body = self._verb, b"".join(self._body)
            self._verb, self._body = None, None
            status, parts = direct.answer(verb, body)
            keep_alive = self.parser.should_keep_alive() and not direct.close_after(verb)
            self._reply(status, parts, keep_alive=keep_alive)
            self._direct_complete()

        def _direct_complete(self) -> None:
            """What uvicorn's ``on_response_complete`` does after a response, for a verb call:
            count it and wait for the next request — a deadline (``_idle``) instead of a new
            keep-alive timer per call. Reading is never paused by a verb call (its body is not
            buffered for an ASGI cycle)."""
            self.server_state.total_requests += 1
            self._in_head = True
            self._head_bytes = 0
            if not self.transport.is_closing():
                self._idle = True
                self._arm(self.timeout_keep_alive, "idle")

        def _reply(
            self, status: int, parts: Sequence[bytes | memoryview], *, keep_alive: bool
        ) -> None:
            """Write a JSON response in one go (head and body together)."""
            if self.transport.is_closing():
                return
            length = sum(map(len, parts))
            head = heads.start(self.server_state.default_headers, status) + (
                b"content-length: %d\r\n\r\n" % length
                if keep_alive
                else b"content-length: %d\r\nconnection: close\r\n\r\n" % length
            )
            if length < _WRITE_JOINED_BELOW:
                self.transport.write(b"".join([head, *parts]))
            else:  # a big NodeList echo: not copied again
                self.transport.writelines([head, *parts])
            if not keep_alive:
                self.transport.close()

        def on_response_complete(self) -> None:
            cycle = self.cycle
            if cycle is not None and isinstance(cycle.transport, OneWrite):
                cycle.transport.flush()
            self._in_head = True
            self._head_bytes = 0
            super().on_response_complete()

    return BoundedHttpToolsProtocol


class _ReplyHeads:
    """A verb reply's status line, uvicorn's default headers (``date``, ``server``) and the
    content type, per status. uvicorn replaces its header list each second (the date): built
    once per list and status, not once per call."""

    __slots__ = ("_built", "_of")

    def __init__(self) -> None:
        self._of: list[tuple[bytes, bytes]] | None = None
        self._built: dict[int, bytes] = {}

    def start(self, default_headers: list[tuple[bytes, bytes]], status: int) -> bytes:
        """The head up to (not including) ``content-length``."""
        if default_headers is not self._of:
            self._of, self._built = default_headers, {}
        head = self._built.get(status)
        if head is None:
            lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
            lines += [b"%s: %s\r\n" % (name, value) for name, value in default_headers]
            lines.append(b"content-type: application/json\r\n")
            head = self._built[status] = b"".join(lines)
        return head


def _peer(client: Any) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"
