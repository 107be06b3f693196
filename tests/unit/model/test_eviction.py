"""The eviction record's annotation format: round trip, removal of stale keys, garbage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.queues import HISTORY_LIMIT
from app.model.eviction import (
    COUNT_KEY,
    DEACTIVATED_KEY,
    HISTORY_KEY,
    KEYS,
    PREFIX,
    REASON_KEY,
    REQUEUE_AT_KEY,
    TIME_KEY,
    EvictionRecord,
    format_history,
    invalid_record_fields,
    parse_history,
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
    preemption_history=(NOW - 60, NOW),
)


def present(annotations: dict[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if v is not None}


def test_round_trip() -> None:
    ann = FULL.to_annotations()
    assert set(ann) == set(KEYS)
    assert all(k.startswith(PREFIX) for k in KEYS if k != HISTORY_KEY)
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


# --- runway.dev/preemption-history (the preemption budget's memory) ---------------------------

PREEMPTED = {REASON_KEY: "Preempted", TIME_KEY: "2027-01-15T08:00:00Z"}


def test_history_round_trips_oldest_first() -> None:
    record = EvictionRecord("Preempted", NOW, preemption_history=(NOW - 120, NOW - 60, NOW))
    ann = record.to_annotations()
    assert ann[HISTORY_KEY] == ("2027-01-15T07:58:00Z,2027-01-15T07:59:00Z,2027-01-15T08:00:00Z")
    assert EvictionRecord.from_annotations(present(ann)) == record
    assert EvictionRecord("Preempted", NOW).to_annotations()[HISTORY_KEY] is None
    assert parse_history("2027-01-15T08:00:00Z, 2027-01-15T07:59:00Z,") == (NOW - 60, NOW)


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2027-01-15T08:00:00Z,not-a-time",
        "9999999-01-01T00:00:00Z",
        ",".join(["2027-01-15T08:00:00Z"] * (HISTORY_LIMIT + 1)),
        "2027-01-15T08:00:00Z" + " " * 10_000,
        "x" * 1_000_000,
        "\x00,\u202e",
    ],
)
def test_hostile_history_is_empty_and_counted(value: str) -> None:
    ann = {**PREEMPTED, HISTORY_KEY: value}
    record = EvictionRecord.from_annotations(ann)
    assert record is not None and record.preemption_history == ()
    assert parse_history(value) is None
    assert invalid_record_fields(ann) == ["preemption-history"]


def test_history_empty_value_is_valid() -> None:
    assert invalid_record_fields({**PREEMPTED, HISTORY_KEY: ""}) == []
    assert format_history(()) is None


@given(st.text(max_size=300))
def test_history_parser_never_raises(value: str) -> None:
    parsed = parse_history(value)
    assert parsed is None or len(parsed) <= HISTORY_LIMIT
