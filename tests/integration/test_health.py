"""``app/health.py``: the plain-HTTP health port (``server.healthPort``) over real TCP, started by
the app's lifespan: /readyz answers from runway's caches as the main port's does."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from app.config import ConfigError, parse_config
from app.health import answer
from app.server import create_app
from app.wiring import Runway
from tests.asgi import started
from tests.runway_process import free_port


@pytest.mark.parametrize(
    ("method", "target", "not_ready", "status"),
    [
        (b"GET", b"/healthz", "caches not synced", b"200"),
        (b"GET", b"/readyz", None, b"200"),
        (b"GET", b"/readyz?verbose", "caches not synced", b"503"),
        (b"HEAD", b"/readyz", None, b"200"),
        (b"POST", b"/readyz", None, b"405"),
        (b"GET", b"/metrics", None, b"404"),  # nothing but the probes over plain HTTP
        (b"POST", b"/scheduler/filter", None, b"404"),
    ],
)
def test_answer(method: bytes, target: bytes, not_ready: str | None, status: bytes) -> None:
    reply = answer(method, target, not_ready)
    assert reply.split(b" ", 2)[1] == status
    if status == b"503":
        assert reply.endswith(b"caches not synced")  # the reason, as the main port says it


async def test_health_port_answers_readyz_from_the_caches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    app = create_app(parse_config({"server": {"healthPort": port}}))
    async with started(app), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        assert (await http.get("/healthz")).text == "ok"
        assert (await http.get("/readyz")).status_code == 200
        monkeypatch.setattr(Runway, "not_ready", property(lambda _: "caches not synced"))
        reply = await http.get("/readyz")
        assert (reply.status_code, reply.text) == (503, "caches not synced")
        assert (await http.get("/scheduler/filter")).status_code == 404
    with pytest.raises(httpx.ConnectError):  # closed with the app
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/healthz")


async def test_a_silent_client_is_dropped() -> None:
    port = free_port()
    app = create_app(parse_config({"server": {"healthPort": port}}))
    async with started(app):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /readyz HTTP/1.1\r\n" + b"X: " + b"y" * 10_000 + b"\r\n\r\n")
        assert await asyncio.wait_for(reader.read(), 5) == b""  # head too long: closed
        writer.close()


def test_health_port_must_differ_from_port() -> None:
    with pytest.raises(ConfigError, match="healthPort 8888 is also `port`"):
        parse_config({"server": {"healthPort": 8888}})
