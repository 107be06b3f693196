"""Small traces and configs for the simulator's tests."""

from __future__ import annotations

import json
from typing import Any

from app.config import parse_config
from app.config.model import RunwayConfig
from app.simulator.trace import Trace, parse_trace


def trace_of(nodes: list[dict[str, Any]], *workloads: dict[str, Any]) -> Trace:
    """A trace from a cluster's node groups and workload lines."""
    lines = [json.dumps({"cluster": {"nodes": nodes}})]
    lines += [json.dumps(w) for w in workloads]
    return parse_trace(lines, "test")


def config(data: dict[str, Any] | None = None) -> RunwayConfig:
    """A config from a dict, as the loader validates a file."""
    return parse_config(data or {}, "test.yaml")


def cpu_nodes(count: int, cpu: str = "4") -> list[dict[str, Any]]:
    """``count`` nodes of ``cpu`` cores."""
    return [{"name": "n", "count": count, "allocatable": {"cpu": cpu}}]
