"""Importing what earlier versions kept in annotations (docs/state.md, "Migration"): pure.

Before the WorkloadRecord, runway kept a workload's eviction record in ``runway.dev/eviction-*``
annotations on its owner or its pods, where the workload's own tenant could write it — a tenant
may have planted one just before an operator runs the import. Imported once, explicitly
(``python -m app migrate-annotations``), such a record may only make the workload *less*
privileged than what runway holds, field by field (``FIELDS``, tested for every field of
``EvictionRecord``): nothing moves its queue order earlier than its pods' creation, shortens a
backoff, lowers a count, lifts a deactivation or protects it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from app.model.eviction import EvictionRecord

FIELDS: Final = {
    "reason": "kept only when runway holds no record: Preempted orders the workload at its "
    "creation (priorityPreemption: Creation) or at its time, PodsReadyTimeout at its time, "
    "never before its pods' creation (time)",
    "time": "clamped to [the workload's pods' creation, now]: the queue order (Eviction "
    "timestamps) never moves earlier than the pods' creation, nor into the future; runway's "
    "own time is kept when it holds a record",
    "count": "the higher of the two: a higher count only deactivates sooner",
    "requeue_at": "the later of the two: a backoff only lengthens",
    "first_eviction_time": "the earlier of the two, and never after the record's time: the "
    "backoffLimitTimeout clock only runs out sooner",
    "deactivated": "either: an import deactivates, never reactivates",
    "message": "taken with a deactivation it brings (text only)",
    "preemptor_uid": "dropped: it would place the pod it names just before this workload in "
    "its queue (a pending preemptor's anchor) and hold this workload behind it",
    "failed_pools": "dropped: where the workload prefers to run is not runway's to restrict "
    "from a tenant's word",
    "preemption_history": "dropped: a preemption budget's memory protects the workload",
}
"""What each imported field can and cannot change (docs/state.md, the migration's table)."""


def less_privileged(
    current: EvictionRecord | None,
    imported: EvictionRecord,
    *,
    created: float | None,
    now: float,
) -> EvictionRecord | None:
    """The record to keep when ``imported`` (read from retired annotations) meets ``current``
    (runway's WorkloadRecord, None when it has none), per ``FIELDS``; None = keep ``current``
    unchanged. ``created``: the earliest creation of the workload's pods now (None: unknown,
    then the import's time is ``now``)."""
    floor = min(created if created is not None else now, now)
    time = min(max(imported.time, floor), now)
    first = (
        None if imported.first_eviction_time is None else min(imported.first_eviction_time, time)
    )
    if current is None:
        return replace(
            imported,
            time=time,
            first_eviction_time=first,
            preemptor_uid=None,
            failed_pools=(),
            preemption_history=(),
        )
    requeue = max(
        (t for t in (current.requeue_at, imported.requeue_at) if t is not None), default=None
    )
    firsts = [t for t in (current.first_eviction_time, first) if t is not None]
    merged = replace(
        current,
        count=max(current.count, imported.count),
        requeue_at=requeue,
        first_eviction_time=min(firsts) if firsts else None,
        deactivated=current.deactivated or imported.deactivated,
        message=current.message
        if current.deactivated or not imported.deactivated
        else imported.message,
    )
    return None if merged == current else merged
