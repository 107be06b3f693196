"""DecisionLog.numbered: the decisions newest first, numbered, for the REST API's pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from app.policy.victims import Decision
from app.state.decisions import DecisionLog


@dataclass
class _Preemptor:
    key: str


@dataclass
class FakeDecision:
    """What DecisionLog.add reads of a Decision."""

    preemptor: _Preemptor
    n: int

    def recorded_nodes(self, max_nodes: int) -> tuple[Any, ...]:
        return ()

    def to_dict(self, max_nodes: int) -> dict[str, Any]:
        return {"n": self.n, "preemptor": self.preemptor.key}


def log_of(*preemptors: str, size: int = 200) -> DecisionLog:
    log = DecisionLog(size)
    for n, p in enumerate(preemptors):
        log.add(cast(Decision, FakeDecision(_Preemptor(p), n)))
    return log


def test_numbered_newest_first_below_a_number() -> None:
    log = log_of("a", "b", "a", "c")
    assert [(s, d["n"]) for s, d in log.numbered(10)] == [(4, 3), (3, 2), (2, 1), (1, 0)]
    assert [s for s, _ in log.numbered(2)] == [4, 3]
    assert [s for s, _ in log.numbered(2, before=3)] == [2, 1]
    assert [s for s, _ in log.numbered(10, preemptor="a")] == [3, 1]


def test_numbers_survive_the_oldest_falling_off() -> None:
    log = log_of("a", "b", "c", size=2)
    assert [s for s, _ in log.numbered(10)] == [3, 2]
    log.add(cast(Decision, FakeDecision(_Preemptor("d"), 9)))
    assert [s for s, _ in log.numbered(10, before=4)] == [3]
