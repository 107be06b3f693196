"""A watch stream read straight from its socket: one HTTP/1.1 GET, chunked transfer decoding.

A pod watch delivers one small chunk per event, and through httpx each chunk passes httpcore,
h11, anyio's TLS stream and a timeout scope per read: about 0.15 ms of CPU per event, as much
as the rest of the event's handling together (bench/RESULTS.md, issue #13). Here a watch owns
one connection (asyncio streams, the client's TLS context, SNI and credentials) and reads each
chunk with two awaits; the stream as a whole is bounded by one deadline (the server ends it
after ``timeoutSeconds``; a stream alive much longer died silently).

``KubeClient.watch`` uses it when it talks to a real API server (no injected transport); tests
that fake the API server through an httpx transport keep the httpx path.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

MAX_HEAD_BYTES = 64 * 1024
"""A response head longer than this is not an API server's."""


class StreamBroken(Exception):
    """The connection failed or the server broke the HTTP framing."""


@dataclass
class WatchResponse:
    """An open watch: its status, headers (lower-case names) and the body's chunks."""

    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks as the server sent them, until its last chunk (or EOF)."""
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            while chunk := await self.reader.read(65536):
                yield chunk
            return
        reader = self.reader
        try:
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    return
                data = await reader.readexactly(size + 2)
                yield data[:-2]
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise StreamBroken(f"chunked body broken: {exc!r}") from None

    async def body(self, limit: int = 1 << 20) -> bytes:
        """The whole body (an error answer), at most ``limit`` bytes."""
        length = self.headers.get("content-length")
        if length is not None:
            size = min(int(length), limit) if length.isdigit() else 0
            try:
                return await self.reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                return exc.partial
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
        return b"".join(parts)[:limit]

    def close(self) -> None:
        """Drop the connection (a watch connection is never reused)."""
        self.writer.close()


async def open_watch(
    base_url: str,
    path: str,
    params: Mapping[str, str | int],
    headers: Mapping[str, str],
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None = None,
    connect_timeout: float = 30.0,
) -> WatchResponse:
    """Connect, send ``GET path?params`` and read the response head (``StreamBroken`` when the
    connection or the framing fails)."""
    url = urlsplit(base_url)
    https = url.scheme == "https"
    host = url.hostname or "localhost"
    port = url.port or (443 if https else 80)
    prefix = url.path.rstrip("/")
    try:
        async with asyncio.timeout(connect_timeout):
            reader, writer = await asyncio.open_connection(
                host,
                port,
                ssl=(ssl_context or ssl.create_default_context()) if https else None,
                server_hostname=(server_hostname or host) if https else None,
                limit=MAX_HEAD_BYTES,
            )
            name = f"[{host}]" if ":" in host else host  # an IPv6 literal
            authority = name if url.port is None else f"{name}:{port}"
            lines = [f"GET {prefix}{path}?{urlencode(params)} HTTP/1.1", f"Host: {authority}"]
            lines += [f"{k}: {v}" for k, v in headers.items()]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head = await reader.readuntil(b"\r\n\r\n")
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError) as exc:
        raise StreamBroken(f"connect/head failed: {exc!r}") from None
    except TimeoutError:
        raise StreamBroken("no response head in time") from None
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        writer.close()
        raise StreamBroken(f"not an HTTP response: {status_line[:80]!r}") from None
    found: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            found[name.strip().lower()] = value.strip()
    # The reader's limit bounds ``readuntil`` (the head, a chunk-size line), not ``readexactly``.
    return WatchResponse(status, found, reader, writer)
