"""Reading request bodies with a size cap, before any parsing."""

from __future__ import annotations

from starlette.requests import Request


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
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
