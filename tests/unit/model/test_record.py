"""The WorkloadRecord wire shape: what runway writes reads back the same; what it reads from the
API server never raises (anyone with RBAC on records may write garbage); the conditions a person
reads say what the state says."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.eviction import EvictionRecord
from app.model.gate import GateEntry, PodRef, seal
from app.model.lifecycle import Life
from app.model.record import (
    SUBDOMAIN,
    RecordState,
    WorkloadRecordObject,
    bounded_identity,
    conditions,
    identity_matches,
    new_object,
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
            victims=(PodRef("u-v", "ns", "v"),),
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


def test_a_preemptors_record_names_no_pod_of_another_namespace() -> None:
    """Issue #36: the preemptor's namespace reads its record; a victim of another namespace is
    there only as a sealed UID (no namespace, name or UID), which runway finds again."""
    entry = FULL.preemptions[0]
    other = PodRef("u-other", "tenant-b", "precious")
    state = replace(FULL, preemptions=(replace(entry, victims=(*entry.victims, other)),))
    status = status_of(state, T0 + 60)
    (victims,) = [p["victims"] for p in status["preemptions"]]
    assert victims[0] == {"uid": "u-v", "namespace": "ns", "name": "v"}
    assert victims[1] == {"uid": seal("u-other")}
    text = json.dumps(status)
    assert "u-other" not in text and "tenant-b" not in text and "precious" not in text
    back = read(status)
    assert back.preemptions[0].victims[1] == PodRef(seal("u-other"), "", "")


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
                "Deactivated": ("True", "ByOperator"),
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


def valid_name(name: str) -> bool:
    """What the API server takes as an object name (``IsDNS1123Subdomain``)."""
    return 0 < len(name) <= 253 and SUBDOMAIN.fullmatch(name) is not None


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("a..b", "label"),  # label values may hold dots and underscores side by side
        ("a_.b", "label"),
        ("a.-b", "pod-group"),
        ("-.-", "label"),
        ("...", "label"),
        ("x" * 300, "owner:Job"),  # the API server takes any owner name on a pod
        ("train", "owner:Foo..Bar"),
        ("train", "owner:" + "K" * 400),
        ("", ""),
        ("Ünïcödé", "owner:Jöb"),
    ],
)
def test_every_identity_gets_a_name_the_api_server_accepts(name: str, source: str) -> None:
    assert valid_name(record_name(name, source)), record_name(name, source)


def test_an_owner_kind_that_reads_as_another_sources_prefix_is_told_apart() -> None:
    names = {
        record_name("x", source)
        for source in ("label", "owner:Wl", "pod", "owner:Pod", "pod-group", "owner:Pg")
    }
    assert len(names) == 6


@given(st.text(max_size=400), st.text(max_size=80))
def test_record_names_are_valid_bounded_and_deterministic(name: str, source: str) -> None:
    got = record_name(name, source)
    assert valid_name(got) and len(got) <= 211
    record_name.cache_clear()
    assert record_name(name, source) == got


@given(
    st.tuples(st.text(max_size=300), st.sampled_from(["label", "pod", "pod-group", "owner:Job"])),
    st.tuples(st.text(max_size=300), st.sampled_from(["label", "pod", "pod-group", "owner:Job"])),
)
def test_two_identities_never_share_a_name(a: tuple[str, str], b: tuple[str, str]) -> None:
    if a != b:
        assert record_name(*a) != record_name(*b)


def test_a_new_record_always_fits_the_schema() -> None:
    """The chart's CRD bounds ``spec.workload`` (253, 316): a longer identity is cut with a
    hash, so the POST is never refused for it; only owners that can name an object are kept."""
    obj = new_object(
        "ns",
        "n" * 300,
        "owner:" + "K" * 400,
        (("v1", "Job", "ok", "u1"), ("v1", "Job", "o" * 300, "u2"), ("v1", "Job", "x", "")),
    )
    workload = obj["spec"]["workload"]
    assert len(workload["name"]) == 253 and len(workload["source"]) == 316
    assert (workload["name"], workload["source"]) == bounded_identity(
        "n" * 300, "owner:" + "K" * 400
    )
    assert [r["name"] for r in obj["metadata"]["ownerReferences"]] == ["ok"]
    assert valid_name(obj["metadata"]["name"])
    assert bounded_identity("train", "owner:Job") == ("train", "owner:Job")


def test_a_record_is_its_workloads_only_when_it_names_it() -> None:
    mine = RecordState(workload=("train", "owner:Job"))
    assert identity_matches(mine, ("train", "owner:Job"))
    assert not identity_matches(mine, ("train", "owner:JOB"))
    assert identity_matches(RecordState(), ("train", "owner:JOB"))  # written by hand, no identity
    long = RecordState(workload=bounded_identity("n" * 300, "pod"))
    assert identity_matches(long, ("n" * 300, "pod"))


@pytest.mark.parametrize(
    ("status", "active", "authority"),
    [
        ({}, True, None),
        ({"deactivatedBy": "operator"}, True, None),  # active: nobody's deactivation
        ({}, False, "operator"),  # spec.active false written by someone else
        ({"eviction": {"reason": "PodsReadyTimeout", "time": "2023-11-14T22:13:20Z",
                       "deactivated": True}}, False, "runway"),  # written before deactivatedBy
        ({"deactivatedBy": "runway"}, False, "runway"),
        ({"deactivatedBy": "operator", "eviction": {"reason": "PodsReadyTimeout",
          "time": "2023-11-14T22:13:20Z", "deactivated": True}}, False, "operator"),
        ({"deactivatedBy": "tenant"}, False, "operator"),  # not runway's word: the strictest
    ],
)  # fmt: skip
def test_the_record_says_who_may_lift_its_deactivation(
    status: dict[str, Any], active: bool, authority: str | None
) -> None:
    state = read(status, active=active)
    assert state.authority == authority
    assert read(status_of(state, T0), active=active).authority == authority


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
