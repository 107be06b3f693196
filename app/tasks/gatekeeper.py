"""Keeps the gate honest, and is the only code that releases it: opens a gate as its victims
disappear, its failed task's back-off ends or its bound passes (removing its mirror from the
preemptor's WorkloadRecord), and at startup resumes (leader) or releases the gates mirrored by a
previous run or another replica — a resumed preemption only after the same cross-check against
the cache a live ``preempt`` gets (``policy.crosscheck``). Where kube-scheduler cannot be made to
ask again (takeover from 1.32), a failed preemption's calls are re-run, with that cross-check,
when its back-off ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.clock import Clock
from app.logs import get_logger
from app.model.gate import GateEntry, PodRef, PreemptionPlan
from app.policy.crosscheck import Refusal, check_preemptor, check_victims
from app.state.cache import CacheEvent, ClusterCache
from app.state.gate import GateBook
from app.tasks.loop import Ticker, listen
from app.tasks.ports import PodApi, PreemptionRecorder
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
        mirror: PreemptionRecorder | None = None,
        scheduler_names: tuple[str, ...] = ("default-scheduler",),
        rerun_failed: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__("gatekeeper", tick=interval_s, debounce=0.0)
        self.rerun_failed = rerun_failed
        """Whether a failed preemption's calls are re-run by runway when its back-off ends,
        rather than the preemptor woken for kube-scheduler to ask again: takeover on a release
        where a touch does not re-queue a pod rejected by NodeResourcesFit (1.32+, QueueingHints;
        ``Release.touch_requeues``). A victim's deletion is an event that re-queues it there."""
        self.gate = gate
        self.cache = cache
        self.executor = executor
        self.pods = pods
        self.clock = clock
        self.is_leader = is_leader
        self.mirror = mirror
        self.scheduler_names = scheduler_names
        self._resumed = False
        self._releases: set[asyncio.Task[None]] = set()
        self.on_retry: Callable[[str], object] = lambda uid: None
        """Told the preemptor's UID when a failed preemption's back-off ends (its gate is
        released): kube-scheduler parked the pod when ``preempt`` was vetoed meanwhile, and the
        mirror's removal is a write to a WorkloadRecord, not to the pod, so nothing else moves
        it back to the active queue. ``app.wiring`` plugs in ``RequeueWaker.wake_retry``."""
        self.follow(lambda: cache.subscribe(self._on_change))
        self.follow(lambda: listen(gate.listeners, self.poke))

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop the sweep and the subscriptions; let the mirror removals (record writes) in
        flight finish within ``grace_s``, then cancel them."""
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
        """Open the gate of ``entry`` and remove its mirror in a tracked task; a preemptor whose
        failed preemption backed off is woken (``on_retry``), or its calls re-run
        (``rerun_failed``) — then the re-run mirrors its own entry over this one, and no removal
        races that write."""
        retry = self.gate.backing_off(entry.preemptor.uid)
        self.gate.release(entry.preemptor.uid)
        log.info("gate opened", preemptor=entry.preemptor.key, node=entry.node, why=why)
        if retry and self.rerun_failed() and self._rerun_failed(entry):
            return
        self.executor.mirror_removed(entry.preemptor.uid)
        task = asyncio.get_running_loop().create_task(
            self._unmirror(entry.preemptor), name=f"gate-release:{entry.preemptor.key}"
        )
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)
        if retry:
            self.on_retry(entry.preemptor.uid)

    def pending_tasks(self) -> int:
        """Mirror removals (record writes) not finished yet."""
        return sum(1 for t in self._releases if not t.done())

    async def _unmirror(self, preemptor: PodRef) -> None:
        if self.mirror is None:
            return
        try:
            await self.mirror.unmirror_gate(preemptor)
        except Exception as exc:
            log.warning("could not remove a gate's mirror", preemptor=preemptor.key, error=str(exc))

    def resume_mirrored(self) -> None:
        """Gates found on records at startup: release the finished ones, re-run the others'
        calls after the cross-check a live ``preempt`` gets (preemptor pending and handled by a
        scheduler runway serves, every outstanding victim on that node with a lower priority
        than the cached preemptor's); one that fails it is released, nothing is called.

        The calls are idempotent (condition patch with a UID precondition, record once,
        UID-precondition delete with 404 = done), so re-running a plan cut short is safe.
        """
        now = self.clock.now()
        for entry in self.gate.mirrored():
            uid = entry.preemptor.uid
            if self.gate.get(uid):
                continue
            check = self.gate.check(entry, now)
            if check.open:
                self.release(entry, check.why)
                log.info("released a gate left in flight", pod=entry.preemptor.key, why=check.why)
                continue
            refusal = self._rerun(entry, check.outstanding, "resumed after a runway restart")
            if refusal is not None:
                self.release(entry, f"not resumed: {refusal.message}")
                log.warning(
                    "a preemption left in flight failed the cross-check: released",
                    pod=entry.preemptor.key,
                    reason=refusal.reason,
                    why=refusal.message,
                )
                continue
            log.info(
                "resuming a preemption left in flight", pod=entry.preemptor.key, node=entry.node
            )

    def _rerun_failed(self, entry: GateEntry) -> bool:
        """Re-run the calls of ``entry``'s failed preemption for the victims still running
        (its gate just released at the end of its back-off); False when there are none or the
        cross-check refuses (the preemptor is then woken as on any release)."""
        # The gate's own check, its failure released: what it still waits for (none when the
        # victims went, or when a higher-priority preemption took the claim).
        outstanding = self.gate.check(entry, self.clock.now()).outstanding
        if not outstanding:
            return False
        try:
            refusal = self._rerun(entry, outstanding, "retried after a refused call")
        except RuntimeError:  # the executor is shutting down: woken instead, nothing called
            return False
        if refusal is not None:
            log.info(
                "a failed preemption not retried: the cross-check refused it",
                pod=entry.preemptor.key,
                reason=refusal.reason,
                why=refusal.message,
            )
            return False
        log.info(
            "retrying a failed preemption's calls",
            pod=entry.preemptor.key,
            node=entry.node,
            victims=[v.key for v in outstanding],
        )
        return True

    def _rerun(self, entry: GateEntry, outstanding: tuple[PodRef, ...], why: str) -> Refusal | None:
        """Submit ``entry``'s calls again for its ``outstanding`` victims after the cross-check a
        live ``preempt`` gets (preemptor pending and handled by a scheduler runway serves, every
        victim on that node with a lower priority than the cached preemptor's); the refusal
        instead, and nothing called. The calls are idempotent (condition patch with a UID
        precondition, record once, UID-precondition delete with 404 = done)."""
        uid = entry.preemptor.uid
        pod = self.cache.pod(uid)
        refusal = check_preemptor(uid, pod, self.scheduler_names)
        if refusal is None and pod is not None:
            refusal = check_victims(
                pod.priority, entry.node, [(v.uid, self.cache.pod(v.uid)) for v in outstanding]
            )
        if refusal is not None or pod is None:
            return refusal
        # Every API call names the pods as the cache knows them by UID (never by the names a
        # record carries): a condition or a delete can only reach the checked pod.
        victims = tuple(
            PodRef.of(cached) for v in outstanding if (cached := self.cache.pod(v.uid)) is not None
        )
        self.executor.submit(
            PreemptionPlan(
                preemptor=PodRef.of(pod),
                node=entry.node,
                victims=victims,
                message=f"Preempted by {entry.preemptor.key} ({why})",
                rule=entry.rule,
                priority=pod.priority,
            )
        )
        return None
