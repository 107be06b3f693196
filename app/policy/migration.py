"""Importing what earlier versions kept in annotations (docs/state.md, "Migration"): pure.

Before the WorkloadRecord, runway kept a workload's eviction record in ``runway.dev/eviction-*``
annotations on its owner or its pods, where the workload's own tenant could write it. Imported
once, explicitly (``python -m app migrate-annotations``), such a record may only make the
workload *less* privileged than what runway holds: a later requeueAt, a higher count, a
deactivation. Nothing that protects a workload is taken from it: no preemption history (the
budget's protection), no life facts (min-runtime's start), no gate (a preemption in flight is
dropped, never resumed).
"""

from __future__ import annotations

from dataclasses import replace

from app.model.eviction import EvictionRecord


def less_privileged(
    current: EvictionRecord | None, imported: EvictionRecord
) -> EvictionRecord | None:
    """The record to keep when ``imported`` (read from retired annotations) meets ``current``
    (runway's WorkloadRecord, None when it has none); None = keep ``current`` unchanged."""
    stripped = replace(imported, preemption_history=())
    if current is None:
        return stripped
    requeue = max(
        (t for t in (current.requeue_at, imported.requeue_at) if t is not None), default=None
    )
    merged = replace(
        current,
        count=max(current.count, imported.count),
        requeue_at=requeue,
        deactivated=current.deactivated or imported.deactivated,
        message=current.message
        if current.deactivated or not imported.deactivated
        else imported.message,
    )
    return None if merged == current else merged
