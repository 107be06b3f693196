"""The config file's JSON schema, generated from the models, as the Helm chart embeds it.

``python -m app config-schema`` prints it; ``--chart helm/runway/values.schema.json`` writes it
under ``properties.config`` of the chart's values schema, so ``helm install`` refuses a config
runway would refuse (an unknown key, ``auth.mode: tokenreview``, ``timeout: 300``) before any pod
crash-loops. A test fails when the chart's copy drifts from the models.

The schema is self-contained (no ``$ref``: Helm's draft-07 validators resolve nothing else), lists
the other documented spellings of a key (``parentQueue``, ``preemptMinRuntime``), and gives
duration defaults as a file writes them (``"5m"``, not ``300.0``). Rules spanning fields (the
queue tree, ``renewDeadline < leaseDuration``) are checked by ``check-config`` and at start.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from app.config.durations import DURATION_PATTERN, format_duration
from app.config.loader import field_keys
from app.config.model import RunwayConfig
from app.config.section import Section

CHART_DESCRIPTION = (
    "runway's config file (docs/configuration.md), generated from app/config by "
    "`python -m app config-schema --chart helm/runway/values.schema.json`; do not edit by hand."
)


def _sections() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {RunwayConfig.__name__: RunwayConfig}
    todo: list[type[BaseModel]] = [Section]
    while todo:
        for sub in todo.pop().__subclasses__():
            found[sub.__name__] = sub
            todo.append(sub)
    return found


def _is_duration(prop: dict[str, Any]) -> bool:
    options = prop.get("anyOf", [prop])
    return any(o.get("pattern") == DURATION_PATTERN for o in options)


def _patch_section(model: type[BaseModel], schema: dict[str, Any]) -> None:
    props: dict[str, Any] = schema.get("properties", {})
    for prop in props.values():
        default = prop.get("default")
        if _is_duration(prop) and isinstance(default, int | float):
            prop["default"] = format_duration(float(default))
    for key, name in field_keys(model).items():
        if key not in props:
            info = model.model_fields[name]
            primary = info.alias or name
            props[key] = {
                **copy.deepcopy(props[primary]),
                "description": f"Another spelling of `{primary}` (set one of them).",
            }


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Replace every ``$ref`` by its definition and drop pydantic's titles."""
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = _inline(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**target, **_inline(rest, defs)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties":
            out[key] = {name: _inline(prop, defs) for name, prop in value.items()}
        else:
            out[key] = _inline(value, defs)
    return out


def config_schema() -> dict[str, Any]:
    """The JSON schema of a config file (what ``parse_config`` accepts, per key)."""
    raw = RunwayConfig.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = raw.pop("$defs", {})
    sections = _sections()
    for name, section in defs.items():
        _patch_section(sections[name], section)
    _patch_section(RunwayConfig, raw)
    inlined: dict[str, Any] = _inline(raw, defs)
    return inlined


def chart_config_schema() -> dict[str, Any]:
    """The ``config`` entry of the chart's ``values.schema.json``."""
    schema = config_schema()
    schema["description"] = CHART_DESCRIPTION
    return schema


def render_values_schema(values_schema: str) -> str:
    """``values_schema`` (the chart's JSON text) with its ``config`` entry regenerated."""
    doc = json.loads(values_schema)
    doc["properties"]["config"] = chart_config_schema()
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_values_schema(path: str | Path) -> None:
    """Regenerate the ``config`` entry of the chart's values schema file in place."""
    file = Path(path)
    file.write_text(render_values_schema(file.read_text(encoding="utf-8")), encoding="utf-8")
