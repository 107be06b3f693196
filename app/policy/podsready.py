"""waitForPodsReady timeouts (DESIGN §5, Kueue KEP-349): what is due, and when.

Two clocks, both only when ``waitForPodsReady.enable`` is true and the workload is admitted and
not PodsReady:

- **WaitForStart** — the workload has not been PodsReady since admission: ``timeout`` counts from
  its *admitted* fact (DESIGN §2: the first bind of any of its pods), so a gang only partly
  scheduled times out too (KEP-349's deadlock). KEP-349: the timeout "applies before the job has
  started" — a workload *as a whole* never PodsReady stays on this clock even when one of its
  pods was Ready and then crashed.
- **WaitForRecovery** — the workload was PodsReady (as a whole) and lost it (a pod failed):
  ``recoveryTimeout`` counts from the *last* moment PodsReady went false (Kueue: the
  lastTransitionTime of its ``PodsReady=False``/``WaitForRecovery`` condition), the workload's
  ``lost`` fact (``app.policy.lifecycle``; persisted, so a restart or a new leader keeps the
  clock); unset = no timeout, the workload may recover forever.

The evictor (leader only) evicts with reason ``PodsReadyTimeout`` when ``due``, and otherwise
rechecks after ``recheck_after`` seconds. ``blockAdmission`` (``block_until``) holds other
workloads back while any admitted one is not PodsReady, recovering ones included, as Kueue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.config.requeue import WaitForPodsReadyConfig
from app.model import Pod
from app.model.eviction import EvictionRecord
from app.model.timestamps import parse_time
from app.policy.backoff import in_backoff
from app.policy.workload import bind_time, is_ready, members

Cause = Literal["", "WaitForStart", "WaitForRecovery"]
WAIT_FOR_START: Cause = "WaitForStart"
WAIT_FOR_RECOVERY: Cause = "WaitForRecovery"


@dataclass(frozen=True)
class PodsReadyState:
    """What the evaluation needs to know about one workload."""

    admitted_at: float | None
    """Its *admitted* fact (first bind); None = not admitted, nothing is counting."""
    pods_ready: bool
    """Ready + succeeded pods >= minAvailable, now."""
    not_ready_since: float | None = None
    """When PodsReady last went false *after having been true* (the ``lost`` fact); None =
    never lost it, or (with ``was_ready``) not known yet when."""
    was_ready: bool = False
    """The workload as a whole has been PodsReady since its admission (implied by
    ``not_ready_since``)."""
    straggler_since: float | None = None
    """A workload that declares minAvailable: the earliest bind of a bound member never Ready
    (``straggler_since``). Each bound member must be Ready within ``timeout`` of its bind, as
    each pod of a Kueue partial admission must: pods bound after the floor was Ready do not
    outlive the timeout on the recovery clock (unset: forever) — issue #36."""


@dataclass(frozen=True)
class PodsReadyCheck:
    """The verdict: which clock runs, whether it has run out, and when to look again."""

    cause: Cause = ""
    """Empty when no timeout applies."""
    deadline: float | None = None
    """When the running clock runs out (None when none runs)."""
    due: bool = False
    """The deadline has passed: evict now with reason PodsReadyTimeout."""
    recheck_after: float = 0.0
    """Seconds until the deadline (0 when due or when nothing runs)."""


NOTHING = PodsReadyCheck()


def running_clock(
    state: PodsReadyState, config: WaitForPodsReadyConfig
) -> tuple[Cause, float | None]:
    """Which clock runs for the workload and when it runs out (Kueue's
    ``admittedNotReadyWorkload``): ``("", None)`` when none does — not enabled, not admitted,
    PodsReady, or recovering without a ``recoveryTimeout`` — and ``(WAIT_FOR_RECOVERY, None)``
    when it lost PodsReady at a moment not known yet. A straggler (``straggler_since``) runs
    ``timeout`` from its bind when that ends first (issue #36)."""
    if not config.enable or state.admitted_at is None or state.pods_ready:
        return "", None
    cause, deadline = _workload_clock(state, config)
    if state.straggler_since is not None:
        straggler = state.straggler_since + config.timeout
        if deadline is None or straggler < deadline:
            return WAIT_FOR_START, straggler
    return cause, deadline


def _workload_clock(
    state: PodsReadyState, config: WaitForPodsReadyConfig
) -> tuple[Cause, float | None]:
    """The workload's own clock: WaitForStart from its admission, or WaitForRecovery."""
    assert state.admitted_at is not None
    if state.was_ready or state.not_ready_since is not None:
        if config.recovery_timeout is None:
            return "", None
        if state.not_ready_since is None:
            return WAIT_FOR_RECOVERY, None
        return WAIT_FOR_RECOVERY, state.not_ready_since + config.recovery_timeout
    return WAIT_FOR_START, state.admitted_at + config.timeout


def evaluate_pods_ready(
    state: PodsReadyState, now: float, config: WaitForPodsReadyConfig
) -> PodsReadyCheck:
    """Which PodsReady timeout applies to the workload at ``now``, and whether it is due."""
    cause, deadline = running_clock(state, config)
    if not cause:
        return NOTHING
    if deadline is None:
        # Lost, but when is not known yet (the caller supplies the moment it noticed).
        return PodsReadyCheck(cause=cause)
    remaining = deadline - now
    return PodsReadyCheck(
        cause=cause, deadline=deadline, due=remaining <= 0, recheck_after=max(remaining, 0.0)
    )


def block_until(state: PodsReadyState, config: WaitForPodsReadyConfig) -> float | None:
    """``blockAdmission``: until when this workload holds back the admission of others (None:
    it does not; ``math.inf``: until it is PodsReady, no clock ends it).

    As Kueue (``podsReadyForAllAdmittedWorkloads``: every admitted workload whose ``PodsReady``
    is not True blocks): a workload waiting for its start, and one recovering from a lost pod —
    without a ``recoveryTimeout``, until it recovers. Past its deadline it no longer blocks: it
    is being evicted (and, should no leader evict it, it does not hold the cluster forever)."""
    if not (config.enable and config.block_admission):
        return None
    if state.admitted_at is None or state.pods_ready:
        return None
    _, deadline = running_clock(state, config)
    return math.inf if deadline is None else deadline


def blocks_admission(state: PodsReadyState, now: float, config: WaitForPodsReadyConfig) -> bool:
    """Whether this admitted workload holds back the admission of others at ``now``
    (``block_until``)."""
    until = block_until(state, config)
    return until is not None and until > now


def timeout_message(workload: str, check: PodsReadyCheck, config: WaitForPodsReadyConfig) -> str:
    """The eviction message for a due check (on the DisruptionTarget condition and the record)."""
    if check.cause == WAIT_FOR_RECOVERY:
        return (
            f"workload {workload} did not recover PodsReady within waitForPodsReady."
            f"recoveryTimeout ({config.recovery_timeout:.0f}s)"
        )
    return (
        f"workload {workload} did not reach PodsReady within waitForPodsReady.timeout "
        f"({config.timeout:.0f}s) of its admission"
    )


# --- the pods' own evidence of a workload's readiness (derived, so it survives a restart) -----

FLIP_MARGIN_S = 2.0
"""A pod whose Ready=False transition is this much later than its start has been Ready before
(the kubelet writes the first Ready=False when it starts the pod)."""


def _has_been_ready(pod: Pod) -> bool:
    """Whether ``pod`` shows it has been Ready: Ready now, Succeeded, or a Ready=False transition
    well after its own start (the kubelet writes the first Ready=False when it starts the pod)."""
    if pod.status.phase == "Succeeded" or is_ready(pod):
        return True
    cond = pod.condition("Ready")
    t = parse_time(cond.lastTransitionTime) if cond is not None else None
    started_at = parse_time(pod.status.startTime)
    return t is not None and started_at is not None and t - started_at >= FLIP_MARGIN_S


def straggler_since(pods: Sequence[Pod]) -> float | None:
    """The earliest bind of a bound member that has never been Ready (None: none)."""
    binds = [
        t
        for p in members(pods)
        if p.spec.nodeName and not _has_been_ready(p) and (t := bind_time(p)) is not None
    ]
    return min(binds, default=None)


def _is_replacement(pod: Pod, started: float) -> bool:
    """Created (and bound, if at all) after the workload started: it stands for a pod lost."""
    created = parse_time(pod.metadata.creationTimestamp)
    bound = bind_time(pod)
    return created is not None and created > started and (bound is None or bound > started)


def was_pods_ready(
    pods: Sequence[Pod],
    started: float | None,
    size: int,
    *,
    most: int | None = None,
) -> bool:
    """Whether the workload *as a whole* has been PodsReady since its admission (KEP-349: the
    recovery clock is for a job that "has already started and some pod failed"; one pod having
    been Ready is not the workload having been PodsReady).

    For a workload runway never saw PodsReady (its ``ready`` fact unknown: it happened while no
    runway was watching), derived from the pods: it has started, and every pod it started with
    that runway still sees (members and failed pods) shows it has been Ready; the pods it
    started with that are gone (deleted, maybe replaced) cannot tell and are presumed to have
    been. ``most``: the most
    members it has had (``Life.size``): no more pods than that can be gone — a size its pods
    never reached (a Job's parallelism its controller has not filled) was never PodsReady."""
    if started is None:
        return False  # fewer than its size were ever bound together
    originals = [
        p for p in pods if p.metadata.deletionTimestamp is None and not _is_replacement(p, started)
    ]
    evidenced = sum(1 for p in originals if _has_been_ready(p))
    had = size if most is None else min(size, most)
    gone = max(0, had - len(originals))
    return evidenced + gone >= size


def loss_time(pods: Sequence[Pod], since: float) -> float | None:
    """When the workload lost PodsReady after ``since`` (the last moment it is known to have
    been PodsReady: its ``ready`` or ``recovered`` fact), as its pods show it; None when they do
    not (a pod deleted, its replacement not created yet: the caller takes the moment it noticed).

    The earliest, among the pods not ready now and not being deleted (members, and the Failed
    pods a Job keeps: they are how it loses a pod), of a Ready=False transition after
    ``since`` (strictly: times have second precision, and a transition in the very second the
    workload recovered may be the loss it recovered from — then the moment runway noticed
    dates it) that shows the pod had been Ready (well after its own start: the kubelet writes
    the first Ready=False when it starts a pod) and of a creation after ``since`` (a
    replacement: the pod it stands for was lost by then, and may be gone). A pod that was
    already not ready at ``since`` — one that failed before the workload recovered — is not the
    loss: Kueue's clock is the *last* transition of PodsReady to false.
    """
    found: float | None = None
    for pod in pods:
        if pod.metadata.deletionTimestamp is not None:
            continue
        if pod.status.phase == "Succeeded" or is_ready(pod):
            continue
        cond = pod.condition("Ready")
        t = parse_time(cond.lastTransitionTime) if cond is not None else None
        if t is not None and t > since and _has_been_ready(pod):
            found = t if found is None else min(found, t)
            continue
        if pod.status.phase == "Failed":
            continue
        if _is_replacement(pod, since):
            created = parse_time(pod.metadata.creationTimestamp)
            if created is not None:
                found = created if found is None else min(found, created)
    return found


def missed_loss(pods: Sequence[Pod], since: float) -> float | None:
    """When the workload lost PodsReady after ``since`` and got it back with nobody looking (it
    is PodsReady now): ``loss_time``'s evidence, else the creation of a pod created after
    ``since`` — a replacement, Ready now, which stands for a pod lost by then (a pod failing
    within ``FLIP_MARGIN_S`` of its start does not show it had been Ready, its replacement
    does). None: nothing shows a loss."""
    found = loss_time(pods, since)
    for pod in pods:
        if pod.metadata.deletionTimestamp is None and _is_replacement(pod, since):
            created = parse_time(pod.metadata.creationTimestamp)
            if created is not None and (found is None or created < found):
                found = created
    return found


def workload_state(admitted: float | None, record: EvictionRecord | None, now: float) -> str:
    """``deactivated``, ``backoff``, ``admitted`` or ``pending`` (``admitted``: the workload's
    admitted fact)."""
    if record is not None and record.deactivated:
        return "deactivated"
    if in_backoff(record, now):
        return "backoff"
    return "admitted" if admitted is not None else "pending"
