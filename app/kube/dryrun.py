"""The embedded default's stand-in for the API server: every planned pod write is logged, none
made (implements ``app.tasks.ports.PodApi`` like ``app.kube.pods.KubePodWriter``); Events are
logged too (``EventSink``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.logs import get_logger
from app.model.event import EventNote
from app.model.gate import PodRef

log = get_logger("dry-run")


class DryRunPodWriter:
    """Logs each pod write as ``dry-run: ...``; answers as if it had succeeded."""

    async def add_condition(
        self, pod: PodRef, type_: str, reason: str, message: str, now: float
    ) -> bool:
        """Log the status patch."""
        log.info(
            "dry-run: patch pods/status condition",
            pod=pod.key,
            condition=type_,
            reason=reason,
            message=message,
        )
        return True

    async def delete(self, pod: PodRef) -> bool:
        """Log the delete."""
        log.info("dry-run: delete pod", pod=pod.key, uid=pod.uid)
        return True

    async def nominate(self, pod: PodRef, node: str | None) -> None:
        """Log the nomination patch."""
        log.info("dry-run: patch pods/status nominatedNodeName", pod=pod.key, node=node)

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> bool:
        """Log the annotation patch."""
        log.info("dry-run: patch pod annotations", pod=pod.key, annotations=dict(annotations))
        return True

    async def ungate(self, pod: PodRef, patch: Sequence[Mapping[str, Any]]) -> bool:
        """Log the gate's removal."""
        log.info("dry-run: remove scheduling gate", pod=pod.key, patch=list(patch))
        return True


class DryRunEventSink:
    """The embedded default's ``EventSink``: logs each Event as ``dry-run: ...``."""

    def emit(self, note: EventNote) -> None:
        """Log the Event runway would write."""
        log.info(
            "dry-run: event",
            about=str(note.regarding),
            type=note.type,
            reason=note.reason,
            message=note.message,
        )
