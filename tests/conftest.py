"""Fixtures shared by every kind of test. Builders (pods, nodes, Jobs, queue trees) live in
tests/builders.py, the in-process HTTP client in tests/asgi.py; the control plane for e2e in
tests/e2e/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from fastapi import FastAPI

from tests.asgi import asgi_client


@pytest.fixture
async def asgi() -> AsyncIterator[Callable[[FastAPI], httpx.AsyncClient]]:
    """A factory of in-process clients (``asgi(app)``), all closed when the test ends."""
    clients: list[httpx.AsyncClient] = []

    def make(app: FastAPI) -> httpx.AsyncClient:
        clients.append(asgi_client(app))
        return clients[-1]

    yield make
    for c in clients:
        await c.aclose()
