"""``preemption:`` — how a preemption's API calls run, and the gate that holds the preemptor."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.config.durations import Duration
from app.config.section import Section


class PreemptionConfig(Section):
    """Asynchronous preemption (KEP-4832 in the extender)."""

    async_: bool | Literal["auto"] = Field(
        "auto",
        alias="async",
        description="`auto` (default): takeover where it was measured to clear a preemption "
        "storm faster than the scheduler executing, chosen by the scheduler's release (DESIGN "
        "§1.1, bench/RESULTS.md §3): takeover up to 1.32 (measured on 1.20), the scheduler "
        "executing from 1.33, where its own preemption is asynchronous (measured on 1.34 and "
        "1.37: takeover loses there). "
        "Takeover (true): `preempt` answers `{}` and runway executes the preemption "
        "in a background task (nominate, then mark, record and delete each victim), so "
        "kube-scheduler's cycle never waits for those API calls. False: `preempt` returns the "
        "victims and kube-scheduler deletes them itself, as it does without an extender; runway "
        "writes the eviction records and holds the preemptor in the gate. On kube-scheduler "
        "1.32+ with its own SchedulerAsyncPreemption on, pick false (docs: README, Preemption).",
    )
    scheduler_names: list[str] = Field(
        default_factory=lambda: ["default-scheduler"],
        min_length=1,
        description="`spec.schedulerName` values of the schedulers runway serves: a preemptor "
        "handled by another scheduler is refused (DESIGN §4: never delete on a request's word).",
    )
    protected_namespaces: list[str] = Field(
        default_factory=lambda: ["kube-system"],
        description="Namespaces whose pods runway never chooses as preemption victims, whatever "
        "kube-scheduler offers (the control plane's pods). runway's own namespace is added by "
        "`protectOwnNamespace`.",
    )
    protect_own_namespace: bool = Field(
        True,
        description="Never choose a victim in runway's own namespace (`POD_NAMESPACE`, else the "
        "in-cluster service account's; none when runway runs outside a pod): its replicas and "
        "the bundled scheduler live there.",
    )
    protected_pod_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Pods in runway's own namespace that carry all of these labels are never "
        "victims, even with `protectOwnNamespace: false`; the chart sets its release's labels "
        "(runway's replicas and the bundled scheduler). Empty: no such rule. Labels elsewhere "
        "count for nothing: tenants may write any label on their own pods.",
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
