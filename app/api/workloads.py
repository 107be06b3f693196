"""``/v1`` REST for the requeue feature (DESIGN §5, §6): workloads, queue order, reactivation.

* ``GET /v1/workloads/{namespace}/{name}`` — pods, its life facts (created, admitted, started,
  members) with where each came from, PodsReady and its clock, protected-until, the eviction
  record, the gate.
* ``POST /v1/workloads/{namespace}/{name}:activate`` — reset count and requeueAt and clear the
  deactivation (authenticated: ``require_auth("write")``).
* ``GET /v1/queues/{name}/pending`` — a leaf queue's pending order, each entry with its sort key.

Read-only answers come from the cache and the record store (no API call); times are RFC 3339.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from app import metrics
from app.api.auth import Principal, require_auth, require_operator
from app.api.context import ApiContext, context
from app.api.errors import error_response
from app.api.models import CamelModel
from app.api.paging import ContinueParam, LimitParam, PageRequest, page
from app.logs import get_logger
from app.model import Pod
from app.model.event import REACTIVATED, EventNote, ObjectRef
from app.model.eviction import EvictionRecord
from app.model.gate import PodRef
from app.model.record import OPERATOR, RecordWriteFailed
from app.model.timestamps import format_optional_time, format_time
from app.policy.lifecycle import Source
from app.policy.minruntime import defaults_for_pool, protected_until, resolve_preempt
from app.policy.ordering import (
    admissible,
    preemptor_anchors,
    queue_head,
    queue_order_key,
)
from app.policy.podsready import workload_state
from app.policy.schedgate import WAITING_FOR_UNGATE, gated, hold_by
from app.policy.workload import SizeSource, WorkloadKey, is_ready
from app.wire.schema import ErrorBody

log = get_logger("api.workloads")
router = APIRouter(prefix="/v1", tags=["requeue"])


class EvictionRecordView(CamelModel):
    """The workload's eviction record (annotations ``runway.dev/eviction-*``)."""

    reason: Literal["Preempted", "PodsReadyTimeout", "Deactivated"] = Field(
        description="Why it was last evicted; `Deactivated`: a requeue limit exceeded (Kueue's "
        "reason; once reactivated the workload is ordered by its creation)."
    )
    time: str = Field(description="When it was last evicted (RFC 3339).")
    preemptor_uid: str | None = Field(description="UID of the preempting pod (Preempted).")
    count: int = Field(description="Requeues after PodsReadyTimeout since (re)activation.")
    requeue_at: str | None = Field(description="Not admissible before this time (backoff).")
    first_eviction_time: str | None = Field(
        description="First PodsReadyTimeout eviction since activation (backoffLimitTimeout)."
    )
    deactivated: bool = Field(description="Held until reactivated (`POST ...:activate`).")
    message: str | None
    failed_pools: list[str] = Field(description="Node pools where it last failed readiness.")

    @classmethod
    def of(cls, record: EvictionRecord) -> EvictionRecordView:
        """The view of ``record``."""
        return cls(
            reason=record.reason,
            time=format_time(record.time),
            preemptor_uid=record.preemptor_uid,
            count=record.count,
            requeue_at=format_optional_time(record.requeue_at),
            first_eviction_time=format_optional_time(record.first_eviction_time),
            deactivated=record.deactivated,
            message=record.message,
            failed_pools=list(record.failed_pools),
        )


class PodView(CamelModel):
    """One pod of the workload."""

    name: str
    uid: str
    node: str | None
    phase: str | None
    ready: bool
    terminating: bool
    scheduling_gated: bool = Field(
        False, description="Carries runway's scheduling gate `runway.dev/admission`."
    )


class FactView(CamelModel):
    """One fact of the workload's life (DESIGN §2) and where it came from."""

    time: str | None = Field(description="RFC 3339; None when not known (or reset).")
    source: Source = Field(
        description="`persisted` (read back from the workload's WorkloadRecord, `status.life`), "
        "`derived` (from the pods now; the leader persists it shortly), `unknown`."
    )


class MembersView(CamelModel):
    """The workload's members: pods neither Failed nor being deleted."""

    count: int = Field(description="Member pods runway sees.")
    min_available: int
    source: Source = Field(
        description="`declared` (annotation runway.dev/min-available, never capped at the pods "
        "seen) or `derived` (no annotation: a gang of all its members)."
    )
    size: int = Field(
        0,
        description="PodsReady's target: ready + succeeded members must reach it (a failed pod "
        "not yet replaced leaves the workload not ready).",
    )
    size_source: SizeSource = Field(
        "members",
        description="`declared` (runway.dev/min-available), `parallelism` (the owner Job's) or "
        "`members` (the most members the workload has had: the record's `status.life.size`).",
    )


class LifeView(CamelModel):
    """The workload's life as persisted facts: created, admitted, started, ready, lost,
    recovered, members."""

    created: FactView = Field(
        description="The `Creation` queue-order timestamp: its Job's creationTimestamp (read "
        "from the Job), else its earliest pod's, fixed at first sight."
    )
    admitted: FactView = Field(
        description="First bind since created or last fully evicted; waitForPodsReady.timeout "
        "counts from here."
    )
    started: FactView = Field(
        description="The minAvailable-th bind; min-runtime counts from here. Only a full "
        "eviction resets it."
    )
    ready: FactView = Field(
        description="First reached PodsReady since admitted (KEP-349): from then on a loss of "
        "readiness runs recoveryTimeout, not timeout. Reset with admitted.",
    )
    lost: FactView = Field(
        description="When PodsReady last went false after it had been reached (Kueue's "
        "WaitForRecovery): recoveryTimeout counts from here. None while PodsReady.",
    )
    recovered: FactView = Field(
        description="When PodsReady was last reached again after a loss; a later loss is "
        "dated only by what happened after it.",
    )
    members: MembersView


class GateView(CamelModel):
    """The workload's pod held in the preemption gate."""

    pod: str
    nominated_node: str | None
    outstanding_victims: int
    until: str | None


class HoldView(CamelModel):
    """What holds the workload's pending pods now, and how."""

    rule: str = Field(
        description="The admission rule that holds it (`deactivated`, `backoff`, "
        "`anti-flapping`, `block-admission`, `strict-fifo`...); empty: none does (a gated pod's "
        "gate goes on the leader's next pass)."
    )
    reason: str
    until: str | None
    by: Literal["schedulingGate", "filter"] = Field(
        description="`schedulingGate`: runway's gate keeps the pod out of kube-scheduler's "
        "queues (no cycle, no autoscaler demand, `SchedulingGated`); `filter`: the filter "
        "rejects every node (the pod cycles, `Unschedulable`)."
    )


class WorkloadResponse(CamelModel):
    """A workload as runway sees it."""

    namespace: str
    name: str
    identity: str = Field(
        description="Where the name comes from: `label`, `pod-group`, `owner:<Kind>` or `pod`."
    )
    queue: str
    state: Literal["pending", "admitted", "backoff", "deactivated"]
    pods: list[PodView]
    min_available: int
    start_time: str | None = Field(
        description="The *started* fact (minAvailable-th bind), as in `life.started`."
    )
    life: LifeView = Field(description="The four facts of DESIGN §2 and where each came from.")
    pods_ready: bool
    pods_ready_clock: Literal["", "WaitForStart", "WaitForRecovery"] = Field(
        description="Which waitForPodsReady timeout runs (empty: none)."
    )
    pods_ready_deadline: str | None = Field(description="When that timeout runs out.")
    protected_until: str | None = Field(
        description="Preempt min-runtime protection (same-queue preemptor, global pool "
        "defaults) ends at this time; None when not started."
    )
    eviction_record: EvictionRecordView | None
    deactivated_by: Literal["runway", "operator"] | None = Field(
        None,
        description="Who deactivated it, and so who may activate it: `runway` (the requeue "
        "limit: whoever may activate workloads in the namespace) or `operator` (an operator "
        "only: the permission cluster-wide). None: active.",
    )
    gate: list[GateView]
    hold: HoldView | None = Field(
        None,
        description="Why its pending pods wait, and whether a scheduling gate or the filter "
        "holds them (DESIGN §5.8); None when no pod is pending or it is admitted.",
    )


class PendingEntry(CamelModel):
    """One pending workload in queue order."""

    position: int = Field(description="1 = head of the order.")
    workload: str
    priority: int
    pending_preemptor: bool = Field(
        description="Placed just before the pending workloads it preempted."
    )
    order_timestamp: str = Field(
        description="The queue-order timestamp (by eviction reason; a pending preemptor takes "
        "that of the earliest workload it preempted)."
    )
    admissible: bool = Field(description="Neither in backoff nor deactivated.")
    key: list[int | float | str] = Field(
        description="The sort key: [-priority, queue-order timestamp (unix seconds), 0 if "
        "placed as a pending preemptor else 1, name]."
    )


class PendingResponse(CamelModel):
    """A leaf queue's pending order, head first."""

    queue: str
    queueing_strategy: str
    head: str | None = Field(description="The first admissible workload (StrictFIFO admits it).")
    pending: list[PendingEntry]
    continue_: str | None = Field(
        None,
        alias="continue",
        description="Pass back as `continue` for the next page; null on the last page.",
    )


def _not_found(message: str) -> JSONResponse:
    return error_response(404, message)


def _no_records(ctx: ApiContext) -> JSONResponse | None:
    """503 while records cannot be written (the WorkloadRecord CRD missing: the reason says what
    to do), None otherwise."""
    if ctx.records.available:
        return None
    why = ctx.cluster.not_ready or "the WorkloadRecords are not available"
    return error_response(503, f"nothing written: {why}")


def workload_response(ctx: ApiContext, key: WorkloadKey) -> WorkloadResponse | None:
    """The REST view of workload ``key`` (None when the cache has none of its pods)."""
    view = ctx.cache.workload(key)
    if view is None:
        return None
    now = ctx.clock.now()
    record = ctx.records.read(key)
    facts = ctx.requeue.life(view)
    life = facts.life
    _, check = ctx.requeue.evaluate(view, now)
    queue = ctx.cache.queue_of_pod(view.pods[0])
    defaults = defaults_for_pool(ctx.config.min_runtime, None)
    res = resolve_preempt(ctx.queues, defaults, queue)
    gates = []
    for pod in view.pods:
        hold = ctx.requeue.gate_hold(pod, now)
        if hold is not None:
            gates.append(
                GateView(
                    pod=pod.key,
                    nominated_node=hold.nominated_node,
                    outstanding_victims=hold.outstanding_victims,
                    until=format_optional_time(hold.until),
                )
            )
    return WorkloadResponse(
        namespace=key.namespace,
        name=key.name,
        identity=key.source,
        queue=queue,
        state=workload_state(life.admitted, record, now),
        pods=[
            PodView(
                name=p.metadata.name,
                uid=p.uid,
                node=p.spec.nodeName,
                phase=p.status.phase,
                ready=is_ready(p),
                terminating=p.metadata.deletionTimestamp is not None,
                scheduling_gated=gated(p),
            )
            for p in view.pods
        ],
        min_available=facts.min_available,
        start_time=format_optional_time(life.started),
        life=LifeView(
            created=FactView(
                time=format_optional_time(life.created), source=facts.source("created")
            ),
            admitted=FactView(
                time=format_optional_time(life.admitted), source=facts.source("admitted")
            ),
            started=FactView(
                time=format_optional_time(life.started), source=facts.source("started")
            ),
            ready=FactView(time=format_optional_time(life.ready), source=facts.source("ready")),
            lost=FactView(time=format_optional_time(life.lost), source=facts.source("lost")),
            recovered=FactView(
                time=format_optional_time(life.recovered), source=facts.source("recovered")
            ),
            members=MembersView(
                count=facts.members,
                min_available=facts.min_available,
                source=facts.min_available_source,
                size=facts.size,
                size_source=facts.size_source,
            ),
        ),
        pods_ready=facts.pods_ready,
        pods_ready_clock=check.cause,
        pods_ready_deadline=format_optional_time(check.deadline),
        protected_until=format_optional_time(protected_until(life.started, res)),
        eviction_record=EvictionRecordView.of(record) if record is not None else None,
        deactivated_by=ctx.records.state(key).authority,
        gate=gates,
        hold=_hold(ctx, view.pods, life.admitted is not None, now),
    )


def _hold(ctx: ApiContext, pods: Sequence[Pod], admitted: bool, now: float) -> HoldView | None:
    """What holds the workload's first pending pod (None: none pending, or admitted)."""
    waiting = [p for p in pods if not p.spec.nodeName and p.metadata.deletionTimestamp is None]
    if not waiting or admitted:
        return None
    verdict = ctx.requeue.admit(waiting[0], now)
    if verdict.allowed and not gated(waiting[0]):
        return None
    return HoldView(
        rule="" if verdict.allowed else verdict.rule,
        reason=WAITING_FOR_UNGATE if verdict.allowed else verdict.reason,
        until=format_optional_time(verdict.until),
        by=hold_by(waiting[0]),
    )


_404: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such workload or queue"}
}


@router.get(
    "/workloads/{namespace}/{name}",
    response_model=WorkloadResponse,
    summary="A workload's pods, start, PodsReady, protection, eviction record and gate",
    responses=_404,
)
async def get_workload(
    request: Request, namespace: str, name: str
) -> WorkloadResponse | JSONResponse:
    """The workload named ``namespace/name`` (label, pod-group, owner or pod name)."""
    ctx = context(request)
    key = ctx.requeue.find_workload(namespace, name)
    found = workload_response(ctx, key) if key is not None else None
    if found is None:
        return _not_found(
            f"no workload {namespace}/{name} in runway's cache: no pod carries that workload "
            "label, pod-group, controller owner or name (`GET /v1/cache/summary` counts the "
            "cached pods)"
        )
    return found


_WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_404,
    401: {"model": ErrorBody, "description": "No or bad bearer token"},
    403: {"model": ErrorBody, "description": "Not allowed"},
    503: {"model": ErrorBody, "description": "The WorkloadRecord CRD is missing: nothing written"},
}
"""What ``:activate`` and ``:deactivate`` may answer besides the workload."""


@router.post(
    "/workloads/{namespace}/{name}:activate",
    response_model=WorkloadResponse,
    summary="Reactivate a workload: reset its requeue count and backoff",
    responses=_WRITE_RESPONSES,
)
async def activate_workload(
    request: Request,
    namespace: str,
    name: str,
    principal: Annotated[Principal, Depends(require_auth("write"))],
) -> WorkloadResponse | JSONResponse:
    """Kueue's reactivation: count and requeueAt reset, deactivation cleared (``spec.active:
    true``), written to the workload's WorkloadRecord. A workload without a record is left as
    it is. Whoever may activate workloads in the namespace (the dependency) lifts a backoff and
    the requeue limit's deactivation; an operator's deactivation only an operator lifts
    (``require_operator``: the permission cluster-wide)."""
    ctx = context(request)
    key = ctx.requeue.find_workload(namespace, name)
    if key is None:
        return _not_found(f"no workload {namespace}/{name} in runway's cache: nothing to activate")
    if (refused := _no_records(ctx)) is not None:
        return refused
    if ctx.records.state(key).authority == OPERATOR:
        principal = await require_operator(
            request, f"workload {namespace}/{name} was deactivated by an operator"
        )
    log.info("activate", workload=f"{namespace}/{name}", user=principal.user)
    before = ctx.records.read(key)
    try:
        activated = await ctx.records.activate(key)
    except RecordWriteFailed as exc:
        return _unwritten(namespace, name, exc)
    if activated is not None:
        _reactivated(ctx, key, deactivated=before is not None and before.deactivated)
    found = workload_response(ctx, key)
    if found is None:
        return _not_found(f"workload {namespace}/{name} disappeared while being activated")
    return found


@router.post(
    "/workloads/{namespace}/{name}:deactivate",
    response_model=WorkloadResponse,
    summary="Deactivate a workload: never admitted until activated (spec.active: false)",
    responses=_WRITE_RESPONSES,
)
async def deactivate_workload(
    request: Request,
    namespace: str,
    name: str,
    principal: Annotated[Principal, Depends(require_auth("write"))],
) -> WorkloadResponse | JSONResponse:
    """Kueue's ``spec.active: false``, on the workload's WorkloadRecord: its pods are refused by
    ``filter`` until an operator activates it (``:activate`` or ``kubectl patch``). Operators
    only (``require_operator``): the record says an operator deactivated it."""
    del principal  # authenticated by the dependency; the operator's permission is checked here
    principal = await require_operator(request, f"deactivating workload {namespace}/{name}")
    ctx = context(request)
    key = ctx.requeue.find_workload(namespace, name)
    if key is None:
        return _not_found(
            f"no workload {namespace}/{name} in runway's cache: nothing to deactivate"
        )
    if (refused := _no_records(ctx)) is not None:
        return refused
    log.info("deactivate", workload=f"{namespace}/{name}", user=principal.user)
    try:
        await ctx.records.deactivate(key)
    except RecordWriteFailed as exc:
        return _unwritten(namespace, name, exc)
    found = workload_response(ctx, key)
    if found is None:
        return _not_found(f"workload {namespace}/{name} disappeared while being deactivated")
    return found


def _unwritten(namespace: str, name: str, exc: RecordWriteFailed) -> JSONResponse:
    """503: the person's change could not be written (nothing was changed)."""
    return error_response(
        503,
        f"workload {namespace}/{name}: its WorkloadRecord could not be written ({exc.reason}: "
        f"{exc}); nothing was changed, retry later",
        {"Retry-After": "5"},
    )


def _reactivated(ctx: ApiContext, key: WorkloadKey, *, deactivated: bool) -> None:
    """Count the reactivation and tell the workload's pods and owners (Events)."""
    pods = ctx.cache.workload_pods(key)
    queue = ctx.cache.queue_of_pod(pods[0]) if pods else ""
    metrics.REACTIVATED_WORKLOADS.labels(metrics.queue_label(queue), str(deactivated).lower()).inc()
    message = "Reactivated through the REST API: requeue count and backoff reset" + (
        ", deactivation cleared" if deactivated else ""
    )
    subjects = [ObjectRef.of_pod(PodRef.of(p)) for p in pods]
    subjects += [ObjectRef.of_owner(o) for o in ctx.records.targets(key).owners]
    for subject in subjects:
        ctx.events.emit(EventNote(subject, REACTIVATED, message, action="Activate"))


@router.get(
    "/queues/{name}/pending",
    response_model=PendingResponse,
    summary="A leaf queue's pending workloads, in queue order",
    responses=_404,
)
async def get_pending(
    request: Request, name: str, limit: LimitParam = None, continue_: ContinueParam = None
) -> PendingResponse | JSONResponse:
    """Order: priority (desc), a pending preemptor before its victims, queue-order timestamp
    (asc), name. Workloads in backoff or deactivated keep their place but are not admissible.
    Paged by the sort key: a page resumes after the last workload of the previous one."""
    ctx = context(request)
    if not ctx.queues.is_known(name) and not ctx.cache.pods_in_queue(name):
        return _not_found(
            f"no queue {name!r}: the config declares no such queue and no pod names it "
            "(`GET /v1/queues` lists the configured queues)"
        )
    now = ctx.clock.now()
    workloads = ctx.requeue.pending_workloads(name)
    strategy = ctx.requeue.order
    anchors = preemptor_anchors(workloads, strategy)
    head = queue_head(workloads, strategy, now)
    entries = []
    for i, w in enumerate(workloads, 1):
        key = queue_order_key(w, strategy, anchors)
        entries.append(
            PendingEntry(
                position=i,
                workload=w.name,
                priority=w.priority,
                pending_preemptor=key[2] == 0,
                order_timestamp=format_time(key[1]),
                admissible=admissible(w, now),
                key=list(key),
            )
        )
    shown, token = page(
        entries,
        lambda e: tuple(e.key),
        PageRequest(limit, continue_),
        f"queues/{name}/pending",
        presorted=True,
    )
    return PendingResponse(
        queue=name,
        queueing_strategy=ctx.queues.node(name).queueing_strategy,
        head=head.name if head is not None else None,
        pending=shown,
        continue_=token,
    )
