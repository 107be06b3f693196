"""``/v1/preemptions`` and ``/v1/gate``: what asynchronous preemption is doing and has done."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from app.model.timestamps import format_time
from app.runtime import Runtime

router = APIRouter(prefix="/v1", tags=["preemption"])


class PreemptionView(BaseModel):
    """One preemption task."""

    preemptor: str = Field(description="namespace/name of the preempting pod")
    preemptorUID: str
    node: str = Field(description="the node chosen by preempt")
    victims: list[str] = Field(description="namespace/name of every victim, gang siblings included")
    rule: str = Field(description="the queue rule that made the victims eligible")
    started: float = Field(description="Unix seconds")
    finished: float | None = None
    seconds: float | None = Field(None, description="wall time of the API calls")
    result: str = Field(description="running, success, error or cancelled")
    error: str = ""
    steps: list[str] = Field(default_factory=list)


class PreemptionsView(BaseModel):
    """Tasks in flight and the most recent finished ones (newest first)."""

    inFlight: list[PreemptionView]
    recent: list[PreemptionView]


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


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@router.get("/preemptions", response_model=PreemptionsView, summary="Preemption tasks")
async def preemptions(request: Request) -> dict[str, Any]:
    """In-flight preemption tasks and the last finished ones, with timings and results."""
    executor = _runtime(request).preemptions
    if executor is None:
        return {"inFlight": [], "recent": []}
    return {
        "inFlight": [r.to_dict() for r in executor.in_flight()],
        "recent": [r.to_dict() for r in executor.recent()],
    }


@router.get("/gate", response_model=list[GateEntryView], summary="Preemptors held in the gate")
async def gate(request: Request) -> list[dict[str, Any]]:
    """Every preemptor this replica holds while its victims go."""
    return [
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
        for e in _runtime(request).gate
    ]
