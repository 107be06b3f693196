"""An ASGI app served by uvicorn on a loopback port in a background thread, for clients that
need real HTTP in the test's own process (the kubectl plugin's sync client, a browser), while
the test changes the app's state directly. Always stopped, even when the test fails."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_in_thread(
    app: Any, host: str = "127.0.0.1", *, http: Any = "auto", **options: Any
) -> Iterator[str]:
    """``app`` on a free port of ``host`` (no lifespan); yields its base URL. ``http``:
    uvicorn's protocol (runway's own: ``app.connections.bounded_protocol``); ``options``: more
    of uvicorn's (``ssl_certfile``... serve HTTPS)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan="off", log_config=None, log_level="error", http=http, **options
    )
    server = uvicorn.Server(config)
    # uvicorn installs no signal handlers outside the main thread.
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"{'https' if options.get('ssl_certfile') else 'http'}://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
