"""waitForPodsReady timeouts (DESIGN §5, Kueue KEP-349): what is due, and when.

Two clocks, both only when ``waitForPodsReady.enable`` is true and the workload is admitted and
not PodsReady:

- **WaitForStart** — the workload has not been PodsReady since admission: ``timeout`` counts from
  its *admitted* fact (DESIGN §2: the first bind of any of its pods), so a gang only partly
  scheduled times out too (KEP-349's deadlock). KEP-349: the timeout "applies before the job has
  started" — a workload *as a whole* never PodsReady stays on this clock even when one of its
  pods was Ready and then crashed.
- **WaitForRecovery** — the workload was PodsReady (as a whole) and lost it (a pod failed):
  ``recoveryTimeout`` counts from the moment PodsReady went false; unset = no timeout, the
  workload may recover forever.

The evictor (leader only) evicts with reason ``PodsReadyTimeout`` when ``due``, and otherwise
rechecks after ``recheck_after`` seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.config.requeue import WaitForPodsReadyConfig
from app.model import Pod
from app.model.eviction import EvictionRecord
from app.model.timestamps import parse_time
from app.policy.backoff import in_backoff
from app.policy.workload import bind_time, is_ready, members, pods_ready

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
    """When PodsReady went false *after having been true*; None = never lost it, or (with
    ``was_ready``) not known yet when."""
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


def evaluate_pods_ready(
    state: PodsReadyState, now: float, config: WaitForPodsReadyConfig
) -> PodsReadyCheck:
    """Which PodsReady timeout applies to the workload at ``now``, and whether it is due (the
    earlier of its clock and, for a straggler, ``timeout`` from its bind)."""
    if not config.enable or state.admitted_at is None or state.pods_ready:
        return NOTHING
    check = _clock(state, state.admitted_at, now, config)
    if state.straggler_since is None:
        return check
    deadline = state.straggler_since + config.timeout
    if check.deadline is not None and check.deadline <= deadline:
        return check
    remaining = deadline - now
    return PodsReadyCheck(
        cause=WAIT_FOR_START,
        deadline=deadline,
        due=remaining <= 0,
        recheck_after=max(remaining, 0.0),
    )


def _clock(
    state: PodsReadyState, admitted: float, now: float, config: WaitForPodsReadyConfig
) -> PodsReadyCheck:
    """The workload's own clock: WaitForStart from ``admitted``, or WaitForRecovery."""
    if state.was_ready or state.not_ready_since is not None:
        if config.recovery_timeout is None:
            return NOTHING
        if state.not_ready_since is None:
            # Lost, but when is not known yet (the caller supplies the moment it noticed).
            return PodsReadyCheck(cause=WAIT_FOR_RECOVERY)
        cause, deadline = WAIT_FOR_RECOVERY, state.not_ready_since + config.recovery_timeout
    else:
        cause, deadline = WAIT_FOR_START, admitted + config.timeout
    remaining = deadline - now
    return PodsReadyCheck(
        cause=cause, deadline=deadline, due=remaining <= 0, recheck_after=max(remaining, 0.0)
    )


def blocks_admission(state: PodsReadyState, now: float, config: WaitForPodsReadyConfig) -> bool:
    """``blockAdmission``: this admitted workload holds back the admission of others.

    Only while it waits for its *start* (KEP-349: "until the first batch of pods ... is
    scheduled") and has not timed out — a workload never PodsReady as a whole counts, even if one
    of its pods was Ready once. A workload recovering from a failed pod does not block: without
    a recoveryTimeout it could hold the whole cluster forever.
    """
    if not (config.enable and config.block_admission):
        return False
    check = evaluate_pods_ready(state, now, config)
    return check.cause == WAIT_FOR_START and not check.due


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
    was_ready: bool = False,
    *,
    most: int | None = None,
) -> bool:
    """Whether the workload *as a whole* has been PodsReady since its admission (KEP-349: the
    recovery clock is for a job that "has already started and some pod failed"; one pod having
    been Ready is not the workload having been PodsReady).

    ``was_ready``: runway saw it PodsReady (in memory). Otherwise, derived from the pods so that
    it survives a restart: it has started, and every pod it started with that runway still sees
    (members and failed pods) shows it has been Ready; the pods it started with that are gone
    (deleted, maybe replaced) cannot tell and are presumed to have been. ``most``: the most
    members it has had (``Life.size``): no more pods than that can be gone — a size its pods
    never reached (a Job's parallelism its controller has not filled) was never PodsReady."""
    if was_ready:
        return True
    if started is None:
        return False  # fewer than its size were ever bound together
    originals = [
        p for p in pods if p.metadata.deletionTimestamp is None and not _is_replacement(p, started)
    ]
    evidenced = sum(1 for p in originals if _has_been_ready(p))
    had = size if most is None else min(size, most)
    gone = max(0, had - len(originals))
    return evidenced + gone >= size


def not_ready_since(
    pods: Sequence[Pod],
    admitted: float | None,
    started: float | None,
    was_ready: bool = False,
    *,
    size: int | None = None,
    ready: bool | None = None,
    most: int | None = None,
) -> float | None:
    """When PodsReady went false after the workload as a whole had been PodsReady
    (``was_pods_ready``); None if it never was (or is ready now: ``ready``, else the pods' own
    ``pods_ready``; or it was, but the pods do not show when it was lost). ``size`` and
    ``most``: ``was_pods_ready``'s.

    Derived from the pods so that it survives a restart, among the pods since ``admitted``: the
    earliest Ready=False transition of a pod that has been Ready (``was_ready``: runway saw the
    workload PodsReady; otherwise a transition well after the pod's own start) — failed pods
    included, they are how a Job loses a pod — else, once the workload has *started*, the
    creation of a replacement pod (the pod it replaces may be gone already).
    """
    if (pods_ready(pods) if ready is None else ready) or admitted is None:
        return None
    target = size if size is not None else len(members(pods))
    if not was_pods_ready(pods, started, target, was_ready, most=most):
        return None
    flips: list[float] = []
    for pod in pods:
        if pod.metadata.deletionTimestamp is not None:
            continue
        if pod.status.phase == "Succeeded" or is_ready(pod):
            continue
        cond = pod.condition("Ready")
        t = parse_time(cond.lastTransitionTime) if cond is not None else None
        if t is not None and t >= admitted:
            started_at = parse_time(pod.status.startTime)
            if was_ready or (started_at is not None and t - started_at >= FLIP_MARGIN_S):
                flips.append(t)
                continue
        if started is None or pod.status.phase == "Failed":
            continue
        created = parse_time(pod.metadata.creationTimestamp)
        if created is not None and _is_replacement(pod, started):
            # A replacement: its predecessor failed or was deleted; PodsReady was lost then.
            flips.append(created)
    return min(flips) if flips else None


def workload_state(admitted: float | None, record: EvictionRecord | None, now: float) -> str:
    """``deactivated``, ``backoff``, ``admitted`` or ``pending`` (``admitted``: the workload's
    admitted fact)."""
    if record is not None and record.deactivated:
        return "deactivated"
    if in_backoff(record, now):
        return "backoff"
    return "admitted" if admitted is not None else "pending"
