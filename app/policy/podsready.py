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

from dataclasses import dataclass
from typing import Literal

from app.config.requeue import WaitForPodsReadyConfig

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
    """Which PodsReady timeout applies to the workload at ``now``, and whether it is due."""
    if not config.enable or state.admitted_at is None or state.pods_ready:
        return NOTHING
    if state.was_ready or state.not_ready_since is not None:
        if config.recovery_timeout is None:
            return NOTHING
        if state.not_ready_since is None:
            # Lost, but when is not known yet (the caller supplies the moment it noticed).
            return PodsReadyCheck(cause=WAIT_FOR_RECOVERY)
        cause, deadline = WAIT_FOR_RECOVERY, state.not_ready_since + config.recovery_timeout
    else:
        cause, deadline = WAIT_FOR_START, state.admitted_at + config.timeout
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
