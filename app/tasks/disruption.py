"""Evicting one pod the way Kubernetes asks it be done, in one place: ``DisruptionTarget=True``
(with the reason and a message its namespace may read), then — after ``then``, e.g. the eviction
record — the DELETE with a UID precondition. The preemption executor (victims, off-node gang
siblings) and the PodsReady evictor evict through it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from app.model.gate import PodRef
from app.model.pod import DISRUPTION_TARGET
from app.tasks.ports import PodApi


async def disrupt(
    pods: PodApi,
    pod: PodRef,
    reason: str,
    message: str,
    now: float,
    *,
    then: Callable[[], Awaitable[object]] | None = None,
) -> bool:
    """Mark ``pod`` a disruption target, run ``then``, delete it. False when the pod was gone
    (or its name belongs to another pod now: the mark has a UID precondition): then nothing is
    recorded or deleted — runway did not evict it."""
    if not await pods.add_condition(pod, DISRUPTION_TARGET, reason, message, now):
        return False
    if then is not None:
        await then()
    return await pods.delete(pod)
