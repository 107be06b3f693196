"""A watch stream read straight from its socket: one HTTP/1.1 GET, chunked transfer decoding.

Why not httpx, asyncio streams or an ``asyncio.Protocol``: a pod watch delivers a small chunk
per event, and every chunk that reaches the process wakes the event loop. A wake after the
process slept costs far more CPU than the event's own handling (about 150 µs of user time on
the 2-core VMs of bench/RESULTS.md, issue #13, against 40 µs for the same read when warm), and
an asyncio transport reads — and wakes — whenever the kernel has data, even while its protocol
is paused (the TLS layer keeps feeding its buffer).

Here a watch is a non-blocking socket (TLS through ``ssl.SSLSocket``) that the event loop
watches **only while the reader waits**: ``WatchSocket.read()`` first takes whatever the
kernel already holds, without waiting; so a reader that pauses between reads (the reflector's
batch window) gets every event that arrived meanwhile in one wake, and none wakes the process
while it pauses. The stream as a whole is bounded by the caller's deadline (the server ends it
after ``timeoutSeconds``; a stream alive much longer died silently).

``KubeClient.watch`` uses it when it talks to a real API server (no injected transport); tests
that fake the API server through an httpx transport keep the httpx path.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

MAX_HEAD_BYTES = 64 * 1024
"""A response head longer than this is not an API server's."""
MAX_SIZE_LINE = 1024
"""A chunk-size line (hex size and extensions) longer than this is broken framing."""
RECV_BYTES = 256 * 1024
"""Bytes asked of the socket per receive."""
READ_LIMIT = 4 * 1024 * 1024
"""At most this many bytes are taken per ``read()`` (a server faster than runway's decoding
cannot make one read unbounded)."""


class StreamBroken(Exception):
    """The connection failed or the server broke the HTTP framing."""


class ChunkedDecoder:
    """HTTP/1.1 chunked transfer decoding, incremental: ``feed`` raw bytes as they arrive, get
    the body bytes they complete (a chunk's data is passed on before the chunk ends)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._left = 0  # data bytes of the current chunk still to come
        self._crlf = False  # the CRLF after a chunk's data is due
        self.done = False
        """The last (zero-size) chunk was read; trailers, if any, are ignored."""

    def feed(self, data: bytes | bytearray) -> bytes:
        """The body bytes ``data`` completes (``StreamBroken`` on bad framing)."""
        if self.done:
            return b""
        buf = self._buf
        buf += data
        parts: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            if self._left:
                take = min(self._left, end - pos)
                parts.append(bytes(buf[pos : pos + take]))
                pos += take
                self._left -= take
                if self._left:
                    break
                self._crlf = True
            if self._crlf:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise StreamBroken("chunked body broken: no CRLF after a chunk's data")
                pos += 2
                self._crlf = False
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if end - pos > MAX_SIZE_LINE:
                    raise StreamBroken("chunked body broken: a chunk-size line too long")
                break
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise StreamBroken(f"chunked body broken: chunk size {size_text[:20]!r}") from None
            if size < 0:
                raise StreamBroken(f"chunked body broken: chunk size {size_text[:20]!r}")
            pos = eol + 2
            if size == 0:
                self.done = True
                break
            self._left = size
        del buf[:pos]
        return b"".join(parts)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class WatchSocket:
    """An open watch: its status, headers (lower-case names) and a body read by ``read()``."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self._sock = sock
        self._loop = loop
        self._raw = bytearray()  # received, not yet taken by the head or the body decoder
        self._eof = False
        self._want_write = False  # TLS needs to write before it can read again (rare)
        self.status = 0
        self.headers: dict[str, str] = {}
        self._chunked: ChunkedDecoder | None = None
        self._length: int | None = None  # Content-Length left to read, if given

    # -- the socket ----------------------------------------------------------------------

    def _receive(self, limit: int = READ_LIMIT) -> None:
        """Take what the socket holds now, without waiting (up to ``limit`` bytes)."""
        sock, raw = self._sock, self._raw
        start = len(raw)
        while not self._eof and len(raw) - start < limit:
            try:
                data = sock.recv(RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                return
            except ssl.SSLWantWriteError:
                self._want_write = True
                return
            except ssl.SSLZeroReturnError:  # the server's TLS close_notify
                self._eof = True
                return
            except (OSError, ssl.SSLError) as exc:
                raise StreamBroken(f"read failed: {exc!r}") from None
            if not data:
                self._eof = True
                return
            raw += data

    async def _wait(self, writable: bool = False) -> None:
        """Until the socket is readable (or writable): the only time the loop watches it."""
        loop, fd = self._loop, self._sock.fileno()
        waiter: asyncio.Future[None] = loop.create_future()
        if writable:
            loop.add_writer(fd, _wake, waiter)
        else:
            loop.add_reader(fd, _wake, waiter)
        try:
            await waiter
        finally:
            if writable:
                loop.remove_writer(fd)
            else:
                loop.remove_reader(fd)

    async def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                await self._wait(writable=True)
                continue
            except ssl.SSLWantReadError:
                await self._wait()
                continue
            view = view[sent:]

    async def _handshake(self, sock: ssl.SSLSocket) -> None:
        while True:
            try:
                sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                await self._wait()
            except ssl.SSLWantWriteError:
                await self._wait(writable=True)

    # -- HTTP ----------------------------------------------------------------------------

    async def _read_head(self) -> None:
        raw = self._raw
        self._receive(MAX_HEAD_BYTES)  # TLS may hold decrypted bytes already: no readiness then
        while (end := raw.find(b"\r\n\r\n")) < 0:
            if len(raw) > MAX_HEAD_BYTES:
                raise StreamBroken("response head too long")
            if self._eof:
                raise StreamBroken("connection closed before the response head")
            want_write, self._want_write = self._want_write, False
            await self._wait(want_write)
            self._receive(MAX_HEAD_BYTES)
        head = bytes(raw[:end]).decode("latin-1")
        del raw[: end + 4]
        status_line, *header_lines = head.split("\r\n")
        try:
            self.status = int(status_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            raise StreamBroken(f"not an HTTP response: {status_line[:80]!r}") from None
        for line in header_lines:
            name, sep, value = line.partition(":")
            if sep:
                self.headers[name.strip().lower()] = value.strip()
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            self._chunked = ChunkedDecoder()
        elif (length := self.headers.get("content-length", "")).isdigit():
            self._length = int(length)

    def _take(self) -> bytes:
        """The body bytes among what was received so far."""
        raw = self._raw
        if not raw:
            return b""
        if self._chunked is not None:
            data = self._chunked.feed(raw)
            raw.clear()
            return data
        if self._length is not None:
            data = bytes(raw[: self._length])
            self._length -= len(data)
        else:
            data = bytes(raw)
        raw.clear()
        return data

    def _ended(self) -> bool:
        if self._chunked is not None:
            return self._chunked.done
        return self._length == 0

    def read_now(self) -> bytes:
        """The body bytes that have arrived, without waiting (``b""``: none yet, or the end;
        ``StreamBroken`` as ``read``)."""
        if self._ended():
            return b""
        self._receive()
        return self._take()

    async def read(self) -> bytes:
        """The body bytes that arrived since the last read, waiting only if there are none;
        ``b""`` once the body ended (``StreamBroken`` if the connection ended it early)."""
        while True:
            if self._ended():
                return b""
            self._receive()
            data = self._take()
            if data:
                return data
            if self._ended():
                return b""
            if self._eof:
                if self._chunked is not None or self._length:
                    raise StreamBroken("connection closed in the middle of the body")
                return b""
            want_write, self._want_write = self._want_write, False
            await self._wait(want_write)

    async def body(self, limit: int = 1 << 20) -> bytes:
        """The whole body (an error answer), at most ``limit`` bytes."""
        parts: list[bytes] = []
        size = 0
        while size < limit and (data := await self.read()):
            parts.append(data)
            size += len(data)
        return b"".join(parts)[:limit]

    def close(self) -> None:
        """Drop the connection (a watch connection is never reused)."""
        self._sock.close()


async def _connect(host: str, port: int, loop: asyncio.AbstractEventLoop) -> socket.socket:
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError | None = None
    for family, type_, proto, _, address in infos:
        sock = socket.socket(family, type_, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error or OSError(f"no address for {host}")


async def open_watch(
    base_url: str,
    path: str,
    params: Mapping[str, str | int],
    headers: Mapping[str, str],
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None = None,
    connect_timeout: float = 30.0,
) -> WatchSocket:
    """Connect, send ``GET path?params`` and read the response head (``StreamBroken`` when the
    connection or the framing fails)."""
    url = urlsplit(base_url)
    https = url.scheme == "https"
    host = url.hostname or "localhost"
    port = url.port or (443 if https else 80)
    prefix = url.path.rstrip("/")
    loop = asyncio.get_running_loop()
    name = f"[{host}]" if ":" in host else host  # an IPv6 literal
    authority = name if url.port is None else f"{name}:{port}"
    lines = [f"GET {prefix}{path}?{urlencode(params)} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    sock: socket.socket | None = None
    try:
        async with asyncio.timeout(connect_timeout):
            sock = await _connect(host, port, loop)
            if https:
                context = ssl_context or ssl.create_default_context()
                sock = context.wrap_socket(
                    sock, server_hostname=server_hostname or host, do_handshake_on_connect=False
                )
            stream = WatchSocket(sock, loop)
            if isinstance(sock, ssl.SSLSocket):
                await stream._handshake(sock)
            await stream._send(request)
            await stream._read_head()
            return stream
    except (OSError, ssl.SSLError, StreamBroken) as exc:
        if sock is not None:
            sock.close()
        if isinstance(exc, StreamBroken):
            raise
        raise StreamBroken(f"connect/head failed: {exc!r}") from None
    except TimeoutError:
        if sock is not None:
            sock.close()
        raise StreamBroken("no response head in time") from None
    except BaseException:  # cancelled: do not leak the socket
        if sock is not None:
            sock.close()
        raise
