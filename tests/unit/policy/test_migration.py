"""policy/migration: a record read from retired annotations (which the workload's tenant could
write, just before the operator imports them) only ever makes its workload less privileged than
runway's own record — field by field, for every field of ``EvictionRecord``."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.policy.migration import FIELDS, less_privileged
from app.policy.ordering import QueueOrderStrategy, queue_order_timestamp

T0 = 1_800_000_000.0
NOW = T0 + 3600
CREATED = T0 - 600
OURS = EvictionRecord(PODS_READY_TIMEOUT, T0, count=2, requeue_at=T0 + 100, message="ours")
Y2000 = 946_684_800.0


def test_every_field_has_a_rule() -> None:
    """A field added to EvictionRecord needs a decision here (and in docs/state.md)."""
    assert set(FIELDS) == {f.name for f in dataclasses.fields(EvictionRecord)}


@pytest.mark.parametrize(
    ("current", "imported", "expected"),
    [
        # nothing of runway's: the imported record, without what protects or points elsewhere
        (
            None,
            EvictionRecord(
                PREEMPTED,
                T0,
                preemptor_uid="other-pod",
                failed_pools=("a",),
                preemption_history=(T0,),
            ),
            EvictionRecord(PREEMPTED, T0),
        ),
        # the attack: eviction-time 2000-01-01 planted on a pending Job: the time is its
        # pods' creation at the earliest, so the workload orders where its creation puts it
        (
            None,
            EvictionRecord(PODS_READY_TIMEOUT, Y2000, count=1, first_eviction_time=Y2000),
            EvictionRecord(PODS_READY_TIMEOUT, CREATED, count=1, first_eviction_time=Y2000),
        ),
        # ...nor in the future (a time after now), and its clock no later than its time
        (
            None,
            EvictionRecord(PODS_READY_TIMEOUT, NOW + 99, count=1, first_eviction_time=NOW + 999),
            EvictionRecord(PODS_READY_TIMEOUT, NOW, count=1, first_eviction_time=NOW),
        ),
        # a higher count and a later requeueAt are taken
        (
            OURS,
            replace(OURS, count=5, requeue_at=T0 + 500),
            replace(OURS, count=5, requeue_at=T0 + 500),
        ),
        # a lower count or an earlier requeueAt never lowers runway's
        (OURS, replace(OURS, count=1, requeue_at=T0 + 1), None),
        # runway's time and reason stay (an import never moves its order)
        (OURS, replace(OURS, reason=PREEMPTED, time=Y2000), None),
        # an earlier backoffLimitTimeout clock is taken, a later one never
        (
            replace(OURS, first_eviction_time=T0),
            replace(OURS, first_eviction_time=T0 - 50),
            replace(OURS, first_eviction_time=T0 - 50),
        ),
        (replace(OURS, first_eviction_time=T0), replace(OURS, first_eviction_time=T0 + 50), None),
        # a deactivation is taken, with its message
        (
            OURS,
            replace(OURS, deactivated=True, message="limit"),
            replace(OURS, deactivated=True, message="limit"),
        ),
        # a workload runway deactivated is never reactivated by an import
        (replace(OURS, deactivated=True), replace(OURS, deactivated=False), None),
        # history, preemptor and pools never added to a record
        (
            OURS,
            replace(OURS, preemption_history=(T0,), preemptor_uid="p", failed_pools=("a",)),
            None,
        ),
    ],
)
def test_imports_only_make_a_workload_less_privileged(
    current: EvictionRecord | None, imported: EvictionRecord, expected: EvictionRecord | None
) -> None:
    assert less_privileged(current, imported, created=CREATED, now=NOW) == expected


def test_without_a_known_creation_the_import_is_now() -> None:
    got = less_privileged(None, EvictionRecord(PODS_READY_TIMEOUT, Y2000), created=None, now=NOW)
    assert got is not None and got.time == NOW


times = st.floats(min_value=Y2000, max_value=NOW + 10**6, allow_nan=False)
records = st.builds(
    EvictionRecord,
    reason=st.sampled_from([PREEMPTED, PODS_READY_TIMEOUT]),
    time=times,
    preemptor_uid=st.none() | st.just("p"),
    count=st.integers(0, 50),
    requeue_at=st.none() | times,
    first_eviction_time=st.none() | times,
    deactivated=st.booleans(),
    failed_pools=st.just(()) | st.just(("a",)),
    preemption_history=st.just(()) | st.just((T0,)),
)


@given(st.none() | records, records, st.floats(min_value=Y2000, max_value=NOW))
def test_no_import_makes_a_workload_more_privileged(
    current: EvictionRecord | None, imported: EvictionRecord, created: float
) -> None:
    got = less_privileged(current, imported, created=created, now=NOW)
    kept = current if got is None else got
    assert kept is not None
    for strategy in (QueueOrderStrategy(), QueueOrderStrategy(priority_preemption="Eviction")):
        # never ordered before its pods' creation (nor before runway's own order)
        order = queue_order_timestamp(created, kept, strategy)
        assert order >= min(created, NOW) or (
            current is not None and order == queue_order_timestamp(created, current, strategy)
        )
    if current is None:
        assert kept.preemption_history == () and kept.preemptor_uid is None
        assert kept.failed_pools == () and kept.time <= NOW
        return
    assert kept.count >= current.count and kept.deactivated >= current.deactivated
    assert (kept.time, kept.reason, kept.preemptor_uid) == (
        current.time,
        current.reason,
        current.preemptor_uid,
    )
    assert kept.preemption_history == current.preemption_history
    assert kept.failed_pools == current.failed_pools
    if current.requeue_at is not None:
        assert kept.requeue_at is not None and kept.requeue_at >= current.requeue_at
    if current.first_eviction_time is not None:
        assert kept.first_eviction_time is not None
        assert kept.first_eviction_time <= current.first_eviction_time
