"""The embedded default's stand-in for the API server: every planned call is logged, none made."""

from __future__ import annotations

from app.logs import get_logger
from app.policy.gate import GateEntry, PodRef

log = get_logger("dry-run")


class DryRunPreemptionApi:
    """Implements ``app.tasks.preemption.PreemptionApi`` by logging what would be done."""

    async def mirror_gate(self, preemptor: PodRef, entry: GateEntry | None) -> None:
        """Log the gate annotation patch."""
        log.info(
            "dry-run: patch pod annotation",
            pod=preemptor.key,
            action="set gate" if entry else "remove gate",
        )

    async def mark_disruption(self, victim: PodRef, message: str) -> None:
        """Log the DisruptionTarget status patch."""
        log.info(
            "dry-run: patch pods/status DisruptionTarget=True",
            pod=victim.key,
            reason="PreemptionByScheduler",
            message=message,
        )

    async def record_eviction(self, victim: PodRef, preemptor: PodRef, now: float) -> None:
        """Log the eviction record write."""
        log.info(
            "dry-run: write eviction record",
            pod=victim.key,
            reason="Preempted",
            preemptor=preemptor.uid,
        )

    async def delete_pod(self, victim: PodRef) -> None:
        """Log the delete."""
        log.info("dry-run: delete pod", pod=victim.key, uid=victim.uid)

    async def nominate(self, preemptor: PodRef, node: str | None) -> None:
        """Log the nomination patch."""
        log.info("dry-run: patch pods/status nominatedNodeName", pod=preemptor.key, node=node)
