"""``python -m app resolve``: the min-runtime for a queue pair, offline, from a config file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.__main__ import main

CONFIG = """\
queues:
  - {name: A}
  - {name: B, parentQueue: A, reclaimMinRuntime: 10m, preemptMinRuntime: 10m}
  - {name: C, parent: B}
  - {name: D, parent: B, reclaimMinRuntime: 60s}
  - {name: leaf1, parent: C, reclaimMinRuntime: 0s, preemptMinRuntime: 5m}
  - {name: leaf2, parent: C, reclaimMinRuntime: 3m}
  - {name: leaf3, parent: D}
  - {name: E, preemptionBudget: {maxPreemptions: 3, window: 1h}}
  - {name: leaf4, parent: E}
minRuntime:
  defaultReclaimMinRuntime: 45s
  pools:
    big: {reclaimMinRuntime: 1h, reclaimResolveMethod: queue}
"""


TO_ROOT = {
    "leaf1": ["leaf1", "C", "B", "A"],
    "leaf2": ["leaf2", "C", "B", "A"],
    "leaf3": ["leaf3", "D", "B", "A"],
}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "runway.yaml"
    path.write_text(CONFIG)
    return path


def run(
    capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, object] | None, str]:
    code = main(["resolve", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else None), err


@pytest.mark.parametrize(
    ("preemptor", "victim", "expected"),
    [
        ("leaf1", "leaf3", ("reclaim", 60.0, "D", ["D"])),
        ("leaf1", "leaf2", ("reclaim", 180.0, "leaf2", ["leaf2"])),
        ("leaf3", "leaf1", ("reclaim", 600.0, "B", ["C", "B"])),
        ("leaf1", "leaf1", ("preempt", 300.0, "leaf1", ["leaf1"])),
        ("leaf2", "leaf2", ("preempt", 600.0, "B", ["leaf2", "C", "B"])),
    ],
)
def test_seed_examples(
    capsys: pytest.CaptureFixture[str],
    config: Path,
    preemptor: str,
    victim: str,
    expected: tuple[str, float, str, list[str]],
) -> None:
    code, body, err = run(
        capsys, "--config", str(config), "--preemptor-queue", preemptor, "--victim-queue", victim
    )
    assert code == 0 and err == "" and body is not None
    action, seconds, source, path = expected
    assert body.pop("victimBudget") == {
        "maxPreemptions": 0,
        "windowSeconds": 0.0,
        "resolvedFrom": "default",
        "path": TO_ROOT[victim],
        "source": "file",
    }
    assert body == {
        "action": action,
        "minRuntimeSeconds": seconds,
        "resolvedFrom": source,
        "path": path,
    }


def test_pool(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    args = ["--config", str(config), "--preemptor-queue", "leaf3", "--victim-queue", "leaf1"]
    assert run(capsys, *args)[1]["minRuntimeSeconds"] == 600.0  # type: ignore[index]
    assert run(capsys, *args, "--pool", "big")[1]["minRuntimeSeconds"] == 0.0  # type: ignore[index]


def test_unknown_queue_is_noted_on_stderr(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, body, err = run(
        capsys, "--config", str(config), "--preemptor-queue", "leaf1", "--victim-queue", "gost"
    )
    assert code == 0 and body is not None
    assert body.pop("victimBudget")["path"] == ["gost"]
    assert body == {
        "action": "reclaim",
        "minRuntimeSeconds": 45.0,
        "resolvedFrom": "default",
        "path": ["gost"],
    }
    assert "queue 'gost' is not in the config" in err and "leaf1" not in err


def test_bad_config_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("queues:\n  - {name: a}\n  - {name: team-a, parent: tema}\n")
    code, body, err = run(
        capsys, "--config", str(bad), "--preemptor-queue", "a", "--victim-queue", "a"
    )
    assert code == 2 and body is None
    assert "queues[1].parent: queue 'team-a': unknown parent queue 'tema'" in err


def test_embedded_default_without_config(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNWAY_CONFIG", raising=False)
    code, body, _ = run(capsys, "--preemptor-queue", "default", "--victim-queue", "default")
    assert code == 0 and body is not None and body["minRuntimeSeconds"] == 0.0


def test_missing_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["resolve", "--preemptor-queue", "a"])
    assert info.value.code == 2
    assert "--victim-queue" in capsys.readouterr().err


def test_as_a_process(config: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "resolve",
            "--config",
            str(config),
            "--preemptor-queue",
            "leaf1",
            "--victim-queue",
            "leaf3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["minRuntimeSeconds"] == 60.0


def test_victim_budget_inherited(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    args = ["--config", str(config), "--preemptor-queue", "leaf1", "--victim-queue", "leaf4"]
    body = run(capsys, *args)[1]
    assert body is not None and body["victimBudget"] == {
        "maxPreemptions": 3,
        "windowSeconds": 3600.0,
        "resolvedFrom": "E",
        "path": ["leaf4", "E"],
        "source": "file",
    }
