"""``/v1/preemptions`` and ``/v1/gate``: what asynchronous preemption is doing and has done."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.context import ApiContext, context
from app.api.paging import (
    ContinueParam,
    LimitParam,
    PageRequest,
    decode_token,
    encode_token,
    page,
)
from app.model import Pod
from app.model.timestamps import format_optional_time, format_time
from app.policy.schedgate import WAITING_FOR_UNGATE, gated, hold_by
from app.wire.schema import ErrorBody

router = APIRouter(prefix="/v1", tags=["preemption"])


class PreemptionView(BaseModel):
    """One preemption task."""

    preemptor: str = Field(description="namespace/name of the preempting pod")
    preemptorUID: str
    node: str = Field(description="the node chosen by preempt")
    victims: list[str] = Field(description="namespace/name of every victim, gang siblings included")
    awaited: list[str] = Field(
        default_factory=list,
        description="namespace/name of pods already going (another preemption in flight chose "
        "them, or they are terminating): awaited, never deleted again",
    )
    displaced: list[str] = Field(
        default_factory=list,
        description="namespace/name of lower-priority preemptors whose claim on the node this "
        "preemption took (their nomination cleared, their gate opened)",
    )
    rule: str = Field(description="the queue rule that made the victims eligible")
    started: float = Field(description="Unix seconds")
    finished: float | None = None
    seconds: float | None = Field(None, description="wall time of the API calls")
    result: str = Field(description="running, success, error or cancelled")
    error: str = ""
    steps: list[str] = Field(default_factory=list)


_CONTINUE = Field(
    None,
    alias="continue",
    description="Pass back as `continue` for the next page; null on the last page.",
)


class PreemptionsView(BaseModel):
    """Tasks in flight (oldest first) and the most recent finished ones (newest first); paged
    as one list, in-flight tasks first."""

    model_config = ConfigDict(populate_by_name=True)

    inFlight: list[PreemptionView]
    recent: list[PreemptionView]
    continue_: str | None = _CONTINUE


class GateEntryView(BaseModel):
    """A preemptor held in the gate."""

    preemptor: str
    preemptorUID: str
    node: str = Field(description="the nominated node: the only one filter lets through")
    victims: list[str]
    since: str = Field(description="RFC 3339")
    deadline: str = Field(description="RFC 3339: the gate opens by then whatever happens")
    rule: str
    holder: str = Field(description="the runway replica that runs the task")


def _task_key(task: dict[str, Any]) -> tuple[Any, ...]:
    if task["finished"] is None:  # in flight: oldest first
        return (0, task["started"], task["preemptorUID"])
    return (1, -task["finished"], task["preemptorUID"], task["started"])


@router.get(
    "/preemptions",
    response_model=PreemptionsView,
    summary="Preemption tasks",
)
async def preemptions(
    request: Request, limit: LimitParam = None, continue_: ContinueParam = None
) -> dict[str, Any]:
    """In-flight preemption tasks and the last finished ones, with timings and results."""
    executor = context(request).executor
    tasks = [r.to_dict() for r in executor.in_flight()] + [r.to_dict() for r in executor.recent()]
    items, token = page(tasks, _task_key, PageRequest(limit, continue_), "preemptions")
    return {
        "inFlight": [t for t in items if t["finished"] is None],
        "recent": [t for t in items if t["finished"] is not None],
        "continue": token,
    }


CONTINUE_HEADER = "Runway-Continue"
"""Where ``GET /v1/gate`` (a bare list) puts its ``continue`` token."""


def _gate_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry["since"], entry["preemptor"], entry["preemptorUID"])


@router.get(
    "/gate",
    response_model=list[GateEntryView],
    summary="Preemptors held in the gate",
    responses={
        200: {
            "headers": {
                CONTINUE_HEADER: {
                    "description": "The `continue` token of the next page (absent on the last).",
                    "schema": {"type": "string"},
                }
            }
        }
    },
)
async def gate(
    request: Request, response: Response, limit: LimitParam = None, continue_: ContinueParam = None
) -> list[dict[str, Any]]:
    """Every preemptor this replica holds while its victims go, longest held first. A bare
    list: the next page's token is in the `Runway-Continue` header."""
    entries = [
        {
            "preemptor": e.preemptor.key,
            "preemptorUID": e.preemptor.uid,
            "node": e.node,
            "victims": [v.key for v in e.victims],
            "since": format_time(e.since),
            "deadline": format_time(e.deadline),
            "rule": e.rule,
            "holder": e.holder,
        }
        for e in context(request).gate
    ]
    items, token = page(entries, _gate_key, PageRequest(limit, continue_), "gate")
    if token is not None:
        response.headers[CONTINUE_HEADER] = token
    return items


class DecisionsView(BaseModel):
    """The last preempt decisions, newest first (``victims.Decision.to_dict``)."""

    model_config = ConfigDict(populate_by_name=True)

    decisions: list[dict[str, Any]]
    continue_: str | None = _CONTINUE


@router.get(
    "/preemptions/decisions",
    response_model=DecisionsView,
    summary="Recent preempt decisions, with every rule applied",
)
async def decisions(
    request: Request,
    limit: int = Query(
        50,
        ge=1,
        le=10_000,
        description="How many, newest first; when more remain the answer carries `continue`.",
    ),
    preemptor: str | None = Query(None, description="Only this preemptor (`namespace/name`)."),
    continue_: ContinueParam = None,
) -> dict[str, Any]:
    """Per offered node and victim: kept, dropped, re-selected or gang-expanded, and why."""
    # Numbered newest first: a page resumes below the last number it served, and only what
    # it shows (and one more, to know whether more remain) is decoded.
    before = None
    if continue_ is not None:
        key = decode_token("decisions", continue_)
        if len(key) != 1 or type(key[0]) is not int:
            raise HTTPException(400, "invalid continue token: it does not fit this list's order")
        before = key[0]
    found = context(request).decisions.numbered(limit + 1, preemptor or None, before)
    token = encode_token("decisions", (found[limit - 1][0],)) if len(found) > limit else None
    return {"decisions": [d for _, d in found[:limit]], "continue": token}


class ExplainView(BaseModel):
    """Why a pod is (not) a victim of a preemptor, from the live state."""

    preemptor: str
    victim: str
    action: str = Field(description="preempt (same leaf queue) or reclaim (another leaf queue)")
    minRuntimeSeconds: float | None
    resolvedFrom: str = Field(description="the queue that set the value, or 'default'")
    path: list[str] = Field(description="queues walked to resolve the value")
    start: str | None = Field(description="the victim workload's start (RFC 3339), if known")
    protectedUntil: str | None
    protected: bool
    protectedBy: str | None = Field(
        None,
        description="min-runtime, budget (the workload's exhausted preemption budget alone) or "
        "null when not protected",
    )
    budget: dict[str, Any] | None = Field(
        None,
        description="the victim workload's preemption budget now: maxPreemptions, "
        "windowSeconds, resolvedFrom, path, preemptionsInWindow, protected, protectedUntil",
    )
    eligible: bool = Field(description="lower priority than the preemptor and not protected")
    workload: dict[str, Any]
    explanation: str
    lastDecision: dict[str, Any] | None = Field(
        None, description="the victim's record in the newest decision of this preemptor"
    )
    queueDenied: dict[str, str] = Field(
        default_factory=dict,
        description="`preemptor`/`victim` → the queue its label names but its namespace may "
        "not use (the queue's `namespaces` or `namespaceSelector`): it is queued in `default` "
        "instead",
    )
    notManaged: dict[str, str] = Field(
        default_factory=dict,
        description="`preemptor`/`victim` → why runway does not manage that pod (`scope`): "
        "an unmanaged victim has no min-runtime or budget of runway's, an unmanaged pod no "
        "record, hold, backoff or PodsReady eviction",
    )


def _split(value: str, name: str) -> tuple[str, str]:
    ns, sep, pod = value.partition("/")
    if not sep or not ns or not pod:
        raise HTTPException(400, f"{name} must be `namespace/name`, got {value!r}")
    return ns, pod


def _hold_of(ctx: ApiContext, pod: Pod) -> dict[str, Any] | None:
    """What holds ``pod`` while it is pending (its rule, until when, and whether its
    scheduling gate or the filter holds it); None when nothing does or it is bound."""
    if pod.spec.nodeName or pod.metadata.deletionTimestamp is not None:
        return None
    verdict = ctx.requeue.admit(pod, ctx.clock.now())
    if verdict.allowed and not gated(pod):
        return None
    return {
        "rule": "" if verdict.allowed else verdict.rule,
        "by": hold_by(pod),
        "until": format_optional_time(verdict.until),
        "reason": WAITING_FOR_UNGATE if verdict.allowed else verdict.reason,
    }


@router.get(
    "/explain",
    response_model=ExplainView,
    summary="Why a pod is (not) a victim of a preemptor",
    responses={
        400: {"model": ErrorBody, "description": "bad parameter"},
        404: {"model": ErrorBody, "description": "pod not known"},
    },
)
async def explain(
    request: Request,
    preemptor: str = Query(description="`namespace/name` of the preempting pod"),
    victim: str = Query(description="`namespace/name` of the candidate victim"),
) -> dict[str, Any]:
    """Resolve min-runtime for the pair and the victim's preemption budget now, and say whether
    the victim is protected (and by which)."""
    ctx = context(request)
    p_ns, p_name = _split(preemptor, "preemptor")
    v_ns, v_name = _split(victim, "victim")
    p_pod = ctx.cache.pod_by_key(p_ns, p_name)
    v_pod = ctx.cache.pod_by_key(v_ns, v_name)
    missing = [k for k, pod in ((preemptor, p_pod), (victim, v_pod)) if pod is None]
    if missing or p_pod is None or v_pod is None:
        hint = (
            " runway has no cluster cache (embedded default):"
            " use GET /v1/resolve?preemptorQueue=..&victimQueue=.. for the rule alone"
            if not ctx.cluster.connected
            else ""
        )
        raise HTTPException(404, f"pod {', '.join(missing)} not in runway's cache.{hint}")
    answer = ctx.decider.explain(p_pod, v_pod)
    answer["lastDecision"] = ctx.decisions.about(preemptor, v_pod.metadata.uid)
    denied = {
        role: queue
        for role, pod in (("preemptor", p_pod), ("victim", v_pod))
        if (queue := ctx.cache.denied_queue(pod)) is not None
    }
    not_managed = {
        role: why
        for role, pod in (("preemptor", p_pod), ("victim", v_pod))
        if (why := ctx.cache.unmanaged_reason(pod))
    }
    holds = {
        role: hold
        for role, pod in (("preemptor", p_pod), ("victim", v_pod))
        if (hold := _hold_of(ctx, pod)) is not None
    }
    if holds:
        # which hold applies (DESIGN §5.8): runway's scheduling gate, or the filter
        answer["holds"] = holds
    if not_managed:
        answer["notManaged"] = not_managed
        answer["explanation"] = (
            f"{answer['explanation']} "
            + " ".join(f"The {role} is not managed: {why}." for role, why in not_managed.items())
        ).strip()
    if denied:
        answer["queueDenied"] = denied
        answer["explanation"] = (
            f"{answer['explanation']} "
            + " ".join(
                f"The {role} names queue {queue!r}, which its namespace may not use: it is "
                "queued in 'default'."
                for role, queue in denied.items()
            )
        ).strip()
    return answer
