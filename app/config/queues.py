"""The queue tree and the node-pool min-runtime defaults of the config file (DESIGN §2, §3).

```yaml
queues:
  - name: research
    reclaimMinRuntime: 10m
  - name: team-a
    parent: research          # KAI's `parentQueue` is accepted too
    preemptMinRuntime: 5m     # unset = inherit; "0s" = no protection, stops inheritance
    queueingStrategy: StrictFIFO
    namespaces: [team-a, "team-a-*"]                 # who may use the subtree, by name...
    namespaceSelector: {matchLabels: {team: a}}      # ...or by the namespace's labels
    preemptionBudget: {maxPreemptions: 3, window: 1h}  # maxPreemptions 0 = none, stops inheritance
minRuntime:
  defaultPreemptMinRuntime: 0s
  defaultPreemptionBudget: {maxPreemptions: 0}   # none (the default)
  defaultReclaimMinRuntime: 0s
  reclaimResolveMethod: lca  # or `queue`
  poolLabel: runway.dev/pool
  pools:
    a100: {defaultReclaimMinRuntime: 30m}
```

KAI's spellings are accepted as written: `parentQueue` on a queue (the Queue CRD), and
`preemptMinRuntime` / `reclaimMinRuntime` for the pool defaults (the SchedulingShard's
`spec.minRuntime`). KAI's plugin arguments (`defaultPreemptMinRuntime`,
`defaultReclaimMinRuntime`, `reclaimResolveMethod`) are runway's own names.

Durations are Go durations (``90s``, ``1h30m``, ``2d``); unlike KAI, an invalid or negative
duration is a config error rather than a silent ``0s``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from app.config.durations import Duration, format_duration
from app.config.section import Section
from app.config.selectors import LabelSelectorConfig

QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]
ReclaimResolveMethod = Literal["lca", "queue"]

DEFAULT_POOL_LABEL = "runway.dev/pool"

HISTORY_LIMIT = 100
"""The most preemption times runway keeps per workload (``runway.dev/preemption-history``),
so the largest ``maxPreemptions`` a preemption budget may ask for."""


def _one_of(data: Any, ours: str, kais: str) -> Any:
    """Reject a mapping that spells one field both ways (runway's name and KAI's)."""
    if isinstance(data, dict) and ours in data and kais in data:
        raise ValueError(f"give `{ours}` or KAI's `{kais}`, not both (they are the same field)")
    return data


class PreemptionBudgetConfig(Section):
    """How often one workload may be a victim (issue #16, ``app.policy.budget``)."""

    max_preemptions: int = Field(
        ge=0,
        le=HISTORY_LIMIT,
        description="A workload preempted (or reclaimed) this many times within `window` is "
        "protected from both until the oldest of those preemptions leaves the window. "
        f"0 = no budget (and, on a queue, stops inheritance). At most {HISTORY_LIMIT}: the "
        "history runway keeps per workload is bounded.",
    )
    window: Duration = Field(
        0.0,
        description="The sliding window the preemptions are counted in; required (above 0s) "
        "when `maxPreemptions` is above 0.",
    )

    @model_validator(mode="after")
    def _window_when_counted(self) -> PreemptionBudgetConfig:
        if self.max_preemptions > 0 and self.window <= 0:
            raise ValueError(
                f"`window` must be above 0s when `maxPreemptions` is "
                f"{self.max_preemptions}, got {format_duration(self.window)!r}"
            )
        return self


_NAMESPACE_PATTERN = re.compile(r"[a-z0-9*?]([-a-z0-9*?]{0,61}[a-z0-9*?])?")


class QueueConfig(Section):
    """One queue of the tree. A pod names its leaf queue by label (`runway.dev/queue`)."""

    name: str = Field(
        min_length=1,
        description="Queue name, unique in the tree; what pods put in their queue label.",
    )
    parent: str | None = Field(
        None,
        validation_alias=AliasChoices("parent", "parentQueue"),
        description="Name of the parent queue; unset or empty = a top-level queue. "
        "KAI's `parentQueue` is accepted.",
    )
    preempt_min_runtime: Duration | None = Field(
        None,
        description="Minimum runtime before a workload of this subtree may be preempted by a "
        "workload of its own leaf queue. Unset = inherit from the parent (then the pool "
        'default); "0s" = no protection, and stops inheritance.',
    )
    reclaim_min_runtime: Duration | None = Field(
        None,
        description="Minimum runtime before a workload of this subtree may be reclaimed by a "
        "workload of another queue (resolved per `minRuntime.reclaimResolveMethod`). Unset = "
        'inherit; "0s" = no protection, and stops inheritance.',
    )
    preemption_budget: PreemptionBudgetConfig | None = Field(
        None,
        description="`{maxPreemptions: N, window: W}`: a workload of this subtree preempted N "
        "times within W is protected from preemption and reclaim until the oldest of those "
        "leaves the window. Unset = inherit from the parent (then "
        "`minRuntime.defaultPreemptionBudget`); `maxPreemptions: 0` = no budget, and stops "
        "inheritance.",
    )
    queueing_strategy: QueueingStrategy = Field(
        "BestEffortFIFO",
        description="Leaf queues only: `BestEffortFIFO` lets any pending pod through; "
        "`StrictFIFO` admits only the head of the queue's pending order.",
    )
    namespaces: list[str] | None = Field(
        None,
        description="The namespaces whose pods may use this subtree's queues (names, or "
        "shell patterns such as `team-a-*`; `*` = every namespace), as Kueue reaches a "
        "ClusterQueue only through a LocalQueue an administrator made in the namespace. The "
        "nearest queue up the tree that sets `namespaces` or `namespaceSelector` decides (a "
        "namespace may use the queue when it matches either); neither set on the queue or any "
        "ancestor = every namespace (a single-tenant cluster). A pod naming a queue its "
        "namespace may not use is queued in `default` instead, counted in "
        "`runway_queue_denied_total` and explained in `/v1/explain`. On KAI Queue objects: the "
        "annotation `runway.dev/namespaces` (comma-separated).",
    )
    namespace_selector: LabelSelectorConfig | None = Field(
        None,
        description="The namespaces whose pods may use this subtree's queues, by the "
        "namespace's labels: a Kubernetes `LabelSelector` (`matchLabels`, `matchExpressions` "
        "with `In`, `NotIn`, `Exists`, `DoesNotExist`), as Kueue's ClusterQueue "
        "`namespaceSelector`; `{}` matches every namespace. Decided together with `namespaces` "
        "(the nearest queue that sets either; a match of either allows). runway watches "
        "Namespaces only while some queue has a selector (RBAC: get/list/watch namespaces); "
        "a namespace it has not seen (the embedded default sees none) has no labels, and one "
        "with more than 256 labels matches no selector. On KAI Queue objects: the annotation "
        "`runway.dev/namespace-selector` in `kubectl -l` syntax (`team=a,tier in (gold,silver),"
        "!legacy`).",
    )

    @field_validator("namespaces")
    @classmethod
    def _namespace_patterns(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for item in value:
            if not item or not _NAMESPACE_PATTERN.fullmatch(item):
                raise ValueError(
                    f"{item!r} is not a namespace name or pattern (lowercase letters, digits, "
                    "'-', and the wildcards '*' and '?')"
                )
        return value

    @field_validator("namespace_selector", mode="before")
    @classmethod
    def _selector_is_an_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                "a LabelSelector object, e.g. {matchLabels: {team: a}} or {matchExpressions: "
                "[{key: tier, operator: In, values: [gold]}]} (the string form is for a KAI "
                "Queue's runway.dev/namespace-selector annotation)"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _parent_spelled_once(cls, data: Any) -> Any:
        return _one_of(data, "parent", "parentQueue")

    @property
    def parent_name(self) -> str | None:
        """The parent's name, with KAI's empty string folded into None (top-level)."""
        return self.parent or None


class PoolMinRuntime(Section):
    """Overrides for the nodes of one pool; an unset field keeps the global default."""

    default_preempt_min_runtime: Duration | None = Field(
        None,
        validation_alias=AliasChoices(
            "defaultPreemptMinRuntime", "default_preempt_min_runtime", "preemptMinRuntime"
        ),
        description="Preempt min-runtime where no queue sets one, on this pool's nodes. "
        "Unset = the global `defaultPreemptMinRuntime`. KAI's shard spelling "
        "`preemptMinRuntime` is accepted.",
    )
    default_reclaim_min_runtime: Duration | None = Field(
        None,
        validation_alias=AliasChoices(
            "defaultReclaimMinRuntime", "default_reclaim_min_runtime", "reclaimMinRuntime"
        ),
        description="Reclaim min-runtime where no queue sets one, on this pool's nodes. "
        "Unset = the global `defaultReclaimMinRuntime`. KAI's shard spelling "
        "`reclaimMinRuntime` is accepted.",
    )
    reclaim_resolve_method: ReclaimResolveMethod | None = Field(
        None,
        description="Reclaim resolution method on this pool's nodes. Unset = the global "
        "`reclaimResolveMethod`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _spelled_once(cls, data: Any) -> Any:
        _one_of(data, "defaultPreemptMinRuntime", "preemptMinRuntime")
        return _one_of(data, "defaultReclaimMinRuntime", "reclaimMinRuntime")


class MinRuntimeConfig(Section):
    """Node-pool level of the min-runtime hierarchy: applies where no queue sets a value."""

    default_preempt_min_runtime: Duration = Field(
        0.0,
        validation_alias=AliasChoices(
            "defaultPreemptMinRuntime", "default_preempt_min_runtime", "preemptMinRuntime"
        ),
        description='Preempt min-runtime where no queue sets one. "0s" (default) = always '
        "preemptible, as without min-runtime. KAI's shard spelling `preemptMinRuntime` is "
        "accepted.",
    )
    default_reclaim_min_runtime: Duration = Field(
        0.0,
        validation_alias=AliasChoices(
            "defaultReclaimMinRuntime", "default_reclaim_min_runtime", "reclaimMinRuntime"
        ),
        description='Reclaim min-runtime where no queue sets one. "0s" (default) = always '
        "reclaimable. KAI's shard spelling `reclaimMinRuntime` is accepted.",
    )
    reclaim_resolve_method: ReclaimResolveMethod = Field(
        "lca",
        description="`lca` (default): from the lowest common ancestor of the two leaf queues, "
        "step one level down towards the victim and walk up from there to the first queue "
        "that sets `reclaimMinRuntime`, so a setting only affects its siblings. `queue`: walk "
        "up from the victim's leaf queue.",
    )
    pool_label: str = Field(
        DEFAULT_POOL_LABEL,
        min_length=1,
        description="Node label whose value names a node's pool, the key of `pools` "
        "(KAI's is `kai.scheduler/node-pool`).",
    )
    pools: dict[str, PoolMinRuntime] = Field(
        default_factory=dict,
        description="Per-pool overrides keyed by the value of `poolLabel` on the node. A node "
        "without the label, or with a value not listed here, uses the global defaults.",
    )
    default_preemption_budget: PreemptionBudgetConfig = Field(
        default_factory=lambda: PreemptionBudgetConfig(max_preemptions=0),
        description="The preemption budget of a workload whose queues set none (see a queue's "
        "`preemptionBudget`). Default `{maxPreemptions: 0}`: no budget. Not per pool: the "
        "budget belongs to the workload, not to a node.",
    )

    @model_validator(mode="before")
    @classmethod
    def _spelled_once(cls, data: Any) -> Any:
        _one_of(data, "defaultPreemptMinRuntime", "preemptMinRuntime")
        return _one_of(data, "defaultReclaimMinRuntime", "reclaimMinRuntime")


def tree_problems(queues: Sequence[QueueConfig]) -> list[tuple[tuple[int | str, ...], str, Any]]:
    """What is wrong with the tree: ``(location, message, offending value)`` per problem.

    Checks duplicate names, unknown parents and cycles; locations are relative to the
    ``queues`` list, e.g. ``(3, "parent")``.
    """
    problems: list[tuple[tuple[int | str, ...], str, Any]] = []
    first: dict[str, int] = {}
    for i, q in enumerate(queues):
        if q.name in first:
            problems.append(
                (
                    (i, "name"),
                    f"duplicate queue name {q.name!r} (already queues[{first[q.name]}]); "
                    "queue names must be unique",
                    q.name,
                )
            )
        else:
            first[q.name] = i
    parents = {q.name: q.parent_name for q in queues}
    for i, q in enumerate(queues):
        parent = q.parent_name
        if parent is not None and parent not in parents:
            problems.append(
                (
                    (i, "parent"),
                    f"queue {q.name!r}: unknown parent queue {parent!r}; declare it in "
                    "`queues` or fix the name",
                    parent,
                )
            )
    reported: set[str] = set()
    for i, q in enumerate(queues):
        if first.get(q.name) != i or q.name in reported:
            continue
        seen = [q.name]
        cur = parents.get(q.name)
        while cur is not None and cur in parents:
            if cur in seen:
                # Report each cycle once, at its first member in file order; a queue that
                # only leads into a cycle is not itself wrong.
                if cur == q.name:
                    cycle = [*seen, cur]
                    reported.update(cycle)
                    problems.append(
                        (
                            (i, "parent"),
                            f"queue {q.name!r}: parent cycle {' -> '.join(cycle)}; a queue "
                            "cannot be its own ancestor",
                            q.parent,
                        )
                    )
                break
            seen.append(cur)
            cur = parents[cur]
    return problems
