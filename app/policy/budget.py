"""THE preemption budget rule (issue #16): how often one workload may be a victim. Pure.

A queue may set ``preemptionBudget: {maxPreemptions: N, window: W}``: a workload that was
preempted (or reclaimed) N times within W is protected from further preemption *and* reclaim
until the oldest of those N preemptions leaves the window. Unset = inherit from the parent queue,
then the global default (``minRuntime.defaultPreemptionBudget``; none by default).
``maxPreemptions: 0`` means "no budget here" and stops inheritance. The victim's leaf queue
decides (walking up from it), whoever the preemptor is, on whatever node.

The history (the preemption times of one workload) is persisted with its eviction record
(``runway.dev/preemption-history``, ``app.model.eviction``) and bounded: ``record_preemption``
keeps only the last N times, and never more than ``HISTORY_LIMIT`` (the config rejects a larger
``maxPreemptions``).

A time is inside the window at ``now`` when ``now - W < t <= now``; a time in the future (another
replica's clock, or a value written by hand) does not count, so a hand-written history can
never protect a workload for longer than a real one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from app.config.durations import format_duration
from app.config.queues import HISTORY_LIMIT, MinRuntimeConfig, PreemptionBudgetConfig
from app.model.timestamps import format_time

if TYPE_CHECKING:
    from app.policy.queues import QueueTree

__all__ = [
    "GLOBAL_DEFAULT",
    "HISTORY_LIMIT",
    "NO_BUDGET",
    "BudgetResolution",
    "BudgetStatus",
    "PreemptionBudget",
    "budget_protected_until",
    "budget_status",
    "default_budget",
    "from_config",
    "record_preemption",
    "resolve_budget",
]

GLOBAL_DEFAULT: Final = "default"
"""``BudgetResolution.resolved_from`` when no queue set a budget (the global default applied)."""


@dataclass(frozen=True, slots=True)
class PreemptionBudget:
    """At most ``max_preemptions`` preemptions of one workload within ``window_s`` seconds.

    ``max_preemptions == 0`` (or a window of 0) is no budget: never protects."""

    max_preemptions: int
    window_s: float

    @property
    def enabled(self) -> bool:
        """Whether the budget can protect anything at all."""
        return self.max_preemptions > 0 and self.window_s > 0

    def describe(self) -> str:
        """``3 per 1h``, or ``none``."""
        if not self.enabled:
            return "none"
        return f"{self.max_preemptions} per {format_duration(self.window_s)}"


NO_BUDGET: Final = PreemptionBudget(0, 0.0)


def from_config(config: PreemptionBudgetConfig | None) -> PreemptionBudget | None:
    """The policy value of a config ``preemptionBudget`` (None: unset, inherit)."""
    if config is None:
        return None
    if config.max_preemptions == 0:
        return NO_BUDGET
    return PreemptionBudget(config.max_preemptions, config.window)


def default_budget(min_runtime: MinRuntimeConfig) -> PreemptionBudget:
    """``minRuntime.defaultPreemptionBudget``: where no queue sets a budget."""
    return from_config(min_runtime.default_preemption_budget) or NO_BUDGET


@dataclass(frozen=True, slots=True)
class BudgetResolution:
    """The budget of a leaf queue and where it came from."""

    budget: PreemptionBudget
    resolved_from: str
    """The queue whose ``preemptionBudget`` applied, or ``"default"`` (the global default)."""
    path: tuple[str, ...] = ()
    """The queues consulted, leaf first, up to ``resolved_from`` (or the top-level queue)."""
    is_default: bool = False
    """True when no queue set one (tells the default from a queue named "default")."""

    def describe(self) -> str:
        """``budget of queue team-a: 3 per 1h`` (or ``default budget: ...``)."""
        where = "default budget" if self.is_default else f"budget of queue {self.resolved_from}"
        return f"{where}: {self.budget.describe()}"


def resolve_budget(
    tree: QueueTree, leaf_queue: str, default: PreemptionBudget = NO_BUDGET
) -> BudgetResolution:
    """The budget protecting a workload of ``leaf_queue``: the first queue walking up from the
    leaf that sets one (``maxPreemptions: 0`` included: it stops the walk), else ``default``.
    Never raises: an unknown queue is a top-level queue with no settings."""
    walked: list[str] = []
    for name in tree.path_to_root(leaf_queue):
        walked.append(name)
        budget = tree.node(name).preemption_budget
        if budget is not None:
            return BudgetResolution(budget, name, tuple(walked))
    return BudgetResolution(default, GLOBAL_DEFAULT, tuple(walked), is_default=True)


def _in_window(history: Sequence[float], window_s: float, now: float) -> list[float]:
    # ``t + W > now`` rather than ``t > now - W``: the same float as the protection's end, so
    # "protected" and "until > now" never disagree by a rounding.
    return sorted(t for t in history if t <= now < t + window_s)


def budget_protected_until(
    history: Sequence[float], budget: PreemptionBudget, now: float
) -> float | None:
    """When the protection ends (epoch seconds), or None when the workload is not protected.

    Protected while at least N of its preemptions are inside the window: until enough of them
    leave it that fewer than N remain (with exactly N, when the oldest leaves)."""
    if not budget.enabled:
        return None
    inside = _in_window(history, budget.window_s, now)
    if len(inside) < budget.max_preemptions:
        return None
    return inside[len(inside) - budget.max_preemptions] + budget.window_s


def record_preemption(
    history: Sequence[float], at: float, budget: PreemptionBudget
) -> tuple[float, ...]:
    """The history after a preemption at ``at``: in time order, only the last N kept (at most
    ``HISTORY_LIMIT``); no budget keeps nothing."""
    keep = min(budget.max_preemptions, HISTORY_LIMIT) if budget.enabled else 0
    if keep <= 0:
        return ()
    return tuple(sorted([*history, at])[-keep:])


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A workload's budget at one instant: how many preemptions count and until when it is
    protected (None = not protected)."""

    resolution: BudgetResolution
    in_window: int
    protected_until: float | None
    history: tuple[float, ...] = field(default=(), repr=False)

    @property
    def protected(self) -> bool:
        """Whether the budget protects the workload now."""
        return self.protected_until is not None

    def describe(self) -> str:
        """``preempted 3 times in the last 1h (budget of queue team-a: 3 per 1h); protected
        until ...`` for an operator."""
        budget = self.resolution.budget
        if not budget.enabled:
            return f"no preemption budget ({self.resolution.describe()})"
        times = "time" if self.in_window == 1 else "times"
        head = (
            f"preempted {self.in_window} {times} in the last {format_duration(budget.window_s)} "
            f"({self.resolution.describe()})"
        )
        if self.protected_until is None:
            return f"{head}; budget not exhausted"
        return f"{head}; protected until {format_time(self.protected_until)}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (names as in the REST API)."""
        budget = self.resolution.budget
        return {
            "maxPreemptions": budget.max_preemptions,
            "windowSeconds": budget.window_s,
            "resolvedFrom": self.resolution.resolved_from,
            "path": list(self.resolution.path),
            "preemptionsInWindow": self.in_window,
            "protected": self.protected,
            "protectedUntil": None
            if self.protected_until is None
            else format_time(self.protected_until),
        }


def budget_status(
    history: Sequence[float], resolution: BudgetResolution, now: float
) -> BudgetStatus:
    """The budget state at ``now`` of a workload with ``history`` under ``resolution``."""
    budget = resolution.budget
    inside = len(_in_window(history, budget.window_s, now)) if budget.enabled else 0
    return BudgetStatus(
        resolution,
        inside,
        budget_protected_until(history, budget, now),
        tuple(history),
    )
