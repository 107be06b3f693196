"""Request bodies read with a size cap; reply bodies written from several buffers."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class ClientGone(Exception):
    """The client closed the connection before its body was read (nobody awaits a reply)."""


class BodyTooLarge(Exception):
    """The body is over the configured cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"request body exceeds the {limit}-byte limit (server.maxBodyBytes); raise the "
            "limit or register the extender with nodeCacheCapable: true to send node names only"
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or ``BodyTooLarge`` as soon as it is known to exceed ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit)
            chunks.append(chunk)
    except ClientDisconnect as exc:
        raise ClientGone(f"client disconnected after {size} bytes of its body") from exc
    return b"".join(chunks)


class BuffersResponse(Response):
    """A JSON response written as several buffers (bytes or memoryviews) with one
    Content-Length: a 50 MB echo of the request's nodes is sent without being copied."""

    media_type = "application/json"

    def __init__(self, parts: Sequence[bytes | memoryview], status_code: int = 200) -> None:
        self.parts = list(parts)
        super().__init__(content=b"", status_code=status_code, media_type=self.media_type)
        length = str(sum(len(p) for p in self.parts)).encode("latin-1")
        self.raw_headers = [
            (k, length if k == b"content-length" else v) for k, v in self.raw_headers
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        last = len(self.parts) - 1
        for i, part in enumerate(self.parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < last})
        if not self.parts:
            await send({"type": "http.response.body", "body": b""})
