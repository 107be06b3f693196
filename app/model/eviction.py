"""The eviction record of a workload (DESIGN §5.1), and runway 0.1's annotations for it.

One record per workload, kept in its WorkloadRecord's ``status.eviction`` (``app.model.record``,
docs/state.md), so it survives runway restarts and pod re-creation. The asynchronous preemption
writes it (reason ``Preempted``) and so does the PodsReady evictor (reason ``PodsReadyTimeout``),
both through ``app.policy.eviction``. Times are Unix seconds here; persisted, RFC 3339 in UTC
with second precision.

Runway 0.1 kept the record in annotations on the workload's controller (or on every pod of a
bare-pod workload). They are never read as state now (``app.model.record.RETIRED_ANNOTATIONS``):
``from_annotations`` reads them once, for ``migrate-annotations`` (``app.kube.migration``, which
imports only what makes a workload less privileged: ``app.policy.migration``). The retired keys:

========================================  =====================================================
annotation                                meaning
========================================  =====================================================
``runway.dev/eviction-reason``            ``Preempted`` or ``PodsReadyTimeout`` (last eviction)
``runway.dev/eviction-time``              when the last eviction happened
``runway.dev/eviction-preemptor-uid``     UID of the preempting pod (``Preempted`` only)
``runway.dev/eviction-count``             requeues after PodsReadyTimeout since activation
                                          (Kueue's ``requeueState.count``), decimal integer
``runway.dev/eviction-requeue-at``        not admissible before this time (Kueue's
                                          ``requeueState.requeueAt``), rounded *up* to a second
``runway.dev/eviction-first-time``        first PodsReadyTimeout eviction since activation:
                                          the clock of ``backoffLimitTimeout``
``runway.dev/eviction-deactivated``       ``"true"``: never scheduled again until reactivated
``runway.dev/eviction-message``           human text (why it was evicted / deactivated)
``runway.dev/eviction-failed-pools``      comma-separated node-pool label values where the
                                          workload last failed readiness (for prioritize)
``runway.dev/preemption-history``         comma-separated times (RFC 3339, oldest first) of the
                                          workload's last preemptions, as many as its
                                          preemption budget counts (``app.policy.budget``), at
                                          most ``HISTORY_LIMIT``
========================================  =====================================================

``from_annotations`` never raises: a record needs a known reason and a parsable time, else there
is no record (a garbled record must not hold a workload back forever); any other field that does
not parse takes its default. Nothing in app/ writes these annotations any more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeGuard

from app.config.queues import HISTORY_LIMIT
from app.model.timestamps import format_time, parse_stored_time

EvictionReason = Literal["Preempted", "PodsReadyTimeout", "Deactivated"]
PREEMPTED: Final = "Preempted"
PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
DEACTIVATED: Final = "Deactivated"
"""Kueue's eviction reason of a workload deactivated (a requeue limit exceeded at a
PodsReadyTimeout, or deactivated by hand before any eviction): after reactivation it is ordered
by its creation, as Kueue orders a workload whose Evicted reason is not PodsReadyTimeout."""
REASONS: Final[tuple[EvictionReason, ...]] = ("Preempted", "PodsReadyTimeout", "Deactivated")

DEACTIVATION_REASON: Final = "RequeuingLimitExceeded"
"""Why a workload is deactivated (Kueue's reason); the record's message starts with it."""

PREFIX: Final = "runway.dev/eviction-"
REASON_KEY: Final = PREFIX + "reason"
TIME_KEY: Final = PREFIX + "time"
PREEMPTOR_UID_KEY: Final = PREFIX + "preemptor-uid"
COUNT_KEY: Final = PREFIX + "count"
REQUEUE_AT_KEY: Final = PREFIX + "requeue-at"
FIRST_TIME_KEY: Final = PREFIX + "first-time"
DEACTIVATED_KEY: Final = PREFIX + "deactivated"
MESSAGE_KEY: Final = PREFIX + "message"
FAILED_POOLS_KEY: Final = PREFIX + "failed-pools"
HISTORY_KEY: Final = "runway.dev/preemption-history"
KEYS: Final = (
    REASON_KEY,
    TIME_KEY,
    PREEMPTOR_UID_KEY,
    COUNT_KEY,
    REQUEUE_AT_KEY,
    FIRST_TIME_KEY,
    DEACTIVATED_KEY,
    MESSAGE_KEY,
    FAILED_POOLS_KEY,
    HISTORY_KEY,
)


def is_reason(value: object) -> TypeGuard[EvictionReason]:
    """True for ``Preempted``, ``PodsReadyTimeout`` and ``Deactivated``."""
    return value in REASONS


@dataclass(frozen=True)
class EvictionRecord:
    """What runway remembers about a workload's evictions (times in Unix seconds)."""

    reason: EvictionReason
    """Why it was last evicted."""
    time: float
    """When it was last evicted."""
    preemptor_uid: str | None = None
    """UID of the pod that preempted it (reason ``Preempted``)."""
    count: int = 0
    """Requeues after PodsReadyTimeout since the workload was (re)activated."""
    requeue_at: float | None = None
    """Not admissible before this time (backoff); None = no backoff."""
    first_eviction_time: float | None = None
    """First PodsReadyTimeout eviction since activation (the ``backoffLimitTimeout`` clock)."""
    deactivated: bool = False
    """Deactivated (limit exceeded): never admitted until reactivated through the REST API."""
    message: str | None = None
    """Human text: why it was evicted or deactivated."""
    failed_pools: tuple[str, ...] = ()
    """Node-pool label values where it last failed readiness (prioritize scores them 0)."""
    preemption_history: tuple[float, ...] = ()
    """When it was last preempted, oldest first (bounded by its preemption budget)."""

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None) -> EvictionRecord | None:
        """The record in ``annotations``; None when absent or unusable (never raises)."""
        if not annotations:
            return None
        reason = annotations.get(REASON_KEY)
        time = parse_stored_time(annotations.get(TIME_KEY))
        if not is_reason(reason) or time is None:
            return None
        return cls(
            reason=reason,
            time=time,
            preemptor_uid=_text(annotations.get(PREEMPTOR_UID_KEY)),
            count=_count(annotations.get(COUNT_KEY)),
            requeue_at=parse_stored_time(annotations.get(REQUEUE_AT_KEY)),
            first_eviction_time=parse_stored_time(annotations.get(FIRST_TIME_KEY)),
            deactivated=_flag(annotations.get(DEACTIVATED_KEY)),
            message=_text(annotations.get(MESSAGE_KEY)),
            failed_pools=_pools(annotations.get(FAILED_POOLS_KEY)),
            preemption_history=parse_history(annotations.get(HISTORY_KEY)) or (),
        )


def _ceil(seconds: float) -> float:
    return float(math.ceil(seconds))


MAX_COUNT_DIGITS: Final = 9
"""A longer count is not one runway wrote (and ``int()`` of 4,300+ digits raises)."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_count(value: object) -> int | None:
    """A non-negative decimal count of ASCII digits (bounded), else None. The one parser of
    runway's integer annotations (``eviction-count``, ``min-available``)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > MAX_COUNT_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def _count(value: object) -> int:
    return parse_count(value) or 0


def _flag(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "true"


def _pools(value: object) -> tuple[str, ...]:
    if not isinstance(value, str):
        return ()
    return tuple(sorted({p.strip() for p in value.split(",") if p.strip()}))


def format_history(times: tuple[float, ...]) -> str | None:
    """``runway.dev/preemption-history``'s value (None: no history, the key is removed)."""
    return ",".join(format_time(t) for t in times[-HISTORY_LIMIT:]) or None


_HISTORY_MAX_CHARS: Final = HISTORY_LIMIT * 40
"""Longer than any history runway writes: not split at all (a hostile value costs nothing)."""


def parse_history(value: object) -> tuple[float, ...] | None:
    """The preemption times in ``value``, oldest first; None when any entry is not a time
    runway could have written, or there are more than ``HISTORY_LIMIT`` (never raises)."""
    if not isinstance(value, str) or len(value) > _HISTORY_MAX_CHARS:
        return None
    parts = [p for p in value.split(",") if p.strip()]
    if len(parts) > HISTORY_LIMIT:
        return None
    times: list[float] = []
    for part in parts:
        t = parse_stored_time(part)
        if t is None:
            return None
        times.append(t)
    return tuple(sorted(times))
