"""policy/migration: a record read from retired annotations only ever makes its workload less
privileged than runway's own record."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.policy.migration import less_privileged

T0 = 1_800_000_000.0
OURS = EvictionRecord(PODS_READY_TIMEOUT, T0, count=2, requeue_at=T0 + 100, message="ours")


@pytest.mark.parametrize(
    ("current", "imported", "expected"),
    [
        # nothing of runway's: the imported record, without its (protecting) history
        (
            None,
            EvictionRecord(PREEMPTED, T0, preemption_history=(T0,)),
            EvictionRecord(PREEMPTED, T0),
        ),
        # a higher count and a later requeueAt are taken
        (
            OURS,
            replace(OURS, count=5, requeue_at=T0 + 500),
            replace(OURS, count=5, requeue_at=T0 + 500),
        ),
        # a lower count or an earlier requeueAt never lowers runway's
        (OURS, replace(OURS, count=1, requeue_at=T0 + 1), None),
        # a deactivation is taken, with its message
        (
            OURS,
            replace(OURS, deactivated=True, message="limit"),
            replace(OURS, deactivated=True, message="limit"),
        ),
        # a workload runway deactivated is never reactivated by an import
        (replace(OURS, deactivated=True), replace(OURS, deactivated=False), None),
        # history never added to a record (it would protect the workload)
        (OURS, replace(OURS, preemption_history=(T0, T0 + 1)), None),
    ],
)
def test_imports_only_make_a_workload_less_privileged(
    current: EvictionRecord | None, imported: EvictionRecord, expected: EvictionRecord | None
) -> None:
    assert less_privileged(current, imported) == expected
