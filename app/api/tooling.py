"""``/v1/...`` REST for people and tools: min-runtime and preemption-budget resolution and the
queue tree.

The same functions back the offline CLI (``python -m app resolve``), so the answer for a queue
pair is the same whether asked of a running runway or of a config file.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import Field

from app.api.context import context
from app.api.models import CamelModel
from app.config import RunwayConfig
from app.policy.budget import GLOBAL_DEFAULT, BudgetResolution, default_budget, resolve_budget
from app.policy.minruntime import (
    Resolution,
    defaults_for_pool,
    resolve,
    resolve_preempt,
    resolve_reclaim,
)
from app.policy.queues import QueueTree
from app.state.requeue import QueueCounts
from app.supervise import in_slices
from app.wire.schema import ErrorBody

router = APIRouter(prefix="/v1", tags=["tooling"])


class BudgetView(CamelModel):
    """A victim queue's resolved preemption budget (``preemptionBudget``)."""

    max_preemptions: int = Field(
        description="A workload preempted this many times within the window is protected; "
        "0 = no budget."
    )
    window_seconds: float = Field(description="The sliding window (0 with no budget).")
    resolved_from: str = Field(
        description="The queue whose `preemptionBudget` applied, or `default` "
        "(`minRuntime.defaultPreemptionBudget`)."
    )
    path: list[str] = Field(
        description="The queues consulted walking up from the victim's leaf queue, ending at "
        "`resolvedFrom` (or at the top-level queue when the default applied)."
    )
    source: str = Field(
        description="Where the value comes from: `file` (a queue's entry or the default) or "
        "`Queue/<name>`."
    )


def budget_view(tree: QueueTree, res: BudgetResolution) -> BudgetView:
    """The JSON shape of a resolved preemption budget (REST and CLI)."""
    return BudgetView(
        max_preemptions=res.budget.max_preemptions,
        window_seconds=res.budget.window_s,
        resolved_from=res.resolved_from,
        path=list(res.path),
        source="file" if res.is_default else tree.origin_of(res.resolved_from),
    )


def victim_budget(config: RunwayConfig, tree: QueueTree, victim_queue: str) -> BudgetView:
    """The preemption budget protecting a workload of ``victim_queue``."""
    return budget_view(tree, resolve_budget(tree, victim_queue, default_budget(config.min_runtime)))


class ResolveResponse(CamelModel):
    """The min-runtime protecting a victim in one queue from a preemptor in another."""

    action: Literal["preempt", "reclaim"] = Field(
        description="`preempt` when both pods are in the same leaf queue, else `reclaim`."
    )
    min_runtime_seconds: float = Field(description="How long the victim is protected after start.")
    resolved_from: str = Field(
        description="The queue whose setting applied, or `default` for the node-pool default."
    )
    path: list[str] = Field(
        description="The queues consulted, in walk order, ending at `resolvedFrom` (or at the "
        "top-level queue when the pool default applied)."
    )
    victim_budget: BudgetView | None = Field(
        None,
        description="The preemption budget of the victim's workload (its leaf queue's, "
        "whoever the preemptor): exhausted, it protects like a min-runtime.",
    )


class QueueView(CamelModel):
    """One queue with its own settings and what they resolve to."""

    name: str
    parent: str | None = Field(description="None for a top-level queue.")
    path: list[str] = Field(description="Top-level queue first, down to this queue.")
    children: list[str]
    queueing_strategy: str
    preempt_min_runtime_seconds: float | None = Field(
        description="Set on this queue (None = inherited)."
    )
    reclaim_min_runtime_seconds: float | None = Field(
        description="Set on this queue (None = inherited)."
    )
    effective_preempt_min_runtime_seconds: float = Field(
        description="Preempt min-runtime of a victim in this queue (inheritance and pool "
        "default applied)."
    )
    effective_preempt_from: str = Field(description="Queue that set it, or `default`.")
    effective_reclaim_min_runtime_seconds: float = Field(
        description="Reclaim min-runtime of a victim in this queue walking up from it (method "
        "`queue`; with `lca` the preemptor's queue matters, ask /v1/resolve)."
    )
    effective_reclaim_from: str = Field(description="Queue that set it, or `default`.")
    source: str = Field(
        description="Where this queue's own settings come from: `file`, or `Queue/<name>` (a "
        "KAI Queue object, `queueSource: kai | auto`)."
    )
    effective_preempt_source: str = Field(
        description="Where the effective preempt value comes from: `file` (the queue's entry or "
        "the file's `minRuntime` default) or `Queue/<name>`."
    )
    effective_reclaim_source: str = Field(
        description="Where the effective reclaim value comes from: `file` or `Queue/<name>`."
    )
    preemption_budget: BudgetView | None = Field(
        None,
        description="The preemption budget of a workload in this queue (inheritance and the "
        "default applied).",
    )
    counts: QueueCounts | None = Field(
        None,
        description="Workloads of this queue in runway's cache by state (None offline).",
    )


class QueuesResponse(CamelModel):
    """The queue tree with resolved settings, in config order."""

    pool: str | None = Field(description="The pool whose defaults were applied (None = global).")
    default_preempt_min_runtime_seconds: float
    default_reclaim_min_runtime_seconds: float
    default_preemption_budget: BudgetView = Field(
        description="`minRuntime.defaultPreemptionBudget`: where no queue sets one."
    )
    reclaim_resolve_method: Literal["lca", "queue"]
    queue_source: Literal["file", "kai"] = Field(
        "file", description="Where the tree comes from now (`queueSource`; `auto` resolved)."
    )
    queue_source_error: str | None = Field(
        None,
        description="Why the last change of the KAI Queue objects was refused (the tree shown "
        "is the last good one); None when current.",
    )
    queues: list[QueueView]


def _pool_labels(config: RunwayConfig, pool: str | None) -> dict[str, str] | None:
    return {config.min_runtime.pool_label: pool} if pool else None


def resolve_pair(
    config: RunwayConfig,
    tree: QueueTree,
    preemptor_queue: str,
    victim_queue: str,
    pool: str | None = None,
) -> Resolution:
    """Resolve one preemptor/victim queue pair, on a node of ``pool`` (None = global defaults)."""
    defaults = defaults_for_pool(config.min_runtime, _pool_labels(config, pool))
    return resolve(tree, defaults, preemptor_queue, victim_queue)


def resolution_response(res: Resolution) -> ResolveResponse:
    """The JSON shape of a resolution (REST and CLI)."""
    return ResolveResponse(
        action=res.action,
        min_runtime_seconds=res.min_runtime_s,
        resolved_from=res.resolved_from,
        path=list(res.path),
    )


def queues_response(config: RunwayConfig, tree: QueueTree, pool: str | None) -> QueuesResponse:
    """Every configured queue with its own and its effective settings."""
    defaults = defaults_for_pool(config.min_runtime, _pool_labels(config, pool))
    fallback = default_budget(config.min_runtime)
    views = []
    for node in tree:
        pre = resolve_preempt(tree, defaults, node.name)
        rec = resolve_reclaim(tree, defaults, node.name, node.name, method="queue")
        views.append(
            QueueView(
                name=node.name,
                parent=tree.parent(node.name),
                path=list(tree.hierarchy_path(node.name)),
                children=list(tree.children(node.name)),
                queueing_strategy=node.queueing_strategy,
                preempt_min_runtime_seconds=node.preempt_min_runtime_s,
                reclaim_min_runtime_seconds=node.reclaim_min_runtime_s,
                effective_preempt_min_runtime_seconds=pre.min_runtime_s,
                effective_preempt_from=pre.resolved_from,
                effective_reclaim_min_runtime_seconds=rec.min_runtime_s,
                effective_reclaim_from=rec.resolved_from,
                source=node.origin,
                effective_preempt_source=tree.origin_of(pre.resolved_from),
                effective_reclaim_source=tree.origin_of(rec.resolved_from),
                preemption_budget=budget_view(tree, resolve_budget(tree, node.name, fallback)),
            )
        )
    return QueuesResponse(
        pool=defaults.pool,
        default_preempt_min_runtime_seconds=defaults.preempt_min_runtime_s,
        default_reclaim_min_runtime_seconds=defaults.reclaim_min_runtime_s,
        default_preemption_budget=budget_view(
            tree, BudgetResolution(fallback, GLOBAL_DEFAULT, (), is_default=True)
        ),
        reclaim_resolve_method=defaults.reclaim_resolve_method,
        queues=views,
    )


_POOL = Query(
    min_length=1,
    description="Value of the node's pool label (`minRuntime.poolLabel`): apply that pool's "
    "defaults. Omitted = the global defaults.",
)


@router.get(
    "/resolve",
    response_model=ResolveResponse,
    summary="Explain the min-runtime for a preemptor/victim queue pair",
    responses={400: {"model": ErrorBody, "description": "A parameter is missing or empty"}},
)
async def resolve_endpoint(
    request: Request,
    preemptor_queue: Annotated[
        str,
        Query(
            alias="preemptorQueue",
            min_length=1,
            description="Leaf queue of the pending (preempting) pod.",
        ),
    ],
    victim_queue: Annotated[
        str,
        Query(alias="victimQueue", min_length=1, description="Leaf queue of the running victim."),
    ],
    pool: Annotated[str | None, _POOL] = None,
) -> ResolveResponse:
    """Same leaf queue → `preempt`, else `reclaim`; the rule path says which queue (or the
    pool default) set the value; `victimBudget` is the victim's preemption budget. Queues the
    config does not declare count as top-level queues with no settings."""
    ctx = context(request)
    res = resolve_pair(ctx.config, ctx.queues, preemptor_queue, victim_queue, pool)
    answer = resolution_response(res)
    answer.victim_budget = victim_budget(ctx.config, ctx.queues, victim_queue)
    return answer


@router.get(
    "/queues",
    response_model=QueuesResponse,
    summary="The queue tree with resolved min-runtimes",
    responses={400: {"model": ErrorBody, "description": "A parameter is empty"}},
)
async def queues_endpoint(
    request: Request, pool: Annotated[str | None, _POOL] = None
) -> QueuesResponse:
    """Each configured queue: parent, path, children, its own settings, the values a victim
    in it gets (preempt; reclaim walking up from the queue) and its workloads by state."""
    ctx = context(request)
    response = queues_response(ctx.config, ctx.queues, pool)
    response.queue_source = "kai" if ctx.cluster.queue_origin == "kai" else "file"
    response.queue_source_error = ctx.cluster.queue_error
    counts = await in_slices(ctx.requeue.queue_counts_steps(ctx.clock.now()))
    for view in response.queues:
        c = counts.get(view.name)
        view.counts = c if c is not None else QueueCounts()
    return response
