"""``POST /v1/workloads/{namespace}/{name}:deactivate``: hold a workload until it is activated
again (``:activate``), as runway does itself when a backoff limit is exceeded.

The deactivation is kept in the workload's eviction record (``runway.dev/eviction-deactivated``),
so runway deactivates only a workload it has evicted (one with a record): a 409 says so for
the others (suspend their Job to hold them).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from app.api.auth import Principal, require_auth
from app.api.context import context
from app.api.errors import error_response
from app.api.workloads import WorkloadResponse, workload_response
from app.model.event import DEACTIVATED, EventNote, ObjectRef
from app.model.eviction import EvictionRecord
from app.model.gate import PodRef
from app.policy.backoff import deactivate
from app.wire.schema import ErrorBody

router = APIRouter(prefix="/v1", tags=["requeue"])


@router.post(
    "/workloads/{namespace}/{name}:deactivate",
    response_model=WorkloadResponse,
    summary="Deactivate a workload: held until activated again",
    responses={
        404: {"model": ErrorBody, "description": "No such workload"},
        409: {"model": ErrorBody, "description": "The workload has no eviction record"},
        401: {"model": ErrorBody, "description": "No or bad bearer token"},
        403: {"model": ErrorBody, "description": "Not allowed"},
    },
)
async def deactivate_workload(
    request: Request,
    namespace: str,
    name: str,
    principal: Annotated[Principal, Depends(require_auth("write"))],
) -> WorkloadResponse | JSONResponse:
    """The filter rejects the workload's pods (rule `deactivated`) until
    `POST .../{name}:activate`; its place in the queue is kept."""
    ctx = context(request)
    key = ctx.requeue.find_workload(namespace, name)
    if key is None:
        return error_response(404, f"no workload {namespace}/{name} in runway's cache")
    if ctx.records.read(key) is None:
        return error_response(
            409,
            f"workload {namespace}/{name} has no eviction record: runway deactivates only a "
            "workload it has evicted (the record holds the deactivation); suspend its Job to "
            "hold it otherwise",
        )
    message = f"deactivated through the REST API by {principal.user}"

    def change(current: EvictionRecord | None) -> EvictionRecord | None:
        return deactivate(current, message) if current is not None else None

    if await ctx.records.update(key, change) is not None:
        pods = ctx.cache.workload_pods(key)
        subjects = [ObjectRef.of_pod(PodRef.of(p)) for p in pods]
        subjects += [ObjectRef.of_owner(o) for o in ctx.records.targets(key).owners]
        for subject in subjects:
            ctx.events.emit(EventNote(subject, DEACTIVATED, message, action="Deactivate"))
    found = workload_response(ctx, key)
    if found is None:
        return error_response(404, f"workload {namespace}/{name} disappeared while deactivated")
    return found
