"""client-go's Event correlation, pure: spam filter per object, deduplication within a window."""

from __future__ import annotations

import pytest

from app.model.event import EventNote, ObjectRef
from app.policy.events import EventCorrelator, event_name

POD = ObjectRef("v1", "Pod", "ns", "victim", "uid-1")
OTHER = ObjectRef("v1", "Pod", "ns", "other", "uid-2")
NOTE = EventNote(POD, "Preempted", "Preempted by ns/p on node n1: reclaim")


def test_first_event_is_created_with_client_go_name() -> None:
    corr = EventCorrelator("runway").correlate(NOTE, 1000.0)
    assert (corr.action, corr.count, corr.first_seen) == ("create", 1, 1000.0)
    assert corr.name == event_name(POD, int(1000.0 * 1e9)) == f"victim.{int(1000.0 * 1e9):x}"


def test_names_are_unique_within_one_nanosecond() -> None:
    c = EventCorrelator("runway")
    names = [c.correlate(EventNote(POD, "R", f"m{i}"), 1000.0).name for i in range(3)]
    assert len(set(names)) == 3


@pytest.mark.parametrize(
    ("second", "later", "action", "count"),
    [
        (NOTE, 5.0, "patch", 2),  # identical within the window: count + 1
        (NOTE, 600.0, "patch", 2),  # the window's edge still counts
        (NOTE, 601.0, "create", 1),  # past the window: a new Event
        (EventNote(POD, "Preempted", "another message"), 5.0, "create", 1),
        (EventNote(POD, "Preempting", NOTE.message), 5.0, "create", 1),
        (EventNote(POD, NOTE.reason, NOTE.message, type="Warning"), 5.0, "create", 1),
        (EventNote(OTHER, NOTE.reason, NOTE.message), 5.0, "create", 1),
    ],
)
def test_second_event(second: EventNote, later: float, action: str, count: int) -> None:
    c = EventCorrelator("runway")
    first = c.correlate(NOTE, 0.0)
    corr = c.correlate(second, later)
    assert (corr.action, corr.count) == (action, count)
    if action == "patch":
        assert corr.name == first.name
        assert corr.first_seen == 0.0


def test_repeats_keep_counting_and_the_window_slides() -> None:
    c = EventCorrelator("runway", window=10.0)
    names = {c.correlate(NOTE, t).name for t in (0.0, 8.0, 16.0, 24.0)}
    assert len(names) == 1
    assert c.correlate(NOTE, 30.0).count == 5


def test_spam_filter_drops_past_the_burst_then_refills() -> None:
    c = EventCorrelator("runway", burst=3, qps=1.0 / 300.0)
    actions = [c.correlate(EventNote(POD, "R", f"m{i}"), 0.0).action for i in range(5)]
    assert actions == ["create", "create", "create", "drop", "drop"]
    # Another object has its own bucket.
    assert c.correlate(EventNote(OTHER, "R", "m0"), 0.0).action == "create"
    # One token back after 5 minutes.
    assert c.correlate(EventNote(POD, "R", "m9"), 300.0).action == "create"
    assert c.correlate(EventNote(POD, "R", "m10"), 300.0).action == "drop"


def test_repeats_count_against_the_spam_filter_too() -> None:
    c = EventCorrelator("runway", burst=2)
    assert [c.correlate(NOTE, float(t)).action for t in range(3)] == ["create", "patch", "drop"]


def test_forget_makes_the_next_one_a_create() -> None:
    c = EventCorrelator("runway")
    c.correlate(NOTE, 0.0)
    c.forget(NOTE)
    assert c.correlate(NOTE, 1.0).action == "create"


def test_caches_are_bounded() -> None:
    c = EventCorrelator("runway", cache_size=10)
    for i in range(100):
        ref = ObjectRef("v1", "Pod", "ns", f"p{i}", f"u{i}")
        c.correlate(EventNote(ref, "R", "m"), float(i))
    assert len(c._buckets) == 10
    assert len(c._seen) == 10
    # The oldest were forgotten: the same Event again is created anew.
    old = EventNote(ObjectRef("v1", "Pod", "ns", "p0", "u0"), "R", "m")
    assert c.correlate(old, 101.0).action == "create"
