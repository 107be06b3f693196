"""Asynchronous preemption: the API calls of a preemption, run after ``preempt`` has answered.

For the chosen node, per victim (gang siblings included): a ``DisruptionTarget=True`` condition,
the eviction record on its workload, then ``DELETE`` with a UID precondition (404 counts as done);
finally ``status.nominatedNodeName`` on the preemptor. Retries live in the Kubernetes layer; here a
failed call fails the task, which clears the nomination and opens the gate.

Tasks are tracked, named, bounded by a semaphore, and drained (then cancelled) at shutdown, so no
task is ever left pending. ``preemption.async: false`` runs the same calls inline (the baseline).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from app import metrics
from app.clock import Clock
from app.logs import get_logger
from app.policy.gate import GateEntry, PodRef
from app.state.gate import GateBook

log = get_logger("preemption")

Result = Literal["running", "success", "error", "cancelled"]


class PreemptionApi(Protocol):
    """The Kubernetes calls a preemption makes (``app.kube`` implements them; tests fake them)."""

    async def mirror_gate(self, preemptor: PodRef, entry: GateEntry | None) -> None:
        """Write (or with None, remove) the gate annotation on the preemptor."""

    async def mark_disruption(self, victim: PodRef, message: str) -> None:
        """Add ``DisruptionTarget=True`` (reason PreemptionByScheduler) to the victim's status."""

    async def record_eviction(self, victim: PodRef, preemptor: PodRef, now: float) -> None:
        """Write the eviction record (reason Preempted) on the victim's workload."""

    async def delete_pod(self, victim: PodRef) -> None:
        """Delete the victim with a UID precondition; a 404 is success."""

    async def nominate(self, preemptor: PodRef, node: str | None) -> None:
        """Set (or with None, clear) ``status.nominatedNodeName`` on the preemptor."""


@dataclass(frozen=True)
class PreemptionPlan:
    """What one preemption must do."""

    preemptor: PodRef
    node: str
    victims: tuple[PodRef, ...]
    message: str
    """The DisruptionTarget message: names the preemptor and the queue rule."""
    rule: str = ""


@dataclass
class PreemptionRecord:
    """One preemption as the REST API reports it."""

    plan: PreemptionPlan
    started: float
    finished: float | None = None
    result: Result = "running"
    error: str = ""
    seconds: float | None = None
    steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready view."""
        return {
            "preemptor": self.plan.preemptor.key,
            "preemptorUID": self.plan.preemptor.uid,
            "node": self.plan.node,
            "victims": [v.key for v in self.plan.victims],
            "rule": self.plan.rule,
            "started": self.started,
            "finished": self.finished,
            "seconds": self.seconds,
            "result": self.result,
            "error": self.error,
            "steps": list(self.steps),
        }


class PreemptionExecutor:
    """Runs preemption plans in tracked background tasks and keeps their history."""

    def __init__(
        self,
        api: PreemptionApi,
        gate: GateBook,
        clock: Clock,
        *,
        concurrency: int = 16,
        victim_parallelism: int = 8,
        gate_bound_s: float = 60.0,
        history: int = 100,
        identity: str = "",
        revert_timeout_s: float = 5.0,
    ) -> None:
        self._api = api
        self._gate = gate
        self._clock = clock
        self._slots = asyncio.Semaphore(concurrency)
        self._victim_parallelism = victim_parallelism
        self._gate_bound_s = gate_bound_s
        self._identity = identity
        self._revert_timeout_s = revert_timeout_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: dict[str, PreemptionRecord] = {}
        self._recent: deque[PreemptionRecord] = deque(maxlen=history)
        self._closing = False

    # --- entry points -------------------------------------------------------------------------

    def hold(self, plan: PreemptionPlan) -> GateEntry:
        """Put the preemptor in the gate (before ``preempt`` answers)."""
        now = self._clock.now()
        entry = GateEntry(
            preemptor=plan.preemptor,
            node=plan.node,
            victims=plan.victims,
            since=now,
            deadline=now + self._gate_bound_s,
            rule=plan.rule,
            holder=self._identity,
        )
        self._gate.hold(entry)
        return entry

    def submit(self, plan: PreemptionPlan) -> PreemptionRecord:
        """Hold the preemptor and run the plan in a background task; returns at once."""
        if self._closing:
            raise RuntimeError("preemption executor is shutting down")
        entry = self.hold(plan)
        record = self._start_record(plan)
        task = asyncio.get_running_loop().create_task(
            self._guarded(plan, entry, record), name=f"preempt:{plan.preemptor.key}->{plan.node}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return record

    async def run_inline(self, plan: PreemptionPlan) -> PreemptionRecord:
        """Hold the preemptor and make the calls before returning (``preemption.async: false``)."""
        entry = self.hold(plan)
        record = self._start_record(plan)
        await self._guarded(plan, entry, record)
        return record

    def release(self, uid: str, why: str, mirrored: GateEntry | None = None) -> None:
        """Open the gate for ``uid`` and remove the mirrored annotation in the background.

        ``mirrored``: an entry read from the pod's annotation (another replica's, or one left
        by a restart): its annotation is removed too, though this book never held it.
        """
        entry = self._gate.release(uid) or mirrored
        if entry is None:
            return
        log.info("gate opened", preemptor=entry.preemptor.key, node=entry.node, why=why)
        if not self._closing:
            task = asyncio.get_running_loop().create_task(
                self._unmirror(entry.preemptor), name=f"gate-release:{entry.preemptor.key}"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # --- introspection ------------------------------------------------------------------------

    def in_flight(self) -> list[PreemptionRecord]:
        """Records of running tasks."""
        return list(self._in_flight.values())

    def recent(self) -> list[PreemptionRecord]:
        """The last finished records, newest first."""
        return list(reversed(self._recent))

    def running(self, preemptor_uid: str) -> bool:
        """Whether a task for this preemptor is still making its calls."""
        return preemptor_uid in self._in_flight

    def pending_tasks(self) -> int:
        """Background tasks not finished yet (preemptions and gate releases)."""
        return sum(1 for t in self._tasks if not t.done())

    # --- shutdown -----------------------------------------------------------------------------

    async def drain(self, grace_s: float) -> None:
        """Let running tasks finish within ``grace_s``, then cancel the rest and wait for them."""
        self._closing = True
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)
        assert self.pending_tasks() == 0, "a preemption task outlived drain()"

    # --- the work -----------------------------------------------------------------------------

    def _start_record(self, plan: PreemptionPlan) -> PreemptionRecord:
        record = PreemptionRecord(plan=plan, started=self._clock.now())
        self._in_flight[plan.preemptor.uid] = record
        metrics.PREEMPTION_IN_FLIGHT.set(len(self._in_flight))
        return record

    async def _guarded(
        self, plan: PreemptionPlan, entry: GateEntry, record: PreemptionRecord
    ) -> None:
        start = time.perf_counter()
        try:
            async with self._slots:
                await self._execute(plan, entry, record)
            record.result = "success"
        except asyncio.CancelledError:
            record.result, record.error = "cancelled", "cancelled at shutdown"
            await self._fail(plan, record)
            raise
        except Exception as exc:
            record.result, record.error = "error", f"{type(exc).__name__}: {exc}"
            log.warning(
                "preemption failed",
                preemptor=plan.preemptor.key,
                node=plan.node,
                error=record.error,
            )
            await self._fail(plan, record)
        finally:
            record.seconds = time.perf_counter() - start
            record.finished = self._clock.now()
            self._in_flight.pop(plan.preemptor.uid, None)
            self._recent.append(record)
            metrics.PREEMPTION_IN_FLIGHT.set(len(self._in_flight))
            metrics.PREEMPTION_EXECUTIONS.labels(record.result).inc()
            metrics.PREEMPTION_DURATION.labels(record.result).observe(record.seconds)

    async def _execute(
        self, plan: PreemptionPlan, entry: GateEntry, record: PreemptionRecord
    ) -> None:
        await self._api.mirror_gate(plan.preemptor, entry)
        record.steps.append("gate mirrored")
        limit = asyncio.Semaphore(self._victim_parallelism)

        async def evict(victim: PodRef) -> None:
            async with limit:
                await self._api.mark_disruption(victim, plan.message)
                await self._api.record_eviction(victim, plan.preemptor, self._clock.now())
                await self._api.delete_pod(victim)

        await _all_or_raise([evict(v) for v in plan.victims])
        record.steps.append(f"{len(plan.victims)} victims marked, recorded and deleted")
        await self._api.nominate(plan.preemptor, plan.node)
        record.steps.append(f"nominated to {plan.node}")

    async def _fail(self, plan: PreemptionPlan, record: PreemptionRecord) -> None:
        """Undo what the scheduler would otherwise act on: the nomination and the gate."""
        self._gate.release(plan.preemptor.uid)
        try:
            # Bounded: at shutdown this runs after cancellation and must not hold drain() up.
            async with asyncio.timeout(self._revert_timeout_s):
                await self._api.nominate(plan.preemptor, None)
                await self._api.mirror_gate(plan.preemptor, None)
            record.steps.append("nomination cleared, gate opened")
        except Exception as exc:  # the gate is open locally; the annotation expires by deadline
            record.steps.append(f"revert failed: {type(exc).__name__}: {exc}")

    async def _unmirror(self, preemptor: PodRef) -> None:
        try:
            await self._api.mirror_gate(preemptor, None)
        except Exception as exc:
            log.warning("could not remove gate annotation", preemptor=preemptor.key, error=str(exc))


async def _all_or_raise(coros: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run every coroutine; if one fails, cancel the others and raise that first error."""
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
