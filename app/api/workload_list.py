"""``GET /v1/workloads``: every workload runway sees, each with its queue, state, place in its
queue's pending order and the reason it waits — what ``kubectl runway workloads`` and the
``/ui/`` page show.

Read-only, from the cache and the record store (no API call). Paged (``app.api.paging``) in the
order it is listed: by leaf queue; in a queue the pending workloads first, in queue order
(``GET /v1/queues/{name}/pending``), then the others by ``namespace/name``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from operator import attrgetter
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import Field

from app.api.context import ApiContext, context
from app.api.models import CamelModel
from app.api.paging import ContinueParam, LimitParam, PageRequest, page
from app.model.timestamps import format_optional_time
from app.policy.minruntime import defaults_for_pool, protected_until, resolve_preempt
from app.policy.ordering import preemptor_anchors, queue_order_key
from app.policy.podsready import workload_state
from app.policy.schedgate import WAITING_FOR_UNGATE, HoldBy, hold_by
from app.policy.workload import WorkloadKey
from app.state.cache import WorkloadView
from app.state.requeue import WORKLOAD_STEP
from app.supervise import Turns, in_slices

router = APIRouter(prefix="/v1", tags=["requeue"])

State = Literal["pending", "admitted", "backoff", "deactivated"]

WAITING_FOR_SCHEDULER = (
    "no runway rule holds it: kube-scheduler has not placed it yet (resources, affinity, "
    "taints; `kubectl describe pod` shows the scheduler's message)"
)


class WorkloadSummary(CamelModel):
    """One workload in the list."""

    namespace: str
    name: str
    queue: str
    state: State
    priority: int
    pods: int = Field(description="Pods runway sees (any phase).")
    position: int | None = Field(
        description="Place in its queue's pending order (1 = head); None when not pending."
    )
    rule: str = Field(
        description="The runway rule that holds it (`deactivated`, `backoff`, `gate`, "
        "`anti-flapping`, `block-admission`, `strict-fifo`); empty when none does."
    )
    reason: str = Field(
        description="Why it waits (the filter's message), or why it is not held; empty when "
        "admitted."
    )
    until: str | None = Field(description="When the hold is expected to end (RFC 3339).")
    hold_by: Literal["", "schedulingGate", "filter"] = Field(
        "",
        description="What keeps it off the nodes while pending: `schedulingGate` (runway's "
        "gate `runway.dev/admission`: no scheduling cycle, `kubectl get pods` says "
        "SchedulingGated) or `filter` (a filter rejection); empty when not pending.",
    )
    requeue_at: str | None = Field(description="Backoff: not admissible before (RFC 3339).")
    protected_until: str | None = Field(
        description="Admitted: preempt min-runtime protection ends at this time (RFC 3339)."
    )


class WorkloadList(CamelModel):
    """A page of workloads."""

    items: list[WorkloadSummary]
    continue_: str | None = Field(
        None,
        alias="continue",
        description="Pass back as `continue` for the next page; null on the last page.",
    )


Place = tuple[int, tuple[int, float, int, str]]
"""A pending workload's position in its queue and its queue-order key."""


@dataclass(frozen=True)
class _Row:
    """A listed workload before its summary is built (only a page's rows get one)."""

    key: WorkloadKey
    view: WorkloadView
    queue: str
    place: Place | None
    order: tuple[Any, ...]
    """Where it is listed: by queue; pending ones first in queue order, then by name."""


def _order(key: WorkloadKey, queue: str, place: Place | None) -> tuple[Any, ...]:
    if place is not None:
        return (queue, 0, *place[1], key.source)
    return (queue, 1, 0, 0.0, 0, str(key), key.source)


_ROW_ORDER = attrgetter("order")


def _rows(
    ctx: ApiContext,
    namespace: str | None,
    queue: str | None,
    only: WorkloadKey | None = None,
    state: str | None = None,
    now: float = 0.0,
) -> Generator[None, None, list[_Row]]:
    """The matching workloads with their place (the pending order is memoised), as a pass
    that yields every ``WORKLOAD_STEP`` workloads: at 41,729 workloads a list holds the event loop
    ~200 ms otherwise (bench.scale), and kube-scheduler's verbs wait meanwhile."""
    cache, requeue = ctx.cache, ctx.requeue
    positions: dict[str, Place] = {}
    for q in cache.queues():
        if queue is not None and q != queue:
            continue
        pending = requeue.pending_workloads(q)
        anchors = preemptor_anchors(pending, requeue.order)
        for i, w in enumerate(pending, 1):
            positions[w.name] = (i, queue_order_key(w, requeue.order, anchors))
        yield
    out: list[_Row] = []
    keys = cache.workload_keys() if only is None else [only]
    for n, key in enumerate(keys):
        if n % WORKLOAD_STEP == 0:
            yield
        if namespace is not None and key.namespace != namespace:
            continue
        view = cache.workload(key)
        if view is None or not view.pods:
            continue
        q = cache.queue_of_pod(view.pods[0])
        if queue is not None and q != queue:
            continue
        place = positions.get(str(key))
        row = _Row(key, view, q, place, _order(key, q, place))
        if state is None or _state(ctx, row, now) == state:
            out.append(row)
    return out


def _state(ctx: ApiContext, row: _Row, now: float) -> str:
    admitted = ctx.requeue.life(row.view).life.admitted
    return workload_state(admitted, ctx.records.read(row.key), now)


def _summary(ctx: ApiContext, row: _Row, now: float) -> WorkloadSummary:
    """The summary of one listed workload: its state, and the rule that holds it and why."""
    key, view = row.key, row.view
    record = ctx.records.read(key)
    life = ctx.requeue.life(view).life
    rule, reason, until = "", "", None
    by: HoldBy | None = None
    waiting = [p for p in view.pods if not p.spec.nodeName and p.metadata.deletionTimestamp is None]
    if waiting and life.admitted is None:
        verdict = ctx.requeue.admit(waiting[0], now)
        by = hold_by(waiting[0])
        if verdict.allowed:
            reason = WAITING_FOR_UNGATE if by == "schedulingGate" else WAITING_FOR_SCHEDULER
        else:
            rule, reason, until = verdict.rule, verdict.reason, verdict.until
    defaults = defaults_for_pool(ctx.config.min_runtime, None)
    started = protected_until(life.started, resolve_preempt(ctx.queues, defaults, row.queue))
    return WorkloadSummary(
        namespace=key.namespace,
        name=key.name,
        queue=row.queue,
        state=workload_state(life.admitted, record, now),
        priority=max((p.priority for p in view.pods), default=0),
        pods=len(view.pods),
        position=row.place[0] if row.place is not None else None,
        rule=rule,
        reason=reason,
        until=format_optional_time(until),
        hold_by=by or "",
        requeue_at=format_optional_time(record.requeue_at) if record is not None else None,
        protected_until=format_optional_time(started) if life.admitted is not None else None,
    )


@router.get(
    "/workloads",
    response_model=WorkloadList,
    summary="Every workload: queue, state, place in the pending order, why it waits",
)
async def list_workloads(
    request: Request,
    namespace: Annotated[
        str | None, Query(min_length=1, description="Only this namespace (omitted: all).")
    ] = None,
    queue: Annotated[
        str | None, Query(min_length=1, description="Only this leaf queue (omitted: all).")
    ] = None,
    state: Annotated[State | None, Query(description="Only workloads in this state.")] = None,
    pod: Annotated[
        str | None,
        Query(
            min_length=1,
            description="Only the workload of this pod (needs `namespace`): none when runway's "
            "cache has no such pod.",
        ),
    ] = None,
    limit: LimitParam = None,
    continue_: ContinueParam = None,
) -> WorkloadList:
    """By leaf queue; in each, pending workloads in queue order (with the rule and reason
    that hold each, or that none does), then the admitted ones by name."""
    ctx = context(request)
    only = None
    if pod is not None:
        if namespace is None:
            raise HTTPException(400, "pod needs namespace: a pod is named within its namespace")
        found_pod = ctx.cache.pod_by_key(namespace, pod)
        only = ctx.cache.workload_key_of(found_pod.metadata.uid) if found_pod else None
        if only is None:
            return WorkloadList(items=[])
    now = ctx.clock.now()
    rows = await in_slices(_rows(ctx, namespace, queue, only, state, now))
    # Only the page's rows are summarised (the filter's rule chain runs for those alone).
    shown, token = page(rows, _ROW_ORDER, PageRequest(limit, continue_), "workloads")
    turns = Turns()
    items: list[WorkloadSummary] = []
    for row in shown:
        items.append(_summary(ctx, row, now))
        await turns.take()
    return WorkloadList(items=items, continue_=token)
