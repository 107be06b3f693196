"""Kueue's requeue backoff and retry limits, and the next state of an eviction record (DESIGN §5).

Pure: ``now`` and the jitter source are passed in. The n-th requeue after a PodsReadyTimeout
eviction (``n = count + 1``) waits::

    wait = min(base * 2^(n-1), max) * (1 + 1e-4 * U[0, 1))      # max 0 = no cap

and the record's ``requeueAt`` becomes ``now + wait`` unless it is already later (it is never
moved earlier). When ``count + 1 > backoffLimitCount``, or the first PodsReadyTimeout eviction is
older than ``backoffLimitTimeout``, the workload is deactivated instead — evicted with reason
``Deactivated`` (underlying cause ``RequeuingLimitExceeded``, in the message), as Kueue evicts a
workload it deactivates — and its count and requeueAt stay as they were. Reactivated, it is then
ordered by its creation, not by that eviction (``app.policy.ordering``), as in Kueue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from app.config.requeue import RequeuingStrategyConfig
from app.model.eviction import (
    DEACTIVATED,
    DEACTIVATION_REASON,
    PODS_READY_TIMEOUT,
    EvictionReason,
    EvictionRecord,
)

JitterSource = Callable[[], float]
"""Returns a number in [0, 1): the ``U`` of the jitter. Injected: policy draws no random numbers;
the callers pass ``random.random`` (``no_jitter``, the default here, keeps waits deterministic)."""

JITTER_FACTOR = 1e-4
"""Kueue's requeue jitter: the wait grows by up to 0.01%."""

NO_CAP_SECONDS = float((2**63 - 1) // 2) / 1e9
"""The wait used when uncapped: Kueue turns cap 0 into MaxInt64/2 nanoseconds (~146 years)."""


def no_jitter() -> float:
    """A jitter source that always returns 0 (deterministic waits)."""
    return 0.0


def exponential_wait(
    n: int, base: float, cap: float, jitter: JitterSource = no_jitter, factor: float = 2.0
) -> float:
    """Seconds to wait before the n-th retry: ``min(base * factor^(n-1), cap) * (1 + 1e-4*U)``.

    ``n <= 0`` waits 0 (nothing to back off from). ``cap <= 0`` means no cap.
    """
    if n <= 0 or base <= 0:
        return 0.0
    limit = cap if cap > 0 else NO_CAP_SECONDS
    wait = float(base)
    # Multiply step by step so a huge n saturates at the cap instead of overflowing.
    for _ in range(n - 1):
        wait *= factor
        if wait >= limit:
            break
    wait = min(wait, limit)
    u = min(max(jitter(), 0.0), 1.0)
    return wait * (1.0 + JITTER_FACTOR * u)


RECORD_RETRY_BASE_S = 1.0
RECORD_RETRY_MAX_S = 300.0
"""A workload whose WorkloadRecord cannot be written (refused by the API server, its namespace's
quota used up, the API server away) is written again no sooner than 1 s, then 2 s, 4 s ... up to
5 min after each consecutive failure: meanwhile its state is kept in memory only, and no write
is attempted however often its pods change (no retry storm: issue #36)."""


def record_retry_wait(failures: int) -> float:
    """Seconds before a record is written again after its ``failures``-th consecutive failure."""
    return exponential_wait(failures, RECORD_RETRY_BASE_S, RECORD_RETRY_MAX_S)


def backoff_wait(count: int, base: float, cap: float, jitter: JitterSource = no_jitter) -> float:
    """The wait of the next requeue of a workload already requeued ``count`` times."""
    return exponential_wait(max(count, 0) + 1, base, cap, jitter)


def count_limit_exceeded(count: int, limit: int | None) -> bool:
    """True when one more requeue would exceed ``backoffLimitCount`` (None = no limit)."""
    return limit is not None and count + 1 > limit


def time_limit_exceeded(first_eviction_time: float | None, now: float, limit: float | None) -> bool:
    """True when the first PodsReadyTimeout eviction is older than ``backoffLimitTimeout``."""
    return (
        limit is not None and first_eviction_time is not None and now - first_eviction_time > limit
    )


@dataclass(frozen=True)
class RequeueState:
    """Kueue's ``workload.status.requeueState``: count and requeueAt, either may be unset."""

    count: int | None = None
    requeue_at: float | None = None


def set_requeue_state(
    state: RequeueState | None, wait_until: float, increment: bool
) -> tuple[RequeueState, bool]:
    """Kueue's ``SetRequeueState``: requeueAt only ever moves later; optionally count + 1.

    Returns the new state and whether it changed.
    """
    current = state or RequeueState()
    requeue_at = current.requeue_at
    if requeue_at is None or wait_until > requeue_at:
        requeue_at = wait_until
    count = (current.count or 0) + 1 if increment else current.count
    new = RequeueState(count=count, requeue_at=requeue_at)
    return new, new != current or state is None


def limit_message(count: int, first: float | None, now: float, cfg: RequeuingStrategyConfig) -> str:
    """Why a workload is deactivated, for the record's message and the filter's reason."""
    if count_limit_exceeded(count, cfg.backoff_limit_count):
        return (
            f"{DEACTIVATION_REASON}: exceeding the maximum number of re-queuing retries "
            f"(backoffLimitCount {cfg.backoff_limit_count})"
        )
    since = 0.0 if first is None else now - first
    return (
        f"{DEACTIVATION_REASON}: still not PodsReady {since:.0f}s after the first "
        f"PodsReadyTimeout eviction (backoffLimitTimeout {cfg.backoff_limit_timeout:.0f}s)"
    )


def next_eviction_state(
    record: EvictionRecord | None,
    reason: EvictionReason,
    now: float,
    config: RequeuingStrategyConfig,
    jitter: JitterSource = no_jitter,
    *,
    preemptor_uid: str | None = None,
    message: str | None = None,
    failed_pools: Sequence[str] = (),
) -> EvictionRecord:
    """The record to persist when the workload is evicted now for ``reason``.

    - ``PodsReadyTimeout``: count + 1 and requeueAt = now + backoff (never earlier than before);
      or, when a limit is exceeded, ``deactivated`` with reason ``Deactivated`` (Kueue's
      eviction of a deactivated workload) and count and requeueAt unchanged.
    - ``Preempted``: no backoff (Kueue backs off readiness failures only); count, requeueAt and
      the readiness history are kept, the preemptor is recorded.

    The preemption history (``app.policy.budget``) is kept as it was: the caller appends to it.
    """
    prev = record
    count = prev.count if prev else 0
    requeue_at = prev.requeue_at if prev else None
    first = prev.first_eviction_time if prev else None
    pools = prev.failed_pools if prev else ()
    history = prev.preemption_history if prev else ()
    if reason != PODS_READY_TIMEOUT:
        return EvictionRecord(
            reason=reason,
            time=now,
            preemptor_uid=preemptor_uid,
            count=count,
            requeue_at=requeue_at,
            first_eviction_time=first,
            deactivated=prev.deactivated if prev else False,
            message=message,
            failed_pools=pools,
            preemption_history=history,
        )
    first = now if first is None else first
    pools = tuple(sorted(set(failed_pools))) if failed_pools else pools
    if count_limit_exceeded(count, config.backoff_limit_count) or time_limit_exceeded(
        first, now, config.backoff_limit_timeout
    ):
        return EvictionRecord(
            reason=DEACTIVATED,
            time=now,
            count=count,
            requeue_at=requeue_at,
            first_eviction_time=first,
            deactivated=True,
            message=limit_message(count, first, now, config),
            failed_pools=pools,
            preemption_history=history,
        )
    wait = backoff_wait(count, config.backoff_base_seconds, config.backoff_max_seconds, jitter)
    state, _ = set_requeue_state(RequeueState(count, requeue_at), now + wait, increment=True)
    return EvictionRecord(
        reason=reason,
        time=now,
        count=state.count or 0,
        requeue_at=state.requeue_at,
        first_eviction_time=first,
        deactivated=False,
        message=message,
        failed_pools=pools,
        preemption_history=history,
    )


def reactivate(record: EvictionRecord) -> EvictionRecord:
    """The record after ``POST /v1/workloads/NS/NAME:activate``: count, requeueAt and the
    backoffLimitTimeout clock reset, no longer deactivated (the eviction history stays: a
    workload deactivated by a requeue limit keeps its reason ``Deactivated`` and is ordered by
    its creation, as Kueue orders it after ``spec.active`` goes back to true)."""
    return replace(
        record, count=0, requeue_at=None, first_eviction_time=None, deactivated=False, message=None
    )


def in_backoff(record: EvictionRecord | None, now: float) -> bool:
    """True while ``now < requeueAt``."""
    return record is not None and record.requeue_at is not None and now < record.requeue_at


def held_by_record(record: EvictionRecord | None, now: float) -> bool:
    """Deactivated, or in backoff: the record alone keeps the workload from being admitted."""
    return record is not None and (record.deactivated or in_backoff(record, now))


@dataclass(frozen=True)
class ScheduleRow:
    """One requeue in :func:`requeue_schedule`."""

    attempt: int
    """The n-th PodsReadyTimeout eviction."""
    backoff_seconds: float
    """Backoff before the workload may be admitted again (0 when deactivated)."""
    elapsed_seconds: float
    """Seconds since the first admission until it is requeued (or deactivated)."""
    deactivated: bool


def requeue_schedule(
    timeout: float,
    config: RequeuingStrategyConfig,
    attempts: int,
    jitter: JitterSource = no_jitter,
) -> list[ScheduleRow]:
    """The seed's table: a workload that never gets ready, evicted after ``timeout`` every time.

    Each attempt: admitted (at once, when its backoff ends), evicted ``timeout`` later, then backed
    off — the same :func:`next_eviction_state` the evictor uses. Stops at deactivation or after
    ``attempts`` rows.
    """
    rows: list[ScheduleRow] = []
    record: EvictionRecord | None = None
    admitted_at = 0.0
    for attempt in range(1, attempts + 1):
        evicted_at = admitted_at + timeout
        record = next_eviction_state(record, PODS_READY_TIMEOUT, evicted_at, config, jitter)
        if record.deactivated:
            rows.append(ScheduleRow(attempt, 0.0, evicted_at, True))
            break
        requeue_at = record.requeue_at if record.requeue_at is not None else evicted_at
        rows.append(ScheduleRow(attempt, requeue_at - evicted_at, requeue_at, False))
        admitted_at = requeue_at
    return rows


def default_schedule_attempts(config: RequeuingStrategyConfig) -> int:
    """Rows :func:`requeue_schedule` prints by default: until deactivation, else 10."""
    if config.backoff_limit_count is not None:
        return config.backoff_limit_count + 1
    # A time limit always ends the table: every attempt adds at least the PodsReady timeout.
    return 1000 if config.backoff_limit_timeout is not None else 10
