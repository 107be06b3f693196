"""The PodsReady evictor (DESIGN §5, Kueue KEP-349): evicts workloads that miss their timeouts.

One tracked asyncio task per process. It wakes on every cache change (debounced) and at least
every ``tick`` seconds, asks ``app.policy.podsready`` which admitted workloads ran out of
``timeout`` (since the workload's *admitted* fact: its first bind) or ``recoveryTimeout`` (since
PodsReady went false), and — on the leader only — evicts each of them in its own tracked task:

1. write the eviction record (reason ``PodsReadyTimeout``, count + 1, requeueAt by the backoff,
   the node pools it failed in; or ``deactivated`` past the limit). The record goes first: if
   runway dies half-way, the next leader sees the record of *this* admission (eviction time after
   the start) and only finishes the job instead of counting a second eviction;
2. ``DisruptionTarget=True`` (reason ``PodsReadyTimeout``) on each *active* pod (neither
   Succeeded nor Failed: as Kueue suspends a Job, whose controller deletes only its active
   pods; a finished pod keeps its logs), a strategic merge patch of ``pods/status``;
3. delete each of them with a UID precondition (404, or a 409 because the name now belongs to a
   re-created pod, both mean done). The owner re-creates the pods; ``filter`` holds them for the
   backoff, or for good when deactivated.

It also answers the requeue gauges (backoff, deactivated, pending per queue): they are counted
over every workload when Prometheus scrapes (``metrics.on_scrape``), not by the loop, so a busy
cluster costs no background pass for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Generator

from app import metrics
from app.clock import Clock
from app.config.requeue import WaitForPodsReadyConfig
from app.logs import get_logger
from app.model.event import DEACTIVATED, EventNote, ObjectRef
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.gate import PodRef
from app.model.timestamps import format_time
from app.policy.backoff import JitterSource
from app.policy.eviction import timed_out
from app.policy.podsready import PodsReadyCheck, timeout_message
from app.policy.workload import WorkloadKey, active_pods, live_pods
from app.state.cache import WorkloadView
from app.state.records import RecordBook
from app.state.requeue import WORKLOAD_STEP, QueueCounts, RequeueView
from app.supervise import in_slices
from app.tasks.disruption import disrupt
from app.tasks.loop import Ticker
from app.tasks.ports import EventSink, NoEvents, PodApi

log = get_logger("tasks.podsready")


class PodsReadyEvictor(Ticker):
    """Evicts workloads past their PodsReady timeouts (leader only) and keeps the gauges."""

    def __init__(
        self,
        view: RequeueView,
        records: RecordBook,
        pods: PodApi,
        clock: Clock,
        config: WaitForPodsReadyConfig,
        *,
        pool_label: str,
        tick: float = 1.0,
        debounce: float = 0.05,
        jitter: JitterSource = random.random,
        is_leader: Callable[[], bool] = lambda: True,
        events: EventSink | None = None,
    ) -> None:
        super().__init__("podsready", tick=tick, debounce=debounce)
        self.events = events or NoEvents()
        self.view = view
        self.cache = view.cache
        self.records = records
        self.pods = pods
        self.clock = clock
        self.config = config
        self.pool_label = pool_label
        self.jitter = jitter
        self.is_leader = is_leader
        self._evictions: set[asyncio.Task[None]] = set()
        self._in_flight: set[str] = set()
        self._gauged: set[str] = set()
        self._settled: dict[WorkloadKey, WorkloadView] = {}
        self._settled_facts = -1
        self.evicted = 0
        """Evictions recorded by this process (for tests and the log)."""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to the cache, count the gauges at each scrape and start the loop."""
        self.follow(lambda: self.cache.subscribe(self._on_change))
        self.follow(lambda: metrics.on_scrape(self._scraped))
        super().start()

    def _on_change(self, _event: object) -> None:
        if self.config.enable:  # disabled: a pass does nothing, so nothing wakes it
            self.poke()

    async def stop(self) -> None:
        """Stop the loop and every eviction in flight; returns when none is left."""
        await super().stop()
        for task in list(self._evictions):
            task.cancel()
        for task in list(self._evictions):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def pending_tasks(self) -> int:
        """Eviction tasks not finished yet."""
        return sum(1 for t in self._evictions if not t.done())

    async def run_once(self) -> float:
        """One evaluation pass (``Ticker``)."""
        return await self.tick_once()

    # -- one pass -------------------------------------------------------------------------------

    async def tick_once(self) -> float:
        """Evaluate every workload once; start the due evictions (leader only). Returns the
        seconds until the next deadline (``tick`` when none is near)."""
        if not self.config.enable:
            return self.tick  # nothing to evict
        # Without the WorkloadRecords (no CRD) an eviction could not be recorded: none starts
        # (the store says why once; /readyz and runway_records_available show it).
        leader = self.is_leader() and self.records.available
        return await in_slices(self._pass_steps(self.clock.now(), leader))

    def _pass_steps(self, now: float, leader: bool) -> Generator[None, None, float]:
        """The pass over every workload, yielding every ``WORKLOAD_STEP`` of them (``in_slices``: a
        resync makes every workload's view new, and 40,000 of them are ~150 ms of work).
        Workloads are looked at in the cache's order, as one synchronous pass would; one that
        changes meanwhile is looked at again on the next pass (its view is new)."""
        cache = self.cache
        idx = self.view.index
        wait = self.tick
        # A workload not admitted yet, or PodsReady, has nothing due: it is not looked at again
        # until its pods (a new cache view) or the records change. During a scheduling burst
        # a pass is then a dict lookup per workload, plus the admitted ones still starting.
        # The facts are read before the pass: a change meanwhile makes the next pass look at
        # every workload again.
        facts = idx.facts
        settled = self._settled if self._settled_facts == facts else {}
        now_settled: dict[WorkloadKey, WorkloadView] = {}
        for n, key in enumerate(cache.workload_keys()):
            if n % WORKLOAD_STEP == 0:
                yield
            view = cache.workload(key)
            if view is None:
                continue
            if settled.get(key) is view:
                now_settled[key] = view
                continue
            life = self.view.life(view)
            admitted = life.life.admitted
            if admitted is None:
                now_settled[key] = view
                continue
            if life.pods_ready:
                now_settled[key] = view
                continue
            if not leader or not self.records.is_queued(view.pods):
                continue
            _, check = self.view.evaluate(view, now)
            if check.due and str(key) not in self._in_flight:
                self._start_eviction(view, check)
            elif check.deadline is not None:
                wait = min(wait, check.recheck_after)
        self._settled, self._settled_facts = now_settled, facts
        return wait

    def _start_eviction(self, view: WorkloadView, check: PodsReadyCheck) -> None:
        name = str(view.key)
        self._in_flight.add(name)

        async def run() -> None:
            try:
                await self.evict(view, check)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # retried on the next pass: the workload is still due
                log.warning("eviction failed, retrying later", workload=name, error=str(exc))
            finally:
                self._in_flight.discard(name)

        task = asyncio.get_running_loop().create_task(run(), name=f"podsready-evict:{name}")
        self._evictions.add(task)
        task.add_done_callback(self._evictions.discard)

    async def evict(self, view: WorkloadView, check: PodsReadyCheck) -> EvictionRecord | None:
        """Record, mark and delete one workload (see the module docstring)."""
        cfg = self.config
        now = self.clock.now()
        key = view.key
        pods = live_pods(view.pods)
        # Only the active pods are marked and deleted, as Kueue suspends a Job (its controller
        # deletes the active pods): a Succeeded pod keeps its logs and its completion, a Failed
        # one what the Job counts it for. The eviction is the workload's all the same.
        targets = active_pods(pods)
        message = timeout_message(str(key), check, cfg)
        label = self.pool_label
        pools = sorted(
            {
                pool
                for p in pods
                if p.spec.nodeName and (pool := self.cache.node_labels(p.spec.nodeName).get(label))
            }
        )
        start = self.view.life(view).life.admitted

        def change(current: EvictionRecord | None) -> EvictionRecord | None:
            # None: this admission's eviction is recorded already: only finish the deletes.
            return timed_out(
                current,
                now,
                cfg.requeuing_strategy,
                self.jitter,
                admitted=start,
                message=message,
                failed_pools=pools,
            )

        record = await self.records.record_eviction(key, change)
        if record is not None:
            self.evicted += 1
            reason = DEACTIVATED if record.deactivated else PODS_READY_TIMEOUT
            queue = self.cache.queue_of_pod(view.pods[0]) if view.pods else ""
            metrics.count_eviction(queue, reason)
            log.info(
                "workload evicted: PodsReady timeout",
                workload=str(key),
                cause=check.cause,
                count=record.count,
                requeue_at=format_time(record.requeue_at) if record.requeue_at else None,
                deactivated=record.deactivated,
                pods=len(targets),
            )
        current = record or self.records.read(key)
        text = message
        if current is not None and current.deactivated and current.message:
            text = f"{message}; {current.message}"
        elif current is not None and current.requeue_at is not None:
            text = f"{message}; requeued after backoff at {format_time(current.requeue_at)}"
        refs = [PodRef.of(p) for p in targets]
        for ref in refs:
            await disrupt(self.pods, ref, PODS_READY_TIMEOUT, text, now)
        if record is not None:
            self._emit(key, refs, record, text)
        return record

    def _emit(
        self, key: WorkloadKey, refs: list[PodRef], record: EvictionRecord, text: str
    ) -> None:
        """Events on the evicted pods and the workload's owners (once per recorded eviction)."""
        reason = DEACTIVATED if record.deactivated else PODS_READY_TIMEOUT
        subjects = [ObjectRef.of_pod(r) for r in refs]
        subjects += [ObjectRef.of_owner(o) for o in self.records.targets(key).owners]
        for subject in subjects:
            self.events.emit(EventNote(subject, reason, text, type="Warning", action="Evict"))

    # -- gauges ---------------------------------------------------------------------------------

    def _scraped(self) -> Generator[None, None, None]:
        # The scrape's pass (``metrics.on_scrape``): it yields as it counts, and never raises:
        # a failure is logged, the gauges keep their last values.
        try:
            counts = yield from self.view.queue_counts_steps(self.clock.now())
            self._set_gauges(counts)
        except Exception:
            log.exception("requeue gauges not refreshed")

    def update_gauges(self, now: float) -> None:
        """Count the workloads per state and queue into the gauges (in one go)."""
        self._set_gauges(self.view.queue_counts(now))

    def _set_gauges(self, counts: dict[str, QueueCounts]) -> None:
        metrics.WORKLOADS_BACKOFF.set(sum(c.backoff for c in counts.values()))
        metrics.WORKLOADS_DEACTIVATED.set(sum(c.deactivated for c in counts.values()))
        pending: dict[str, int] = {}  # by label: undeclared queues add up under `other`
        for queue, c in counts.items():
            label = metrics.queue_label(queue)
            pending[label] = pending.get(label, 0) + c.pending
        for label, n in pending.items():
            metrics.PENDING_WORKLOADS.labels(label).set(n)
        # Series of queues that are gone are removed, not zeroed.
        for label in self._gauged - pending.keys():
            with contextlib.suppress(KeyError):
                metrics.PENDING_WORKLOADS.remove(label)
        self._gauged = set(pending)
