"""The README's complete runway.yaml: valid (check-config says so) and complete (every key)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from app.config import RunwayConfig
from app.config.loader import section_type

README = Path(__file__).resolve().parents[3] / "README.md"
MARKER = "<!-- complete runway.yaml:"


def readme_config() -> str:
    """The fenced YAML block right after the marker comment."""
    text = README.read_text()
    start = text.index("```yaml\n", text.index(MARKER)) + len("```yaml\n")
    return text[start : text.index("```", start)]


def missing_keys(model: type[BaseModel], data: dict[str, Any], prefix: str = "") -> list[str]:
    """Keys of ``model`` (and of its nested sections) absent from ``data``."""
    out = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in data:
            out.append(prefix + key)
            continue
        section = section_type(info.annotation)
        if section is not None and isinstance(data[key], dict):
            out.extend(missing_keys(section, data[key], f"{prefix}{key}."))
    return out


def test_check_config_accepts_the_readme_file(tmp_path: Path) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(readme_config())
    result = subprocess.run(
        [sys.executable, "-m", "app", "check-config", str(file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_the_readme_file_has_every_section_and_key() -> None:
    data = yaml.safe_load(readme_config())
    assert missing_keys(RunwayConfig, data) == []
    assert data["queues"] and data["minRuntime"]["pools"]
