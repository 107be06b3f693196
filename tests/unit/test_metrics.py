"""The registry: standard collectors, no ``_created``, build info, bounded queue labels, and the
README's metrics table generated from it."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from app import metrics

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_metrics_table_is_up_to_date() -> None:
    text = README.read_text()
    assert metrics.splice_reference(text) == text, (
        "README.md's metrics table is stale: `python -m app metrics-reference --write README.md`"
    )


def test_every_exported_family_is_in_the_table() -> None:
    table = metrics.reference()
    for family in metrics.REGISTRY.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{name}`" in table


def test_the_standard_series_are_exported() -> None:
    families = {
        f.name + ("_total" if f.type == "counter" else "") for f in metrics.REGISTRY.collect()
    }
    assert set(metrics.STANDARD_SERIES) <= families


def test_exposition_has_process_gc_and_build_info_and_no_created() -> None:
    text = metrics.exposition().decode()
    assert "\nprocess_cpu_seconds_total " in text
    assert "python_gc_collections_total{" in text
    assert "python_info{" in text
    assert (
        f'runway_build_info{{python="{platform.python_version()}",'
        f'version="{metrics.runway_version()}"}} 1.0' in text
    )
    assert "_created" not in text


@pytest.mark.parametrize(
    ("declared", "queue", "label"),
    [
        (["team-a", "default"], "team-a", "team-a"),
        (["team-a", "default"], "default", "default"),
        (["team-a", "default"], "typo-queue", "other"),
        ([], "team-a", "other"),
    ],
)
def test_queue_label_is_a_declared_queue_or_other(
    declared: list[str], queue: str, label: str
) -> None:
    saved = metrics._queue_names
    try:
        metrics.set_queue_names(declared)
        assert metrics.queue_label(queue) == label
    finally:
        metrics.set_queue_names(saved)


def test_count_eviction_feeds_both_counters() -> None:
    before_new = metrics.EVICTED_WORKLOADS.labels("other", "Preempted")._value.get()
    before_old = metrics.EVICTIONS.labels("Preempted")._value.get()
    metrics.count_eviction("never-declared", "Preempted")
    assert metrics.EVICTED_WORKLOADS.labels("other", "Preempted")._value.get() == before_new + 1
    assert metrics.EVICTIONS.labels("Preempted")._value.get() == before_old + 1


def test_splice_without_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match="markers"):
        metrics.splice_reference("# README without the markers\n")


def test_cli_writes_the_table(tmp_path: Path) -> None:
    from app.__main__ import main

    target = tmp_path / "README.md"
    target.write_text(
        f"# x\n\n{metrics.REFERENCE_START}\nold table\n{metrics.REFERENCE_END}\n\nafter\n"
    )
    assert main(["metrics-reference", "--write", str(target)]) == 0
    text = target.read_text()
    assert "old table" not in text
    assert "| `runway_build_info` | gauge |" in text
    assert text.endswith("\n\nafter\n")
    (tmp_path / "plain.md").write_text("no markers\n")
    assert main(["metrics-reference", "--write", str(tmp_path / "plain.md")]) == 2
    assert main(["metrics-reference", "--write", str(tmp_path / "missing.md")]) == 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["filter", "prioritize", "preempt", "unknown"]),
            st.sampled_from(["ok", "bad_request", "error"]),
            st.one_of(
                st.none(),
                st.sampled_from(metrics.LATENCY_BUCKETS),  # on a bound: "le" includes it
                st.floats(min_value=0, max_value=20, allow_nan=False),
            ),
        ),
        max_size=40,
    )
)
def test_verb_calls_expose_what_a_counter_and_a_histogram_would(
    calls: list[tuple[str, str, float | None]],
) -> None:
    """The verbs' plain-number counter and histogram (``VerbCalls``) scrape exactly as
    prometheus_client's own Counter and Histogram fed the same calls."""
    mine, reference = CollectorRegistry(), CollectorRegistry()
    verbs = metrics.VerbCalls(metrics.LATENCY_BUCKETS)
    mine.register(verbs)
    counter = Counter(verbs.REQUESTS, verbs.REQUESTS_DOC, ["verb", "outcome"], registry=reference)
    histogram = Histogram(
        verbs.DURATION,
        verbs.DURATION_DOC,
        ["verb"],
        buckets=metrics.LATENCY_BUCKETS,
        registry=reference,
    )
    for verb, outcome, seconds in calls:
        verbs.record(verb, outcome, seconds)
        counter.labels(verb, outcome).inc()
        if seconds is not None:
            histogram.labels(verb).observe(seconds)
    assert generate_latest(mine).decode() == generate_latest(reference).decode()
