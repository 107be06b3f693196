"""The filter verb's decision: may this pod be placed now, and on which of the offered nodes.

runway's rules judge the pod (its workload), not the node, so one verdict covers every offered
node. The rules apply in this order; the first that holds the pod back answers (DESIGN §5):

1. ``deactivated``     — the workload exceeded its requeue limit; only reactivation helps.
2. ``backoff``         — ``now < requeueAt`` after a PodsReadyTimeout eviction.
3. ``gate``            — the pod's own preemption is in flight: only its nominated node passes
                         (terminal: a held preemptor is not subject to the rules below, or the
                         preemption it paid for would be wasted).
4. ``anti-flapping``   — the workload was preempted by a pod that is still pending: wait for it
                         (bounded), so victim and preemptor do not take turns evicting each other.
5. ``block-admission`` — ``waitForPodsReady.blockAdmission``: another admitted workload is still
                         waiting for PodsReady and has not timed out.
6. ``strict-fifo``     — the leaf queue is StrictFIFO and the workload is not the head of its
                         pending order (BestEffortFIFO never blocks).

A pod the rules let through may still be kept off single nodes: ``claim`` — a preemption in
flight holds the node and the pod, of lower or equal priority, would not fit beside its
preemptor (``app.policy.claims``).

Every rejection names what holds the pod, until when (RFC 3339 and seconds from now) and what an
operator can do. The caller (``app.api``) builds :class:`FilterInput` from the cache; nothing here
reads state or the clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.config.queues import QueueingStrategy
from app.model.event import shown_to
from app.model.eviction import PREEMPTED, EvictionRecord
from app.model.timestamps import format_time
from app.policy import claims as claim_rules
from app.policy.backoff import in_backoff
from app.policy.claims import Claim


@dataclass(frozen=True)
class Admission:
    """A filter verdict for one pod.

    runway's rules (backoff, gate, FIFO...) judge the pod, not the node, so a verdict applies to
    every offered node except that the gate may keep the pod's nominated node open.
    """

    allowed: bool
    only_nodes: frozenset[str] | None = None
    """When allowed: restrict to these nodes (the gate's nominated node); None = every node."""
    reason: str = ""
    """For rejected nodes: what, until when, and what to do — shown in the pod's events."""
    rule: str = ""
    """Short name of the rule that rejected (a metric label), empty when allowed."""
    until: float | None = None
    """When the hold is expected to end (None = unknown / until an operator acts)."""
    except_nodes: Mapping[str, str] = field(default_factory=dict)
    """When allowed: nodes kept free for a preemption in flight (node → reason)."""


ADMIT = Admission(allowed=True)


@dataclass(frozen=True)
class Preconditions:
    """The cheap facts each rule needs before it can hold a pod at all (known without reading
    a record or building ``FilterInput``): the filter's shortcut asks ``may_hold`` first."""

    has_record: bool
    """The workload has an eviction record (or may have one)."""
    gated: bool
    """A gate entry exists for the pod."""
    blockers: bool
    """Some admitted workload is not PodsReady yet (blockAdmission)."""
    strict_queue: bool
    """The pod's leaf queue is StrictFIFO."""
    claims: bool
    """A preemption in flight claims a node."""


def preconditions(facts: FilterInput) -> Preconditions:
    """The preconditions ``facts`` show (what ``may_hold`` asks, read off the full input)."""
    return Preconditions(
        has_record=facts.record is not None,
        gated=facts.gate is not None,
        blockers=bool(facts.blockers),
        strict_queue=facts.queueing_strategy == "StrictFIFO",
        claims=bool(facts.claims),
    )


@dataclass(frozen=True)
class GateHold:
    """The pod's preemption is in flight (the gate): its nominated node and what it waits for."""

    nominated_node: str | None
    outstanding_victims: int
    until: float | None = None
    """The gate's bound: it opens at this time at the latest."""
    victims: tuple[str, ...] = ()
    """``namespace/name`` of the victims still outstanding (named in the reason)."""


@dataclass(frozen=True)
class Blocker:
    """An admitted workload that is not PodsReady yet (for ``blockAdmission``)."""

    workload: str
    timeout_at: float | None
    """When its running waitForPodsReady clock (timeout, or recoveryTimeout while it recovers
    from a lost pod) runs out; past that it no longer blocks. None: no clock runs out (it
    recovers without a recoveryTimeout): it blocks until it is PodsReady, as in Kueue."""


@dataclass(frozen=True)
class FilterInput:
    """What the filter rules need to know about the pod's workload, built from the cache."""

    workload: str
    """``namespace/name`` of the pod's workload."""
    queue: str = "default"
    record: EvictionRecord | None = None
    gate: GateHold | None = None
    preemptor_pending: bool = False
    """The pod that preempted this workload (``record.preemptor_uid``) is still pending."""
    preemptor_name: str | None = None
    """``namespace/name`` of that preemptor, for the message."""
    blockers: Sequence[Blocker] = field(default_factory=tuple)
    """Admitted, not PodsReady workloads (the caller passes them only with blockAdmission on)."""
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    queue_head: str | None = None
    """``namespace/name`` of the head of the leaf queue's *admissible* pending order."""
    admitted: bool = False
    """The workload is already admitted (e.g. a replacement pod): admission rules 5 and 6 skip."""
    claims: Sequence[Claim] = field(default_factory=tuple)
    """Claims of preemptions in flight that keep this pod off their node."""


@dataclass(frozen=True)
class FilterPolicy:
    """Settings of the rules that come from the config."""

    anti_flapping_seconds: float = 60.0
    """Longest hold of a victim behind its pending preemptor (counted from the eviction)."""


DEFAULT_POLICY = FilterPolicy()


def _when(until: float, now: float) -> str:
    return f"{format_time(until)} (in {max(until - now, 0.0):.0f}s)"


def _activate(workload: str, policy: FilterPolicy) -> str:
    return f"POST /v1/workloads/{workload}:activate"


def _deactivated(facts: FilterInput, record: EvictionRecord, policy: FilterPolicy) -> Admission:
    why = record.message or "exceeded its requeue limit"
    return Admission(
        allowed=False,
        rule="deactivated",
        reason=f"workload {facts.workload} is deactivated ({why}); it stays unschedulable until "
        f"reactivated: fix the cause, then {_activate(facts.workload, policy)}",
    )


def _backoff(
    facts: FilterInput, record: EvictionRecord, now: float, policy: FilterPolicy
) -> Admission:
    assert record.requeue_at is not None
    return Admission(
        allowed=False,
        rule="backoff",
        until=record.requeue_at,
        reason=f"workload {facts.workload} is in requeue backoff after {record.reason} eviction "
        f"#{record.count} until {_when(record.requeue_at, now)}; it is retried then "
        f"automatically (to retry now: {_activate(facts.workload, policy)})",
    )


def _gate(facts: FilterInput, gate: GateHold, now: float) -> Admission:
    until = f" at the latest until {_when(gate.until, now)}" if gate.until is not None else ""
    named = ", ".join(gate.victims[:5]) + (" ..." if len(gate.victims) > 5 else "")
    waiting = f"{gate.outstanding_victims} victim(s) still terminating" + (
        f": {named}" if named else ""
    )
    if not gate.nominated_node:
        return Admission(
            allowed=False,
            rule="gate",
            until=gate.until,
            reason=f"preemption in flight for workload {facts.workload}: {waiting}, no nominated "
            f"node yet; held{until}; nothing to do, it is retried when the victims are gone",
        )
    return Admission(
        allowed=True,
        only_nodes=frozenset((gate.nominated_node,)),
        rule="gate",
        until=gate.until,
        reason=f"preemption in flight for workload {facts.workload}: held for its nominated node "
        f"{gate.nominated_node} ({waiting}){until}; nothing to do",
    )


def _anti_flapping(
    facts: FilterInput, record: EvictionRecord, now: float, policy: FilterPolicy
) -> Admission | None:
    if not (facts.preemptor_pending and record.reason == PREEMPTED and record.preemptor_uid):
        return None
    until = record.time + policy.anti_flapping_seconds
    if now >= until:
        return None
    who = (
        shown_to("pod", facts.preemptor_name, _namespace(facts.workload))
        if facts.preemptor_name
        else "its preemptor"
    )
    return Admission(
        allowed=False,
        rule="anti-flapping",
        until=until,
        reason=f"workload {facts.workload} was preempted by {who}, which is still pending; held "
        f"until it is scheduled or until {_when(until, now)} so the two do not evict each other "
        "in turn; nothing to do",
    )


def _namespace(workload: str) -> str:
    return workload.partition("/")[0]


def _block_admission(facts: FilterInput, now: float) -> Admission | None:
    live = [
        b
        for b in facts.blockers
        if b.workload != facts.workload and (b.timeout_at is None or b.timeout_at > now)
    ]
    if not live:
        return None
    first = min(
        live, key=lambda b: (math.inf if b.timeout_at is None else b.timeout_at, b.workload)
    )
    others = f" and {len(live) - 1} other(s)" if len(live) > 1 else ""
    until = (
        "is ready (it recovers from a lost pod; no waitForPodsReady.recoveryTimeout ends it)"
        if first.timeout_at is None
        else f"is ready or times out at {_when(first.timeout_at, now)}"
    )
    return Admission(
        allowed=False,
        rule="block-admission",
        until=first.timeout_at,
        reason="waitForPodsReady.blockAdmission: admitted "
        f"{shown_to('workload', first.workload, _namespace(facts.workload))}{others} is "
        f"not PodsReady; admission of {facts.workload} is blocked until it {until}; to admit "
        "workloads concurrently set waitForPodsReady.blockAdmission: false",
    )


def _strict_fifo(facts: FilterInput) -> Admission | None:
    if facts.queueing_strategy != "StrictFIFO" or facts.queue_head in (None, facts.workload):
        return None
    return Admission(
        allowed=False,
        rule="strict-fifo",
        reason=f"queue {facts.queue} is StrictFIFO and "
        f"{shown_to('workload', facts.queue_head or '', _namespace(facts.workload))} is ahead of "
        f"{facts.workload}; it waits until the head is scheduled (to let workloads pass each "
        f"other, set queueingStrategy: BestEffortFIFO on queue {facts.queue})",
    )


# --- the chain: each rule with what it needs and how it judges ---------------------------------

Judge = Callable[[FilterInput, float, FilterPolicy], Admission | None]


@dataclass(frozen=True)
class Rule:
    """One link of the chain: its name (the metric label), the cheap facts without which it can
    never hold a pod (the filter's shortcut, ``may_hold``), and its judgement (None: it does not
    hold this pod; the next rule judges)."""

    name: str
    needs: Callable[[Preconditions], bool]
    judge: Judge


def _deactivated_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    record = facts.record
    return _deactivated(facts, record, policy) if record and record.deactivated else None


def _backoff_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    record = facts.record
    return _backoff(facts, record, now, policy) if record and in_backoff(record, now) else None


def _gate_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    return _gate(facts, facts.gate, now) if facts.gate is not None else None


def _anti_flapping_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    record = facts.record
    return _anti_flapping(facts, record, now, policy) if record is not None else None


def _block_admission_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    return None if facts.admitted else _block_admission(facts, now)


def _strict_fifo_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    return None if facts.admitted else _strict_fifo(facts)


def _claim_rule(facts: FilterInput, now: float, policy: FilterPolicy) -> Admission | None:
    if not facts.claims:
        return None
    return Admission(
        allowed=True,
        rule="claim",
        except_nodes={c.node: claim_rules.reason(c) for c in facts.claims},
    )


CHAIN: tuple[Rule, ...] = (
    Rule("deactivated", lambda p: p.has_record, _deactivated_rule),
    Rule("backoff", lambda p: p.has_record, _backoff_rule),
    Rule("gate", lambda p: p.gated, _gate_rule),
    Rule("anti-flapping", lambda p: p.has_record, _anti_flapping_rule),
    Rule("block-admission", lambda p: p.blockers, _block_admission_rule),
    Rule("strict-fifo", lambda p: p.strict_queue, _strict_fifo_rule),
    Rule("claim", lambda p: p.claims, _claim_rule),
)
"""The rules in the order they apply (module docstring): ``admit`` runs them, ``may_hold`` asks
their needs, so a rule added here is in both."""

RULES = tuple(rule.name for rule in CHAIN)
"""The rule names, in the order they apply (metric label values)."""


def may_hold(pre: Preconditions) -> bool:
    """Whether any rule of the chain could hold a pod with ``pre``; False: ``admit`` admits
    (the filter answers without building the rule chain's input)."""
    return any(rule.needs(pre) for rule in CHAIN)


def admit(
    facts: FilterInput | None = None,
    now: float = 0.0,
    policy: FilterPolicy = DEFAULT_POLICY,
) -> Admission:
    """Decide whether a pod may be placed now: the first rule of ``CHAIN`` that holds it
    answers. ``facts`` describe the pod's workload; without them (nothing known) every node
    passes."""
    if facts is None:
        return ADMIT
    for rule in CHAIN:
        verdict = rule.judge(facts, now, policy)
        if verdict is not None:
            return verdict
    return ADMIT


@dataclass(frozen=True)
class NodeSplit:
    """How a verdict splits the offered nodes: passed (None = all), and rejected with reasons."""

    passed: list[str] | None
    unresolvable: dict[str, str]


def split_nodes(admission: Admission, offered: Sequence[str]) -> NodeSplit:
    """Apply a verdict to the offered nodes.

    Rejected nodes go to ``FailedAndUnresolvableNodes`` so kube-scheduler does not try to preempt
    on the pod's behalf: no victim would make a pod in backoff or in the gate schedulable.
    """
    if admission.allowed and admission.only_nodes is None:
        if not admission.except_nodes:
            return NodeSplit(passed=None, unresolvable={})
        free = admission.except_nodes
        return NodeSplit(
            passed=[n for n in offered if n not in free],
            unresolvable={n: free[n] for n in offered if n in free},
        )
    keep = admission.only_nodes if admission.allowed else frozenset()
    assert keep is not None
    passed = [n for n in offered if n in keep]
    return NodeSplit(
        passed=passed, unresolvable={n: admission.reason for n in offered if n not in keep}
    )
