"""Minimum runtime before preemption or reclaim (DESIGN §3, KAI's min-runtime plugin). Pure.

Resolution order, lowest level wins: a queue's own setting, inherited up the tree, then the
node pool's default (``minRuntime.pools[<label value>]``, then ``minRuntime``).

- **preempt** (victim in the preemptor's leaf queue): walk up from the victim's leaf to the first
  queue that sets ``preemptMinRuntime``.
- **reclaim** (victim in another leaf queue), method ``lca``: from the lowest common ancestor of
  the two leaves step one level down towards the victim, then walk up to the first queue that
  sets ``reclaimMinRuntime``; with no common ancestor, only the victim's top-level queue is
  consulted. Method ``queue``: walk up from the victim's leaf.

When the ``lca`` walk finds nothing, the reclaim default applies, as in KAI's design text and
its plugin since KAI #234 (09b60aa4; its first version fell back to the *preempt* default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from app.model.timestamps import format_optional_time, format_time
from app.policy.budget import BudgetStatus
from app.policy.queues import DEFAULT_QUEUE, QueueTree

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
    if preemptor_queue == DEFAULT_QUEUE or not tree.is_known(preemptor_queue):
        return resolve_from_the_victims_side(tree, defaults, victim_queue)
    return resolve_reclaim(tree, defaults, preemptor_queue, victim_queue)


def resolve_from_the_victims_side(
    tree: QueueTree, defaults: PoolDefaults, victim_queue: str
) -> Resolution:
    """Reclaim min-runtime for a preemptor with no place in the tree: in ``default``, in a
    queue the tree does not declare (or one its namespace may not use, hence ``default``), or
    not managed at all. Such a preemptor has no lowest common ancestor with the victim; KAI's
    walk from an implicit root would read only the victim's top-level queue and skip the
    victim queue's own ``reclaimMinRuntime``. Whatever it claims, it gets the most protective
    answer any declared preemptor could: the longest of the walks up from each queue on the
    victim's path (the leaf-most on a tie)."""
    down = tree.hierarchy_path(victim_queue)  # top-level first
    walks = [
        _walk_up(tree, down[k::-1], "reclaim", defaults.reclaim_min_runtime_s)
        for k in range(len(down) - 1, -1, -1)
    ]
    return max(walks, key=lambda r: r.min_runtime_s)


# --- protection and the elastic floor (DESIGN §3): the one definition ------------------------


class ResolutionLike(Protocol):
    """A resolved min-runtime (:class:`Resolution` has this shape; so does ``victims.Rule``)."""

    @property
    def action(self) -> str:
        """``preempt`` (same leaf queue) or ``reclaim`` (another leaf queue)."""
        ...

    @property
    def min_runtime_s(self) -> float:
        """The resolved minimum runtime in seconds."""
        ...

    @property
    def resolved_from(self) -> str:
        """Which queue (or pool default) set the value, as a rule an operator reads."""
        ...

    @property
    def path(self) -> Sequence[str]:
        """The queues walked to find it."""
        ...


def protected_until(start: float | None, res: ResolutionLike | None) -> float | None:
    """When the protection ends (unix seconds): ``start + minRuntime``.

    None when the start is unknown or no min-runtime was resolved. A ``0s`` rule gives the start
    itself: the protection ended when the workload started (it never protected it).
    """
    if start is None or res is None:
        return None
    return start + res.min_runtime_s


def is_protected(now: float, start: float | None, res: ResolutionLike | None) -> bool:
    """Protected while ``now <= start + minRuntime`` (KAI: preemptible only when ``currentTime >
    startTime + minRuntime``, so at the boundary itself still protected); no known start, no
    rule or ``0s`` → not.

    ``0s`` means no protection at all, even with a start in the future (clock skew); a positive
    min-runtime protects a start in the future.
    """
    until = protected_until(start, res)
    return res is not None and res.min_runtime_s > 0 and until is not None and now <= until


@dataclass(frozen=True)
class Protection:
    """Whether a pod is protected now, and by which rule: its min-runtime, or its workload's
    preemption budget (``app.policy.budget``), which protects exactly like a min-runtime."""

    protected: bool
    action: str
    min_runtime_s: float | None
    resolved_from: str
    path: tuple[str, ...]
    start: float | None
    protected_until: float | None
    budget: BudgetStatus | None = None
    """The workload's preemption budget now; None when the caller knows none."""
    by_min_runtime: bool | None = field(default=None, compare=False)
    """Whether the min-runtime alone protects; None = ``protected`` (no budget involved)."""

    @property
    def by_budget_only(self) -> bool:
        """Protected by the preemption budget alone: the min-runtime does not protect."""
        own = self.protected if self.by_min_runtime is None else self.by_min_runtime
        return self.budget is not None and self.budget.protected and not own

    def _min_runtime_text(self) -> str:
        if self.start is None:
            return "start unknown, so not protected"
        if self.min_runtime_s is None:
            return "no min-runtime resolved, so not protected"
        if self.min_runtime_s <= 0:
            return f"{self.action} min-runtime 0s ({self.resolved_from}), so not protected"
        rule = f"{self.action} min-runtime {self.min_runtime_s:g}s ({self.resolved_from})"
        until = self.protected_until if self.protected_until is not None else self.start
        own = self.protected if self.by_min_runtime is None else self.by_min_runtime
        state = "protected until" if own else "protection ended"
        return f"{rule}; started {format_time(self.start)}, {state} {format_time(until)}"

    def describe(self) -> str:
        """One line for an operator: the rule and the time window; the preemption budget when
        it protects (alone it is the reason)."""
        if self.budget is None or not self.budget.protected:
            return self._min_runtime_text()
        if self.by_budget_only:
            return f"preemption budget: {self.budget.describe()}"
        return f"{self._min_runtime_text()}; also preemption budget: {self.budget.describe()}"


def protection(
    res: ResolutionLike | None,
    start: float | None,
    now: float,
    action: str,
    budget: BudgetStatus | None = None,
) -> Protection:
    """The protection at ``now`` of a workload started at ``start`` under rule ``res``, and
    under its preemption ``budget`` (its state at ``now``; None: no budget known).

    ``action`` names the kind when ``res`` is None (``res.action`` otherwise).
    """
    own = is_protected(now, start, res)
    return Protection(
        protected=own or (budget is not None and budget.protected),
        action=res.action if res is not None else action,
        min_runtime_s=res.min_runtime_s if res is not None else None,
        resolved_from=res.resolved_from if res is not None else "",
        path=tuple(res.path) if res is not None else (),
        start=start,
        protected_until=protected_until(start, res),
        budget=budget,
        by_min_runtime=own,
    )


def protected_by(prot: Protection) -> str | None:
    """``min-runtime``, ``budget`` (the preemption budget alone) or None (not protected)."""
    if not prot.protected:
        return None
    return "budget" if prot.by_budget_only else "min-runtime"


def is_elastic(min_available: int, pods: int) -> bool:
    """Elastic = minAvailable below the pod count (DESIGN §2); otherwise a gang."""
    return min_available < pods


def floor_allowance(min_available: int, running: int) -> int:
    """How many pods a protected elastic workload may lose: those above minAvailable."""
    return max(0, running - min_available)


def elastic_may_lose(min_available: int, running: int, evicting: int) -> bool:
    """Whether a protected elastic workload may lose ``evicting`` of its ``running`` pods.

    Only while at least ``min_available`` keep running (KAI's scenario validator:
    ``minAvailable <= running - evicted``). An unprotected workload has no floor.
    """
    return running - evicting >= min_available


def floor_text(workload: str, min_available: int, running: int, used: int) -> str:
    """The elastic floor for an operator: ``used`` of the allowed evictions taken."""
    return (
        f"elastic {workload}: {running} running, minAvailable {min_available}, "
        f"{used} of {floor_allowance(min_available, running)} allowed evictions used"
    )


@dataclass(frozen=True)
class Explanation:
    """Why a victim is (not) eligible for a preemptor: the explain endpoint's verdict."""

    protection: Protection
    eligible: bool
    """Lower priority than the preemptor and not protected."""
    elastic: bool
    explanation: str

    def to_dict(self) -> dict[str, object]:
        """The rule fields of the explain answer (JSON-ready; names as in the REST API)."""
        p = self.protection
        return {
            "action": p.action,
            "minRuntimeSeconds": p.min_runtime_s,
            "resolvedFrom": p.resolved_from,
            "path": list(p.path),
            "start": format_optional_time(p.start),
            "protectedUntil": format_optional_time(p.protected_until),
            "protected": p.protected,
            "protectedBy": protected_by(p),
            "budget": p.budget.to_dict() if p.budget is not None else None,
            "eligible": self.eligible,
            "explanation": self.explanation,
        }


def explain(
    prot: Protection,
    *,
    victim_priority: int,
    preemptor_priority: int,
    min_available: int,
    pods: int,
) -> Explanation:
    """Whether a victim (workload of ``pods`` pods, floor ``min_available``) with protection
    ``prot`` is eligible for a preemptor, and why, in one line."""
    lower = victim_priority < preemptor_priority
    elastic = is_elastic(min_available, pods)
    if not lower:
        why = (
            f"not a victim: priority {victim_priority} is not below the preemptor's "
            f"{preemptor_priority}"
        )
    elif prot.protected and elastic:
        why = (
            f"protected elastic workload ({prot.describe()}): it may lose pods only while "
            f"{min_available} of its {pods} pods keep running"
        )
    elif prot.protected:
        why = f"protected: {prot.describe()}"
    else:
        why = f"eligible: {prot.describe()}"
    return Explanation(prot, lower and not prot.protected, elastic, why)


def same_queue_protected_until(
    tree: QueueTree,
    config_min_runtime: MinRuntimeConfig,
    queue: str,
    node_labels: Mapping[str, str] | None,
    started: float | None,
) -> float | None:
    """When min-runtime stops protecting a workload of leaf ``queue`` started at ``started``
    from a preemption within its own queue: the queue's resolved ``preemptMinRuntime``, with the
    pool defaults of the node (``node_labels``) its first bound pod runs on. What its record
    shows as ``protection.preemptUntil``."""
    defaults = defaults_for_pool(config_min_runtime, node_labels)
    return protected_until(started, resolve_preempt(tree, defaults, queue))
