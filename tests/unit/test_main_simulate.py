"""``python -m app simulate``: generate, replay, compare, JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.__main__ import main


@pytest.fixture
def configs(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "base.yaml"
    base.write_text("{}\n")
    protected = tmp_path / "protected.yaml"
    protected.write_text(
        "minRuntime: {defaultPreemptMinRuntime: 1h, defaultReclaimMinRuntime: 1h}\n"
    )
    return base, protected


def test_generate_then_compare_side_by_side(
    tmp_path: Path, configs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    code = main(
        [
            "simulate",
            "--generate",
            str(trace),
            "--workloads",
            "60",
            "--nodes",
            "6",
            "--seed",
            "4",
            "--queue",
            "a",
            "--queue",
            "b",
        ]
    )
    assert code == 0
    assert "60 workloads" in capsys.readouterr().err
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    argv = ["simulate", str(trace), "--compare", *map(str, configs), "--seed", "2"]
    assert main([*argv, "--json", str(out_a)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "|  | base | protected |"
    assert "| queue wait a p95 |" in text
    assert main([*argv, "--json", str(out_b)]) == 0
    # Determinism: the same trace, configs and seed give byte-identical JSON.
    assert out_a.read_bytes() == out_b.read_bytes()
    doc = json.loads(out_a.read_text())
    assert [r["config"] for r in doc["results"]] == ["base", "protected"]
    assert doc["results"][0]["workloads"]["finished"] > 0


def test_one_config_with_decisions(
    tmp_path: Path, configs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"cluster": {"nodes": [{"count": 1, "allocatable": {"cpu": "1"}}]}}\n'
        '{"name": "low", "arrival": 0, "duration": 100, "requests": {"cpu": "1"}}\n'
        '{"name": "high", "arrival": 5, "duration": 10, "priority": 1, "requests": {"cpu": "1"}}\n'
    )
    out = tmp_path / "o.json"
    assert (
        main(
            ["simulate", str(trace), "--config", str(configs[0]), "--decisions", "--json", str(out)]
        )
        == 0
    )
    (result,) = json.loads(out.read_text())["results"]
    assert [d["kind"] for d in result["decisions"]] == ["preempted"]


def test_a_bad_trace_names_the_line(
    tmp_path: Path, configs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"cluster": {"nodes": [{"allocatable": {"cpu": "1"}}]}}\n{"name": "x"}\n')
    assert main(["simulate", str(trace), "--config", str(configs[0])]) == 2
    assert f"{trace}:2: duration: required" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate"], "give a TRACE file"),
        (["simulate", "t.jsonl"], "give --config FILE or --compare"),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_trace_without_a_cluster_is_refused(
    tmp_path: Path, configs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"name": "a", "arrival": 0, "duration": 1}\n')
    assert main(["simulate", str(trace), "--config", str(configs[0])]) == 2
    assert "no cluster line" in capsys.readouterr().err


def test_bad_generate_knobs_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--generate", str(tmp_path / "t.jsonl"), "--never-ready", "3"]
    assert main(argv) == 2
    assert "never-ready: must be in [0, 1] (got 3.0)" in capsys.readouterr().err
