"""Shared helpers of the kube-layer integration tests: a client on a fake transport, polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
from kubernetes.client import Configuration

from app.kube.access import ClusterAccess
from app.kube.client import KubeClient
from app.kube.retry import Backoff, RetryPolicy


def access(host: str = "https://kube.test", token: str = "t0k3n") -> ClusterAccess:
    """Cluster access with a static bearer token."""
    cfg = Configuration()
    cfg.host = host
    cfg.api_key = {"BearerToken": f"Bearer {token}"}
    return ClusterAccess(cfg, "test")


def client(
    transport: httpx.AsyncBaseTransport,
    *,
    retry_total: float = 2.0,
    host: str = "https://kube.test",
) -> KubeClient:
    """A client whose retries are quick."""
    return KubeClient(
        access(host),
        transport=transport,
        request_timeout=5,
        retry=RetryPolicy(total=retry_total, backoff=Backoff(base=0.01, cap=0.05)),
    )


async def until(condition: Callable[[], bool], within: float = 5.0, what: str = "") -> None:
    """Poll ``condition`` until true; fail with ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.01)  # polling interval
