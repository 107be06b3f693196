"""The WorkloadRecord wire shape: what runway writes reads back the same; what it reads from the
API server never raises (anyone with RBAC on records may write garbage); the conditions a person
reads say what the state says."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.model.eviction import EvictionRecord
from app.model.gate import GateEntry, PodRef
from app.model.lifecycle import Life
from app.model.record import (
    RecordState,
    WorkloadRecordObject,
    conditions,
    record_name,
    state_of,
    status_of,
)
from app.model.timestamps import format_time

T0 = 1_700_000_000.0


def read(status: dict[str, Any], *, active: bool = True) -> RecordState:
    """What runway reads back from an object with ``status`` (as the API server returns it)."""
    raw = {
        "metadata": {"name": "job.a", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "spec": {"workload": {"name": "a", "source": "owner:Job"}, "active": active},
        "status": status,
    }
    return state_of(msgspec.convert(raw, WorkloadRecordObject))


FULL = RecordState(
    queue="team-a",
    life=Life(T0, T0 + 1, T0 + 2, 4, T0 + 30, lost=T0 + 70, recovered=T0 + 50),
    eviction=EvictionRecord(
        reason="PodsReadyTimeout",
        time=T0 + 40,
        count=2,
        requeue_at=T0 + 100,
        first_eviction_time=T0 + 10,
        message="not ready in 30s",
        failed_pools=("pool-a",),
        preemption_history=(T0 + 5,),
    ),
    preemptions=(
        GateEntry(
            preemptor=PodRef("u-p", "ns", "p"),
            node="n1",
            victims=(PodRef("u-v", "other", "v"),),
            since=T0 + 50.25,
            deadline=T0 + 80.5,
            rule="preempt",
            priority=100,
        ),
    ),
    protected_until=T0 + 62,
)


def test_what_runway_writes_reads_back_the_same() -> None:
    back = read(status_of(FULL, T0 + 60))
    assert back == FULL
    assert back.version == "7" and back.uid == "u"


@pytest.mark.parametrize(
    "status",
    [
        {"life": {"created": "yesterday", "size": -3, "ready": 12}},
        {"eviction": {"reason": "Whatever", "time": "2024-01-01T00:00:00Z"}},
        {"eviction": {"reason": "Preempted", "count": "many"}},
        {"protection": {"preemptUntil": "99999-01-01T00:00:00Z"}},
        {"preemptions": [{"preemptorUID": "", "node": "n1"}, "garbage"]},
        {"preemptions": [{"preemptorUID": "x", "preemptor": "p", "node": "n", "deadline": 1e300}]},
    ],
)
def test_garbage_reads_as_absent_never_raises(status: dict[str, Any]) -> None:
    # msgspec.convert may refuse the whole object (the store then skips it and counts it); what
    # it accepts never raises in state_of and never yields an unbounded value.
    try:
        state = read(status)
    except msgspec.ValidationError:
        return
    assert state.eviction is None or state.eviction.reason in ("Preempted", "PodsReadyTimeout")
    assert all(e.deadline < 2.0**37 for e in state.preemptions)


def by_type(state: RecordState, now: float) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions(state, now)}


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        # pending: neither admitted nor started, no PodsReady condition yet
        (
            RecordState(life=Life(T0)),
            {
                "Admitted": ("False", "Pending"),
                "Started": ("False", "NotStarted"),
                "Deactivated": ("False", "Active"),
            },
        ),
        # admitted, waiting for its pods
        (
            RecordState(life=Life(T0, T0 + 1, T0 + 2, 2)),
            {
                "Admitted": ("True", "Bound"),
                "Started": ("True", "MinAvailableBound"),
                "PodsReady": ("False", "WaitForStart"),
                "Deactivated": ("False", "Active"),
            },
        ),
        # reached PodsReady
        (
            RecordState(life=Life(T0, T0 + 1, T0 + 2, 2, T0 + 9)),
            {
                "Admitted": ("True", "Bound"),
                "Started": ("True", "MinAvailableBound"),
                "PodsReady": ("True", "Started"),
                "Deactivated": ("False", "Active"),
            },
        ),
        # lost PodsReady after reaching it (Kueue: False, WaitForRecovery)
        (
            RecordState(life=Life(T0, T0 + 1, T0 + 2, 2, T0 + 9, lost=T0 + 30)),
            {
                "Admitted": ("True", "Bound"),
                "Started": ("True", "MinAvailableBound"),
                "PodsReady": ("False", "WaitForRecovery"),
                "Deactivated": ("False", "Active"),
            },
        ),
        # reached it again (Kueue: True, Recovered)
        (
            RecordState(life=Life(T0, T0 + 1, T0 + 2, 2, T0 + 9, recovered=T0 + 40)),
            {
                "Admitted": ("True", "Bound"),
                "Started": ("True", "MinAvailableBound"),
                "PodsReady": ("True", "Recovered"),
                "Deactivated": ("False", "Active"),
            },
        ),
        # evicted and backing off
        (
            RecordState(
                life=Life(T0),
                eviction=EvictionRecord("PodsReadyTimeout", T0 + 40, count=1, requeue_at=T0 + 99),
            ),
            {
                "Admitted": ("False", "Pending"),
                "Started": ("False", "NotStarted"),
                "Evicted": ("True", "PodsReadyTimeout"),
                "BackingOff": ("True", "Backoff"),
                "Deactivated": ("False", "Active"),
            },
        ),
        # deactivated by hand
        (
            RecordState(active=False, life=Life(T0)),
            {
                "Admitted": ("False", "Pending"),
                "Started": ("False", "NotStarted"),
                "Evicted": ("True", "Deactivated"),
                "Deactivated": ("True", "Inactive"),
            },
        ),
    ],
)
def test_conditions(state: RecordState, expected: dict[str, tuple[str, str]]) -> None:
    assert by_type(state, T0 + 60) == expected


def test_the_pods_ready_condition_says_since_when() -> None:
    (ready,) = [
        c
        for c in conditions(RecordState(life=Life(T0, T0 + 1, T0 + 2, 2, T0 + 9)), T0 + 60)
        if c["type"] == "PodsReady"
    ]
    assert ready["lastTransitionTime"] == "2023-11-14T22:13:29Z"
    assert "(2)" in ready["message"]
    # lost: the recovery clock's start (Kueue's WaitForRecovery lastTransitionTime)
    life = Life(T0, T0 + 1, T0 + 2, 2, T0 + 9, lost=T0 + 30)
    (lost,) = [c for c in conditions(RecordState(life=life), T0 + 60) if c["type"] == "PodsReady"]
    assert (lost["status"], lost["lastTransitionTime"]) == ("False", format_time(T0 + 30))


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        ("train", "owner:Job", "job.train"),
        ("solo", "pod", "pod.solo"),
        ("grp", "pod-group", "pg.grp"),
        ("team", "label", "wl.team"),
    ],
)
def test_record_names(name: str, source: str, expected: str) -> None:
    assert record_name(name, source) == expected


def test_names_changed_to_be_valid_never_collide() -> None:
    a, b = record_name("Train", "owner:Job"), record_name("train", "owner:Job")
    assert a != b and a.startswith("job.train-")
    assert len(record_name("x" * 400, "owner:Job")) <= 253


@pytest.mark.parametrize(
    ("state", "hold_by", "held"),
    [
        (
            RecordState(
                eviction=EvictionRecord("PodsReadyTimeout", T0, count=1, requeue_at=T0 + 99)
            ),
            "schedulingGate",
            ("True", "SchedulingGate"),
        ),
        (
            RecordState(
                eviction=EvictionRecord("PodsReadyTimeout", T0, count=1, requeue_at=T0 + 99)
            ),
            "filter",
            ("True", "Filter"),
        ),
        (RecordState(active=False), "schedulingGate", ("True", "SchedulingGate")),
        (  # backoff over: nothing holds it
            RecordState(
                eviction=EvictionRecord("PodsReadyTimeout", T0, count=1, requeue_at=T0 + 1)
            ),
            "schedulingGate",
            None,
        ),
        (RecordState(active=False), "", None),  # a store that does not say (in memory)
    ],
)
def test_the_held_condition_says_whether_a_gate_or_the_filter_holds(
    state: RecordState, hold_by: str, held: tuple[str, str] | None
) -> None:
    """DESIGN §5.8: the WorkloadRecord says which hold applies to a held workload's pods."""
    found = [c for c in conditions(state, T0 + 60, hold_by) if c["type"] == "Held"]
    assert [(c["status"], c["reason"]) for c in found] == ([held] if held else [])
