"""The `queues` and `minRuntime` config: defaults, KAI spellings, tree errors, durations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from app.config import ConfigError, RunwayConfig, load_config, parse_config
from app.config.queues import MinRuntimeConfig, PoolMinRuntime, QueueConfig
from app.server import create_app
from tests.reference import upstream_cases


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return str(info.value)


def test_defaults() -> None:
    config = parse_config({})
    assert config.queues == []
    mr = config.min_runtime
    assert (mr.default_preempt_min_runtime, mr.default_reclaim_min_runtime) == (0.0, 0.0)
    assert mr.reclaim_resolve_method == "lca"
    assert mr.pool_label == "runway.dev/pool" and mr.pools == {}
    q = QueueConfig(name="a")
    assert (q.parent, q.preempt_min_runtime, q.reclaim_min_runtime) == (None, None, None)
    assert q.queueing_strategy == "BestEffortFIFO"


def test_full_example_round_trips() -> None:
    data = {
        "queues": [
            {"name": "research", "reclaimMinRuntime": "10m"},
            {
                "name": "team-a",
                "parent": "research",
                "preemptMinRuntime": "1h30m",
                "reclaimMinRuntime": "0s",
                "queueingStrategy": "StrictFIFO",
            },
        ],
        "minRuntime": {
            "defaultPreemptMinRuntime": "5m",
            "defaultReclaimMinRuntime": "2d",
            "reclaimResolveMethod": "queue",
            "poolLabel": "kai.scheduler/node-pool",
            "pools": {"a100": {"defaultReclaimMinRuntime": "30m", "reclaimResolveMethod": "lca"}},
        },
    }
    config = parse_config(data)
    team = config.queues[1]
    assert (team.parent, team.preempt_min_runtime, team.reclaim_min_runtime) == (
        "research",
        5400.0,
        0.0,
    )
    assert config.min_runtime.default_reclaim_min_runtime == 2 * 86400
    assert config.min_runtime.pools["a100"].default_reclaim_min_runtime == 1800
    dumped = config.model_dump(by_alias=True, exclude_none=True)
    assert parse_config(dumped) == config
    assert dumped["queues"][1]["preemptMinRuntime"] == "1h30m"


def test_kai_spellings_are_accepted_as_written() -> None:
    config = parse_config(
        {
            "queues": [
                {"name": "top", "parentQueue": ""},  # the Queue CRD's field, "" = top-level
                {"name": "leaf", "parentQueue": "top"},
            ],
            # A SchedulingShard's spec.minRuntime, as written.
            "minRuntime": {
                "preemptMinRuntime": "5m",
                "reclaimMinRuntime": "10m",
                "pools": {"gpu": {"preemptMinRuntime": "1m", "reclaimMinRuntime": "2m"}},
            },
        }
    )
    assert config.queues[0].parent_name is None
    assert config.queues[1].parent == "top"
    mr = config.min_runtime
    assert (mr.default_preempt_min_runtime, mr.default_reclaim_min_runtime) == (300, 600)
    gpu = mr.pools["gpu"]
    assert (gpu.default_preempt_min_runtime, gpu.default_reclaim_min_runtime) == (60, 120)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"queues": [{"name": "a", "parent": "b", "parentQueue": "b"}]}, "queues[0]"),
        (
            {"minRuntime": {"preemptMinRuntime": "1s", "defaultPreemptMinRuntime": "1s"}},
            "minRuntime",
        ),
        (
            {
                "minRuntime": {
                    "pools": {"p": {"reclaimMinRuntime": "1s", "defaultReclaimMinRuntime": "2s"}}
                }
            },
            "minRuntime.pools.p",
        ),
    ],
)
def test_one_field_spelled_both_ways_is_an_error(data: dict[str, Any], where: str) -> None:
    message = error_of(data)
    assert f"{where}: give `" in message and "not both" in message


def test_unknown_parent_names_the_queue_field_and_value() -> None:
    message = error_of(
        {
            "queues": [
                {"name": "research"},
                {"name": "team-b", "parent": "research"},
                {"name": "x"},
                {"name": "team-a", "parent": "tema"},
            ]
        }
    )
    assert "queues[3].parent: queue 'team-a': unknown parent queue 'tema'" in message
    assert "(got 'tema')" in message


def test_duplicate_name() -> None:
    message = error_of({"queues": [{"name": "a"}, {"name": "b"}, {"name": "a"}]})
    assert "queues[2].name: duplicate queue name 'a' (already queues[0])" in message


def test_cycles_are_reported_once_each() -> None:
    message = error_of(
        {
            "queues": [
                {"name": "x", "parent": "y"},
                {"name": "y", "parent": "x"},
                {"name": "z", "parent": "x"},  # leads into the cycle: not itself wrong
                {"name": "s", "parent": "s"},
            ]
        }
    )
    assert "queues[0].parent: queue 'x': parent cycle x -> y -> x" in message
    assert "queues[3].parent: queue 's': parent cycle s -> s" in message
    assert message.count("cycle") == 2


def test_every_tree_problem_is_listed() -> None:
    message = error_of({"queues": [{"name": "a", "parent": "nope"}, {"name": "a"}]})
    assert "queues[0].parent" in message and "queues[1].name" in message


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"queues": [{"name": "a", "reclaimMinRuntime": "1h2"}]}, "queues[0].reclaimMinRuntime"),
        ({"queues": [{"name": "a", "preemptMinRuntime": "-5s"}]}, "queues[0].preemptMinRuntime"),
        ({"queues": [{"name": "a", "queueingStrategy": "FIFO"}]}, "queues[0].queueingStrategy"),
        ({"queues": [{"name": ""}]}, "queues[0].name"),
        ({"queues": [{"parent": "x"}]}, "queues[0].name"),
        ({"queues": [{"name": "a", "displayName": "A"}]}, "queues[0].displayName"),
        ({"minRuntime": {"reclaimResolveMethod": "tree"}}, "minRuntime.reclaimResolveMethod"),
        (
            {"minRuntime": {"defaultReclaimMinRuntime": "abc"}},
            "minRuntime.defaultReclaimMinRuntime",
        ),
        ({"minRuntime": {"pools": {"p": {"bogus": 1}}}}, "minRuntime.pools.p.bogus"),
        ({"minRuntime": {"pools": {"p": {"preemptMinRuntime": "5"}}}}, "minRuntime.pools.p"),
    ],
)
def test_bad_values_name_the_field(data: dict[str, Any], path: str) -> None:
    assert f"config: {path}" in error_of(data)


# kai.minruntime.config_parse: KAI logs an error and uses 0s for invalid or negative values;
# runway refuses to start instead, naming the field and the value.
PARSE_CASES = upstream_cases("kai.minruntime.config_parse")
assert PARSE_CASES, "kai.minruntime.config_parse missing from the reference"


@pytest.mark.parametrize("text", [t for c in PARSE_CASES for t in c["input"]["valid"]])
def test_kai_valid_durations_are_non_zero(text: str) -> None:
    config = parse_config(
        {
            "queues": [{"name": "q", "preemptMinRuntime": text, "reclaimMinRuntime": text}],
            "minRuntime": {
                "defaultPreemptMinRuntime": text,
                "pools": {"p": {"reclaimMinRuntime": text}},
            },
        }
    )
    q = config.queues[0]
    assert q.preempt_min_runtime and q.preempt_min_runtime > 0
    assert (
        q.preempt_min_runtime
        == q.reclaim_min_runtime
        == config.min_runtime.default_preempt_min_runtime
    )
    assert config.min_runtime.pools["p"].default_reclaim_min_runtime == q.preempt_min_runtime


def test_kai_valid_duration_values() -> None:
    config = parse_config({"queues": [{"name": "q", "preemptMinRuntime": "5w4d12h"}]})
    assert config.queues[0].preempt_min_runtime == 5 * 604800 + 4 * 86400 + 12 * 3600
    config = parse_config({"queues": [{"name": "q", "preemptMinRuntime": "1.5s"}]})
    assert config.queues[0].preempt_min_runtime == 1.5


@pytest.mark.parametrize(
    "text",
    [t for c in PARSE_CASES for t in (*c["input"]["invalid"], *c["input"]["negative"])],
)
@pytest.mark.parametrize(
    ("wrap", "path"),
    [
        (
            lambda v: {"queues": [{"name": "q", "reclaimMinRuntime": v}]},
            "queues[0].reclaimMinRuntime",
        ),
        (
            lambda v: {"minRuntime": {"defaultPreemptMinRuntime": v}},
            "minRuntime.defaultPreemptMinRuntime",
        ),
        (
            lambda v: {"minRuntime": {"pools": {"gpu": {"defaultReclaimMinRuntime": v}}}},
            "minRuntime.pools.gpu.defaultReclaimMinRuntime",
        ),
    ],
)
def test_kai_invalid_and_negative_durations_are_config_errors(
    text: str, wrap: Any, path: str
) -> None:
    message = error_of(wrap(text))
    assert f"config: {path}:" in message and f"(got {text!r})" in message
    assert ("negative" in message) == text.startswith("-")


def test_loaded_from_yaml_and_held_by_the_runtime(tmp_path: Path) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(
        yaml.safe_dump(
            {
                "queues": [
                    {"name": "A"},
                    {"name": "B", "parentQueue": "A", "reclaimMinRuntime": "10m"},
                ]
            }
        )
    )
    config = load_config(file)
    tree = create_app(config).state.runway.queues
    assert tree.hierarchy_path("B") == ("A", "B")
    assert tree.node("B").reclaim_min_runtime_s == 600


def test_bad_tree_in_a_file_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text("queues:\n  - name: a\n    parent: b\n")
    with pytest.raises(ConfigError, match=r"runway\.yaml:3: queues\[0\]\.parent: queue 'a'"):
        load_config(file)


@pytest.mark.parametrize("model", [QueueConfig, PoolMinRuntime, MinRuntimeConfig])
def test_every_field_is_documented_and_defaulted(model: type[BaseModel]) -> None:
    for name, info in model.model_fields.items():
        assert info.description, f"{model.__name__}.{name} has no description"
        # A queue's name is its identity: the one field without a default.
        if (model, name) != (QueueConfig, "name"):
            assert not info.is_required(), f"{model.__name__}.{name} has no default"


def test_root_fields_are_documented() -> None:
    for name in ("queues", "min_runtime"):
        assert RunwayConfig.model_fields[name].description


# --- preemptionBudget (issue #16) -------------------------------------------------------------


def test_preemption_budget_parses_and_reaches_the_tree() -> None:
    config = parse_config(
        {
            "queues": [
                {"name": "a", "preemptionBudget": {"maxPreemptions": 3, "window": "1h"}},
                {"name": "b", "parent": "a"},
                {"name": "c", "parent": "a", "preemptionBudget": {"maxPreemptions": 0}},
            ],
            "minRuntime": {"defaultPreemptionBudget": {"maxPreemptions": 2, "window": "10m"}},
        }
    )
    from app.policy.budget import NO_BUDGET, PreemptionBudget
    from app.policy.queues import QueueTree

    tree = QueueTree.from_config(config.queues)
    assert tree.node("a").preemption_budget == PreemptionBudget(3, 3600.0)
    assert tree.node("b").preemption_budget is None
    assert tree.node("c").preemption_budget == NO_BUDGET
    default = config.min_runtime.default_preemption_budget
    assert (default.max_preemptions, default.window) == (2, 600.0)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (
            {"maxPreemptions": 3},
            "queues[0].preemptionBudget: `window` must be above 0s when `maxPreemptions` is 3, "
            "got '0s'",
        ),
        ({"maxPreemptions": -1, "window": "1h"}, "queues[0].preemptionBudget.maxPreemptions"),
        ({"maxPreemptions": 101, "window": "1h"}, "less than or equal to 100"),
        ({"maxPreemptions": 3, "window": 3600}, "queues[0].preemptionBudget.window"),
        ({"maxPreemptions": 3, "window": "soon"}, "'soon'"),
        ({"maxPreemptions": 3, "windows": "1h"}, "windows"),
        ({"window": "1h"}, "queues[0].preemptionBudget.maxPreemptions"),
    ],
)
def test_preemption_budget_errors_name_the_field_and_value(
    budget: dict[str, Any], expected: str
) -> None:
    assert expected in error_of({"queues": [{"name": "a", "preemptionBudget": budget}]})


def test_default_preemption_budget_error_names_the_field() -> None:
    message = error_of({"minRuntime": {"defaultPreemptionBudget": {"maxPreemptions": 2}}})
    assert "minRuntime.defaultPreemptionBudget" in message and "'0s'" in message
