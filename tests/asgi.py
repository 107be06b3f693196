"""The in-process HTTP client: ``httpx`` over ``ASGITransport`` straight into a runway app (no
socket, no uvicorn). ``ASGITransport`` does not run the app's lifespan; wrap the app in
``started(app)`` when the test needs startup/shutdown (background tasks, the executor)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

BASE_URL = "http://runway"


def asgi_client(app: FastAPI) -> httpx.AsyncClient:
    """A client for ``app``; use it as ``async with asgi_client(app) as http``."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL)


@asynccontextmanager
async def started(app: FastAPI) -> AsyncIterator[FastAPI]:
    """``app`` between its lifespan's startup and shutdown."""
    async with app.router.lifespan_context(app):
        yield app
