"""runway 0.1's eviction annotations as ``migrate-annotations`` reads them: every field, garbage,
hostile values (nothing writes them any more)."""

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


FULL_ANNOTATIONS = {
    REASON_KEY: "PodsReadyTimeout",
    TIME_KEY: "2027-01-15T08:00:00Z",
    COUNT_KEY: "3",
    REQUEUE_AT_KEY: "2027-01-15T08:04:00Z",
    PREFIX + "first-time": "2027-01-15T07:45:00Z",
    DEACTIVATED_KEY: "true",
    PREFIX + "message": FULL.message,
    PREFIX + "failed-pools": "a,b",
    HISTORY_KEY: "2027-01-15T07:59:00Z,2027-01-15T08:00:00Z",
}


def test_every_field_is_read() -> None:
    assert set(FULL_ANNOTATIONS) == set(KEYS) - {PREFIX + "preemptor-uid"}
    assert EvictionRecord.from_annotations(FULL_ANNOTATIONS) == FULL
    preempted = {
        REASON_KEY: "Preempted",
        TIME_KEY: "2027-01-15T08:00:00Z",
        PREFIX + "preemptor-uid": "uid-1",
        PREFIX + "message": "by ns/p",
    }
    assert EvictionRecord.from_annotations(preempted) == EvictionRecord(
        "Preempted", NOW, preemptor_uid="uid-1", message="by ns/p"
    )


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


def test_history_is_read_oldest_first() -> None:
    ann = {**PREEMPTED, HISTORY_KEY: "2027-01-15T08:00:00Z,2027-01-15T07:58:00Z"}
    record = EvictionRecord.from_annotations(ann)
    assert record is not None and record.preemption_history == (NOW - 120, NOW)
    assert format_history((NOW - 120, NOW)) == "2027-01-15T07:58:00Z,2027-01-15T08:00:00Z"
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


def test_history_empty_value_is_valid() -> None:
    assert parse_history("") == ()
    assert format_history(()) is None


@given(st.text(max_size=300))
def test_history_parser_never_raises(value: str) -> None:
    parsed = parse_history(value)
    assert parsed is None or len(parsed) <= HISTORY_LIMIT
