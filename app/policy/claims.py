"""Claims: the extender-side equivalent of kube-scheduler's in-memory nomination (DESIGN §4).

From the moment ``preempt`` decides, a preemption in flight claims its node and its victims. Until
the preemptor's nomination is visible to kube-scheduler (and after, until it binds or its gate
opens), kube-scheduler's own dry run would offer the same node to every other preemptor and keep
scheduling lower-priority pods into the room the victims free. So:

* another preemptor is not given a claimed node (``policy.victims.decide`` drops it);
* ``filter`` keeps a pod of lower or equal priority off a claimed node where it would not fit
  beside the preemptor (``blocks``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.policy.quantity import Resources, covers


@dataclass(frozen=True)
class Claim:
    """One in-flight preemption's hold on a node."""

    node: str
    preemptor_uid: str
    preemptor: str
    """``namespace/name`` of the preemptor (for messages)."""
    priority: int
    room: Resources | None
    """What the node has free once the victims are gone and the preemptor is placed; None when
    runway cannot tell (node or pods unknown): then every pod that is not above the preemptor's
    priority is kept off."""
    until: float | None = None
    """The preemptor's gate bound: the claim ends by then."""


def room_after(
    allocatable: Mapping[str, int], staying: Mapping[str, int], preemptor: Mapping[str, int]
) -> Resources:
    """The node's room once its remaining pods (``staying``: every non-victim pod's requests) and
    the preemptor are placed (may be negative for a resource already over-committed)."""
    names = set(allocatable) | set(staying) | set(preemptor)
    return {
        n: allocatable.get(n, 0) - staying.get(n, 0) - preemptor.get(n, 0)
        for n in names
        if n in allocatable
    }


def blocks(claim: Claim, pod_uid: str, priority: int, requests: Mapping[str, int]) -> bool:
    """Whether ``claim`` keeps this pod off ``claim.node``: not the preemptor itself, not of
    higher priority, and it would not fit beside the preemptor."""
    if pod_uid == claim.preemptor_uid or priority > claim.priority:
        return False
    return claim.room is None or not covers(claim.room, requests)


def reason(claim: Claim) -> str:
    """The filter reason for a node kept free for a preemptor: what, and that nothing is to do."""
    # Another tenant's pod is never named: the reason lands in this pod's events.
    return (
        f"node {claim.node} is kept free for a preemption in flight of equal or higher "
        "priority, whose victims are being deleted; this pod would not fit beside it. Nothing "
        "to do: other nodes are offered, and the claim ends when that pod binds."
    )
