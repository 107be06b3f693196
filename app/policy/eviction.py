"""THE eviction-record updates, one per way a workload is evicted: pure, so the service
(``state/records``, ``tasks/podsready``) and the simulator (``simulator/engine``) apply the same
rules, not copies of them.

- ``preempted``: the ``Preempted`` eviction (``policy.backoff.next_eviction_state``) and one more
  entry in the preemption budget's history (``policy.budget.record_preemption``) — unless the
  record already names this preemptor as the last one (a gang's other pods: one preemption).
- ``timed_out``: the ``PodsReadyTimeout`` eviction (count, backoff, deactivation past a limit,
  the pools it failed in) — unless this admission's eviction is recorded already (a leader
  finishing a half-done eviction must not count it twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.config.requeue import RequeuingStrategyConfig
from app.model.eviction import DEACTIVATED, PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.policy.backoff import JitterSource, next_eviction_state, no_jitter
from app.policy.budget import PreemptionBudget, record_preemption


def preempted(
    current: EvictionRecord | None,
    preemptor_uid: str,
    now: float,
    config: RequeuingStrategyConfig,
    budget: PreemptionBudget,
    jitter: JitterSource = no_jitter,
    *,
    message: str | None = None,
) -> EvictionRecord:
    """The record after the workload is preempted by ``preemptor_uid`` at ``now``."""
    new = next_eviction_state(
        current, PREEMPTED, now, config, jitter, preemptor_uid=preemptor_uid, message=message
    )
    same = (
        current is not None
        and current.reason == PREEMPTED
        and current.preemptor_uid == preemptor_uid
    )
    if same:
        return new
    return replace(new, preemption_history=record_preemption(new.preemption_history, now, budget))


def timed_out(
    current: EvictionRecord | None,
    now: float,
    config: RequeuingStrategyConfig,
    jitter: JitterSource = no_jitter,
    *,
    admitted: float | None,
    message: str | None = None,
    failed_pools: Sequence[str] = (),
) -> EvictionRecord | None:
    """The record after a PodsReady timeout of the admission at ``admitted``; None when that
    admission's eviction is recorded already."""
    if (
        current is not None
        and current.reason in (PODS_READY_TIMEOUT, DEACTIVATED)
        and admitted is not None
        and current.time >= admitted
    ):
        return None
    return next_eviction_state(
        current,
        PODS_READY_TIMEOUT,
        now,
        config,
        jitter,
        message=message,
        failed_pools=failed_pools,
    )
