"""Read and validate the YAML config; errors name the file, line, field path and value.

Every message is one line per problem, ``FILE:LINE: field.path: what is wrong (got VALUE)``,
with a hint where one helps: a unit for a bare-number duration, the nearest key ("did you
mean") for an unknown one.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import AliasChoices, BaseModel, ValidationError

from app.config.model import RunwayConfig
from app.config.section import WRITTEN

ENV_VAR = "RUNWAY_CONFIG"

Loc = tuple[int | str, ...]


class ConfigError(Exception):
    """The config file cannot be used. ``str()`` is a message meant for the operator."""


class ConfigUnreadable(ConfigError):
    """The config file could not be read at all (missing, unreadable, not text)."""


def _path(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _value_at(data: Any, loc: Loc) -> tuple[bool, Any]:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False, None
    return True, data


def field_keys(model: type[BaseModel]) -> dict[str, str]:
    """Every key a section accepts in a file, mapped to its field name: the camelCase alias
    and any other documented spelling (``AliasChoices``)."""
    keys: dict[str, str] = {}
    for name, info in model.model_fields.items():
        keys[info.alias or name] = name
        if isinstance(info.validation_alias, AliasChoices):
            for choice in info.validation_alias.choices:
                if isinstance(choice, str) and choice != name:
                    keys.setdefault(choice, name)
    return keys


def _inner(annotation: Any, part: int | str) -> Any:
    """The type one step (a list index or a map key) inside ``annotation``."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _inner(get_args(annotation)[0], part)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return _inner(args[0], part) if len(args) == 1 else None
    if origin is list and isinstance(part, int):
        return get_args(annotation)[0]
    if origin is dict and isinstance(part, str):
        return get_args(annotation)[1]
    return None


def section_type(annotation: Any) -> type[BaseModel] | None:
    """The section model a field type holds (``X``, ``X | None``), else None."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return section_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        models = [m for m in map(section_type, get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def section_at(loc: Loc) -> type[BaseModel] | None:
    """The config section a field path lands in (``("queues", 2)`` → ``QueueConfig``)."""
    current: Any = RunwayConfig
    for part in loc:
        model = section_type(current)
        if model is not None and isinstance(part, str):
            name = field_keys(model).get(part)
            if name is None:
                return None
            current = model.model_fields[name].annotation
        else:
            current = _inner(current, part)
            if current is None:
                return None
    return section_type(current)


RETIRED: dict[tuple[str, ...], str] = {
    ("kubernetes", "ownerKinds"): "retired: runway keeps each workload's state in its own "
    "WorkloadRecord resource and writes no owner kind (it reads Jobs' parallelism only); "
    "delete this key (and "
    "`rbac.ownerKinds` from the chart's values); docs/state.md",
}
"""Keys earlier versions knew: named with what to do instead of a bare 'unknown field'."""


def did_you_mean(loc: Loc) -> str:
    """``"; did you mean 'waitForPodsReady'?"`` for an unknown key close to a real one."""
    section = section_at(loc[:-1])
    if section is None or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], list(field_keys(section)), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _line_of(node: yaml.Node | None, loc: Loc) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (the key, for a key that is wrong)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next((kv for kv in node.value if kv[0].value == part), None)
            if pair is None:
                return line
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def format_validation_error(
    exc: ValidationError, data: Any, source: str, node: yaml.Node | None = None
) -> str:
    """Render a pydantic error as ``source[:line]: field.path: message (got value)`` lines."""
    lines: list[tuple[int, str]] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        found, value = _value_at(data, loc)
        got = f" (got {value!r})" if found and not isinstance(value, dict | list) else ""
        line = _line_of(node, loc)
        where = f"{source}:{line}" if line is not None else source
        retired = RETIRED.get(tuple(str(p) for p in loc))
        if err["type"] == "extra_forbidden" and retired:
            text = f"{where}: {_path(loc)}: {retired}"
        elif err["type"] == "extra_forbidden":
            text = f"{where}: {_path(loc)}: unknown field{did_you_mean(loc)}{got}"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            text = f"{where}: {_path(loc)}: {msg}{got}"
        lines.append((line or 0, text))
    lines.sort(key=lambda pair: pair[0])  # file order (stable: pydantic's order within a line)
    return "invalid configuration:\n  " + "\n  ".join(text for _, text in lines)


def parse_config(data: Any, source: str = "config", node: yaml.Node | None = None) -> RunwayConfig:
    """Validate already-parsed YAML/JSON data as a file's content (durations need a unit);
    ``node`` (the composed YAML) lets errors give line numbers."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return RunwayConfig.model_validate(data, context={WRITTEN: True})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, data, source, node)) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def with_overrides(
    config: RunwayConfig, overrides: dict[str, Any], source: str = "command line"
) -> RunwayConfig:
    """``config`` with ``overrides`` (camelCase, nested like the file) applied and the result
    validated by the same model, so ``--port 99999`` is an error like ``port: 99999`` is."""
    if not overrides:
        return config
    data = _merge(config.model_dump(by_alias=True), overrides)
    try:
        return RunwayConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, overrides, source)) from None


def read_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document: the data and its node tree (for line numbers); errors name
    ``source`` with the line and column."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        what = "; ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"{where}: not valid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, node


def load_config(path: str | os.PathLike[str] | None = None) -> RunwayConfig:
    """Load ``path``, else ``$RUNWAY_CONFIG``, else the embedded default (every default)."""
    chosen = path or os.environ.get(ENV_VAR) or None
    if chosen is None:
        return RunwayConfig()
    file = Path(chosen)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc.reason})"
        raise ConfigUnreadable(f"cannot read config file {str(file)!r}: {reason}") from None
    data, node = read_yaml(text, str(file))
    return parse_config(data, str(file), node)
