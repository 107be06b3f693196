"""``python -m app check-config FILE`` and ``config-schema``: exit codes and what they print."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.__main__ import main
from app.config.schema import config_schema


@pytest.mark.parametrize(
    ("text", "code", "out", "err"),
    [
        ("", 0, "valid (waitForPodsReady off, 0 queues)", ""),
        ("waitForPodsReady: {timeout: 2m}\n", 0, "valid (waitForPodsReady on, 0 queues)", ""),
        (
            "waitForPodsReady:\n  timeout: 300\n",
            1,
            "",
            "runway.yaml:2: waitForPodsReady.timeout: a duration needs a unit, as Kueue and KAI "
            'write them: write "300s"',
        ),
        (
            "waitForPodReady: {}\nauth:\n  mode: tokenreview\n",
            1,
            "",
            "runway.yaml:1: waitForPodReady: unknown field; did you mean 'waitForPodsReady'?\n"
            "  {dir}/runway.yaml:3: auth.mode: Input should be",
        ),
        ("server: {port: [1\n", 1, "", "runway.yaml:2:1: not valid YAML"),
    ],
)
def test_exit_code_and_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: int, out: str, err: str
) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(text)
    assert main(["check-config", str(file)]) == code
    captured = capsys.readouterr()
    assert out in captured.out
    assert err.replace("{dir}", str(tmp_path)) in captured.err
    assert (captured.out == "") is (code != 0)


def test_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(tmp_path / "absent.yaml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


def test_usage_error_exits_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "check-config"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "FILE" in result.stderr


def test_config_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config-schema"]) == 0
    assert json.loads(capsys.readouterr().out) == config_schema()


def test_config_schema_rewrites_only_the_config_entry_of_a_chart_schema(tmp_path: Path) -> None:
    file = tmp_path / "values.schema.json"
    file.write_text(json.dumps({"type": "object", "properties": {"config": {}, "x": {}}}))
    assert main(["config-schema", "--chart", str(file)]) == 0
    written = json.loads(file.read_text())
    assert written["properties"]["x"] == {} and written["properties"]["config"]["properties"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("{}", "leave prioritizeVerb out"),
        (
            "waitForPodsReady: {enable: true}",
            "name prioritizeVerb (needed by prioritize.poolPreference",
        ),
        (
            "waitForPodsReady: {enable: true}\nprioritize: {poolPreference: false}",
            "leave prioritizeVerb out",
        ),
        ("prioritize: {locality: true}", "needed by prioritize.locality"),
    ],
)
def test_check_config_says_whether_the_stanza_needs_prioritize(
    tmp_path: Path, config: str, expected: str
) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(config + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "app", "check-config", str(file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
