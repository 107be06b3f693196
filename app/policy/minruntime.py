"""Minimum runtime before preemption or reclaim (SPEC §3, KAI's min-runtime plugin). Pure.

Resolution order, lowest level wins: a queue's own setting, inherited up the tree, then the
node pool's default (``minRuntime.pools[<label value>]``, then ``minRuntime``).

- **preempt** (victim in the preemptor's leaf queue): walk up from the victim's leaf to the first
  queue that sets ``preemptMinRuntime``.
- **reclaim** (victim in another leaf queue), method ``lca``: from the lowest common ancestor of
  the two leaves step one level down towards the victim, then walk up to the first queue that
  sets ``reclaimMinRuntime``; with no common ancestor, only the victim's top-level queue is
  consulted. Method ``queue``: walk up from the victim's leaf.

One deliberate difference from KAI: when the ``lca`` walk finds nothing, KAI falls back to the
*preempt* default (``resolveReclaimMinRuntimeLCA`` initialises with
``defaultPreemptMinRuntime``); runway uses the reclaim default, as the design says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from app.policy.queues import QueueTree

if TYPE_CHECKING:
    from app.config.queues import MinRuntimeConfig, ReclaimResolveMethod

Action = Literal["preempt", "reclaim"]
"""``preempt`` (victim in the preemptor's leaf queue) or ``reclaim`` (another leaf queue)."""
POOL_DEFAULT = "default"
"""``Resolution.resolved_from`` when no queue set a value and the pool default applied."""


@dataclass(frozen=True, slots=True)
class PoolDefaults:
    """The node-pool level of the hierarchy, for the pool of the node being considered."""

    preempt_min_runtime_s: float = 0.0
    reclaim_min_runtime_s: float = 0.0
    reclaim_resolve_method: ReclaimResolveMethod = "lca"
    pool: str | None = None
    """The pool's label value when a per-pool override applied, else None (global defaults)."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """The min-runtime that protects a victim from one preemptor, and where it came from."""

    action: Action
    min_runtime_s: float
    resolved_from: str
    """The queue whose setting applied, or ``"default"`` for the pool default."""
    path: list[str] = field(default_factory=list, hash=False)
    """The queues consulted, in walk order: from where the walk started up to ``resolved_from``
    (or up to the top-level queue when the pool default applied)."""
    pool_default: bool = False
    """True when no queue set a value (tells the pool default from a queue named "default")."""


def defaults_for_pool(
    config_min_runtime: MinRuntimeConfig, node_labels: Mapping[str, str] | None
) -> PoolDefaults:
    """The pool defaults for a node with ``node_labels``: its pool's overrides over the globals.

    A node without the pool label, or whose value has no entry in ``pools``, gets the globals.
    """
    cfg = config_min_runtime
    preempt = cfg.default_preempt_min_runtime
    reclaim = cfg.default_reclaim_min_runtime
    method: ReclaimResolveMethod = cfg.reclaim_resolve_method
    value = (node_labels or {}).get(cfg.pool_label)
    override = cfg.pools.get(value) if value is not None else None
    if override is None:
        return PoolDefaults(preempt, reclaim, method)
    if override.default_preempt_min_runtime is not None:
        preempt = override.default_preempt_min_runtime
    if override.default_reclaim_min_runtime is not None:
        reclaim = override.default_reclaim_min_runtime
    if override.reclaim_resolve_method is not None:
        method = override.reclaim_resolve_method
    return PoolDefaults(preempt, reclaim, method, value)


def _walk_up(tree: QueueTree, path: Sequence[str], action: Action, default_s: float) -> Resolution:
    """First queue along ``path`` (walk order) that sets the action's min-runtime."""
    walked: list[str] = []
    for name in path:
        walked.append(name)
        node = tree.node(name)
        value = node.preempt_min_runtime_s if action == "preempt" else node.reclaim_min_runtime_s
        if value is not None:
            return Resolution(action, value, name, walked)
    return Resolution(action, default_s, POOL_DEFAULT, walked, pool_default=True)


def resolve_preempt(tree: QueueTree, defaults: PoolDefaults, victim_queue: str) -> Resolution:
    """Preempt min-runtime: walk up from the victim's leaf queue, else the pool default."""
    return _walk_up(
        tree, tree.path_to_root(victim_queue), "preempt", defaults.preempt_min_runtime_s
    )


def resolve_reclaim(
    tree: QueueTree,
    defaults: PoolDefaults,
    preemptor_queue: str,
    victim_queue: str,
    method: ReclaimResolveMethod | None = None,
) -> Resolution:
    """Reclaim min-runtime by ``method`` (default: the pool's ``reclaim_resolve_method``)."""
    method = method or defaults.reclaim_resolve_method
    default_s = defaults.reclaim_min_runtime_s
    if method == "queue":
        return _walk_up(tree, tree.path_to_root(victim_queue), "reclaim", default_s)
    down = tree.hierarchy_path(victim_queue)  # top-level first
    lca = tree.lowest_common_ancestor(preemptor_queue, victim_queue)
    if lca is None:
        # Different top-level trees: siblings under an implicit root, so the victim's
        # top-level queue is the "one step down" and there is nothing above it.
        return _walk_up(tree, down[:1], "reclaim", default_s)
    start = down.index(lca)
    if start + 1 < len(down):
        start += 1
    return _walk_up(tree, down[start::-1], "reclaim", default_s)


def resolve(
    tree: QueueTree, defaults: PoolDefaults, preemptor_queue: str, victim_queue: str
) -> Resolution:
    """The min-runtime protecting a victim in ``victim_queue`` from a preemptor.

    Same leaf queue → ``preempt``; otherwise ``reclaim`` by the pool's resolve method. Never
    raises: unknown queues are top-level queues with no settings.
    """
    if preemptor_queue == victim_queue:
        return resolve_preempt(tree, defaults, victim_queue)
    return resolve_reclaim(tree, defaults, preemptor_queue, victim_queue)


def protected_until(start: float | None, res: Resolution) -> float | None:
    """When the protection ends (unix seconds); None when the start is unknown."""
    if start is None:
        return None
    return start + res.min_runtime_s


def is_protected(now: float, start: float | None, res: Resolution) -> bool:
    """Protected while ``now < start + minRuntime``; no known start or ``0s`` → not protected."""
    if start is None or res.min_runtime_s <= 0:
        return False
    return now < start + res.min_runtime_s


def elastic_may_lose(min_available: int, running: int, evicting: int) -> bool:
    """Whether evicting ``evicting`` of ``running`` pods leaves at least ``min_available``.

    KAI's scenario validator for a protected elastic workload: valid iff
    ``minAvailable <= running - evicted``.
    """
    return running - evicting >= min_available


def eligible_victim(now: float, start: float | None, res: Resolution, *, elastic: bool) -> bool:
    """KAI's victim filter: an elastic workload always passes (its floor is checked per
    scenario by :func:`may_evict`); any other passes once its protection is over."""
    return elastic or not is_protected(now, start, res)


def may_evict(
    now: float,
    start: float | None,
    res: Resolution,
    *,
    min_available: int,
    running: int,
    evicting: int,
) -> bool:
    """Whether evicting ``evicting`` of a workload's ``running`` pods is allowed now.

    Unprotected: always. Protected: only while at least ``min_available`` pods keep running
    (so a gang, whose minAvailable is all its pods, cannot lose any).
    """
    if not is_protected(now, start, res):
        return True
    return elastic_may_lose(min_available, running, evicting)
