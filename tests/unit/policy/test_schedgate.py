"""Holds as scheduling gates (``policy.schedgate``, DESIGN §5.8; issue #34): which pods the
webhook gates, the patches, the ungate order, whole gangs, and the release's decision."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.scope import ScopeConfig
from app.policy.releases import release_of
from app.policy.schedgate import (
    GATE,
    GatedWorkload,
    gate_patch,
    gated,
    held_by,
    hold_by,
    incomplete,
    take_whole,
    ungate_order,
    ungate_patch,
    why_not_gate,
)
from app.policy.scope import Scope
from app.policy.wakeup import Hold
from tests.builders import pod, raw_pod
from tests.jsonpatch import PatchFailed, apply_patch

SCOPE = Scope.from_config(
    ScopeConfig.model_validate({"namespaceQueues": {"mapped": "research"}}),
    ("runway-scheduler",),
    ["protected"],
    "runway-system",
)
QUEUED = {"runway.dev/queue": "research"}


def a_pod(
    namespace: str = "team-a",
    scheduler: str | None = "runway-scheduler",
    labels: dict[str, str] | None = None,
    gates: list[str] | None = None,
    node: str | None = None,
) -> Any:
    obj = raw_pod("p", namespace=namespace, labels=QUEUED if labels is None else labels, node=node)
    if scheduler is not None:
        obj["spec"]["schedulerName"] = scheduler
    if gates is not None:
        obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return pod(obj)


@pytest.mark.parametrize(
    ("case", "the_pod", "enabled", "gate"),
    [
        ("a managed pod naming a queue", a_pod(), True, True),
        ("its namespace mapped to a queue", a_pod("mapped", labels={}), True, True),
        ("gates off for the release", a_pod(), False, False),
        ("another scheduler's pod", a_pod(scheduler="default-scheduler"), True, False),
        ("kube-system", a_pod("kube-system"), True, False),
        ("a protected namespace", a_pod("protected"), True, False),
        ("runway's own namespace", a_pod("runway-system"), True, False),
        ("no queue, namespace unmapped", a_pod(labels={}), True, False),
        ("bound at creation", a_pod(node="n1"), True, False),
        ("gated by runway already", a_pod(gates=[GATE]), True, False),
        ("another controller's gate", a_pod(gates=["example.com/other"]), True, True),
    ],
)
def test_which_pods_the_webhook_gates(case: str, the_pod: Any, enabled: bool, gate: bool) -> None:
    why = why_not_gate(SCOPE, the_pod, {}, enabled=enabled)
    assert (why == "") is gate, (case, why)


@pytest.mark.parametrize(
    ("gates", "after"),
    [
        (None, [GATE]),
        ([], [GATE]),
        (["example.com/other"], ["example.com/other", GATE]),
        (["a", "b"], ["a", "b", GATE]),
    ],
)
def test_the_gate_is_appended_to_the_gates_a_pod_has(
    gates: list[str] | None, after: list[str]
) -> None:
    obj = raw_pod("p")
    if gates is not None:
        obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    patched = apply_patch(obj, gate_patch(pod(obj)))
    assert [g["name"] for g in patched["spec"]["schedulingGates"]] == after
    assert gated(pod(patched))


@pytest.mark.parametrize(
    ("gates", "after"),
    [
        ([GATE], []),
        (["a", GATE], ["a"]),
        ([GATE, "b"], ["b"]),
        (["a", GATE, "b"], ["a", "b"]),
    ],
)
def test_ungating_removes_runways_gate_alone(gates: list[str], after: list[str]) -> None:
    obj = raw_pod("p")
    obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    patch = ungate_patch(pod(obj))
    assert patch is not None
    patched = apply_patch(obj, patch)
    assert [g["name"] for g in patched["spec"]["schedulingGates"]] == after


def test_the_ungate_patch_is_a_precondition_on_the_uid_and_the_gates_place() -> None:
    obj = raw_pod("p")
    obj["spec"]["schedulingGates"] = [{"name": "a"}, {"name": GATE}]
    patch = ungate_patch(pod(obj))
    assert patch is not None
    replaced = {**obj, "metadata": {**obj["metadata"], "uid": "another"}}
    with pytest.raises(PatchFailed):
        apply_patch(replaced, patch)
    moved = {**obj, "spec": {**obj["spec"], "schedulingGates": [{"name": GATE}]}}
    with pytest.raises(PatchFailed):
        apply_patch(moved, patch)
    assert ungate_patch(a_pod(gates=["a"])) is None
    assert ungate_patch(a_pod()) is None


def test_hold_by_names_the_gate_only_for_runways_gate() -> None:
    assert hold_by(a_pod(gates=[GATE])) == "schedulingGate"
    assert hold_by(a_pod(gates=["example.com/other"])) == "filter"
    assert hold_by(a_pod()) == "filter"


def w(
    name: str,
    place: int = 0,
    uids: int = 1,
    members: int | None = None,
    min_available: int | None = None,
    queue: str = "q",
    admitted: bool = False,
) -> GatedWorkload:
    return GatedWorkload(
        workload=f"ns/{name}",
        queue=queue,
        place=place,
        uids=tuple(f"{name}-{i}" for i in range(uids)),
        members=uids if members is None else members,
        min_available=min_available,
        admitted=admitted,
    )


@pytest.mark.parametrize(
    ("case", "workload", "waits"),
    [
        ("no gang declared", w("a", uids=2), False),
        ("every pod of the gang exists", w("a", uids=4, min_available=4), False),
        ("more pods than its minimum", w("a", uids=5, min_available=4), False),
        ("a pod of the gang missing", w("a", uids=3, min_available=4), True),
        ("some members bound, the rest gated", w("a", uids=2, members=4, min_available=4), False),
        ("an admitted gang's replacement", w("a", uids=1, min_available=4, admitted=True), False),
    ],
)
def test_a_gang_is_ungated_whole(case: str, workload: GatedWorkload, waits: bool) -> None:
    assert bool(incomplete(workload)) is waits, case
    assert (workload in ungate_order([workload])) is not waits


def test_ungate_order_is_queue_order_and_skips_incomplete_gangs() -> None:
    order = ungate_order(
        [
            w("third", place=2),
            w("head", place=0),
            w("other-queue-head", place=0, queue="p"),
            w("admitted", place=-1),
            w("gang-short", place=1, uids=2, min_available=3),
        ]
    )
    assert [x.workload for x in order] == [
        "ns/admitted",
        "ns/other-queue-head",
        "ns/head",
        "ns/third",
    ]


@pytest.mark.parametrize(
    ("sizes", "tokens", "burst", "taken"),
    [
        ([1, 1, 1], 3, 10, 3),
        ([1, 1, 1], 2, 10, 2),
        ([2, 2], 3, 10, 1),  # never half a gang
        ([3, 1], 2, 10, 0),  # in order: the second does not pass the first
        ([20], 10, 10, 1),  # larger than the bucket: when it is full
        ([20], 9, 10, 0),
        ([20, 1], 10, 10, 1),
        ([], 5, 10, 0),
    ],
)
def test_take_whole_takes_whole_workloads_in_order(
    sizes: list[int], tokens: int, burst: int, taken: int
) -> None:
    order = [w(f"w{i}", uids=n) for i, n in enumerate(sizes)]
    assert take_whole(order, tokens, burst) == taken


@given(st.lists(st.integers(1, 30), max_size=10), st.integers(0, 50), st.integers(1, 40))
def test_take_whole_never_spends_more_than_it_has_but_for_one_big_gang(
    sizes: list[int], tokens: int, burst: int
) -> None:
    order = [w(f"w{i}", uids=n) for i, n in enumerate(sizes)]
    taken = take_whole(order, tokens, burst)
    spent = sum(sizes[:taken])
    assert spent <= tokens or (taken == 1 and sizes[0] > burst and tokens >= burst)


def test_held_by_counts_gated_pods_as_held_by_the_gate() -> None:
    holds = {"a": Hold("backoff", 10.0), "b": Hold("strict-fifo", None), "c": None}
    assert held_by(holds, ["a", "c"]) == {"schedulingGate": 2, "filter": 1}


@pytest.mark.parametrize(
    ("version", "setting", "on"),
    [
        ("1.20.2", "auto", False),
        ("1.20.2", True, False),  # no such field: the API server would drop it
        ("1.26.0", "auto", False),
        ("1.27.3", True, True),  # beta: the operator says the feature is on
        ("1.29.0", "auto", False),
        ("1.30.0", "auto", True),
        ("1.34.4", "auto", True),
        ("1.37.2", "auto", True),
        ("1.37.2", False, False),
    ],
)
def test_the_release_decides_whether_holds_are_gates(
    version: str, setting: bool | str, on: bool
) -> None:
    release = release_of(version, "config")
    assert release.gates(setting) is on
    assert release.to_dict("auto", setting)["holdsAsGates"] is on
