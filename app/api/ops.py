"""``/healthz``, ``/readyz`` and ``/metrics`` for kubelet probes and Prometheus."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app import metrics
from app.api.context import context
from app.supervise import in_slices

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_class=PlainTextResponse, summary="The process is up")
async def healthz() -> str:
    """Liveness: answers as long as the event loop does."""
    return "ok"


@router.get(
    "/readyz",
    response_class=PlainTextResponse,
    summary="Caches are synced",
    responses={503: {"description": "Not ready yet"}},
)
async def readyz(request: Request) -> Response:
    """Readiness: 200 once pods, nodes and the WorkloadRecords are listed and still fed (at once
    on the embedded default); else 503 with the reason (the WorkloadRecord CRD missing, say)."""
    why = context(request).cluster.not_ready
    if why is None:
        return PlainTextResponse("ok")
    return PlainTextResponse(why, status_code=503)


@router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
async def metrics_endpoint() -> Response:
    """Prometheus text exposition, served from a plain route (a mounted app would 307)."""
    for steps in metrics.scrape_passes():  # counts over every workload: the verbs run meanwhile
        await in_slices(steps)
    return Response(metrics.exposition(passes_run=True), media_type=CONTENT_TYPE_LATEST)
