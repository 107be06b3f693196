"""``GET /v1/cache/summary``: what runway's cluster cache holds, to compare with the API server.

Meant for operators debugging "runway does not see my pod" and for the end-to-end tests that
check the cache converges. ``detail=true`` lists every pod and node (large on big clusters).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import Field

from app.api.context import context
from app.api.models import CamelModel
from app.api.paging import ContinueParam, LimitParam, PageRequest, page

router = APIRouter(prefix="/v1", tags=["debug"])


class CachedPod(CamelModel):
    """One cached pod, reduced to what tells two caches apart."""

    uid: str | None = Field(
        None,
        description="Only when read-only REST is protected (`auth.protectReadOnly`): a pod's UID "
        "is what a forged `preempt` would name, so an open endpoint does not hand it out.",
    )
    namespace: str
    name: str
    node_name: str | None
    phase: str | None
    resource_version: str
    workload: str
    terminating: bool


class CachedNode(CamelModel):
    """One cached node."""

    name: str
    resource_version: str
    labels: dict[str, str]
    allocatable: dict[str, str]
    unschedulable: bool


class CacheSummary(CamelModel):
    """Counts (always) and contents (with ``detail=true``) of the cluster cache."""

    connected: bool = Field(description="False on the embedded default (no API server).")
    synced: bool = Field(description="Pods and nodes have been listed.")
    leader: bool | None = Field(description="This replica leads (None: no leader election).")
    identity: str | None = Field(description="This replica's identity in the Lease.")
    pods: int
    pending: int
    bound: int
    nodes: int
    workloads: int
    queues: dict[str, int] = Field(description="Pods per leaf queue.")
    jobs: int = Field(
        0,
        description="batch/v1 Jobs whose size runway knows (parallelism, no more than "
        "completions: PodsReady's target for their pods).",
    )
    jobs_readable: bool | None = Field(
        None,
        description="Whether runway may list and watch Jobs: false while the API server refuses "
        "(no permission; the log said why once): PodsReady's target for a Job's pods is then the "
        "most members its workload has had. null: no answer yet, or no API server.",
    )
    pod_resource_version: str | None = Field(description="Where the pod watch resumes from.")
    node_resource_version: str | None = Field(description="Where the node watch resumes from.")
    pod_items: list[CachedPod] | None = None
    node_items: list[CachedNode] | None = None
    continue_: str | None = Field(
        None,
        alias="continue",
        description="With `detail` and `limit`: pass back as `continue` for the next page (pods "
        "by namespace and name, then nodes by name); null on the last page.",
    )


@router.get(
    "/cache/summary",
    response_model=CacheSummary,
    response_model_by_alias=True,
    summary="What runway's cluster cache holds",
)
async def cache_summary(
    request: Request,
    detail: Annotated[bool, Query(description="List every cached pod and node.")] = False,
    limit: LimitParam = None,
    continue_: ContinueParam = None,
) -> CacheSummary:
    """Counts of the pod/node cache and its indexes, optionally with every object (paged:
    `limit` pods and nodes in all, pods first)."""
    ctx = context(request)
    cache, cluster = ctx.cache, ctx.cluster
    summary = CacheSummary(
        connected=cluster.connected,
        synced=cache.synced,
        leader=cluster.leadership,
        identity=cluster.identity,
        pods=len(cache),
        pending=len(cache.pending_pods()),
        bound=cache.bound_count(),
        nodes=cache.node_count(),
        workloads=len(cache.workload_keys()),
        queues={q: len(cache.pods_in_queue(q)) for q in cache.queues()},
        jobs=cluster.job_count,
        jobs_readable=cluster.jobs_readable,
        pod_resource_version=cluster.pod_resource_version,
        node_resource_version=cluster.node_resource_version,
    )
    if detail:
        show_uids = ctx.config.auth.protect_read_only
        # Page the raw objects by key; only the page's become response models.
        objects: list[tuple[tuple[int, str, str], Any]] = [
            ((0, p.metadata.namespace, p.metadata.name), p) for p in cache.pods()
        ]
        objects += [((1, "", n.name), n) for n in cache.nodes()]
        shown, summary.continue_ = page(
            objects, lambda pair: pair[0], PageRequest(limit, continue_), "cache/summary"
        )
        summary.pod_items = [
            CachedPod(
                uid=p.metadata.uid if show_uids else None,
                namespace=p.metadata.namespace,
                name=p.metadata.name,
                node_name=p.spec.nodeName,
                phase=p.status.phase,
                resource_version=p.metadata.resourceVersion,
                workload=str(cache.workload_key_of(p.metadata.uid) or ""),
                terminating=p.metadata.deletionTimestamp is not None,
            )
            for (kind, _, _), p in shown
            if kind == 0
        ]
        summary.node_items = [
            CachedNode(
                name=n.name,
                resource_version=n.metadata.resourceVersion,
                labels=n.labels,
                allocatable=n.allocatable,
                unschedulable=bool(n.spec.unschedulable),
            )
            for (kind, _, _), n in shown
            if kind == 1
        ]
    return summary
