"""The transport floor: a raw ASGI app that reads the request body and sends it back unparsed.

Served by uvicorn with the settings runway uses (httptools, uvloop, one worker, no access log),
it measures what HTTP alone costs for a body of a given size: runway's overhead over loopback is
its time divided by this floor's. Run: ``python -m bench.floor --port 8890``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Echo: ``/healthz`` answers ``ok``; any other request gets its own body back."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    # Read the whole body the way any app must before parsing it (chunks, then one join).
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"ok" if scope["path"] == "/healthz" else b"".join(chunks)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    """Serve the echo app with runway's uvicorn settings."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8890)
    ns = parser.parse_args()
    uvicorn.run(
        app,
        host=ns.host,
        port=ns.port,
        workers=1,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
