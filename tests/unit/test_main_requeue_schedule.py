"""``python -m app requeue-schedule``: the backoff table until deactivation (KEP-1282's table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.config.requeue import RequeuingStrategyConfig
from app.policy.backoff import JITTER_FACTOR, default_schedule_attempts, requeue_schedule


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "requeue-schedule", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def table(*args: str) -> list[dict[str, Any]]:
    result = run(*args)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "runway.yaml"
    path.write_text(text)
    return str(path)


def test_default_config_prints_ten_uncapped_rows_then_the_cap() -> None:
    rows = table("--no-jitter", "--config", "/dev/null")
    assert [r["attempt"] for r in rows] == list(range(1, 11))
    assert [r["backoffSeconds"] for r in rows] == [
        60,
        120,
        240,
        480,
        960,
        1920,
        3600,
        3600,
        3600,
        3600,
    ]
    # elapsed: each attempt waits the 5m timeout, then its backoff.
    assert rows[0]["elapsedSeconds"] == 360
    assert rows[1]["elapsedSeconds"] == 360 + 300 + 120
    assert not any(r["deactivated"] for r in rows)
    assert set(rows[0]) == {"attempt", "backoffSeconds", "elapsedSeconds", "deactivated"}


def test_count_limit_ends_with_deactivation(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        "waitForPodsReady:\n  timeout: 10m\n  requeuingStrategy:\n    backoffLimitCount: 2\n",
    )
    rows = table("--config", path, "--no-jitter")
    assert rows == [
        {"attempt": 1, "backoffSeconds": 60, "elapsedSeconds": 660, "deactivated": False},
        {"attempt": 2, "backoffSeconds": 120, "elapsedSeconds": 1380, "deactivated": False},
        {"attempt": 3, "backoffSeconds": 0, "elapsedSeconds": 1980, "deactivated": True},
    ]


def test_time_limit_ends_with_deactivation(tmp_path: Path) -> None:
    path = config(
        tmp_path, "waitForPodsReady:\n  requeuingStrategy:\n    backoffLimitTimeout: 1h\n"
    )
    rows = table("--config", path, "--no-jitter")
    assert rows[-1]["deactivated"] and not any(r["deactivated"] for r in rows[:-1])
    first_eviction = 300
    # The deactivating eviction is the first one more than 1h after the first eviction.
    assert rows[-1]["elapsedSeconds"] - first_eviction > 3600
    previous_eviction = rows[-2]["elapsedSeconds"] - rows[-2]["backoffSeconds"]
    assert previous_eviction - first_eviction <= 3600


def test_attempts_caps_rows_and_jitter_is_tiny() -> None:
    rows = table("--attempts", "3", "--config", "/dev/null")
    assert len(rows) == 3
    for row, exact in zip(rows, (60, 120, 240), strict=True):
        assert exact <= row["backoffSeconds"] <= exact * (1 + JITTER_FACTOR)


@pytest.mark.parametrize("bad", ["0", "-2", "many"])
def test_bad_attempts_is_a_usage_error(bad: str) -> None:
    result = run("--attempts", bad)
    assert result.returncode == 2 and "--attempts" in result.stderr


def test_bad_config_names_the_fields(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        "waitForPodsReady:\n  requeuingStrategy:\n    backoffBaseSeconds: 90\n"
        "    backoffMaxSeconds: 30\n",
    )
    result = run("--config", path)
    assert result.returncode == 2
    assert "backoffBaseSeconds (90)" in result.stderr and "backoffMaxSeconds (30)" in result.stderr


def test_pure_schedule_matches_the_cli_defaults() -> None:
    cfg = RequeuingStrategyConfig(backoff_limit_count=1)
    assert default_schedule_attempts(cfg) == 2
    rows = requeue_schedule(300, cfg, default_schedule_attempts(cfg))
    assert [(r.backoff_seconds, r.elapsed_seconds, r.deactivated) for r in rows] == [
        (60, 360, False),
        (0, 660, True),
    ]
    assert default_schedule_attempts(RequeuingStrategyConfig()) == 10
