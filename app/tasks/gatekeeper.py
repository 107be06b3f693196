"""Keeps the gate honest: opens it as victims disappear or the bound passes, and at startup
resumes (leader) or releases the gates mirrored on pods by a previous run or another replica."""

from __future__ import annotations

import asyncio
import contextlib

from app.logs import get_logger
from app.runtime import Runtime
from app.state.cache import CacheEvent
from app.state.gate import GATE_ANNOTATION, decode_entry
from app.state.preemption import gate_check, pod_ref, sweep_gates
from app.tasks.preemption import PreemptionPlan

log = get_logger("gatekeeper")


class GateKeeper:
    """A periodic sweep (for the bound) plus a cache subscription (for victims going away)."""

    def __init__(self, runtime: Runtime, interval_s: float = 1.0) -> None:
        self._runtime = runtime
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe = runtime.cache.subscribe(self._on_change)

    def start(self) -> None:
        """Start the periodic sweep."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="gatekeeper")

    async def stop(self) -> None:
        """Stop the sweep and the subscription."""
        self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _on_change(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        if len(self._runtime.gate):
            sweep_gates(self._runtime)

    async def _run(self) -> None:
        resumed = False
        while True:
            if not resumed and self._runtime.cache.pods_synced and self._runtime.is_leader:
                self.resume_mirrored()
                resumed = True
            sweep_gates(self._runtime)
            await asyncio.sleep(self._interval_s)  # the sweep period, not a wait for a condition

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
