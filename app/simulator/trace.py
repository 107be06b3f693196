"""The trace format: JSON Lines, one workload per line, and an optional cluster line.

A workload line (keys camelCase; only ``name``, ``arrival`` and ``duration`` are required)::

    {"name": "train-17", "arrival": 3600, "queue": "team-a", "priority": 100, "pods": 4,
     "minAvailable": 4, "requests": {"cpu": "8", "nvidia.com/gpu": 2}, "duration": 7200,
     "readyAfter": 30}

``readyAfter`` is the delay from a pod's bind until it is Ready (default 0); ``null`` = the pods
never get ready. ``minAvailable`` defaults to ``pods`` (a gang). Times are seconds of simulated
time from the start of the trace.

A cluster line (at most one, anywhere; ``--nodes`` on the command line replaces it)::

    {"cluster": {"nodes": [{"name": "gpu", "count": 100, "pool": "a",
                            "allocatable": {"cpu": "64", "nvidia.com/gpu": 8}}]}}

Each group makes ``count`` nodes named ``<name>-<i>``; ``pool`` is the value of the node's pool
label (``minRuntime.poolLabel``). Errors name the line and the field:
``trace.jsonl:12: requests.cpu: not a Kubernetes quantity (got 'eight')``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.policy.quantity import QuantityError, Resources, resource_amount


class TraceError(ValueError):
    """A trace that cannot be replayed; ``str()`` names the file, line and field."""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """One workload of the trace."""

    name: str
    arrival: float
    duration: float
    queue: str = "default"
    priority: int = 0
    pods: int = 1
    min_available: int | None = None
    """None = ``pods`` (a gang)."""
    requests: Mapping[str, int] = field(default_factory=dict)
    """Per pod, as integers (``cpu`` in millicores, see ``app.policy.quantity``)."""
    ready_after: float | None = 0.0
    """Seconds from a pod's bind until it is Ready; None = never ready."""

    @property
    def floor(self) -> int:
        """minAvailable, defaulting to the pod count."""
        return self.pods if self.min_available is None else self.min_available


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` identical nodes."""

    name: str
    count: int
    allocatable: Mapping[str, int]
    pool: str | None = None


@dataclass(frozen=True)
class Trace:
    """A parsed trace: workloads by arrival (then line), and the cluster if the file has one."""

    workloads: tuple[WorkloadSpec, ...]
    cluster: tuple[NodeGroup, ...] = ()


_WORKLOAD_KEYS = {
    "name",
    "arrival",
    "queue",
    "priority",
    "pods",
    "minAvailable",
    "requests",
    "duration",
    "readyAfter",
}
_GROUP_KEYS = {"name", "count", "allocatable", "pool"}


class _Line:
    """Field access on one line's object, with errors naming the line and field."""

    def __init__(self, where: str, data: Mapping[str, Any]) -> None:
        self.where = where
        self.data = data

    def fail(self, path: str, msg: str, value: Any = ...) -> TraceError:
        got = "" if value is ... else f" (got {value!r})"
        return TraceError(f"{self.where}: {path}: {msg}{got}")

    def unknown(self, allowed: set[str], prefix: str = "") -> None:
        for key in self.data:
            if key not in allowed:
                raise self.fail(
                    prefix + str(key), f"unknown key; expected one of {', '.join(sorted(allowed))}"
                )

    def number(self, key: str, *, default: Any = ..., minimum: float = 0.0) -> Any:
        if key not in self.data:
            if default is ...:
                raise self.fail(key, "required")
            return default
        value = self.data[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise self.fail(key, "must be a finite number of seconds", value)
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum:g}", value)
        return float(value)

    def integer(self, key: str, *, default: int | None, minimum: int | None = None) -> int | None:
        if key not in self.data or (self.data[key] is None and default is None):
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, "must be an integer", value)
        if minimum is not None and value < minimum:
            raise self.fail(key, f"must be at least {minimum}", value)
        return value

    def text(self, key: str, *, default: str | None) -> str:
        value = self.data.get(key, default)
        if value is None:
            raise self.fail(key, "required")
        if not isinstance(value, str) or not value:
            raise self.fail(key, "must be a non-empty string", value)
        return value

    def resources(self, key: str, *, required: bool) -> Resources:
        raw = self.data.get(key)
        if raw is None:
            if required:
                raise self.fail(key, "required")
            return {}
        if not isinstance(raw, Mapping):
            raise self.fail(key, "must be a map of resource name to quantity", raw)
        out: Resources = {}
        for name, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise self.fail(f"{key}.{name}", "must be a quantity string or a number", value)
            try:
                amount = resource_amount(str(name), str(value))
            except QuantityError:
                raise self.fail(f"{key}.{name}", "not a Kubernetes quantity", value) from None
            if amount < 0:
                raise self.fail(f"{key}.{name}", "must not be negative", value)
            if amount:
                out[str(name)] = amount
        return out


def _workload(line: _Line) -> WorkloadSpec:
    line.unknown(_WORKLOAD_KEYS)
    pods = line.integer("pods", default=1, minimum=1)
    assert pods is not None
    floor = line.integer("minAvailable", default=None, minimum=1)
    if floor is not None and floor > pods:
        raise line.fail("minAvailable", f"must not exceed pods ({pods})", floor)
    never = "readyAfter" in line.data and line.data["readyAfter"] is None
    ready_after = None if never else line.number("readyAfter", default=0.0)
    duration = line.number("duration")
    if duration <= 0:
        raise line.fail("duration", "must be positive", line.data["duration"])
    return WorkloadSpec(
        name=line.text("name", default=None),
        arrival=line.number("arrival"),
        duration=duration,
        queue=line.text("queue", default="default"),
        priority=line.integer("priority", default=0) or 0,
        pods=pods,
        min_available=floor,
        requests=line.resources("requests", required=False),
        ready_after=ready_after,
    )


def _cluster(where: str, raw: Any) -> tuple[NodeGroup, ...]:
    top = _Line(where, {"cluster": raw})
    if not isinstance(raw, Mapping):
        raise top.fail("cluster", "must be an object with `nodes`", raw)
    _Line(where, raw).unknown({"nodes"}, "cluster.")
    nodes = raw.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise top.fail("cluster.nodes", "must be a non-empty list of node groups", nodes)
    groups: list[NodeGroup] = []
    for i, item in enumerate(nodes):
        path = f"cluster.nodes[{i}]"
        if not isinstance(item, Mapping):
            raise top.fail(path, "must be an object", item)
        line = _Line(where, item)
        try:
            line.unknown(_GROUP_KEYS)
            count = line.integer("count", default=1, minimum=1)
            assert count is not None
            pool = item.get("pool")
            if pool is not None and not isinstance(pool, str):
                raise line.fail("pool", "must be a string", pool)
            groups.append(
                NodeGroup(
                    name=line.text("name", default="node"),
                    count=count,
                    allocatable=line.resources("allocatable", required=True),
                    pool=pool,
                )
            )
        except TraceError as exc:
            # Re-anchor the field path under the group.
            head, _, rest = str(exc).partition(": ")
            raise TraceError(f"{head}: {path}.{rest}") from None
    names = [g.name for g in groups]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise top.fail("cluster.nodes", "two groups have the same name", dup)
    return tuple(groups)


def parse_trace(lines: Iterable[str], source: str = "trace") -> Trace:
    """Parse JSON Lines (blank lines and lines starting with ``#`` are skipped)."""
    workloads: list[tuple[float, int, WorkloadSpec]] = []
    cluster: tuple[NodeGroup, ...] = ()
    seen: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(data, dict):
            raise TraceError(f"{where}: a line must be a JSON object (got {data!r})")
        if "cluster" in data:
            if len(data) != 1:
                raise TraceError(f"{where}: a cluster line has only the key `cluster`")
            if cluster:
                raise TraceError(f"{where}: cluster: a second cluster line")
            cluster = _cluster(where, data["cluster"])
            continue
        spec = _workload(_Line(where, data))
        if spec.name in seen:
            raise TraceError(
                f"{where}: name: workload {spec.name!r} already defined on line {seen[spec.name]}"
            )
        seen[spec.name] = number
        workloads.append((spec.arrival, number, spec))
    workloads.sort(key=lambda item: (item[0], item[1]))
    return Trace(tuple(w for _, _, w in workloads), cluster)


def load_trace(path: str | Path) -> Trace:
    """Read and parse a trace file; ``TraceError`` when it cannot be read or is invalid."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc}") from None
    return parse_trace(text.splitlines(), str(path))


def _quantity(name: str, amount: int) -> str | int:
    if name == "cpu":
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    return amount


def workload_line(spec: WorkloadSpec) -> dict[str, Any]:
    """The JSON object of one workload (the inverse of parsing it)."""
    out: dict[str, Any] = {
        "name": spec.name,
        "arrival": spec.arrival,
        "queue": spec.queue,
        "priority": spec.priority,
        "pods": spec.pods,
    }
    if spec.min_available is not None:
        out["minAvailable"] = spec.min_available
    out["requests"] = {k: _quantity(k, v) for k, v in sorted(spec.requests.items())}
    out["duration"] = spec.duration
    out["readyAfter"] = spec.ready_after
    return out


def cluster_line(groups: Sequence[NodeGroup]) -> dict[str, Any]:
    """The JSON object of the cluster line."""
    nodes = []
    for g in groups:
        item: dict[str, Any] = {"name": g.name, "count": g.count}
        if g.pool is not None:
            item["pool"] = g.pool
        item["allocatable"] = {k: _quantity(k, v) for k, v in sorted(g.allocatable.items())}
        nodes.append(item)
    return {"cluster": {"nodes": nodes}}


def dump_trace(trace: Trace) -> str:
    """The trace as JSON Lines (cluster line first)."""
    lines = [json.dumps(cluster_line(trace.cluster))] if trace.cluster else []
    lines += [json.dumps(workload_line(w)) for w in trace.workloads]
    return "\n".join(lines) + "\n"
