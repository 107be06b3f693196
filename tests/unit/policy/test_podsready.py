"""waitForPodsReady timeout evaluation, replaying Kueue's TestAdmittedNotReadyWorkload cases.

Mapping: Kueue's ``waitForPodsReady: null`` is runway's ``enable: false``; a non-null block is
``enable: true`` with its fields. Kueue's ``Admitted`` condition time is runway's admission (start)
time. Kueue's ``PodsReady=False`` reasons map to ``not_ready_since``: ``WaitForRecovery`` (the
workload was ready and lost it) sets it to the condition's time; ``WaitForStart`` and the legacy
``PodsReady`` reason leave it unset (never ready since admission). ``recheckAfter`` is
``recheck_after``; "eviction fires" is ``due``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.config import parse_config
from app.config.requeue import WaitForPodsReadyConfig
from app.model import Pod
from app.model.timestamps import format_time
from app.policy.podsready import (
    NOTHING,
    WAIT_FOR_RECOVERY,
    WAIT_FOR_START,
    PodsReadyState,
    block_until,
    blocks_admission,
    evaluate_pods_ready,
    straggler_since,
    timeout_message,
    was_pods_ready,
)
from tests.builders import condition, pod, raw_pod
from tests.reference import upstream_cases

NOW = 1_800_000_000.0

CASES = upstream_cases("kueue.pods_ready")


def config_from(wfpr: dict[str, Any] | None) -> WaitForPodsReadyConfig:
    if wfpr is None:
        return parse_config({}).wait_for_pods_ready
    block: dict[str, Any] = {"enable": True}
    if wfpr.get("timeout") is not None:
        block["timeout"] = f"{wfpr['timeout']}s"  # Kueue's seconds, as a file writes them
    if wfpr.get("recoveryTimeout") is not None:
        block["recoveryTimeout"] = f"{wfpr['recoveryTimeout']}s"
    return parse_config({"waitForPodsReady": block}).wait_for_pods_ready


def state_from(wl: dict[str, Any], now: float) -> PodsReadyState:
    ready = wl.get("podsReady")
    lost = None
    if ready and ready["status"] != "True" and ready["reason"] == "WaitForRecovery":
        lost = now + ready["t"]
    return PodsReadyState(
        admitted_at=now + wl["admittedAt"] if wl["admitted"] else None,
        pods_ready=bool(ready and ready["status"] == "True"),
        not_ready_since=lost,
    )


@pytest.mark.parametrize("case", CASES, ids=[c["source"]["case"] for c in CASES])
def test_kueue_timeout_eval(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    now = NOW + inp["now_s"]
    check = evaluate_pods_ready(
        state_from(inp["workload"], NOW), now, config_from(inp["waitForPodsReady"])
    )
    assert check.cause == exp["underlyingCause"]
    assert check.recheck_after == exp["recheckAfter_s"]
    assert check.due is (check.recheck_after == 0 and check.cause != "")


def test_every_kueue_feature_is_replayed_somewhere() -> None:
    # test_backoff.py: kueue.backoff.*, kueue.requeue.*; test_ordering.py: kueue.ordering.*;
    # this file: kueue.pods_ready.*. A new feature in the reference data must get a replay.
    replayed = ("kueue.backoff.", "kueue.requeue.", "kueue.ordering.", "kueue.pods_ready.")
    features = {c["feature"] for c in upstream_cases("kueue.")}
    assert features and all(f.startswith(replayed) for f in features)


ON = WaitForPodsReadyConfig(enable=True, timeout=300, recovery_timeout=120, block_admission=True)


def test_start_timeout_becomes_due() -> None:
    state = PodsReadyState(admitted_at=NOW, pods_ready=False)
    early = evaluate_pods_ready(state, NOW + 299, ON)
    assert (early.cause, early.due, early.recheck_after, early.deadline) == (
        WAIT_FOR_START,
        False,
        1,
        NOW + 300,
    )
    late = evaluate_pods_ready(state, NOW + 300, ON)
    assert late.due and late.recheck_after == 0


def test_recovery_counts_from_losing_readiness() -> None:
    state = PodsReadyState(admitted_at=NOW - 10_000, pods_ready=False, not_ready_since=NOW)
    check = evaluate_pods_ready(state, NOW + 100, ON)
    assert (check.cause, check.due, check.recheck_after) == (WAIT_FOR_RECOVERY, False, 20)
    assert evaluate_pods_ready(state, NOW + 120, ON).due


def test_lost_readiness_of_unknown_time_runs_the_recovery_clock_but_is_not_due() -> None:
    # KEP-349: recoveryTimeout "when the job has already started and some pod failed"; when the
    # pods do not show the moment, the caller supplies when it noticed: nothing is due before.
    state = PodsReadyState(admitted_at=NOW - 10_000, pods_ready=False, was_ready=True)
    check = evaluate_pods_ready(state, NOW, ON)
    assert (check.cause, check.due, check.deadline) == (WAIT_FOR_RECOVERY, False, None)
    assert blocks_admission(state, NOW, ON)  # recovering blocks admission until it recovers
    no_recovery = ON.model_copy(update={"recovery_timeout": None})
    assert evaluate_pods_ready(state, NOW, no_recovery).cause == ""


def test_ready_workload_has_nothing_due() -> None:
    state = PodsReadyState(admitted_at=NOW - 10_000, pods_ready=True, not_ready_since=NOW - 50)
    assert not evaluate_pods_ready(state, NOW, ON).cause


NO_RECOVERY = ON.model_copy(update={"recovery_timeout": None})


@pytest.mark.parametrize(
    ("name", "state", "config", "until"),
    [
        # Kueue's podsReadyForAllAdmittedWorkloads: every admitted workload whose PodsReady is
        # not True holds back the next admission (WorkloadsNotReady of its ClusterQueue)
        ("waiting for its start", PodsReadyState(NOW, False), ON, NOW + 300),
        ("PodsReady", PodsReadyState(NOW, True), ON, None),
        ("not admitted", PodsReadyState(None, False), ON, None),
        (
            "recovering from a lost pod",
            PodsReadyState(NOW - 900, False, not_ready_since=NOW),
            ON,
            NOW + 120,
        ),
        (
            "recovering, the loss not dated yet",
            PodsReadyState(NOW - 900, False, was_ready=True),
            ON,
            math.inf,
        ),
        (
            "recovering without a recoveryTimeout: until it recovers, as Kueue",
            PodsReadyState(NOW - 900, False, not_ready_since=NOW),
            NO_RECOVERY,
            math.inf,
        ),
        (
            "blockAdmission off",
            PodsReadyState(NOW, False),
            ON.model_copy(update={"block_admission": False}),
            None,
        ),
        (
            "waitForPodsReady off",
            PodsReadyState(NOW, False),
            ON.model_copy(update={"enable": False}),
            None,
        ),
    ],
)
def test_block_admission_counts_every_admitted_workload_not_pods_ready(
    name: str, state: PodsReadyState, config: WaitForPodsReadyConfig, until: float | None
) -> None:
    assert block_until(state, config) == until, name
    if until is not None:
        assert blocks_admission(state, until - 1 if until != math.inf else NOW, config)
    if until is not None and until != math.inf:
        assert not blocks_admission(state, until, config)  # timed out: being evicted


def test_messages_name_the_setting() -> None:
    start = evaluate_pods_ready(PodsReadyState(NOW, False), NOW + 400, ON)
    assert "waitForPodsReady.timeout (300s)" in timeout_message("ns/wl", start, ON)
    rec = evaluate_pods_ready(PodsReadyState(NOW, False, NOW + 1), NOW + 400, ON)
    assert "recoveryTimeout (120s)" in timeout_message("ns/wl", rec, ON)


def _bound(name: str, *, ready: bool, phase: str = "Running") -> Pod:
    t = format_time(NOW)
    conditions = [condition("PodScheduled", True, t), condition("Ready", ready, t)]
    return pod(
        raw_pod(
            name,
            created=format_time(NOW - 10),
            node="n1",
            phase=phase,
            start_time=t,
            conditions=conditions,
        )
    )


@pytest.mark.parametrize(
    ("pods", "size", "most", "was"),
    [
        # a Job of 3 whose third pod was never created (a quota): never PodsReady
        ([_bound("a", ready=True), _bound("b", ready=True)], 3, 2, False),
        # ... the same with the third pod seen and gone since (deleted): presumed Ready
        ([_bound("a", ready=True), _bound("b", ready=True)], 3, 3, True),
        # the most members unknown: every pod missing is presumed gone (and Ready)
        ([_bound("a", ready=True), _bound("b", ready=True)], 3, None, True),
        # a failed pod that never was Ready: the Job never was PodsReady
        (
            [
                _bound("a", ready=True),
                _bound("b", ready=True),
                _bound("c", ready=False, phase="Failed"),
            ],
            3,
            3,
            False,
        ),
    ],
)
def test_only_pods_the_workload_has_had_are_presumed_ready_when_gone(
    pods: list[Pod], size: int, most: int | None, was: bool
) -> None:
    assert was_pods_ready(pods, NOW, size, most=most) is was


def test_a_declared_floors_straggler_times_out_even_after_the_workload_was_ready() -> None:
    """Issue #36: ``min-available: 1`` on a gang whose first pod became Ready before the others
    bound: the 3 later never-ready pods were on the recovery clock (unset: forever). Each bound
    member must now be Ready within ``timeout`` of its bind."""
    no_recovery = WaitForPodsReadyConfig(enable=True, timeout=300, recovery_timeout=None)
    was_ready = PodsReadyState(admitted_at=0.0, pods_ready=False, was_ready=True)
    assert evaluate_pods_ready(was_ready, 10_000.0, no_recovery) == NOTHING
    stragglers = PodsReadyState(
        admitted_at=0.0, pods_ready=False, was_ready=True, straggler_since=1000.0
    )
    check = evaluate_pods_ready(stragglers, 1299.0, no_recovery)
    assert check.cause == "WaitForStart" and check.deadline == 1300.0 and not check.due
    assert evaluate_pods_ready(stragglers, 1300.0, no_recovery).due
    # the earlier clock wins: the start timeout of a workload never ready
    start = PodsReadyState(admitted_at=0.0, pods_ready=False, straggler_since=100.0)
    assert evaluate_pods_ready(start, 10.0, no_recovery).deadline == 300.0


def test_straggler_since_is_the_earliest_bind_of_a_member_never_ready() -> None:
    def bound(name: str, at: float, ready: bool | None = None, phase: str = "Running") -> Pod:
        conditions = [condition("PodScheduled", True, format_time(at))]
        if ready is not None:
            conditions.append(condition("Ready", ready, format_time(at)))
        return pod(raw_pod(name, node="n1", conditions=conditions, phase=phase))

    assert straggler_since([bound("a", 10.0, ready=True)]) is None
    assert (
        straggler_since([bound("a", 10.0, ready=True), bound("b", 20.0), bound("c", 15.0)]) == 15.0
    )
    assert straggler_since([bound("b", 20.0, phase="Failed")]) is None  # not a member
    assert straggler_since([pod(raw_pod("pending"))]) is None
