"""The command line: bad config stops startup with the field path and value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=60
    )


def test_bad_config_stops_startup_naming_field_and_value(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server:\n  port: nope\n")
    result = run("serve", "--config", str(config))
    assert result.returncode == 2
    assert "server.port" in result.stderr and "'nope'" in result.stderr


def test_openapi_command_prints_the_document() -> None:
    result = run("openapi")
    assert result.returncode == 0
    assert json.loads(result.stdout)["info"]["title"] == "runway"


def test_version_names_the_installed_distribution() -> None:
    from importlib.metadata import version

    result = run("--version")
    assert result.returncode == 0
    assert result.stdout == f"runway {version('runway')}\n"


def test_usage_without_a_command() -> None:
    result = run()
    assert result.returncode == 2
    assert "serve" in result.stderr
