"""The pure wake-up decisions (``app.policy.wakeup``) and the touch schedule
(``app.policy.wakeup.WakeSchedule``): which pods to wake, when, and how fast."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.policy.admission import ADMIT, Admission
from app.policy.rate import TokenBucket
from app.policy.wakeup import (
    WAKE_SLACK_S,
    Hold,
    WakeSchedule,
    awaits_victims,
    freed_by,
    hold_of,
    plan_wakeups,
)
from tests.builders import pod, raw_pod

BACKOFF = Hold("backoff", 100.0)
DEACTIVATED = Hold("deactivated", None)
FIFO = Hold("strict-fifo", None)


@pytest.mark.parametrize(
    ("verdict", "hold"),
    [
        (ADMIT, None),
        (Admission(allowed=False, rule="backoff", until=5.0), Hold("backoff", 5.0)),
        (Admission(allowed=False, rule="deactivated"), Hold("deactivated", None)),
        # the gate restricted to the nominated node still holds the pod
        (
            Admission(allowed=True, only_nodes=frozenset({"n1"}), rule="gate", until=9.0),
            Hold("gate", 9.0),
        ),
    ],
)
def test_hold_of_a_verdict(verdict: Admission, hold: Hold | None) -> None:
    assert hold_of(verdict) == hold


@pytest.mark.parametrize(
    ("case", "previous", "current", "wake", "next_check"),
    [
        ("backoff ended", {"a": BACKOFF}, {"a": None}, ("a",), None),
        ("still in backoff", {"a": BACKOFF}, {"a": BACKOFF}, (), 100.0 + WAKE_SLACK_S),
        ("reactivated", {"a": DEACTIVATED}, {"a": None}, ("a",), None),
        ("hold changed, not ended", {"a": BACKOFF}, {"a": FIFO}, (), None),
        ("bound or deleted meanwhile", {"a": BACKOFF}, {}, (), None),
        ("never held: first pass learns only", {}, {"a": None, "b": BACKOFF}, (), 100.05),
        (
            "StrictFIFO head moved to b",
            {"b": FIFO, "c": FIFO},
            {"b": None, "c": FIFO},
            ("b",),
            None,
        ),
        (
            "earliest end wins",
            {},
            {"a": Hold("backoff", 30.0), "b": Hold("block-admission", 20.0), "c": FIFO},
            (),
            20.0 + WAKE_SLACK_S,
        ),
    ],
)
def test_plan_wakeups(
    case: str,
    previous: dict[str, Hold],
    current: dict[str, Hold | None],
    wake: tuple[str, ...],
    next_check: float | None,
) -> None:
    plan = plan_wakeups(previous, current)
    assert plan.wake == wake, case
    assert plan.held == {u: h for u, h in current.items() if h is not None}, case
    assert plan.next_check == pytest.approx(next_check) if next_check else plan.next_check is None


holds = st.one_of(st.none(), st.builds(Hold, st.sampled_from(["backoff", "gate"]), st.none()))


@given(
    st.dictionaries(st.sampled_from("abcdef"), holds.filter(lambda h: h is not None)),
    st.dictionaries(st.sampled_from("abcdef"), holds),
)
def test_only_previously_held_pending_pods_that_are_free_now_wake(
    previous: dict[str, Hold], current: dict[str, Hold | None]
) -> None:
    plan = plan_wakeups(previous, current)
    for uid in plan.wake:
        assert uid in previous and uid in current and current[uid] is None
    assert set(plan.wake) | set(plan.held) <= set(current)
    assert not set(plan.wake) & set(plan.held)


def test_token_bucket_limits_a_burst_then_trickles() -> None:
    bucket = TokenBucket(rate=2.0, burst=3)
    assert bucket.take(0.0, 10) == 3
    assert bucket.take(0.0, 10) == 0
    assert bucket.next_token_in(0.0) == pytest.approx(0.5)
    assert bucket.take(0.5, 10) == 1
    assert bucket.take(10.0, 10) == 3  # capped at the burst
    assert bucket.take(9.0, 1) == 0  # a clock going back grants nothing
    with pytest.raises(ValueError, match="rate must be > 0"):
        TokenBucket(rate=0, burst=1)


def test_schedule_orders_by_time_and_keeps_one_entry_per_pod() -> None:
    s = WakeSchedule(min_interval=1.0)
    s.push("b", 5.0)
    s.push("a", 3.0)
    assert s.push("a", 4.0) == 3.0  # the earlier entry wins
    assert s.push("b", 2.0) == 2.0
    assert len(s) == 2 and s.next_at() == 2.0
    assert s.pop_due(1.9, 10) == []
    assert s.pop_due(10.0, 10) == ["b", "a"]
    assert len(s) == 0 and s.next_at() is None


def test_schedule_limit_discard_and_min_interval() -> None:
    s = WakeSchedule(min_interval=1.0)
    for uid in "abc":
        s.push(uid, 0.0)
    assert s.pop_due(0.0, 2) == ["a", "b"]
    s.discard("c")
    assert "c" not in s and s.pop_due(5.0, 10) == []
    # touched at 0.0: not again before 1.0
    assert s.push("a", 0.2) == 1.0
    assert s.pop_due(0.5, 10) == []
    assert s.pop_due(1.0, 10) == ["a"]
    s.push("x", 0.0)
    s.clear()
    assert len(s) == 0 and s.next_at() is None


def test_schedule_forgets_old_touches() -> None:
    s = WakeSchedule(min_interval=1.0)
    for i in range(200):
        s.push(f"p{i}", 0.0)
    assert len(s.pop_due(0.0, 1000)) == 200
    s.pop_due(5.0, 10)
    assert len(s._touched) == 0  # nothing younger than min_interval


def on_node(name: str, priority: int, *, terminating: bool) -> dict[str, object]:
    obj = raw_pod(name, node="n1", priority=priority, phase="Running")
    if terminating:
        obj["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    return obj


@pytest.mark.parametrize(
    ("others", "waits"),
    [
        ([], False),
        ([on_node("low", 100, terminating=False)], False),  # running: nothing to wait for
        ([on_node("low", 100, terminating=True)], True),  # the victim still holds its room
        ([on_node("peer", 1000, terminating=True)], False),  # equal priority: not a victim
        ([on_node("vip", 2000, terminating=True)], False),
        (
            [on_node("low", 100, terminating=False), on_node("low2", 50, terminating=True)],
            True,
        ),
    ],
)
def test_a_nominated_pod_awaits_its_terminating_lower_priority_victims(
    others: list[dict[str, object]], waits: bool
) -> None:
    preemptor = pod(raw_pod("high", priority=1000))
    assert awaits_victims(preemptor, [pod(o) for o in others]) is waits


@pytest.mark.parametrize(
    ("gone_priority", "left", "woken"),
    [
        (100, [], ["uid-high"]),  # the last victim: the preemptor is woken
        (100, [on_node("low2", 100, terminating=True)], []),  # another victim still going
        (100, [on_node("low2", 100, terminating=False)], ["uid-high"]),  # not a victim
        (1000, [], []),  # a peer of equal priority was never in its way
        (2000, [], []),
    ],
)
def test_the_last_lower_priority_pod_gone_frees_the_nominated_pod(
    gone_priority: int, left: list[dict[str, object]], woken: list[str]
) -> None:
    gone = pod(on_node("gone", gone_priority, terminating=True))
    nominated = [pod(raw_pod("high", priority=1000))]
    assert freed_by(gone, nominated, [pod(o) for o in left]) == woken
