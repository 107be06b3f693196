"""Never delete on the word of a request (DESIGN §4): a preemption is checked against what the
cache knows before any API call. The verbs are unauthenticated HTTP by protocol, so a forged
``preempt`` payload (a made-up preemptor, a high-priority victim, a pod on another node) must
make runway do nothing at all.

Plain functions over the cached pods; the caller (``app.state.preemption``) answers ``{}`` for a
refusal, logs it and counts it by ``reason``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from app.model import Pod

REASONS = (
    "preemptor-unknown",
    "preemptor-bound",
    "preemptor-deleting",
    "preemptor-scheduler",
    "victim-unknown",
    "victim-elsewhere",
    "victim-priority",
)
"""Refusal reasons (metric label values)."""


@dataclass(frozen=True)
class Refusal:
    """Why a preemption is refused: a short reason (metric label) and what was wrong."""

    reason: str
    message: str


def check_preemptor(
    claimed_uid: str, cached: Pod | None, scheduler_names: Collection[str]
) -> Refusal | None:
    """The preemptor must exist in the cache, be pending, not be deleted, and be handled by one
    of ``scheduler_names``."""
    if cached is None:
        return Refusal(
            "preemptor-unknown", f"preemptor UID {claimed_uid!r} is not in runway's pod cache"
        )
    if cached.spec.nodeName:
        return Refusal(
            "preemptor-bound", f"preemptor {cached.key} is already bound to {cached.spec.nodeName}"
        )
    if cached.metadata.deletionTimestamp is not None:
        return Refusal("preemptor-deleting", f"preemptor {cached.key} is being deleted")
    name = cached.spec.schedulerName or "default-scheduler"
    if name not in scheduler_names:
        return Refusal(
            "preemptor-scheduler",
            f"preemptor {cached.key} is handled by scheduler {name!r}, not one of "
            f"{sorted(scheduler_names)} (preemption.schedulerNames)",
        )
    return None


def check_victims(
    preemptor_priority: int, node: str, victims: Iterable[tuple[str, Pod | None]]
) -> Refusal | None:
    """Each victim (UID, cached pod) must exist, be bound to ``node`` and have a lower priority
    than the preemptor (whose priority comes from the cache). A victim already terminating is
    fine: its delete is a no-op."""
    for uid, pod in victims:
        if pod is None:
            return Refusal("victim-unknown", f"victim UID {uid!r} is not in runway's pod cache")
        if pod.spec.nodeName != node:
            return Refusal(
                "victim-elsewhere",
                f"victim {pod.key} is bound to {pod.spec.nodeName or 'no node'}, not {node}",
            )
        if pod.priority >= preemptor_priority:
            return Refusal(
                "victim-priority",
                f"victim {pod.key} has priority {pod.priority}, not below the preemptor's "
                f"{preemptor_priority}",
            )
    return None
