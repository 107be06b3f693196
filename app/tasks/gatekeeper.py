"""Keeps the gate honest: opens it as victims disappear or the bound passes, and at startup
resumes (leader) or releases the gates mirrored on pods by a previous run or another replica."""

from __future__ import annotations

from app.logs import get_logger
from app.runtime import Runtime
from app.state.cache import CacheEvent
from app.state.gate import GATE_ANNOTATION, decode_entry
from app.state.preemption import gate_check, pod_ref, sweep_gates
from app.tasks.loop import Ticker
from app.tasks.preemption import PreemptionPlan

log = get_logger("gatekeeper")


class GateKeeper(Ticker):
    """A periodic sweep (for the bound) plus a cache subscription (for victims going away)."""

    def __init__(self, runtime: Runtime, interval_s: float = 1.0) -> None:
        super().__init__("gatekeeper", tick=interval_s, debounce=0.0)
        self._runtime = runtime
        self._resumed = False
        self._unsubscribe = runtime.cache.subscribe(self._on_change)

    async def stop(self) -> None:
        """Stop the sweep and the subscription."""
        self._unsubscribe()
        await super().stop()

    def _on_change(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        if len(self._runtime.gate):
            sweep_gates(self._runtime)

    async def run_once(self) -> float:
        """Resume mirrored gates once (leader, after the first list), then sweep."""
        runtime = self._runtime
        if not self._resumed and runtime.cache.pods_synced and runtime.is_leader:
            self.resume_mirrored()
            self._resumed = True
        sweep_gates(runtime)
        return self.tick

    def resume_mirrored(self) -> None:
        """Gates found on pods at startup: release the finished ones, re-run the others' calls.

        The calls are idempotent (condition patch, record once, UID-precondition delete with
        404 = done), so re-running a plan cut short by a restart is safe.
        """
        runtime = self._runtime
        executor = runtime.preemptions
        now = runtime.clock.now()
        for pod in runtime.cache.pods():
            if not pod.annotation(GATE_ANNOTATION) or runtime.gate.get(pod.metadata.uid):
                continue
            entry = decode_entry(pod)
            if entry is None or executor is None:
                continue
            check = gate_check(runtime, entry, now)
            if check.open:
                log.info("released a gate left on a pod", pod=pod.key, why=check.why)
                continue
            log.info("resuming a preemption left in flight", pod=pod.key, node=entry.node)
            executor.submit(
                PreemptionPlan(
                    preemptor=pod_ref(pod),
                    node=entry.node,
                    victims=check.outstanding,
                    message=f"Preempted by {pod.key} (resumed after a runway restart)",
                    rule=entry.rule,
                )
            )
