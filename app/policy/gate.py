"""The preemption gate (KEP-4832 in the extender): when a held preemptor may be placed again.

While its preemption is in flight, a preemptor P is held: ``filter`` passes only its nominated
node and ``preempt`` vetoes. The gate opens when every victim is gone or terminating, when a
bound passes, or after a failed task's back-off (``failed_retry_wait``) — whichever comes first.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from dataclasses import dataclass

from app.model.gate import GateEntry, PodRef
from app.model.timestamps import format_time
from app.policy.backoff import exponential_wait

FAILED_RETRY_BASE_S = 1.0
FAILED_RETRY_MAX_S = 60.0
"""A failed preemption (a victim's DELETE refused by a webhook, the API server failing) keeps
its preemptor in the gate 1 s, then 2 s, 4 s ... up to 60 s after each consecutive failure.
Without it kube-scheduler retries the preemptor at once (the gate's annotation removal is a
pod update that moves it to the active queue) and a refused DELETE becomes a hot loop of
annotation, nomination and DELETE calls, several a second, for as long as the refusal lasts."""


def failed_retry_wait(failures: int) -> float:
    """Seconds a preemptor stays gated after its ``failures``-th consecutive failed preemption."""
    return exponential_wait(failures, FAILED_RETRY_BASE_S, FAILED_RETRY_MAX_S)


class VictimState(enum.Enum):
    """What the cache knows of a victim."""

    PRESENT = "present"
    TERMINATING = "terminating"
    GONE = "gone"
    UNKNOWN = "unknown"
    """No cache (embedded default): only the task's own result can tell."""


@dataclass(frozen=True)
class GateCheck:
    """Whether a held preemptor may go, and why."""

    open: bool
    why: str
    outstanding: tuple[PodRef, ...] = ()


def check_gate(
    entry: GateEntry,
    state_of: Callable[[str], VictimState],
    now: float,
    task_done: bool = False,
) -> GateCheck:
    """Decide whether ``entry`` still holds.

    ``task_done`` means the API calls finished successfully; it only opens the gate when the
    victims cannot be observed (no cache), since a deleted pod may still be running until the
    watch shows it terminating.
    """
    states = {v.uid: state_of(v.uid) for v in entry.victims}
    outstanding = tuple(
        v for v in entry.victims if states[v.uid] in (VictimState.PRESENT, VictimState.UNKNOWN)
    )
    if not outstanding:
        return GateCheck(True, "every victim is gone or terminating")
    if task_done and all(states[v.uid] is VictimState.UNKNOWN for v in outstanding):
        return GateCheck(True, "preemption calls completed (victims not observable)")
    if now >= entry.deadline:
        return GateCheck(True, f"gate bound passed at {format_time(entry.deadline)}", outstanding)
    return GateCheck(False, "preemption in flight", outstanding)


def left_by_the_scheduler(
    entry: GateEntry,
    state_of: Callable[[str], VictimState],
    node_of: Callable[[str], str],
    reserved: Collection[str],
) -> tuple[PodRef, ...]:
    """The victims kube-scheduler was to delete and did not, when it asks ``preempt`` for the
    held preemptor again in scheduler-executes mode.

    It asks again only once its own preemption's API calls are over (1.33+: its PreEnqueue holds
    the pod while they run; before, they ran inside the cycle), so a victim on the chosen node
    still running then was not deleted: its DELETE was refused (a webhook, a policy) or failed.
    Left out: pods on other nodes (gang siblings runway deletes itself) and pods another
    preemption in flight deletes (``reserved``: awaited here). Non-empty means the preemption
    failed, and holding the gate would strand the pod: a held answer (``{}``) parks it as
    unschedulable by NodeResourcesFit, which from 1.32 only a resource event re-queues (its
    flush is 5 minutes). kube-scheduler's own retry — it re-activates a preemptor whose calls
    failed — sets the pace then, as without runway."""
    return tuple(
        v
        for v in entry.victims
        if v.uid not in reserved
        and node_of(v.uid) == entry.node
        and state_of(v.uid) is VictimState.PRESENT
    )


def may_clear_nomination(
    entry: GateEntry | None, node: str, gate_open: bool, scheduler_nominates: bool
) -> bool:
    """Whether runway may clear a pending pod's nomination to ``node`` when a higher-priority
    preemption takes the node: only a nomination runway wrote itself — the pod is a preemptor of
    runway's (``entry``) nominated to that very node — never one kube-scheduler wrote (its own
    preemption, or, from 1.35, the nomination it writes when binding starts, KEP-5278: "external
    components should not overwrite this field"). On such a release a preemptor whose gate is
    open may be binding already: its nomination is the scheduler's now, and stays."""
    if entry is None or entry.node != node:
        return False
    return not (scheduler_nominates and gate_open)
