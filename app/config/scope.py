"""``scope:`` — which pods runway manages (DESIGN §2.0), as Kueue's ``manageJobsWithoutQueueName``.

```yaml
scope:
  manageWithoutQueue: false          # Kueue's default: a pod must name a queue
  namespaceQueues:                   # ...or live in a namespace mapped to one
    team-a: team-a                   # name or shell pattern → queue
    "ml-*": research
  namespaceSelector:                 # only namespaces whose labels match (unset: every one)
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, runway-system]}
```

``kube-system``, the namespaces of ``preemption.protectedNamespaces`` and runway's own namespace
are never managed, whatever this section says.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from app.config.section import Section
from app.config.selectors import LabelSelectorConfig

_NAMESPACE_PATTERN = re.compile(r"^[a-z0-9*?]([-a-z0-9*?]{0,61}[a-z0-9*?])?$")


class ScopeConfig(Section):
    """Which pods runway manages: a scheduler it serves, a queue, a namespace it may touch."""

    manage_without_queue: bool = Field(
        False,
        description="Manage pods that name no queue (no `runway.dev/queue`, `kai.scheduler/queue` "
        "or `kueue.x-k8s.io/queue-name` label) and whose namespace `namespaceQueues` maps to "
        "none, in queue `default` (Kueue's `manageJobsWithoutQueueName`). Off: such pods are "
        "not managed — no record, no hold, no backoff, no PodsReady eviction — and are victims "
        "only as kube-scheduler offers them.",
    )
    namespace_queues: dict[str, str] = Field(
        default_factory=dict,
        description="Namespace (name or shell pattern such as `team-a-*`) → the queue of its "
        "pods that name none: those pods are managed in that queue (an exact name wins over a "
        "pattern; patterns in file order). The queue's own `namespaces`/`namespaceSelector` "
        "still decide whether the namespace may use it.",
    )
    namespace_selector: LabelSelectorConfig | None = Field(
        None,
        description="Only pods of namespaces whose labels match are managed (Kubernetes "
        "LabelSelector; unset: every namespace). runway then lists and watches Namespaces "
        "(RBAC: get/list/watch namespaces). The chart excludes `kube-system` and its own "
        "namespace by `kubernetes.io/metadata.name` (absent before Kubernetes 1.21: those two "
        "are excluded by runway itself on every release).",
    )

    @field_validator("namespace_queues")
    @classmethod
    def _names(cls, mapping: dict[str, str]) -> dict[str, str]:
        for pattern, queue in mapping.items():
            if not _NAMESPACE_PATTERN.match(pattern):
                raise ValueError(
                    f"namespace {pattern!r} is neither a namespace name nor a shell pattern "
                    "of one (lower-case letters, digits, '-', '*', '?'; at most 63 characters)"
                )
            if not queue:
                raise ValueError(f"namespace {pattern!r} maps to an empty queue name")
        return mapping

    @field_validator("namespace_selector", mode="before")
    @classmethod
    def _selector(cls, value: object) -> object:
        # `namespaceSelector: ""` is a YAML slip, not "every namespace": name it.
        if isinstance(value, str):
            raise ValueError(
                "give a LabelSelector mapping ({matchLabels: ..., matchExpressions: ...}), "
                f"not the string {value!r}"
            )
        return value
