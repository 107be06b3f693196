"""Holds as scheduling gates (issue #34, DESIGN §5.8): which pods runway's webhook gates, the
JSON patches that add and remove runway's gate, and the order the leader removes gates in.

A pod with a scheduling gate (``spec.schedulingGates``, GA in 1.30) never enters a scheduling
cycle: kube-scheduler keeps it out of its queues, Cluster Autoscaler and Karpenter do not count
it as demand, and ``kubectl get pods`` says ``SchedulingGated``. Removing the last gate puts the
pod in the active queue at once. Kueue holds plain pods this way (``kueue.x-k8s.io/admission``).

* **Gating** (the webhook, on CREATE): a pod runway will manage (``policy.scope.unmanaged`` is
  empty: a scheduler runway serves, not kube-system/protected/runway's own namespace, the
  namespace selector, a queue named or mapped) gets the gate ``runway.dev/admission`` appended to
  the gates it has. Nothing else is decided at creation: whether the workload may go is the
  leader's, on its next pass, with the facts of that moment.
* **Ungating** (the leader): a gated pod whose admission chain admits it now (the filter's rules,
  ``policy.admission.admit``, through the same ``RequeueView.hold`` the waker asks) loses the
  gate; all the free gated pods of a workload in one go, and a gang that declares
  ``runway.dev/min-available`` only once that many of its pods exist (Kueue's pod groups wait for
  the whole group); workloads in queue order (``ungate_order``). A pod runway does not manage
  (any more) loses the gate at once: runway's gate must never strand a pod.
* **A pass admits in order** (``ungate_pass``): removing a workload's gates admits it, so the
  pass judges each workload with what it let go before it in the same pass, and what the leader
  let go in earlier passes that has not bound yet (``admitting``). Of the chain's rules, two
  depend on other workloads' admission: ``block-admission`` (an admitted workload not PodsReady
  blocks every other admission) — a workload ungated counts as admitted and not PodsReady from
  its ungating, so under blockAdmission one workload goes per pass and the next stays gated until
  the first is PodsReady (or times out, as the filter counts it once it binds); and
  ``strict-fifo`` (the queue's head is its first pending workload) — a workload ungated stays
  pending, and its queue's head, until it binds, so the facts of the pass's start already hold
  the next one. Without this, two workloads found free together would both lose their gates,
  and the filter would then hold the second: ``Unschedulable``, scheduling cycles and autoscaler
  demand for a pod runway holds on purpose.
* **The filter stays authoritative**: a pod without the gate (created while the webhook was
  down, on a release without gates, or whose tenant removed the gate: the API allows removing
  a gate) is held by the filter as before.

Pure: pods and facts in, decisions out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app.model import Pod
from app.policy.admission import (
    DEFAULT_POLICY,
    Admission,
    Blocker,
    FilterInput,
    FilterPolicy,
    admit,
)
from app.policy.scope import Scope, unmanaged
from app.policy.wakeup import Hold

GATE = "runway.dev/admission"
"""The scheduling gate runway adds and removes (as Kueue's ``kueue.x-k8s.io/admission``)."""

WAITING_FOR_UNGATE = (
    "no runway rule holds it: the leader removes its scheduling gate runway.dev/admission on its "
    "next pass (a gang's once all its pods exist; under waitForPodsReady.blockAdmission one "
    "workload at a time, in queue order)"
)
"""Why a gated pod the rules admit still waits (the REST API's reason)."""

HoldBy = Literal["schedulingGate", "filter"]
"""What keeps a held pod off the nodes: its scheduling gate, or the filter's rejection."""


def gated(pod: Pod) -> bool:
    """Whether ``pod`` carries runway's gate."""
    return pod.has_scheduling_gate(GATE)


def hold_by(pod: Pod) -> HoldBy:
    """What holds ``pod`` while runway holds it: its gate when it has runway's, else the
    filter (the REST API's and the WorkloadRecord's ``holdBy``)."""
    return "schedulingGate" if gated(pod) else "filter"


def why_not_gate(
    scope: Scope, pod: Pod, namespace_labels: Mapping[str, str] | None, *, enabled: bool = True
) -> str:
    """Why the webhook does not gate ``pod`` at its creation (a sentence for the log and the
    metric); empty: gate it. ``enabled``: ``admission.schedulingGates`` for this release."""
    if not enabled:
        return "admission.schedulingGates is off for this release"
    if pod.spec.nodeName:
        return "it is bound at creation (spec.nodeName): no scheduler places it"
    if gated(pod):
        return "it carries runway's gate already"
    return unmanaged(scope, pod, namespace_labels)


def gate_patch(pod: Pod) -> list[dict[str, Any]]:
    """The JSONPatch that appends runway's gate to ``pod``'s gates (kept: another controller's
    gates hold the pod too, and ours is removed alone)."""
    entry = {"name": GATE}
    if pod.spec.schedulingGates:
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": entry}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [entry]}]


def ungate_patch(pod: Pod) -> list[dict[str, Any]] | None:
    """The JSONPatch that removes runway's gate from ``pod`` and nothing else (None: it has
    none). ``test`` ops make it a precondition: the same pod (UID) and the gate still at the
    index the cache saw; otherwise the API server answers 422 and the next pass reads again."""
    for index, gate in enumerate(pod.spec.schedulingGates or ()):
        if gate.name == GATE:
            path = f"/spec/schedulingGates/{index}"
            return [
                {"op": "test", "path": "/metadata/uid", "value": pod.uid},
                {"op": "test", "path": f"{path}/name", "value": GATE},
                {"op": "remove", "path": path},
            ]
    return None


@dataclass(frozen=True)
class GatedWorkload:
    """A workload with gated pods the admission chain lets go now, as the leader's pass found
    it (the caller builds it from the cache)."""

    workload: str
    """``namespace/name``."""
    queue: str
    place: int
    """Its place in its leaf queue's pending order (0: the head); admitted workloads and
    unmanaged pods come first (``-1``): nothing orders them."""
    uids: tuple[str, ...]
    """Its gated pods that are free now, in creation order."""
    members: int
    """Its live pods now (gated or not)."""
    min_available: int | None = None
    """``runway.dev/min-available`` when declared (a gang)."""
    admitted: bool = False
    """It has been admitted (its first bind): its gated pods are replacements."""
    facts: FilterInput | None = None
    """What the admission chain read for its gated pods at the pass's start (the filter's
    ``FilterInput`` of its first gated pod); None: no queue rule applies (a pod runway does not
    manage)."""


def incomplete(workload: GatedWorkload) -> str:
    """Why a gang's gates stay on although its rules admit it: fewer of its pods exist than it
    declares (released alone, the first pods would wait bound for the rest). Empty: go."""
    need = workload.min_available
    if workload.admitted or need is None or workload.members >= need:
        return ""
    return (
        f"gang {workload.workload} has {workload.members} of its {need} pods "
        "(runway.dev/min-available): its gates are removed together once all exist"
    )


def ungate_order(workloads: Iterable[GatedWorkload]) -> list[GatedWorkload]:
    """The workloads whose gates go now, in queue order (each queue's head first; queues by
    name so no queue starves another), complete gangs only."""
    ready = [w for w in workloads if not incomplete(w)]
    return sorted(ready, key=lambda w: (w.place, w.queue, w.workload))


ADMITTING_S = 10.0
"""How long a workload the leader ungated counts as admitted before any of its pods binds
(``ungate_pass``'s ``admitting``): kube-scheduler binds a pod that fits within milliseconds of
its gate's removal, and from its bind the filter's own facts count it. One that does not fit
stops blocking after this (the filter never counts a workload that has not bound)."""


@dataclass(frozen=True)
class UngatePlan:
    """What one pass decided: the workloads whose gates go, and those found free at its start
    that stay gated for what goes before them."""

    go: list[GatedWorkload]
    """In order (``ungate_order``); the rate limit takes whole workloads from the front."""
    held: dict[str, Admission] = field(default_factory=dict)
    """Workload → the chain's verdict that keeps it gated this pass (e.g. ``block-admission``:
    a workload ungated before it in this pass is not PodsReady yet)."""


def new_admission(workload: GatedWorkload) -> bool:
    """Whether removing ``workload``'s gates admits it: a workload runway manages that the
    chain does not count as admitted (not yet bound, or these pods beyond its admission)."""
    return workload.facts is not None and not workload.facts.admitted


def ungate_pass(
    workloads: Iterable[GatedWorkload],
    now: float,
    policy: FilterPolicy = DEFAULT_POLICY,
    *,
    block_admission: bool = False,
    admitting: Mapping[str, float] | None = None,
    admitting_for: float = ADMITTING_S,
) -> UngatePlan:
    """The workloads whose gates go in this pass (module docstring: a pass admits in order).

    ``workloads``: those whose gated pods the chain let go at the pass's start, with the facts
    it read (``GatedWorkload.facts``). Each is judged again, in ``ungate_order``, by the same
    chain (``policy.admission.admit``) with one change of facts: under ``block_admission``
    (``waitForPodsReady`` with ``blockAdmission``), every workload admitted before it in this
    pass, and each of ``admitting`` (workload → until when: ungated by an earlier pass, not
    bound yet), is an admitted workload not PodsReady (a ``Blocker`` that ends ``admitting_for``
    after its ungating). Nothing else a pass does changes another workload's facts: StrictFIFO's
    head moves only when it binds."""
    blockers: list[Blocker] = []
    if block_admission and admitting:
        blockers = [Blocker(name, until) for name, until in sorted(admitting.items())]
    go: list[GatedWorkload] = []
    held: dict[str, Admission] = {}
    for workload in ungate_order(workloads):
        facts = workload.facts
        if facts is not None:
            if blockers:
                facts = replace(facts, blockers=(*facts.blockers, *blockers))
            verdict = admit(facts, now, policy)
            if not verdict.allowed:
                held[workload.workload] = verdict
                continue
        go.append(workload)
        if block_admission and new_admission(workload):
            blockers.append(Blocker(workload.workload, now + admitting_for))
    return UngatePlan(go, held)


def take_whole(order: Sequence[GatedWorkload], tokens: int, burst: int) -> int:
    """How many of ``order``'s workloads to ungate with ``tokens`` write tokens: whole
    workloads only (a gang's pods go together), and a workload larger than the bucket's
    ``burst`` when the bucket is full (it could never fit otherwise)."""
    taken = spent = 0
    for workload in order:
        size = len(workload.uids)
        if spent + size <= tokens or (spent == 0 and size > burst and tokens >= burst):
            taken += 1
            spent += size
            continue
        break
    return taken


def held_by(holds: Mapping[str, Hold | None], gated_uids: Iterable[str]) -> dict[HoldBy, int]:
    """How many held pods each kind of hold holds (``runway_held_pods``): the gated ones by
    the gate (held or waiting for their gate's removal), the others by the filter."""
    gates = set(gated_uids)
    by_gate = len(gates)
    by_filter = sum(1 for uid, hold in holds.items() if hold is not None and uid not in gates)
    return {"schedulingGate": by_gate, "filter": by_filter}


__all__ = [
    "ADMITTING_S",
    "GATE",
    "WAITING_FOR_UNGATE",
    "GatedWorkload",
    "HoldBy",
    "UngatePlan",
    "gate_patch",
    "gated",
    "held_by",
    "hold_by",
    "incomplete",
    "new_admission",
    "take_whole",
    "ungate_order",
    "ungate_pass",
    "ungate_patch",
    "why_not_gate",
]
