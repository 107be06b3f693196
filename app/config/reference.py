"""The configuration reference (every key, its default and meaning), generated from the models.

``python -m app config-reference`` prints it; ``docs/configuration.md`` is this output, and a test
fails when the two drift apart, so the documented defaults are always the real ones.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.config.durations import format_duration
from app.config.model import RunwayConfig

_HEADER = """# Configuration reference

Generated from the config models by `python -m app config-reference`; do not edit by hand.
One YAML file, named by `--config` or `RUNWAY_CONFIG`; every key is optional and an empty file
(or none) is the embedded default. Unknown keys are errors. Durations are Go-style strings
(`"90s"`, `"10m"`, `"1h30m"`, `"2d"`, `"1w"`); a bare number is an error (write `300s`).
Check a file with `python -m app check-config FILE`; see a running runway's with `GET /v1/config`.

The clocks below count from a workload's persisted facts (README, *Concepts*), read with
`GET /v1/workloads/{namespace}/{name}` → `life`:
**created** (fixed at first sight: its Job's creationTimestamp when runway read the Job of the
pods' controller UID, else the earliest pod's; the WorkloadRecord's `status.life.created`) orders
`Creation`; **admitted** (first bind since created or last fully evicted;
`status.life.admitted`) starts `waitForPodsReady.timeout`; **started** (the minAvailable-th
bind; `status.life.started`) starts min-runtime (`preemptMinRuntime`, `reclaimMinRuntime`);
**ready** (first reached PodsReady since admitted; `status.life.ready`) switches a later loss of
readiness to `recoveryTimeout`, which counts from **lost** (the last time PodsReady went false;
`status.life.lost`, cleared when **recovered**); **members** (pods neither Failed nor being
deleted) are what minAvailable and PodsReady count. Pod failures, replacements and elastic
scaling move none of them; only a full eviction (no member left bound) resets admitted, started,
ready, lost and recovered.

| key | type | default | meaning |
|---|---|---|---|
"""


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """Nested section models reachable from a field type, with the path suffix they live under."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin in (list, tuple, typing.Sequence):
        return [("[]" + s, m) for s, m in _models_in(get_args(annotation)[0])]
    if origin is dict:
        return [(".<key>" + s, m) for s, m in _models_in(get_args(annotation)[1])]
    if origin in (Union, types.UnionType):
        return [pair for arg in get_args(annotation) for pair in _models_in(arg)]
    if origin is typing.Annotated:
        return _models_in(get_args(annotation)[0])
    return []


def _describe_type(annotation: Any) -> str:
    """A reader's name for a field type: duration, int, string, `a` \\| `b`, list, map..."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        if "format_duration" in repr(annotation):
            return "duration"
        return _describe_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        parts = [_describe_type(a) for a in get_args(annotation) if a is not type(None)]
        return " or ".join(parts)
    if origin is typing.Literal:
        return " \\| ".join(f"`{v}`" for v in get_args(annotation))
    if origin in (list, tuple, typing.Sequence):
        return f"list of {_describe_type(get_args(annotation)[0])}"
    if origin is dict:
        return "map"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if isinstance(annotation, type):
        return names.get(annotation, annotation.__name__)
    return str(annotation)


def _type_name(info: FieldInfo) -> str:
    if any("format_duration" in repr(m) for m in info.metadata):
        return "duration"
    return _describe_type(info.annotation)


def _default(info: FieldInfo, type_name: str) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "(section)"
        if isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            items = [v.model_dump(mode="json", by_alias=True) for v in value]
            return "`" + json.dumps(items, separators=(", ", ": ")) + "`"
        return f"`{value!r}`" if value not in ({}, []) else f"`{value}`"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "unset"
    if type_name == "duration" and isinstance(info.default, int | float):
        return f"`{format_duration(float(info.default))}`"
    return f"`{info.default!r}`".replace("'", '"')


def rows(model: type[BaseModel] = RunwayConfig, prefix: str = "") -> list[str]:
    """Markdown table rows for every field of ``model``, nested sections expanded."""
    out = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}.{key}" if prefix else key
        nested = _models_in(info.annotation)
        type_name = "section" if nested and not prefix.endswith("[]") else _type_name(info)
        description = (info.description or "").replace("\n", " ").replace("|", "\\|")
        out.append(f"| `{path}` | {type_name} | {_default(info, type_name)} | {description} |")
        for suffix, sub in nested:
            out.extend(rows(sub, path + suffix))
    return out


def reference() -> str:
    """The whole reference page."""
    return _HEADER + "\n".join(rows()) + "\n"
