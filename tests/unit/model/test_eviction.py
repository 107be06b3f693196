"""The eviction record's annotation format: round trip, removal of stale keys, garbage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.eviction import (
    COUNT_KEY,
    DEACTIVATED_KEY,
    KEYS,
    PREFIX,
    REASON_KEY,
    REQUEUE_AT_KEY,
    TIME_KEY,
    EvictionRecord,
)

NOW = 1_800_000_000.0

FULL = EvictionRecord(
    reason="PodsReadyTimeout",
    time=NOW,
    preemptor_uid=None,
    count=3,
    requeue_at=NOW + 240,
    first_eviction_time=NOW - 900,
    deactivated=True,
    message="RequeuingLimitExceeded: exceeding the maximum number of re-queuing retries",
    failed_pools=("a", "b"),
)


def present(annotations: dict[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if v is not None}


def test_round_trip() -> None:
    ann = FULL.to_annotations()
    assert set(ann) == set(KEYS) and all(k.startswith(PREFIX) for k in KEYS)
    assert ann[TIME_KEY] == "2027-01-15T08:00:00Z"
    assert ann[DEACTIVATED_KEY] == "true"
    assert EvictionRecord.from_annotations(present(ann)) == FULL
    preempted = EvictionRecord("Preempted", NOW, preemptor_uid="uid-1", message="by ns/p")
    assert EvictionRecord.from_annotations(present(preempted.to_annotations())) == preempted


def test_unset_fields_are_none_so_a_merge_patch_removes_them() -> None:
    ann = EvictionRecord("Preempted", NOW).to_annotations()
    assert ann[REQUEUE_AT_KEY] is None and ann[DEACTIVATED_KEY] is None
    assert ann[COUNT_KEY] == "0"


def test_requeue_at_is_rounded_up() -> None:
    ann = EvictionRecord("PodsReadyTimeout", NOW, requeue_at=NOW + 60.0042).to_annotations()
    back = EvictionRecord.from_annotations(present(ann))
    assert back is not None and back.requeue_at == NOW + 61


@pytest.mark.parametrize(
    "annotations",
    [
        None,
        {},
        {"unrelated": "x"},
        {REASON_KEY: "Evicted", TIME_KEY: "2027-01-15T08:00:00Z"},
        {REASON_KEY: "Preempted", TIME_KEY: "yesterday"},
        {REASON_KEY: "Preempted"},
    ],
)
def test_unusable_record_is_no_record(annotations: dict[str, str] | None) -> None:
    assert EvictionRecord.from_annotations(annotations) is None


def test_garbage_fields_take_defaults() -> None:
    record = EvictionRecord.from_annotations(
        {
            REASON_KEY: "PodsReadyTimeout",
            TIME_KEY: "2027-01-15T08:00:00Z",
            COUNT_KEY: "-4",
            REQUEUE_AT_KEY: "soon",
            DEACTIVATED_KEY: "yes please",
            PREFIX + "failed-pools": " a, ,a,b ",
        }
    )
    assert record is not None
    assert (record.count, record.requeue_at, record.deactivated) == (0, None, False)
    assert record.failed_pools == ("a", "b")


@given(st.dictionaries(st.sampled_from(KEYS), st.text(max_size=40)))
def test_never_raises(annotations: dict[str, str]) -> None:
    EvictionRecord.from_annotations(annotations)
