"""Preemption in the background: the API calls of a preemption, made after ``preempt`` answered.

Takeover (``preemption.async: true``, DESIGN §4): ``preempt`` answered ``{}``, so runway alone
executes the preemption, off kube-scheduler's cycle: the gate mirrored on the preemptor's
WorkloadRecord (the claim, for other replicas), the preemptor's nomination, the clearing of
lower-priority nominations on the node, then per victim (gang siblings included) a
``DisruptionTarget=True`` condition, the eviction record on its workload and ``DELETE`` with a
UID precondition (404 counts as done). Nominate first: the victims' deletion is what makes
kube-scheduler retry the preemptor and schedule other pods, and by then its nominator must
already reserve the node.

Scheduler executes (``preemption.async: false``): ``preempt`` returned the victims and
kube-scheduler deletes them and nominates; runway only mirrors the gate and writes the records.

Retries live in the Kubernetes layer; here a failed call fails the task, which clears the
nomination and opens the gate (the gate keeper releases it). Tasks are tracked, named, bounded
by a semaphore, and drained (then cancelled) at shutdown, so no task is ever left pending.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app import metrics
from app.clock import Clock
from app.logs import get_logger
from app.model.event import PREEMPTING, EventNote, ObjectRef
from app.model.eviction import PREEMPTED
from app.model.gate import PREEMPTED_BY, GateEntry, PodRef, PreemptionPlan
from app.state.gate import GateBook
from app.tasks.disruption import disrupt
from app.tasks.ports import EventSink, NoEvents, PodApi, PreemptionRecorder

log = get_logger("preemption")

MIRROR_KEPT_S = 10.0
"""Scheduler executes: kube-scheduler retries a preemption whose DELETE is refused as fast as its
queue allows (~18 a second on 1.37.2, ``e2e/test_default_mode_e2e.py``), and runway decides each
retry again (``policy.gate.left_by_the_scheduler``). The same claim (node and victims) mirrored
on the preemptor's record less than this long ago is not written again: each retry would add a
record write to the scheduler's DELETE, twice the API load of a refusal."""

Result = Literal["running", "success", "error", "cancelled"]


PREEMPTION_REASON = "PreemptionByScheduler"
MEMO_LIMIT = 4096
"""Entries per memo of the executor, the oldest forgotten first: (victim, preemptor) pairs whose
eviction record was written, remembered against repeats; preemptors' last mirrored claims."""


class PreemptorGone(Exception):
    """The preemptor was deleted (or re-created) before its preemption began."""


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
            "awaited": [v.key for v in self.plan.awaited],
            "displaced": [v.key for v in self.plan.displaced],
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
        pods: PodApi,
        gate: GateBook,
        clock: Clock,
        *,
        concurrency: int,
        victim_parallelism: int,
        gate_bound_s: float,
        history: int,
        identity: str,
        recorder: PreemptionRecorder | None,
        takeover: bool,
        events: EventSink | None,
        owners_of: Callable[[PodRef], Sequence[ObjectRef]],
        revert_timeout_s: float = 5.0,
    ) -> None:
        self.takeover = takeover
        """Whether runway executes preemptions itself (``preemption.async``)."""
        self.pods = pods
        self._recorder = recorder
        self._events = events or NoEvents()
        self._owners_of = owners_of
        # A gang's pods share one record: write it once per (victim, preemptor).
        self._recorded: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._mirrored: OrderedDict[str, tuple[tuple[str, frozenset[str]], float]] = OrderedDict()
        """Preemptor UID → the claim (node, victim UIDs) last mirrored, and when."""
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
        """Put the preemptor in the gate (before ``preempt`` answers): its claim on the node, its
        victims (the awaited ones too: reserved under this gate) and the end of the claims of
        lower priority it takes."""
        now = self._clock.now()
        for taken in plan.displaced:
            why = (
                f"its claim on node {plan.node} was taken by the preemption of "
                f"{plan.preemptor.key} (priority {plan.priority}): retried elsewhere"
            )
            if self._gate.displace(taken.uid, why):
                log.info(
                    "claim taken by a higher priority",
                    preemptor=taken.key,
                    by=plan.preemptor.key,
                    node=plan.node,
                )
        victims = {v.uid: v for v in plan.victims}
        for v in plan.awaited:
            victims.setdefault(v.uid, v)
        entry = GateEntry(
            preemptor=plan.preemptor,
            node=plan.node,
            victims=tuple(victims.values()),
            since=now,
            deadline=now + self._gate_bound_s,
            rule=plan.rule,
            holder=self._identity,
            priority=plan.priority,
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

    async def run(self, plan: PreemptionPlan) -> PreemptionRecord:
        """Hold the preemptor and make the calls before returning (tests and tools; the verb
        never waits for them)."""
        entry = self.hold(plan)
        record = self._start_record(plan)
        await self._guarded(plan, entry, record)
        return record

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
            self._gate.finish(plan.preemptor.uid, ok=True)
        except asyncio.CancelledError:
            record.result, record.error = "cancelled", "cancelled at shutdown"
            await self._fail(plan, record, back_off=False)
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
            # A retried preemption of the same pod may have started while this one reverted.
            if self._in_flight.get(plan.preemptor.uid) is record:
                del self._in_flight[plan.preemptor.uid]
            self._recent.append(record)
            metrics.PREEMPTION_IN_FLIGHT.set(len(self._in_flight))
            metrics.PREEMPTION_EXECUTIONS.labels(record.result).inc()
            metrics.PREEMPTION_DURATION.labels(record.result).observe(record.seconds)

    async def _execute(
        self, plan: PreemptionPlan, entry: GateEntry, record: PreemptionRecord
    ) -> None:
        if self._mirror_kept(entry):
            record.steps.append("gate mirror kept (the same claim, mirrored just before)")
        elif self._recorder is not None:
            if not await self._recorder.mirror_gate(entry):
                raise PreemptorGone(
                    f"preemptor {plan.preemptor.key} is gone: nothing to preempt for"
                )
            self._note_mirrored(entry)
            record.steps.append("gate mirrored")
        if not self.takeover:
            # kube-scheduler deletes the chosen node's victims; runway keeps the records and
            # evicts the gang siblings on other nodes, which kube-scheduler does not know of.
            for victim in plan.victims:
                if victim.uid not in plan.counted:
                    await self._record(victim, plan.preemptor, self._clock.now())
            for victim in plan.off_node:
                now = self._clock.now()
                await disrupt(
                    self.pods, victim, PREEMPTION_REASON, plan.message_for(victim.namespace), now
                )
            record.steps.append(
                f"{len(plan.victims)} eviction records written, "
                f"{len(plan.off_node)} off-node gang siblings deleted"
            )
            return
        await self._nominate(plan, record)
        for other in plan.unnominate:
            await self.pods.nominate(other, None)
        if plan.unnominate:
            record.steps.append(f"{len(plan.unnominate)} lower-priority nominations cleared")
        limit = asyncio.Semaphore(self._victim_parallelism)

        async def evict(victim: PodRef) -> None:
            async with limit:
                now = self._clock.now()

                async def record_it() -> None:
                    if victim.uid not in plan.counted:  # else recorded by another preemption
                        await self._record(victim, plan.preemptor, now)

                if not await disrupt(
                    self.pods,
                    victim,
                    PREEMPTION_REASON,
                    plan.message_for(victim.namespace),
                    now,
                    then=record_it,
                ):
                    return  # gone already (or replaced): not evicted by runway, no Event
                self._events.emit(
                    EventNote(
                        ObjectRef.of_pod(victim),
                        PREEMPTED,
                        preempted_text(plan, victim.namespace),
                        action="Preempt",
                    )
                )

        owners = {o: None for v in plan.victims for o in self._owners_of(v)}
        await _all_or_raise([evict(v) for v in plan.victims])
        record.steps.append(f"{len(plan.victims)} victims marked, recorded and deleted")
        if plan.awaited:
            record.steps.append(
                f"{len(plan.awaited)} victims already going awaited (not deleted again)"
            )
        if plan.victims:
            self._emit_preemption(plan, owners)

    async def _nominate(self, plan: PreemptionPlan, record: PreemptionRecord) -> None:
        """Nominate the preemptor to its node, unless a higher-priority preemption took the
        claim meanwhile (then the nomination, if it raced the taking, is cleared again)."""
        uid = plan.preemptor.uid
        if self._gate.displaced(uid):
            record.steps.append("claim taken by a higher priority: not nominated")
            return
        await self.pods.nominate(plan.preemptor, plan.node)
        if self._gate.displaced(uid):
            await self.pods.nominate(plan.preemptor, None)
            record.steps.append("claim taken by a higher priority: nomination cleared")
            return
        record.steps.append(f"nominated to {plan.node}")

    def _emit_preemption(self, plan: PreemptionPlan, owners: dict[ObjectRef, None]) -> None:
        """Events on the victims' owners and on the preemptor (and its owner)."""
        n = len(plan.victims)
        pods = "pod" if n == 1 else "pods"
        for owner in owners:
            text = preempted_text(plan, owner.namespace)
            self._events.emit(EventNote(owner, PREEMPTED, text, action="Preempt"))
        preempting = f"Preempting {n} {pods} on node {plan.node}"
        if plan.rule:
            preempting += f": {plan.rule}"
        for subject in (ObjectRef.of_pod(plan.preemptor), *self._owners_of(plan.preemptor)):
            self._events.emit(EventNote(subject, PREEMPTING, preempting, action="Preempt"))

    async def _record(self, victim: PodRef, preemptor: PodRef, now: float) -> None:
        if self._recorder is None:
            return
        key = (victim.uid, preemptor.uid)
        if key in self._recorded:
            return
        await self._recorder.record_preemption(victim.uid, preemptor.uid, now)
        self._recorded[key] = None
        while len(self._recorded) > MEMO_LIMIT:
            self._recorded.popitem(last=False)

    def _claim_of(self, entry: GateEntry) -> tuple[str, frozenset[str]]:
        return entry.node, frozenset(v.uid for v in entry.victims)

    def _mirror_kept(self, entry: GateEntry) -> bool:
        """Whether ``entry``'s claim is on the record already, mirrored less than
        ``MIRROR_KEPT_S`` ago (scheduler executes only: in takeover a retry follows a back-off)."""
        if self.takeover:
            return False
        last = self._mirrored.get(entry.preemptor.uid)
        return (
            last is not None
            and last[0] == self._claim_of(entry)
            and self._clock.now() - last[1] < MIRROR_KEPT_S
        )

    def mirror_removed(self, uid: str) -> None:
        """The gate keeper removes the mirror of ``uid``'s gate: the next claim is written."""
        self._mirrored.pop(uid, None)

    def _note_mirrored(self, entry: GateEntry) -> None:
        uid = entry.preemptor.uid
        self._mirrored[uid] = (self._claim_of(entry), self._clock.now())
        self._mirrored.move_to_end(uid)
        while len(self._mirrored) > MEMO_LIMIT:
            self._mirrored.popitem(last=False)

    async def _fail(
        self, plan: PreemptionPlan, record: PreemptionRecord, *, back_off: bool = True
    ) -> None:
        """Undo what the scheduler would otherwise act on: the nomination. The gate opens after
        the failure back-off (the gate keeper releases it and removes its annotation)."""
        # A shutdown is not the preemption's failure: its gate opens at once.
        now = self._clock.now() if back_off else None
        self._gate.finish(plan.preemptor.uid, ok=False, now=now)
        if not self.takeover:
            record.steps.append("gate backing off" if back_off else "gate opened")
            return
        try:
            # Bounded: at shutdown this runs after cancellation and must not hold drain() up.
            async with asyncio.timeout(self._revert_timeout_s):
                await self.pods.nominate(plan.preemptor, None)
            record.steps.append(
                "nomination cleared, gate backing off" if back_off else "nomination cleared"
            )
        except Exception as exc:  # the gate is open anyway; the annotation expires by deadline
            record.steps.append(f"revert failed: {type(exc).__name__}: {exc}")


def preempted_text(plan: PreemptionPlan, namespace: str) -> str:
    """The ``Preempted`` Event a victim (or its owner) in ``namespace`` gets: the preemptor named
    in its own namespace, "a higher-priority workload" in any other (issue #36)."""
    if namespace != plan.preemptor.namespace:
        return f"{PREEMPTED_BY} on node {plan.node}"
    text = f"Preempted by {plan.preemptor.key} on node {plan.node}"
    return f"{text}: {plan.rule}" if plan.rule else text


async def _all_or_raise(coros: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run every coroutine; if one fails, cancel the others and raise that first error."""
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
