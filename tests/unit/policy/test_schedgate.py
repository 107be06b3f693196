"""Holds as scheduling gates (``policy.schedgate``, DESIGN §5.8; issue #34): which pods the
webhook gates, the patches, the ungate order, whole gangs, and the release's decision."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.scope import ScopeConfig
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.policy.admission import Blocker, FilterInput, admit
from app.policy.releases import release_of
from app.policy.schedgate import (
    ADMITTING_S,
    GATE,
    GatedWorkload,
    gate_patch,
    gated,
    held_by,
    hold_by,
    incomplete,
    new_admission,
    take_whole,
    ungate_order,
    ungate_pass,
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
    facts: FilterInput | None = None,
) -> GatedWorkload:
    return GatedWorkload(
        workload=f"ns/{name}",
        queue=queue,
        place=place,
        uids=tuple(f"{name}-{i}" for i in range(uids)),
        members=uids if members is None else members,
        min_available=min_available,
        admitted=admitted,
        facts=facts,
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


# --- a pass admits in order: what it ungates counts as admitted for the next ------------------

NOW = 1_000.0


def free(
    name: str,
    place: int = 0,
    *,
    queue: str = "q",
    uids: int = 1,
    min_available: int | None = None,
    admitted: bool = False,
    strict_head: str | None = None,
    blockers: tuple[Blocker, ...] = (),
    managed: bool = True,
) -> GatedWorkload:
    """A workload the chain let go at the pass's start, with the facts it read: a StrictFIFO
    queue when ``strict_head`` names its head; ``blockers`` as the filter read them."""
    facts = FilterInput(
        workload=f"ns/{name}",
        queue=queue,
        admitted=admitted,
        blockers=blockers,
        queueing_strategy="StrictFIFO" if strict_head else "BestEffortFIFO",
        queue_head=f"ns/{strict_head}" if strict_head else None,
    )
    return w(
        name,
        place=-1 if admitted or not managed else place,
        queue=queue,
        uids=uids,
        min_available=min_available,
        admitted=admitted,
        facts=facts if managed else None,
    )


@pytest.mark.parametrize(
    ("case", "workloads", "block", "admitting", "go", "held"),
    [
        (
            "blockAdmission: two free at the start, the first goes",
            [free("b", 1), free("a", 0)],
            True,
            {},
            ["a"],
            {"b": "block-admission"},
        ),
        (
            "without blockAdmission both go",
            [free("b", 1), free("a", 0)],
            False,
            {},
            ["a", "b"],
            {},
        ),
        (
            "an admitted workload's replacement pods go and block nothing",
            [free("a", 0), free("old", admitted=True)],
            True,
            {},
            ["old", "a"],
            {},
        ),
        (
            "a pod runway does not manage goes and blocks nothing",
            [free("a", 0), free("stray", managed=False)],
            True,
            {},
            ["stray", "a"],
            {},
        ),
        (
            "ungated by an earlier pass, not bound yet: still admitted",
            [free("a", 0)],
            True,
            {"ns/before": NOW + 1},
            [],
            {"a": "block-admission"},
        ),
        (
            "ungated by an earlier pass, past ADMITTING_S: no longer",
            [free("a", 0), free("b", 1)],
            True,
            {"ns/before": NOW},
            ["a"],
            {"b": "block-admission"},
        ),
        (
            "the earlier passes' admission is ignored without blockAdmission",
            [free("a", 0), free("b", 1)],
            False,
            {"ns/before": NOW + 1},
            ["a", "b"],
            {},
        ),
        (
            "a workload ungated before is not blocked by itself (more of its pods gated)",
            [free("a", 0)],
            True,
            {"ns/a": NOW + 1},
            ["a"],
            {},
        ),
        (
            "a blocker the filter read already holds every new admission",
            [free("a", 0, blockers=(Blocker("ns/running", None),)), free("old", admitted=True)],
            True,
            {},
            ["old"],
            {"a": "block-admission"},
        ),
        (
            "StrictFIFO in one queue: only the head",
            [free("a", 0, strict_head="a"), free("b", 1, strict_head="a")],
            False,
            {},
            ["a"],
            {"b": "strict-fifo"},
        ),
        (
            "StrictFIFO in two queues: each queue's head",
            [
                free("a", 0, strict_head="a"),
                free("b", 1, strict_head="a"),
                free("x", 0, queue="p", strict_head="x"),
                free("y", 1, queue="p", strict_head="x"),
            ],
            False,
            {},
            ["x", "a"],
            {"b": "strict-fifo", "y": "strict-fifo"},
        ),
        (
            "StrictFIFO in two queues under blockAdmission: one head in all",
            [free("a", 0, strict_head="a"), free("x", 0, queue="p", strict_head="x")],
            True,
            {},
            ["x"],
            {"a": "block-admission"},
        ),
        (
            "BestEffortFIFO in two queues: everything",
            [free("a", 0), free("b", 1), free("x", 0, queue="p")],
            False,
            {},
            ["x", "a", "b"],
            {},
        ),
        (
            "a gang goes whole, and blocks the next as one admission",
            [free("gang", 0, uids=3, min_available=3), free("next", 1)],
            True,
            {},
            ["gang"],
            {"next": "block-admission"},
        ),
        (
            "an incomplete gang ahead is not ungated, so it blocks nothing",
            [free("gang", 0, uids=2, min_available=3), free("next", 1)],
            True,
            {},
            ["next"],
            {},
        ),
    ],
)
def test_a_pass_judges_each_workload_with_what_it_ungated_before(
    case: str,
    workloads: list[GatedWorkload],
    block: bool,
    admitting: dict[str, float],
    go: list[str],
    held: dict[str, str],
) -> None:
    plan = ungate_pass(workloads, NOW, block_admission=block, admitting=admitting)
    assert [x.workload for x in plan.go] == [f"ns/{n}" for n in go], case
    assert {n: v.rule for n, v in plan.held.items()} == {
        f"ns/{n}": rule for n, rule in held.items()
    }, case
    gangs = [x for x in plan.go if x.min_available]
    assert all(len(x.uids) >= (x.min_available or 0) for x in gangs), "a gang goes whole"


def test_the_reason_a_workload_stays_gated_names_what_was_ungated_before_it() -> None:
    plan = ungate_pass([free("a", 0), free("b", 1)], NOW, block_admission=True)
    assert "admitted workload ns/a is not PodsReady" in plan.held["ns/b"].reason
    assert plan.held["ns/b"].until == NOW + ADMITTING_S
    later = ungate_pass([free("b", 1)], NOW, block_admission=True, admitting={"ns/a": NOW + 4})
    assert "(in 4s)" in later.held["ns/b"].reason and later.held["ns/b"].until == NOW + 4


def test_a_pass_rejudges_with_the_whole_chain() -> None:
    """The chain's own-workload rules still answer (the caller found the pods free, but the
    pass never admits what the chain would not)."""
    record = EvictionRecord(reason=PODS_READY_TIMEOUT, time=NOW - 5, count=1, requeue_at=NOW + 5)
    backing_off = free("a", 0)
    assert backing_off.facts is not None
    backing_off = replace(backing_off, facts=replace(backing_off.facts, record=record))
    plan = ungate_pass([backing_off, free("b", 1)], NOW, block_admission=True)
    assert [x.workload for x in plan.go] == ["ns/b"] and "ns/a" in plan.held


@st.composite
def pass_inputs(
    draw: st.DrawFn,
) -> tuple[list[GatedWorkload], bool, dict[str, float]]:
    queues = draw(st.lists(st.sampled_from("pqr"), min_size=1, max_size=3, unique=True))
    strict = {q: draw(st.booleans()) for q in queues}
    names = draw(st.lists(st.sampled_from("abcdefgh"), max_size=8, unique=True))
    queue_of = {n: draw(st.sampled_from(queues)) for n in names}
    heads = {q: next((n for n in names if queue_of[n] == q), None) for q in queues}
    workloads = []
    for place, name in enumerate(names):
        queue = queue_of[name]
        kind = draw(st.sampled_from(["new", "new", "new", "admitted", "unmanaged"]))
        size = draw(st.integers(1, 3))
        workloads.append(
            free(
                name,
                place,
                queue=queue,
                uids=size,
                min_available=draw(st.none() | st.integers(1, 3)),
                admitted=kind == "admitted",
                managed=kind != "unmanaged",
                strict_head=heads[queue] if strict[queue] else None,
                blockers=draw(
                    st.sampled_from([(), (Blocker("ns/other", NOW - 1),), (Blocker("ns/z", None),)])
                ),
            )
        )
    block = draw(st.booleans())
    admitting = draw(
        st.dictionaries(st.sampled_from(["ns/a", "ns/y", "ns/z"]), st.sampled_from([NOW, NOW + 3]))
    )
    return workloads, block, admitting


@given(pass_inputs())
def test_what_a_pass_ungates_is_admissible_as_a_whole_by_the_chain(
    inputs: tuple[list[GatedWorkload], bool, dict[str, float]],
) -> None:
    """After a pass, every workload it ungates is admitted by the chain with all the others it
    ungates (and the earlier passes' admissions) counted as admitted, not PodsReady; none it
    holds back would be admitted after what went before it; a StrictFIFO queue lets at most
    its head go; under blockAdmission at most one admission goes."""
    workloads, block, admitting = inputs
    plan = ungate_pass(workloads, NOW, block_admission=block, admitting=admitting)
    order = ungate_order(workloads)
    assert plan.go == [x for x in order if x in plan.go], "queue order kept"
    assert {x.workload for x in plan.go}.isdisjoint(plan.held)
    assert len(plan.go) + len(plan.held) == len(order), "each complete workload is decided"
    earlier = tuple(Blocker(n, until) for n, until in admitting.items()) if block else ()
    admissions = [x for x in plan.go if new_admission(x)]
    for x in plan.go:
        if x.facts is None:
            continue
        others = (
            tuple(Blocker(o.workload, NOW + ADMITTING_S) for o in admissions if o is not x)
            if block
            else ()
        )
        together = replace(x.facts, blockers=(*x.facts.blockers, *earlier, *others))
        assert admit(together, NOW).allowed, (x.workload, plan)
    if block:
        assert len(admissions) <= 1
    for queue in {x.queue for x in workloads}:
        strict = [
            x
            for x in admissions
            if x.queue == queue and x.facts and x.facts.queueing_strategy == "StrictFIFO"
        ]
        assert len(strict) <= 1 and all(
            x.facts and x.facts.queue_head == x.workload for x in strict
        )
    for name in plan.held:
        x = next(o for o in order if o.workload == name)
        assert x.facts is not None
        before = [o for o in admissions if order.index(o) < order.index(x)] if block else []
        alone = replace(
            x.facts,
            blockers=(
                *x.facts.blockers,
                *earlier,
                *(Blocker(o.workload, NOW + ADMITTING_S) for o in before),
            ),
        )
        assert not admit(alone, NOW).allowed, "held back only for what went before it"
