"""Keeps the gate honest, and is the only code that releases it: opens a gate as its victims
disappear, its failed task's back-off ends or its bound passes (removing the mirrored
annotation), and at startup resumes (leader) or releases the gates mirrored on pods by a
previous run or another replica."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.clock import Clock
from app.logs import get_logger
from app.model.gate import GATE_ANNOTATION, GateEntry, PodRef, PreemptionPlan, decode_entry
from app.state.cache import CacheEvent, ClusterCache
from app.state.gate import GateBook
from app.tasks.loop import Ticker, listen
from app.tasks.ports import PodApi
from app.tasks.preemption import PreemptionExecutor

log = get_logger("gatekeeper")


class GateKeeper(Ticker):
    """A periodic sweep (for the bound) plus cache and gate-book subscriptions (victims going
    away, tasks failing)."""

    def __init__(
        self,
        gate: GateBook,
        cache: ClusterCache,
        executor: PreemptionExecutor,
        pods: PodApi,
        clock: Clock,
        *,
        is_leader: Callable[[], bool] = lambda: True,
        interval_s: float = 1.0,
    ) -> None:
        super().__init__("gatekeeper", tick=interval_s, debounce=0.0)
        self.gate = gate
        self.cache = cache
        self.executor = executor
        self.pods = pods
        self.clock = clock
        self.is_leader = is_leader
        self._resumed = False
        self._releases: set[asyncio.Task[None]] = set()
        self.follow(lambda: cache.subscribe(self._on_change))
        self.follow(lambda: listen(gate.listeners, self.poke))

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop the sweep and the subscriptions; let the annotation removals in flight finish
        within ``grace_s``, then cancel them."""
        await super().stop()
        pending = [t for t in self._releases if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            for task in still:
                task.cancel()
            await asyncio.gather(*still, return_exceptions=True)

    def _on_change(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        # Only while something is held can a cache change open a gate (a victim going away).
        if len(self.gate) or self.gate.mirrored():
            self.poke()

    async def run_once(self) -> float:
        """Resume mirrored gates once (leader, after the first list), then sweep."""
        if not self._resumed and self.cache.pods_synced and self.is_leader():
            self.resume_mirrored()
            self._resumed = True
        self.sweep()
        return self.tick

    def sweep(self) -> int:
        """Release every gate (local or mirrored) that may open now; returns how many."""
        now = self.clock.now()
        opened = 0
        for entry in self.gate:
            check = self.gate.check(entry, now)
            if check.open:
                self.release(entry, check.why)
                opened += 1
        for mirrored in self.gate.mirrored():
            check = self.gate.check(mirrored, now)
            if check.open:
                self.release(mirrored, check.why)
                opened += 1
        return opened

    def release(self, entry: GateEntry, why: str) -> None:
        """Open the gate of ``entry`` and remove its annotation in a tracked task."""
        self.gate.release(entry.preemptor.uid)
        log.info("gate opened", preemptor=entry.preemptor.key, node=entry.node, why=why)
        task = asyncio.get_running_loop().create_task(
            self._unmirror(entry.preemptor), name=f"gate-release:{entry.preemptor.key}"
        )
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    def pending_tasks(self) -> int:
        """Annotation removals not finished yet."""
        return sum(1 for t in self._releases if not t.done())

    async def _unmirror(self, preemptor: PodRef) -> None:
        try:
            await self.pods.annotate(preemptor, {GATE_ANNOTATION: None})  # False: pod gone
        except Exception as exc:
            log.warning("could not remove gate annotation", preemptor=preemptor.key, error=str(exc))

    def resume_mirrored(self) -> None:
        """Gates found on pods at startup: release the finished ones, re-run the others' calls.

        The calls are idempotent (condition patch, record once, UID-precondition delete with
        404 = done), so re-running a plan cut short by a restart is safe.
        """
        now = self.clock.now()
        for pod in self.cache.pods():
            if not pod.annotation(GATE_ANNOTATION) or self.gate.get(pod.metadata.uid):
                continue
            entry = decode_entry(pod)
            if entry is None:
                continue
            check = self.gate.check(entry, now)
            if check.open:
                self.release(entry, check.why)
                log.info("released a gate left on a pod", pod=pod.key, why=check.why)
                continue
            log.info("resuming a preemption left in flight", pod=pod.key, node=entry.node)
            self.executor.submit(
                PreemptionPlan(
                    preemptor=PodRef.of(pod),
                    node=entry.node,
                    victims=check.outstanding,
                    message=f"Preempted by {pod.key} (resumed after a runway restart)",
                    rule=entry.rule,
                    priority=entry.priority,
                )
            )
