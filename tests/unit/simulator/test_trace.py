"""The trace format: parsing, defaults, errors that name the line and field, round trip."""

from __future__ import annotations

import json

import pytest

from app.simulator.trace import TraceError, dump_trace, load_trace, parse_trace

CLUSTER = json.dumps({"cluster": {"nodes": [{"count": 2, "allocatable": {"cpu": "8"}}]}})


def test_a_minimal_workload_takes_the_defaults() -> None:
    trace = parse_trace(['{"name": "a", "arrival": 5, "duration": 60}'])
    (w,) = trace.workloads
    assert (w.queue, w.priority, w.pods, w.floor, w.ready_after) == ("default", 0, 1, 1, 0.0)
    assert w.requests == {}
    assert trace.cluster == ()


def test_workloads_are_ordered_by_arrival_then_line() -> None:
    trace = parse_trace(
        [
            '{"name": "late", "arrival": 9, "duration": 1}',
            "# a comment",
            "",
            '{"name": "b", "arrival": 1, "duration": 1}',
            '{"name": "a", "arrival": 1, "duration": 1}',
        ]
    )
    assert [w.name for w in trace.workloads] == ["b", "a", "late"]


def test_null_ready_after_means_never_ready_and_quantities_are_parsed() -> None:
    line = {
        "name": "a",
        "arrival": 0,
        "duration": 10,
        "pods": 3,
        "minAvailable": 2,
        "readyAfter": None,
        "requests": {"cpu": "500m", "nvidia.com/gpu": 2, "memory": "1Gi"},
    }
    (w,) = parse_trace([CLUSTER, json.dumps(line)]).workloads
    assert w.ready_after is None
    assert w.floor == 2
    assert w.requests == {"cpu": 500, "nvidia.com/gpu": 2, "memory": 2**30}


def test_the_cluster_line_makes_node_groups() -> None:
    (group,) = parse_trace([CLUSTER]).cluster
    assert (group.name, group.count, group.allocatable, group.pool) == (
        "node",
        2,
        {"cpu": 8000},
        None,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"name": "a", "arrival": 0}', "test:1: duration: required"),
        ('{"arrival": 0, "duration": 1}', "test:1: name: required"),
        (
            '{"name": "a", "arrival": -1, "duration": 1}',
            "test:1: arrival: must be at least 0 (got -1)",
        ),
        (
            '{"name": "a", "arrival": 0, "duration": 0}',
            "test:1: duration: must be positive (got 0)",
        ),
        (
            '{"name": "a", "arrival": "x", "duration": 1}',
            "test:1: arrival: must be a finite number",
        ),
        (
            '{"name": "a", "arrival": 0, "duration": 1, "pods": 0}',
            "test:1: pods: must be at least 1",
        ),
        (
            '{"name": "a", "arrival": 0, "duration": 1, "pods": 2, "minAvailable": 3}',
            "test:1: minAvailable: must not exceed pods (2) (got 3)",
        ),
        (
            '{"name": "a", "arrival": 0, "duration": 1, "requests": {"cpu": "eight"}}',
            "test:1: requests.cpu: not a Kubernetes quantity (got 'eight')",
        ),
        ('{"name": "a", "arrival": 0, "duration": 1, "prio": 3}', "test:1: prio: unknown key"),
        ("not json", "test:1: not JSON"),
        ("[1]", "test:1: a line must be a JSON object"),
        ('{"cluster": {"nodes": []}}', "test:1: cluster.nodes: must be a non-empty list"),
        (
            '{"cluster": {"nodes": [{"count": 1, "allocatable": {"cpu": "x"}}]}}',
            "test:1: cluster.nodes[0].allocatable.cpu: not a Kubernetes quantity",
        ),
        (
            '{"cluster": {"nodes": [{"count": 1}]}}',
            "test:1: cluster.nodes[0].allocatable: required",
        ),
    ],
)
def test_errors_name_the_line_and_the_field(line: str, message: str) -> None:
    with pytest.raises(TraceError) as err:
        parse_trace([line], "test")
    assert str(err.value).startswith(message)


def test_a_duplicate_name_names_both_lines() -> None:
    lines = ['{"name": "a", "arrival": 0, "duration": 1}'] * 2
    with pytest.raises(TraceError, match=r"test:2: name: workload 'a' already defined on line 1"):
        parse_trace(lines, "test")


def test_dump_and_parse_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lines = [
        CLUSTER,
        '{"name": "a", "arrival": 1.5, "duration": 60, "queue": "q", "priority": 5, "pods": 2,'
        ' "minAvailable": 1, "requests": {"cpu": "1500m", "nvidia.com/gpu": 1},'
        ' "readyAfter": null}',
    ]
    trace = parse_trace(lines)
    path = tmp_path / "t.jsonl"
    path.write_text(dump_trace(trace))
    assert load_trace(path) == trace


def test_an_unreadable_file_is_a_trace_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TraceError, match="cannot read the trace"):
        load_trace(tmp_path / "missing.jsonl")
