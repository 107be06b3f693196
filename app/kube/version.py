"""The API server's release (``GET /version``): what runway does for kube-scheduler is decided
per release (``policy.releases``), and a cluster's scheduler is its control plane's release."""

from __future__ import annotations

import msgspec

from app.kube.client import KubeClient


class _Info(msgspec.Struct):
    gitVersion: str = ""


async def server_version(kube: KubeClient, timeout_s: float = 5.0) -> str:
    """``gitVersion`` of the API server (``v1.34.4``); raises the client's typed errors."""
    resp = await kube.request(
        "GET", "/version", verb="get", resource="version", timeout_s=timeout_s
    )
    return msgspec.json.decode(resp.content, type=_Info).gitVersion
