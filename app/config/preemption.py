"""``preemption:`` — how a preemption's API calls run, and the gate that holds the preemptor."""

from __future__ import annotations

from pydantic import Field

from app.config.durations import Duration
from app.config.section import Section


class PreemptionConfig(Section):
    """Asynchronous preemption (KEP-4832 in the extender)."""

    async_: bool = Field(
        True,
        alias="async",
        description="Run the preemption's API calls in a background task after `preempt` answers "
        "(true), or inline before it answers (false: the baseline, slower by the API latency).",
    )
    gate_timeout: Duration = Field(
        60.0,
        gt=0,
        description="Longest a preemptor is held in the gate waiting for its victims to go.",
    )
    max_concurrent_tasks: int = Field(
        16, ge=1, description="Preemption tasks running at once; more wait their turn."
    )
    victim_parallelism: int = Field(
        8, ge=1, description="API calls for the victims of one preemption made in parallel."
    )
    shutdown_grace: Duration = Field(
        20.0,
        ge=0,
        description="At shutdown, time given to running tasks before they are cancelled (and "
        "their nominations reverted).",
    )
    history: int = Field(
        200, ge=1, description="Finished preemptions kept for `GET /v1/preemptions`."
    )
    decision_history: int = Field(
        200, ge=1, description="Preempt decisions kept for `GET /v1/preemptions/decisions`."
    )
    decision_history_bytes: int = Field(
        64 << 20,
        ge=1024,
        description="Bound on the memory (JSON bytes) of the kept preempt decisions, all "
        "together: the oldest are forgotten first.",
    )
    decision_max_nodes: int = Field(
        100,
        ge=1,
        description="Offered nodes recorded per preempt decision (the chosen node first; the "
        "reply is unaffected): a preempt offering 20,000 nodes is remembered cheaply.",
    )
