"""Each workload's state as runway reads and changes it: life facts, eviction record, active,
preemptions in flight — kept in runway's own ``WorkloadRecord`` resource (``app.model.record``,
docs/state.md), never in annotations a tenant can write.

Reading is synchronous (the filter verb calls it): a dict lookup in the record store (kept by
``app.kube.workloadrecords`` from list+watch; ``MemoryRecords`` on the embedded default, which
keeps the same state in memory only). Writing is a read-modify-write through the store
(``RecordStore.update``: create, then the status subresource with a resourceVersion
precondition, re-read on conflict).

The preemptions in flight recorded on a preemptor's workload (the gate and its claim) are handed
to the gate book (``on_gates``) as records change, so every replica, and this one after a
restart, holds the same preemptors.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from app import metrics
from app.clock import Clock
from app.config.requeue import RequeuingStrategyConfig
from app.logs import get_logger
from app.model import Pod
from app.model.eviction import PREEMPTED, EvictionRecord
from app.model.gate import GateEntry, PodRef
from app.model.lifecycle import Life
from app.model.owner import OwnerRef, owner_of
from app.model.record import (
    EMPTY_STATE,
    Change,
    Listener,
    OwnerTuple,
    RecordState,
    next_state,
    record_name,
)
from app.policy.backoff import JitterSource, reactivate
from app.policy.budget import PreemptionBudget, resolve_budget
from app.policy.eviction import preempted
from app.policy.lifecycle import LifeFacts, facts_of, life_to_write
from app.policy.queues import QueueTree
from app.policy.retention import expired
from app.policy.workload import WorkloadKey, owned_by, workload_of
from app.state.cache import ClusterCache, WorkloadView
from app.state.jobs import JobSize, JobSizes

log = get_logger("state.records")

Update = Callable[[EvictionRecord | None], EvictionRecord | None]
"""Computes the record to write from the current one; None = write nothing."""

MEMO_LIMIT = 10_000
"""Bounded memos: preemptions counted; life facts (this many plus twice the workloads)."""


class RecordStore(Protocol):
    """Where records live (``app.kube.workloadrecords.KubeRecordStore``, or ``MemoryRecords``)."""

    listeners: list[Listener]

    @property
    def available(self) -> bool:
        """False while records cannot be written (the API server refuses them: no CRD)."""

    def get(self, namespace: str, name: str) -> RecordState | None:
        """The record's state (None: none yet). No I/O."""

    def all(self) -> list[tuple[str, str, RecordState]]:
        """Every record: ``(namespace, name, state)``."""

    async def update(
        self,
        namespace: str,
        name: str,
        identity: tuple[str, str],
        owners: tuple[OwnerTuple, ...],
        change: Change,
    ) -> RecordState | None:
        """Read-modify-write one record (created when absent); the state written, or None."""

    async def remove(self, namespace: str, name: str, uid: str) -> bool:
        """Delete one record (UID precondition); False when it was gone already."""


class MemoryRecords:
    """The embedded default's store: the same records, in memory only (logged as dry-run)."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], RecordState] = {}
        self.listeners: list[Listener] = []

    @property
    def available(self) -> bool:
        """Always: memory is there."""
        return True

    def get(self, namespace: str, name: str) -> RecordState | None:
        """The record's state."""
        return self.states.get((namespace, name))

    def all(self) -> list[tuple[str, str, RecordState]]:
        """Every record."""
        return [(ns, name, s) for (ns, name), s in self.states.items()]

    async def update(
        self,
        namespace: str,
        name: str,
        identity: tuple[str, str],
        owners: tuple[OwnerTuple, ...],
        change: Change,
    ) -> RecordState | None:
        """Change the record in memory."""
        old = self.states.get((namespace, name))
        new = next_state(change, old or EMPTY_STATE)
        if new is None:
            return None
        new = replace(new, workload=identity, owned=bool(owners))
        self.states[(namespace, name)] = new
        log.info("dry-run: workload record kept in memory", record=f"{namespace}/{name}")
        for listener in list(self.listeners):
            listener(namespace, old, new)
        return new

    async def remove(self, namespace: str, name: str, uid: str) -> bool:
        """Forget one record."""
        del uid
        old = self.states.pop((namespace, name), None)
        if old is not None:
            for listener in list(self.listeners):
                listener(namespace, old, None)
        return old is not None


@dataclass(frozen=True)
class Targets:
    """The workload's controllers (ownerReferences of its record; subjects of its Events)."""

    owners: tuple[OwnerRef, ...] = ()


class RecordBook:
    """Reads (sync, from the store) and updates (async, through the store) workload records."""

    def __init__(
        self,
        cache: ClusterCache,
        config: RequeuingStrategyConfig,
        clock: Clock,
        *,
        queues: QueueTree,
        store: RecordStore,
        default_budget: PreemptionBudget,
        queue_of_pod: Callable[[Pod], str],
        protection: Callable[[WorkloadKey, float], float | None],
        jobs: JobSizes | None,
        jitter: JitterSource = random.random,
        on_change: Callable[[], None] | None = None,
        on_life_change: Callable[[], None] | None = None,
    ) -> None:
        self.cache = cache
        self.jobs = jobs
        """The Jobs' sizes (PodsReady's target of a Job's workload); None: none known (the
        embedded default)."""
        self.queues = queues
        """The queue tree the victims' preemption budgets resolve through (``policy.budget``)."""
        self.default_budget = default_budget
        self.config = config
        self.clock = clock
        self.store: RecordStore = store
        self.jitter = jitter
        self.on_change = on_change or (lambda: None)
        self.on_life_change = on_life_change or self.on_change
        self.protection = protection
        """Until when min-runtime protects a workload started at a time from a same-queue
        preemption (``status.protection``; built by wiring from ``policy.minruntime``)."""
        self.queue_of_pod = queue_of_pod
        """The queue a pod is in (namespace permissions applied: ``RequeueView.queue_of``)."""
        self.on_gates: Callable[[str, GateEntry | None], None] = lambda uid, entry: None
        """Told (preemptor UID, entry or None) as preemptions in flight appear and go."""
        self._life_memo: dict[
            WorkloadKey, tuple[WorkloadView, Life, float | None, JobSize | None, LifeFacts]
        ] = {}
        self._gone: dict[tuple[str, str], float] = {}
        """Unowned records whose workload has no pod in the cache → since when (retention)."""
        self._preempted: OrderedDict[tuple[WorkloadKey, str], None] = OrderedDict()
        """(victim workload, preemptor) evictions counted: a gang's pods count once."""
        self.store.listeners.append(self._observe)

    @property
    def available(self) -> bool:
        """Whether records can be written (False: the API server refuses WorkloadRecords, the
        CRD is missing; the leader's writers wait instead of failing once a second)."""
        return self.store.available

    @property
    def writer(self) -> RecordStore | None:
        """The store when records are written to the API server (None: in memory only)."""
        return None if isinstance(self.store, MemoryRecords) else self.store

    # -- where ----------------------------------------------------------------------------------

    @staticmethod
    def name_of(key: WorkloadKey) -> str:
        """The record's object name for ``key`` (in ``key.namespace``)."""
        return record_name(key.name, key.source)

    def targets(self, key: WorkloadKey) -> Targets:
        """The workload's controllers, from its cached pods' ownerReferences (no access to the
        controller's kind is needed)."""
        found: dict[tuple[str, str, str], OwnerRef] = {}
        for pod in self.cache.workload_pods(key):
            ref = owner_of(pod)
            if ref is not None:
                found.setdefault((ref.kind, ref.api_version, ref.name), ref)
        return Targets(tuple(sorted(found.values())))

    def _owners(self, key: WorkloadKey) -> tuple[OwnerTuple, ...]:
        return tuple((o.api_version, o.kind, o.name, o.uid) for o in self.targets(key).owners)

    def _observe(self, namespace: str, old: RecordState | None, new: RecordState | None) -> None:
        before = {e.preemptor.uid: e for e in (old.preemptions if old else ())}
        after = {e.preemptor.uid: e for e in (new.preemptions if new else ())}
        del namespace  # the entries name their preemptor's namespace themselves
        for uid, entry in after.items():
            if before.get(uid) != entry:
                self.on_gates(uid, entry)
        for uid in before.keys() - after.keys():
            self.on_gates(uid, None)
        a, b = old or EMPTY_STATE, new or EMPTY_STATE
        if (a.eviction, a.active, a.queue) != (b.eviction, b.active, b.queue):
            self.on_change()
        elif a.life != b.life:
            self.on_life_change()

    # -- read (sync) ----------------------------------------------------------------------------

    def state(self, key: WorkloadKey) -> RecordState:
        """The workload's record (an empty state when it has none)."""
        return self.store.get(key.namespace, self.name_of(key)) or EMPTY_STATE

    def read(self, key: WorkloadKey, pod: Pod | None = None) -> EvictionRecord | None:
        """The workload's eviction record (``spec.active`` applied); None when it has none."""
        del pod  # the record is found by the workload's identity alone
        found = self.store.get(key.namespace, self.name_of(key))
        return found.record if found is not None else None

    def may_have_record(self, key: WorkloadKey, pod: Pod | None = None) -> bool:
        """False only when the workload surely has no eviction record (a dict lookup)."""
        return self.read(key, pod) is not None

    def read_pod(self, pod: Pod) -> EvictionRecord | None:
        """The record of ``pod``'s workload."""
        return self.read(workload_of(pod), pod)

    # -- the workload's life facts (DESIGN §2) -------------------------------------------------

    def persisted_life(self, key: WorkloadKey) -> Life:
        """The facts the record holds."""
        return self.state(key).life

    def job_size(self, view: WorkloadView) -> int | None:
        """The size of the workload's Job (``owner:Job``, one of its pods controlled by the Job's
        UID), PodsReady's target unless minAvailable is declared; None: not a Job's, or not
        known (Jobs not readable, the Job gone or of no size)."""
        return self.jobs.size_of(view.key, view.pods) if self.jobs is not None else None

    def life(self, view: WorkloadView) -> LifeFacts:
        """The workload's facts now (persisted, moved by what its pods show: ``policy.lifecycle``;
        PodsReady against its Job's size when it has one); memoised until its pods, its
        persisted facts, its eviction record or its Job's size change (so a loss of PodsReady
        its pods do not date is dated by the first look at it, until the leader persists it)."""
        key = view.key
        state = self.state(key)  # one lookup for both
        persisted, record = state.life, state.record
        evicted = record.time if record is not None else None
        job = self.jobs.lookup(key) if self.jobs is not None else None
        memo = self._life_memo.get(key)
        if (
            memo is not None
            and memo[0] is view
            and memo[1] == persisted
            and memo[2] == evicted
            and memo[3] == job
        ):
            return memo[4]
        parallelism = owner_created = None
        if job is not None and owned_by(view.pods, job.uid):
            parallelism, owner_created = job.size, job.created
        facts = facts_of(
            view.pods,
            persisted,
            owner_created=owner_created,
            last_eviction=evicted,
            parallelism=parallelism,
            observed_at=self.clock.now(),
        )
        # Bounded by the workloads there are: a pass over every workload (the PodsReady evictor,
        # the blockers, /v1/queues) must find its memo, not clear it (41,000 workloads at
        # 150,000 pods: bench.scale).
        if len(self._life_memo) > MEMO_LIMIT + 2 * self.cache.workload_count():
            self._life_memo.clear()
        self._life_memo[key] = (view, persisted, evicted, job, facts)
        return facts

    async def write_life(
        self, key: WorkloadKey, life: Life, *, owner_created: float | None = None
    ) -> bool:
        """Persist ``life`` in the workload's record, as ``policy.lifecycle.life_to_write``
        merges it with what the record holds. Returns True when something was written."""

        def change(current: RecordState) -> RecordState | None:
            new = life_to_write(current.life, life, owner_created)
            until = self.protection(key, new.started) if new.started is not None else None
            if new == current.life and until == current.protected_until:
                return None
            return replace(
                current, life=new, queue=self._queue(key) or current.queue, protected_until=until
            )

        return await self.change(key, change) is not None

    # -- write (async) --------------------------------------------------------------------------

    async def change(self, key: WorkloadKey, change: Change) -> RecordState | None:
        """Read-modify-write the workload's record; returns what was written (None: nothing).
        A workload runway does not manage (``policy.scope``) is never given a record: every
        write path comes through here."""
        if self.cache.workload_unmanaged(key):
            return None
        return await self.store.update(
            key.namespace, self.name_of(key), (key.name, key.source), self._owners(key), change
        )

    async def write(self, key: WorkloadKey, record: EvictionRecord) -> EvictionRecord | None:
        """Persist ``record`` as the workload's record (whatever it held before)."""
        return await self.update(key, lambda _: record)

    async def update(self, key: WorkloadKey, change: Update) -> EvictionRecord | None:
        """Read-modify-write the workload's eviction record; returns what was written. A record
        that says deactivated makes ``spec.active`` false; one that does not, true."""
        written: list[EvictionRecord] = []

        def on_state(current: RecordState) -> RecordState | None:
            new = change(current.record)
            if new is None:
                return None
            written[:] = [new]
            return replace(
                current,
                eviction=new,
                active=not new.deactivated,
                queue=self._queue(key) or current.queue,
            )

        state = await self.change(key, on_state)
        return written[0] if state is not None and written else None

    def _queue(self, key: WorkloadKey) -> str:
        pods = self.cache.workload_pods(key)
        return self.queue_of_pod(pods[0]) if pods else ""

    # -- the gate's mirror (a preemption in flight on its preemptor's record) -------------------

    def _preemptor_key(self, preemptor: PodRef) -> WorkloadKey:
        pod = self.cache.pod(preemptor.uid)
        return (
            workload_of(pod)
            if pod is not None
            else WorkloadKey(preemptor.namespace, preemptor.name, "pod")
        )

    async def mirror_gate(self, entry: GateEntry) -> bool:
        """Record ``entry`` on its preemptor's workload record, for the other replicas and the
        next run; False when the preemptor is gone from a cluster's cache."""
        if self.writer is not None and self.cache.pod(entry.preemptor.uid) is None:
            return False
        key = self._preemptor_key(entry.preemptor)

        def change(current: RecordState) -> RecordState:
            others = tuple(e for e in current.preemptions if e.preemptor.uid != entry.preemptor.uid)
            return replace(current, preemptions=(*others, entry))

        await self.change(key, change)
        return True

    async def unmirror_gate(self, preemptor: PodRef) -> None:
        """Remove the preemption of ``preemptor`` from the record that carries it."""
        key = self._preemptor_key(preemptor)

        def change(current: RecordState) -> RecordState | None:
            kept = tuple(e for e in current.preemptions if e.preemptor.uid != preemptor.uid)
            return None if kept == current.preemptions else replace(current, preemptions=kept)

        if self.store.get(key.namespace, self.name_of(key)) is not None:
            await self.change(key, change)

    # -- retention of records nobody owns (``policy.retention``) --------------------------------

    async def sweep_unowned(self, now: float, retention: float) -> int:
        """Delete the unowned records whose workload has been gone for ``retention`` and that
        hold nothing any more; returns how many were deleted (leader only)."""
        deleted = 0
        present: set[tuple[str, str]] = set()
        for namespace, name, state in self.store.all():
            if state.owned or not state.workload[0]:
                continue
            where = (namespace, name)
            present.add(where)
            key = WorkloadKey(namespace, *state.workload)
            if self.cache.workload_pods(key):
                self._gone.pop(where, None)
                continue
            gone_since = self._gone.setdefault(where, now)
            if expired(state, gone_since, now, retention):
                if await self.store.remove(namespace, name, state.uid):
                    deleted += 1
                    log.info("record of a gone workload deleted", record=f"{namespace}/{name}")
                self._gone.pop(where, None)
        for where in [w for w in self._gone if w not in present]:
            del self._gone[where]
        return deleted

    # -- the operations callers use -------------------------------------------------------------

    async def record_preemption(
        self, victim_pod_uid: str, preemptor_uid: str, now: float, message: str | None = None
    ) -> EvictionRecord | None:
        """Record that the victim's workload was preempted by ``preemptor_uid`` at ``now``, and
        append ``now`` to its preemption history (bounded by its queue's preemption budget).

        Called once per victim pod: a gang's other pods find the record already naming the same
        preemptor as its last ``Preempted`` eviction, and append nothing (one preemption of the
        workload)."""
        victim = self.cache.pod(victim_pod_uid)
        if victim is None:
            log.info("victim not in the cache: no eviction record", victim_uid=victim_pod_uid)
            return None
        budget = resolve_budget(self.queues, self.queue_of_pod(victim), self.default_budget).budget

        def change(current: EvictionRecord | None) -> EvictionRecord:
            return preempted(
                current,
                preemptor_uid,
                now,
                self.config,
                budget,
                self.jitter,
                message=message,
            )

        key = workload_of(victim)
        if not self.cache.is_managed(victim):
            return None  # a victim kube-scheduler offered that runway does not manage
        written = await self.update(key, change)
        if (key, preemptor_uid) not in self._preempted:
            self._preempted[(key, preemptor_uid)] = None
            while len(self._preempted) > MEMO_LIMIT:
                self._preempted.popitem(last=False)
            metrics.count_eviction(self.queue_of_pod(victim), PREEMPTED)
        return written

    async def activate(self, key: WorkloadKey) -> EvictionRecord | None:
        """Reset count and requeueAt, clear deactivation (``spec.active: true``); None when
        there is no eviction record (a workload only deactivated by hand is made active and
        nothing else is written: no eviction is made up)."""
        state = self.state(key)
        if state.eviction is None:
            if not state.active:
                await self.change(key, lambda s: replace(s, active=True))
            return None

        def change(current: EvictionRecord | None) -> EvictionRecord | None:
            return reactivate(current) if current is not None else None

        return await self.update(key, change)

    async def deactivate(self, key: WorkloadKey) -> bool:
        """Deactivate the workload (``spec.active: false``): never admitted until activated.
        False when it was inactive already."""

        def change(current: RecordState) -> RecordState | None:
            return replace(current, active=False) if current.active else None

        return await self.change(key, change) is not None
