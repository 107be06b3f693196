"""Kueue's requeue backoff, limits and requeue state, replayed from upstream-cases.json.

Mapping of Kueue's Workload onto runway (DESIGN §5.1, §5.3): ``status.requeueState`` is the
eviction record's ``count``/``requeue_at``; the Workload's Evicted/DeactivationTarget conditions
are the record's ``reason``/``deactivated``/``message``. Kueue's events, admission checks and
scheduling stats have no runway counterpart and are not asserted.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config import ConfigError, parse_config
from app.config.requeue import RequeuingStrategyConfig
from app.model.eviction import DEACTIVATION_REASON, EvictionRecord
from app.policy import admission
from app.policy.backoff import (
    JITTER_FACTOR,
    NO_CAP_SECONDS,
    RequeueState,
    backoff_wait,
    count_limit_exceeded,
    exponential_wait,
    in_backoff,
    next_eviction_state,
    no_jitter,
    reactivate,
    set_requeue_state,
    time_limit_exceeded,
)
from app.policy.podsready import WAIT_FOR_START, PodsReadyState, evaluate_pods_ready
from tests.reference import upstream_cases

NOW = 1_800_000_000.0
NS = 1e-9


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["source"]["case"] for c in cases]


def requeuing(**kw: Any) -> RequeuingStrategyConfig:
    return RequeuingStrategyConfig.model_validate(kw)


# --- kueue.backoff.wait_time: Kueue's generic WaitTime(iteration); runway's n is Kueue's
# iteration (n = count + 1), base = initial, cap = cap, factor 2.

WAIT_TIME = upstream_cases("kueue.backoff.wait_time")


@pytest.mark.parametrize("case", WAIT_TIME, ids=ids(WAIT_TIME))
def test_kueue_wait_time(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    assert inp["factor"] == 2 and inp["jitter"] == 0
    iterations = inp.get("iterations", [inp.get("iteration")])
    expected = exp["wait_ns"] if isinstance(exp["wait_ns"], list) else [exp["wait_ns"]]
    got = [exponential_wait(n, inp["initial_ns"] * NS, inp["cap_ns"] * NS) for n in iterations]
    assert got == pytest.approx([w * NS for w in expected])


# --- kueue.backoff.default_sequence and kueue.backoff.edge

SEQUENCE = upstream_cases("kueue.backoff.default_sequence")


@pytest.mark.parametrize("case", SEQUENCE, ids=ids(SEQUENCE))
def test_kueue_default_sequence(case: dict[str, Any]) -> None:
    inp = case["input"]
    cfg = RequeuingStrategyConfig()  # the defaults are the documented ones
    assert (cfg.backoff_base_seconds, cfg.backoff_max_seconds) == (
        inp["backoffBaseSeconds"],
        inp["backoffMaxSeconds"],
    )
    got = [
        backoff_wait(c, cfg.backoff_base_seconds, cfg.backoff_max_seconds)
        for c in inp["requeueState.count_before_eviction"]
    ]
    assert got == case["expected"]["requeueAfter_s"]


EDGE = upstream_cases("kueue.backoff.edge")


@pytest.mark.parametrize("case", EDGE, ids=ids(EDGE))
def test_kueue_backoff_edge(case: dict[str, Any]) -> None:
    inp = case["input"]
    section = {
        "backoffBaseSeconds": inp["backoffBaseSeconds"],
        "backoffMaxSeconds": inp["backoffMaxSeconds"],
    }
    data = {"waitForPodsReady": {"requeuingStrategy": section}}
    if case["source"]["case"] == "base > max":
        # runway departs from Kueue on purpose (DESIGN §9): the config is rejected.
        with pytest.raises(ConfigError) as err:
            parse_config(data, "runway.yaml")
        msg = str(err.value)
        assert "waitForPodsReady.requeuingStrategy" in msg
        assert "backoffBaseSeconds (100)" in msg and "backoffMaxSeconds (50)" in msg
        return
    cfg = parse_config(data).wait_for_pods_ready.requeuing_strategy
    count = inp["requeueState.count_before_eviction"]
    wait = backoff_wait(count, cfg.backoff_base_seconds, cfg.backoff_max_seconds)
    assert wait == case["expected"]["requeueAfter_s"]


# --- kueue.requeue.set_requeue_state (times relative to a base time)

SET_STATE = upstream_cases("kueue.requeue.set_requeue_state")


@pytest.mark.parametrize("case", SET_STATE, ids=ids(SET_STATE))
def test_kueue_set_requeue_state(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    cur = inp["current"]
    at = cur["requeueAt_rel_s"]
    state = (
        None
        if at is None and cur["count"] is None
        else RequeueState(cur["count"], None if at is None else NOW + at)
    )
    new, updated = set_requeue_state(state, NOW + inp["waitUntil_rel_s"], inp["incrementCount"])
    assert updated is exp["updated"]
    assert new.count == exp["count"]
    assert new.requeue_at == NOW + exp["requeueAt_rel_s"]


# --- kueue.requeue.on_pods_ready_timeout: the timeout fires, the record counts and backs off.
# Kueue's requeueState before the eviction maps to a prior PodsReadyTimeout record; Kueue's
# eviction message ("Exceeded the PodsReady timeout ns/wl") is runway's own wording instead.

ON_TIMEOUT = upstream_cases("kueue.requeue.on_pods_ready_timeout")


def _wait_config(cfg: dict[str, Any]) -> Any:
    rs = {
        k: cfg[k]
        for k in ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds")
        if k in cfg
    }
    return parse_config(
        {
            "waitForPodsReady": {
                "enable": True,
                "timeout": f"{cfg['timeout_s']}s",
                "requeuingStrategy": rs,
            }
        }
    ).wait_for_pods_ready


def _prior_record(state: dict[str, Any] | None) -> EvictionRecord | None:
    if state is None:
        return None
    at = state.get("requeueAt_from_now_s")
    return EvictionRecord(
        reason="PodsReadyTimeout",
        time=NOW - 600,
        count=state.get("count") or 0,
        requeue_at=None if at is None else NOW + at,
        first_eviction_time=NOW - 3600,
    )


@pytest.mark.parametrize("case", ON_TIMEOUT, ids=ids(ON_TIMEOUT))
def test_kueue_requeue_on_pods_ready_timeout(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    wait = _wait_config(inp["config"])
    wl = inp["workload"]
    check = evaluate_pods_ready(
        PodsReadyState(admitted_at=NOW - wl["admittedAt_ago_s"], pods_ready=False), NOW, wait
    )
    assert check.due
    assert check.cause == exp.get("underlyingCause", WAIT_FOR_START)
    record = next_eviction_state(
        _prior_record(wl["requeueState"]), "PodsReadyTimeout", NOW, wait.requeuing_strategy
    )
    assert record.reason == exp["evicted"]["reason"]
    assert not record.deactivated
    assert record.count == exp["requeueState"]["count"]
    assert record.requeue_at == NOW + exp["requeueState"]["requeueAt_from_now_s"]


# --- kueue.requeue.limit_exceeded: deactivation instead of another requeue.
# Kueue sets DeactivationTarget and later Evicted(Deactivated); runway keeps one record with
# reason PodsReadyTimeout and deactivated=True, and filter reports it (rule "deactivated").

LIMIT = upstream_cases("kueue.requeue.limit_exceeded")


@pytest.mark.parametrize("case", LIMIT, ids=ids(LIMIT))
def test_kueue_limit_exceeded(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    wait = _wait_config(inp["config"])
    prior = _prior_record(inp["workload"].get("requeueState"))
    record = next_eviction_state(prior, "PodsReadyTimeout", NOW, wait.requeuing_strategy)
    assert record.deactivated
    assert record.message is not None and record.message.startswith(DEACTIVATION_REASON)
    assert "exceeding the maximum number of re-queuing retries" in record.message
    if exp.get("requeueState") is not None:
        # Kueue leaves requeueState unchanged when it deactivates.
        assert record.count == exp["requeueState"]["count"]
        assert prior is not None and record.requeue_at == prior.requeue_at
    verdict = admission.admit(admission.FilterInput("ns/wl", record=record), NOW)
    assert (verdict.allowed, verdict.rule) == (False, "deactivated")
    assert (
        "deactivated" in verdict.reason and "maximum number of re-queuing retries" in verdict.reason
    )
    assert "POST /v1/workloads/ns/wl:activate" in verdict.reason
    if "requeueState" in exp and exp["requeueState"] is None:
        # Kueue clears requeueState on the deactivation; runway resets it on reactivation.
        again = reactivate(record)
        assert (again.count, again.requeue_at, again.deactivated) == (0, None, False)


def test_every_kueue_backoff_and_requeue_case_is_replayed() -> None:
    replayed = WAIT_TIME + SEQUENCE + EDGE + SET_STATE + ON_TIMEOUT + LIMIT
    expected = upstream_cases("kueue.backoff") + upstream_cases("kueue.requeue")
    assert sorted(ids(replayed)) == sorted(ids(expected))


# --- runway's own properties


@given(
    count=st.integers(min_value=0, max_value=5000),
    base=st.integers(min_value=0, max_value=10_000),
    cap=st.integers(min_value=0, max_value=100_000),
    u=st.floats(min_value=0.0, max_value=0.999999),
)
def test_wait_is_bounded_and_jitter_is_tiny(count: int, base: int, cap: int, u: float) -> None:
    exact = backoff_wait(count, base, cap)
    jittered = backoff_wait(count, base, cap, lambda: u)
    limit = cap if cap > 0 else NO_CAP_SECONDS
    assert 0 <= exact <= limit
    assert exact <= jittered < exact * (1 + JITTER_FACTOR) or exact == jittered == 0


def test_jitter_source_out_of_range_is_clamped() -> None:
    assert backoff_wait(0, 60, 3600, lambda: 5.0) == pytest.approx(60 * (1 + JITTER_FACTOR))
    assert backoff_wait(0, 60, 3600, lambda: -1.0) == 60


def test_uncapped_huge_count_saturates_instead_of_overflowing() -> None:
    assert backoff_wait(10_000, 60, 0) == NO_CAP_SECONDS


def test_limits() -> None:
    assert not count_limit_exceeded(5, None)
    assert not count_limit_exceeded(2, 3)
    assert count_limit_exceeded(3, 3)
    assert not time_limit_exceeded(None, NOW, 60)
    assert not time_limit_exceeded(NOW - 60, NOW, 60)
    assert time_limit_exceeded(NOW - 61, NOW, 60)
    assert not time_limit_exceeded(NOW - 1e9, NOW, None)


def test_first_eviction_starts_the_clocks() -> None:
    record = next_eviction_state(None, "PodsReadyTimeout", NOW, requeuing(), no_jitter)
    assert record.count == 1
    assert record.requeue_at == NOW + 60
    assert record.first_eviction_time == NOW
    assert in_backoff(record, NOW + 59.9) and not in_backoff(record, NOW + 60)


def test_requeue_at_is_never_moved_earlier() -> None:
    prior = EvictionRecord("PodsReadyTimeout", NOW - 10, count=1, requeue_at=NOW + 10_000)
    record = next_eviction_state(prior, "PodsReadyTimeout", NOW, requeuing())
    assert (record.count, record.requeue_at) == (2, NOW + 10_000)


def test_time_limit_deactivates() -> None:
    cfg = requeuing(backoffLimitTimeout="1h")
    first = next_eviction_state(None, "PodsReadyTimeout", NOW, cfg)
    second = next_eviction_state(first, "PodsReadyTimeout", NOW + 3600, cfg)
    assert not second.deactivated and second.first_eviction_time == NOW
    third = next_eviction_state(second, "PodsReadyTimeout", NOW + 3601, cfg)
    assert third.deactivated and third.count == 2
    assert third.message is not None and "backoffLimitTimeout 3600s" in third.message


def test_preemption_records_the_preemptor_without_backoff() -> None:
    prior = next_eviction_state(None, "PodsReadyTimeout", NOW, requeuing(), failed_pools=["a"])
    record = next_eviction_state(
        prior, "Preempted", NOW + 500, requeuing(), preemptor_uid="uid-p", message="by ns/p"
    )
    assert record.reason == "Preempted" and record.preemptor_uid == "uid-p"
    assert (record.count, record.requeue_at) == (1, NOW + 60)
    assert record.first_eviction_time == NOW and record.failed_pools == ("a",)
    fresh = next_eviction_state(None, "Preempted", NOW, requeuing(), preemptor_uid="u")
    assert (fresh.count, fresh.requeue_at, fresh.first_eviction_time) == (0, None, None)


def test_reactivation_resets_count_requeue_at_and_time_limit() -> None:
    cfg = requeuing(backoffLimitCount=0)
    record = next_eviction_state(None, "PodsReadyTimeout", NOW, cfg)
    assert record.deactivated
    again = reactivate(record)
    assert (again.count, again.requeue_at, again.first_eviction_time) == (0, None, None)
    # Kueue evicts a workload it deactivates with reason Deactivated; reactivated, it keeps it
    assert record.reason == "Deactivated"
    assert not again.deactivated and again.reason == "Deactivated"
