"""The preemption budget (issue #16): resolution through the tree, protected-until, the bounded
history, the victim choice and the explanation; a hypothesis property for the guarantee."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.queues import HISTORY_LIMIT, MinRuntimeConfig, QueueConfig
from app.policy import minruntime
from app.policy.budget import (
    GLOBAL_DEFAULT,
    NO_BUDGET,
    BudgetResolution,
    PreemptionBudget,
    budget_protected_until,
    budget_status,
    default_budget,
    record_preemption,
    resolve_budget,
)
from app.policy.queues import QueueTree
from app.policy.victims import NodeOffer, PodFacts, Preemptor, Rule, decide, protection

HOUR = 3600.0
NOW = 1_800_000_000.0
B3 = PreemptionBudget(3, HOUR)
B2 = PreemptionBudget(2, 60)


def tree() -> QueueTree:
    return QueueTree.from_config(
        [
            QueueConfig(name="root", preemption_budget={"maxPreemptions": 3, "window": "1h"}),
            QueueConfig(name="team-a", parent="root"),
            QueueConfig(
                name="team-b",
                parent="root",
                preemption_budget={"maxPreemptions": 5, "window": "2h"},
            ),
            QueueConfig(name="free", parent="root", preemption_budget={"maxPreemptions": 0}),
            QueueConfig(name="free-leaf", parent="free"),
            QueueConfig(name="other"),
        ]
    )


@pytest.mark.parametrize(
    ("leaf", "default", "budget", "resolved_from", "path", "is_default"),
    [
        ("team-a", NO_BUDGET, B3, "root", ("team-a", "root"), False),
        ("team-b", NO_BUDGET, PreemptionBudget(5, 2 * HOUR), "team-b", ("team-b",), False),
        ("root", NO_BUDGET, B3, "root", ("root",), False),
        # maxPreemptions 0 is "no budget" and stops inheritance (the default is not reached).
        ("free-leaf", B3, NO_BUDGET, "free", ("free-leaf", "free"), False),
        ("other", NO_BUDGET, NO_BUDGET, GLOBAL_DEFAULT, ("other",), True),
        ("other", B2, B2, GLOBAL_DEFAULT, ("other",), True),
        ("unknown", B3, B3, GLOBAL_DEFAULT, ("unknown",), True),
    ],
)
def test_resolve_budget(
    leaf: str,
    default: PreemptionBudget,
    budget: PreemptionBudget,
    resolved_from: str,
    path: tuple[str, ...],
    is_default: bool,
) -> None:
    assert resolve_budget(tree(), leaf, default) == BudgetResolution(
        budget, resolved_from, path, is_default
    )


def test_default_budget_from_config() -> None:
    assert default_budget(MinRuntimeConfig()) == NO_BUDGET
    cfg = MinRuntimeConfig.model_validate(
        {"defaultPreemptionBudget": {"maxPreemptions": 2, "window": "30m"}}
    )
    assert default_budget(cfg) == PreemptionBudget(2, 1800.0)


@pytest.mark.parametrize(
    ("history", "budget", "now", "until"),
    [
        ((), B3, NOW, None),
        ((NOW - 100, NOW - 50), B3, NOW, None),  # 2 of 3
        ((NOW - 300, NOW - 200, NOW - 100), B3, NOW, NOW - 300 + HOUR),  # the oldest leaves
        ((NOW - HOUR, NOW - 200, NOW - 100), B3, NOW, None),  # exactly W ago: outside
        ((NOW - HOUR + 1, NOW - 200, NOW - 100), B3, NOW, NOW + 1),
        # more than N inside (a smaller budget now than when they were recorded): protected
        # until enough have left that fewer than N remain
        ((NOW - 400, NOW - 300, NOW - 200, NOW - 100), B3, NOW, NOW - 300 + HOUR),
        # unsorted input is fine
        ((NOW - 100, NOW - 300, NOW - 200), B3, NOW, NOW - 300 + HOUR),
        # a time in the future does not count (skew or a hand-written value)
        ((NOW - 200, NOW - 100, NOW + 10_000), B3, NOW, None),
        ((NOW - 3, NOW - 2, NOW - 1), NO_BUDGET, NOW, None),
        ((NOW - 3, NOW - 2, NOW - 1), PreemptionBudget(3, 0.0), NOW, None),
        ((NOW - 1,), PreemptionBudget(1, 60), NOW, NOW + 59),
    ],
)
def test_budget_protected_until(
    history: tuple[float, ...], budget: PreemptionBudget, now: float, until: float | None
) -> None:
    assert budget_protected_until(history, budget, now) == until


@pytest.mark.parametrize(
    ("history", "at", "budget", "expected"),
    [
        ((), NOW, B3, (NOW,)),
        ((1.0, 2.0), 3.0, B3, (1.0, 2.0, 3.0)),
        ((1.0, 2.0, 3.0), 4.0, B3, (2.0, 3.0, 4.0)),  # the last N only
        ((1.0, 2.0, 3.0, 4.0, 5.0), 6.0, PreemptionBudget(2, HOUR), (5.0, 6.0)),
        ((1.0, 2.0), 3.0, NO_BUDGET, ()),  # no budget keeps nothing
        ((5.0,), 4.0, B3, (4.0, 5.0)),  # kept in time order
    ],
)
def test_record_preemption(
    history: tuple[float, ...], at: float, budget: PreemptionBudget, expected: tuple[float, ...]
) -> None:
    assert record_preemption(history, at, budget) == expected


def test_record_preemption_is_bounded_even_for_a_huge_budget() -> None:
    history: tuple[float, ...] = ()
    for i in range(HISTORY_LIMIT + 50):
        history = record_preemption(history, float(i), PreemptionBudget(10**9, 10**9))
    assert len(history) == HISTORY_LIMIT
    assert history[-1] == float(HISTORY_LIMIT + 49)


@given(
    budget=st.builds(
        PreemptionBudget,
        st.integers(min_value=1, max_value=6),
        st.floats(min_value=1.0, max_value=1000.0),
    ),
    attempts=st.lists(st.floats(min_value=0.0, max_value=5000.0), max_size=60),
)
def test_obeying_the_rule_never_exceeds_the_budget_in_any_window(
    budget: PreemptionBudget, attempts: list[float]
) -> None:
    """Preempt only while not protected, record each: no window of length W ever holds more
    than N preemptions of the workload."""
    history: tuple[float, ...] = ()
    done: list[float] = []
    for now in sorted(attempts):
        if budget_protected_until(history, budget, now) is None:
            history = record_preemption(history, now, budget)
            done.append(now)
        else:
            until = budget_protected_until(history, budget, now)
            assert until is not None and until > now
        assert len(history) <= budget.max_preemptions
    for start in done:
        inside = [t for t in done if start <= t < start + budget.window_s]
        assert len(inside) <= budget.max_preemptions


@given(
    history=st.lists(st.floats(min_value=0.0, max_value=1e6), max_size=20),
    n=st.integers(min_value=1, max_value=10),
    now=st.floats(min_value=0.0, max_value=1e6),
)
def test_protected_until_is_in_the_future_or_none(history: list[float], n: int, now: float) -> None:
    until = budget_protected_until(history, PreemptionBudget(n, 100.0), now)
    assert until is None or now < until <= now + 100.0


# --- the victim choice and the explanation --------------------------------------------------

P = Preemptor(uid="p", key="ns/p", priority=1000, queue="team-b", workload="ns/p")
TEAM_A = BudgetResolution(B3, "team-a", ("team-a",))


def victim(uid: str, history: tuple[float, ...], *, node: str = "n1", **kw: object) -> PodFacts:
    return PodFacts(
        uid=uid,
        key=f"ns/{uid}",
        node=node,
        priority=100,
        queue="team-a",
        workload=f"ns/{uid}",
        start=NOW - 10 * HOUR,
        resolution=Rule("reclaim", 0.0, "default"),
        requests={"cpu": 1000},
        budget=TEAM_A,
        preemption_history=history,
        **kw,  # type: ignore[arg-type]
    )


EXHAUSTED = (NOW - 1800, NOW - 1200, NOW - 600)


def test_exhausted_budget_protects_like_a_min_runtime() -> None:
    prot = protection(P, victim("v", EXHAUSTED), NOW)
    assert prot.protected and prot.by_budget_only
    assert minruntime.protected_by(prot) == "budget"
    assert prot.describe() == (
        "preemption budget: preempted 3 times in the last 1h (budget of queue team-a: 3 per 1h); "
        "protected until 2027-01-15T08:30:00Z"
    )
    assert not protection(P, victim("v", EXHAUSTED[1:]), NOW).protected


def test_both_rules_name_both() -> None:
    pod = replace(victim("v", EXHAUSTED), resolution=Rule("reclaim", 100 * HOUR, "team-a"))
    prot = protection(P, pod, NOW)
    assert prot.protected and not prot.by_budget_only
    assert minruntime.protected_by(prot) == "min-runtime"
    assert "also preemption budget: preempted 3 times" in prot.describe()


def test_decide_skips_a_budget_protected_victim_and_counts_it() -> None:
    offers = {
        "n1": NodeOffer(victims=[victim("v1", EXHAUSTED)]),
        "n2": NodeOffer(victims=[victim("v2", EXHAUSTED[1:], node="n2")]),
    }
    d = decide(P, offers, {}, NOW)
    assert d.chosen == "n2" and d.victims == ("v2",)
    n1 = next(n for n in d.nodes if n.node == "n1")
    assert n1.outcome == "dropped"
    rec = n1.records[0].to_dict()
    assert rec["outcome"] == "dropped" and rec["protectedBy"] == "budget"
    assert "budget of queue team-a: 3 per 1h" in rec["reason"]
    assert rec["budget"]["preemptionsInWindow"] == 3
    assert d.counts.budget == {"reclaim": 1} and d.counts.protected == {}


def test_budget_protected_bystander_is_not_reselected() -> None:
    offers = {
        "n1": NodeOffer(
            victims=[victim("v1", EXHAUSTED)],
            others=[victim("b1", EXHAUSTED), victim("b2", ())],
        )
    }
    d = decide(P, offers, {}, NOW)
    assert d.chosen == "n1" and d.victims == ("b2",)


def test_explain_names_the_budget() -> None:
    prot = protection(P, victim("v", EXHAUSTED), NOW)
    answer = minruntime.explain(
        prot, victim_priority=100, preemptor_priority=1000, min_available=1, pods=1
    )
    assert not answer.eligible
    assert answer.explanation.startswith("protected: preemption budget: preempted 3 times")
    body = answer.to_dict()
    assert body["protectedBy"] == "budget"
    assert body["budget"] == {
        "maxPreemptions": 3,
        "windowSeconds": HOUR,
        "resolvedFrom": "team-a",
        "path": ["team-a"],
        "preemptionsInWindow": 3,
        "protected": True,
        "protectedUntil": "2027-01-15T08:30:00Z",
    }


def test_status_text_when_not_exhausted() -> None:
    status = budget_status((NOW - 60,), TEAM_A, NOW)
    assert not status.protected
    assert status.describe() == (
        "preempted 1 time in the last 1h (budget of queue team-a: 3 per 1h); budget not exhausted"
    )
    none = budget_status((), BudgetResolution(NO_BUDGET, GLOBAL_DEFAULT, (), True), NOW)
    assert none.describe() == "no preemption budget (default budget: none)"
