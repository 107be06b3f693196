"""Read and validate the YAML config; errors name the field path and the offending value."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from app.config.model import RunwayConfig

ENV_VAR = "RUNWAY_CONFIG"


class ConfigError(Exception):
    """The config file cannot be used. ``str()`` is a message meant for the operator."""


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _value_at(data: Any, loc: tuple[int | str, ...]) -> tuple[bool, Any]:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False, None
    return True, data


def format_validation_error(exc: ValidationError, data: Any, source: str) -> str:
    """Render a pydantic error as ``source: field.path: message (got: value)`` lines."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        found, value = _value_at(data, loc)
        got = f" (got {value!r})" if found and not isinstance(value, dict | list) else ""
        if err["type"] == "extra_forbidden":
            lines.append(f"{source}: {_path(loc)}: unknown field{got}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{source}: {_path(loc)}: {msg}{got}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def parse_config(data: Any, source: str = "config") -> RunwayConfig:
    """Validate already-parsed YAML/JSON data."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return RunwayConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, data, source)) from None


def load_config(path: str | os.PathLike[str] | None = None) -> RunwayConfig:
    """Load ``path``, else ``$RUNWAY_CONFIG``, else the embedded default (every default)."""
    chosen = path or os.environ.get(ENV_VAR) or None
    if chosen is None:
        return RunwayConfig()
    file = Path(chosen)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(file)!r}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from None
    return parse_config(data, str(file))
