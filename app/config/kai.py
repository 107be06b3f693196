"""KAI-Scheduler ``Queue`` objects (``scheduling.run.ai/v2``) as the queue tree, validated exactly
as the config file's ``queues`` list: the same durations (Go strings; ``0s`` stops inheritance,
unset inherits), the same tree checks (unknown parent, cycles), the same error lines, each naming
the object (``Queue/team-a: preemptMinRuntime: ...``).

Only ``metadata.name``, ``spec.parentQueue``, ``spec.preemptMinRuntime`` and
``spec.reclaimMinRuntime`` are read, with two annotations of runway's: ``runway.dev/namespaces``
(the namespaces that may use the queue, comma-separated) and ``runway.dev/namespace-selector``
(a label selector over the namespaces' labels, ``kubectl -l`` syntax, parsed strictly:
``app.config.selectors``). KAI's other fields (resources, priority...) are KAI's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from app.config.loader import ConfigError, format_validation_error
from app.config.queues import QueueConfig, tree_problems
from app.config.selectors import parse_selector

KAI_QUEUE_API_VERSION = "scheduling.run.ai/v2"
KAI_QUEUE_FIELDS = ("parentQueue", "preemptMinRuntime", "reclaimMinRuntime")
NAMESPACES_ANNOTATION = "runway.dev/namespaces"
"""On a (cluster-scoped, administrator-written) KAI Queue: the namespaces that may use it."""
NAMESPACE_SELECTOR_ANNOTATION = "runway.dev/namespace-selector"
"""On a KAI Queue: the labels of the namespaces that may use it (``team=a,tier in (x,y)``)."""


def origin(name: str) -> str:
    """Where a queue read from the cluster comes from: ``Queue/<name>``."""
    return f"Queue/{name}"


def queue_from_kai(obj: Mapping[str, Any]) -> QueueConfig:
    """One Queue object as a queue of the tree; ``ConfigError`` names the object and field
    (every problem of the object, one line each)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    where = origin(name or "<no name>")
    spec = obj.get("spec") or {}
    data: dict[str, Any] = {"name": name}
    data |= {k: spec[k] for k in KAI_QUEUE_FIELDS if spec.get(k) is not None}
    annotations = meta.get("annotations") or {}
    allowed = annotations.get(NAMESPACES_ANNOTATION)
    if isinstance(allowed, str):
        data["namespaces"] = [n.strip() for n in allowed.split(",") if n.strip()]
    problems: list[str] = []
    selector = annotations.get(NAMESPACE_SELECTOR_ANNOTATION)
    if isinstance(selector, str):
        try:
            data["namespaceSelector"] = parse_selector(selector).model_dump(by_alias=True)
        except ValueError as exc:
            shown = selector if len(selector) <= 200 else selector[:200] + "..."
            problems.append(
                f"  {where}: metadata.annotations[{NAMESPACE_SELECTOR_ANNOTATION}]: {exc} "
                f"(got {shown!r})"
            )
    try:
        queue = QueueConfig.model_validate(data)
    except ValidationError as exc:
        message = format_validation_error(exc, data, where)
        problems += message.splitlines()[1:]
    if problems:
        raise ConfigError("invalid Queue object:\n" + "\n".join(problems))
    return queue


def queues_from_kai(objects: Sequence[Mapping[str, Any]]) -> list[QueueConfig]:
    """The tree of ``objects``, sorted by name (KAI has no order); every problem in one
    ``ConfigError``, one line per problem, as the file's loader reports them."""
    lines: list[str] = []
    queues: list[QueueConfig] = []
    for obj in sorted(objects, key=lambda o: str((o.get("metadata") or {}).get("name", ""))):
        try:
            queues.append(queue_from_kai(obj))
        except ConfigError as exc:
            lines += str(exc).splitlines()[1:]
    for loc, msg, value in tree_problems(queues):
        index, field = loc[0], loc[1] if len(loc) > 1 else ""
        name = queues[int(index)].name
        spelled = "parentQueue" if field == "parent" else field
        lines.append(f"  {origin(name)}: spec.{spelled}: {msg} (got {value!r})")
    if lines:
        raise ConfigError("invalid Queue objects:\n" + "\n".join(line for line in lines))
    return queues
