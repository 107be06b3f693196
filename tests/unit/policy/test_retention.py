"""policy/retention: a WorkloadRecord goes only when its workload has been gone for the
retention and nothing in it still holds the workload — owned or not (an owner of a made-up API
is never resolved by the garbage collector)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.gate import GateEntry, PodRef
from app.model.record import RecordState
from app.policy.retention import expired

NOW = 1_800_000_000.0
DAY = 86400.0
GONE = NOW - DAY - 1
STATE = RecordState(eviction=EvictionRecord(PODS_READY_TIMEOUT, NOW - 2 * DAY, count=1))
GATE = GateEntry(PodRef("u", "ns", "p"), "n1", (), since=NOW - 5, deadline=NOW + 55)


@pytest.mark.parametrize(
    ("state", "gone_since", "retention", "expected"),
    [
        (STATE, GONE, DAY, True),
        (STATE, None, DAY, False),  # pods are there
        (STATE, NOW - 10, DAY, False),  # not gone long enough
        (STATE, GONE, 0.0, False),  # retention off
        (replace(STATE, owned=True), GONE, DAY, True),  # owned: by anything, maybe made up
        (replace(STATE, active=False), GONE, DAY, False),  # deactivated: kept
        (  # a backoff still pending: kept
            replace(STATE, eviction=replace(STATE.eviction, requeue_at=NOW + 60)),  # type: ignore[type-var]
            GONE,
            DAY,
            False,
        ),
        (replace(STATE, preemptions=(GATE,)), GONE, DAY, False),  # a preemption in flight
        (RecordState(), GONE, DAY, True),  # life facts only
    ],
)
def test_expired(
    state: RecordState, gone_since: float | None, retention: float, expected: bool
) -> None:
    assert expired(state, gone_since, NOW, retention) is expected
