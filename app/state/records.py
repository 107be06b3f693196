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

import asyncio
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from app import metrics
from app.clock import Clock
from app.config.requeue import RequeuingStrategyConfig
from app.logs import RateLimitedWarnings, get_logger
from app.model import Pod
from app.model.eviction import PREEMPTED, EvictionRecord
from app.model.gate import GateEntry, PodRef, is_sealed, seal
from app.model.lifecycle import Life
from app.model.owner import OwnerRef, owner_of
from app.model.record import (
    EMPTY_STATE,
    OPERATOR,
    RUNWAY,
    WRITE_FAILURES,
    Change,
    Listener,
    OwnerTuple,
    RecordState,
    RecordWriteFailed,
    identity_matches,
    next_state,
    record_name,
)
from app.policy.backoff import JitterSource, reactivate, record_retry_wait
from app.policy.budget import PreemptionBudget, resolve_budget
from app.policy.eviction import preempted
from app.policy.lifecycle import LifeFacts, facts_of, life_to_write
from app.policy.queues import QueueTree
from app.policy.retention import expired
from app.policy.workload import WorkloadKey, owned_by, workload_of
from app.state.cache import ClusterCache, WorkloadView
from app.state.jobs import JobSize, JobSizes
from app.state.owners import DaemonSets, ReadOwners

log = get_logger("state.records")
warn = RateLimitedWarnings(log, 10.0)

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
class Unwritten:
    """A workload's state this process could not write to its record (kept in memory only)."""

    state: RecordState
    failures: int
    """Consecutive failed writes."""
    retry_at: float
    """No write is attempted before then (``policy.backoff.record_retry_wait``)."""


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
        daemonsets: DaemonSets | None,
        jitter: JitterSource = random.random,
        on_change: Callable[[], None] | None = None,
        on_life_change: Callable[[], None] | None = None,
    ) -> None:
        self.cache = cache
        self.jobs = jobs
        """The Jobs' sizes (PodsReady's target of a Job's workload); None: none known (the
        embedded default)."""
        self.owners = ReadOwners(cache, daemonsets)
        """The owners runway has read (DaemonSets, Nodes): ``is_queued``; no DaemonSet store
        (None: the embedded default): no pod is a DaemonSet's."""
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
        self._sealed: OrderedDict[str, str] = OrderedDict()
        """Sealed preemptor UIDs → the UIDs (``unseal``), bounded by ``MEMO_LIMIT``."""
        self._unwritten: OrderedDict[tuple[str, str], Unwritten] = OrderedDict()
        """Records that could not be written → the state kept in memory instead (bounded:
        ``MEMO_LIMIT``, the least recently changed dropped first)."""
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

    def _learn(self, uid: str) -> str:
        """``uid`` sealed, remembered so that ``unseal`` finds it again (bounded)."""
        sealed = seal(uid)
        if sealed != uid:
            self._sealed[sealed] = uid
            self._sealed.move_to_end(sealed)
            while len(self._sealed) > MEMO_LIMIT:
                self._sealed.popitem(last=False)
        return sealed

    def unseal(self, uid: str | None) -> str | None:
        """The UID a record names (a victim's record names a preemptor of another namespace
        sealed): as is when not sealed, else the preemptor's UID when this process has seen
        it (it preempted here, or its preemption in flight is on its own record), else None."""
        if not is_sealed(uid):
            return uid
        return self._sealed.get(uid)  # type: ignore[arg-type]

    def _observe(self, namespace: str, old: RecordState | None, new: RecordState | None) -> None:
        before = {e.preemptor.uid: e for e in (old.preemptions if old else ())}
        after = {e.preemptor.uid: e for e in (new.preemptions if new else ())}
        for uid in after.keys() - before.keys():
            self._learn(uid)  # a preemptor's own record names it: its victims' may not
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

    def _get(self, key: WorkloadKey) -> RecordState | None:
        """The workload's record: what this process could not write, else the store's — when
        it is this workload's (a record of the same name written for another identity is not:
        ``identity_matches``)."""
        where = (key.namespace, self.name_of(key))
        unwritten = self._unwritten.get(where)
        if unwritten is not None:
            return unwritten.state
        found = self.store.get(*where)
        if found is None or not identity_matches(found, (key.name, key.source)):
            return None
        return found

    def state(self, key: WorkloadKey) -> RecordState:
        """The workload's record (an empty state when it has none)."""
        return self._get(key) or EMPTY_STATE

    def read(self, key: WorkloadKey, pod: Pod | None = None) -> EvictionRecord | None:
        """The workload's eviction record (``spec.active`` applied); None when it has none."""
        del pod  # the record is found by the workload's identity alone
        found = self._get(key)
        return found.record if found is not None else None

    def may_have_record(self, key: WorkloadKey, pod: Pod | None = None) -> bool:
        """False only when the workload surely has no eviction record (a dict lookup)."""
        return self.read(key, pod) is not None

    def read_pod(self, pod: Pod) -> EvictionRecord | None:
        """The record of ``pod``'s workload."""
        return self.read(workload_of(pod), pod)

    # -- the workload's life facts (DESIGN §2) -------------------------------------------------

    def is_queued(self, pods: Sequence[Pod]) -> bool:
        """Whether a workload of ``pods`` is queued: not a DaemonSet's or a mirror pod's, as
        runway has read those owners itself (``state.owners.ReadOwners``)."""
        return self.owners.is_queued(pods)

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

    def life_change(
        self, key: WorkloadKey, life: Life, *, owner_created: float | None = None
    ) -> Change:
        """The change that persists ``life`` in the workload's record, as
        ``policy.lifecycle.life_to_write`` merges it with what the record holds (and the
        same-queue protection its start gives); for ``change``."""

        def on_state(current: RecordState) -> RecordState | None:
            new = life_to_write(current.life, life, owner_created)
            until = self.protection(key, new.started) if new.started is not None else None
            if new == current.life and until == current.protected_until:
                return None
            return replace(
                current, life=new, queue=self._queue(key) or current.queue, protected_until=until
            )

        return on_state

    def eviction_change(
        self, key: WorkloadKey, update: Update, applied: list[EvictionRecord] | None = None
    ) -> Change:
        """The change that read-modify-writes the workload's eviction record with ``update``;
        for ``change``. A record that says deactivated makes ``spec.active`` false; one that
        does not, true. ``applied`` receives the record ``update`` made: ``record_eviction``,
        which says whether the write applied it."""

        def on_state(current: RecordState) -> RecordState | None:
            new = update(current.record)
            if new is None:
                return None
            if applied is not None:
                applied[:] = [new]
            active = not new.deactivated
            # Who deactivated it: the requeue limit now, else whoever had (an operator's
            # deactivation stays an operator's whatever the eviction record says).
            by = "" if active else current.authority or RUNWAY
            return replace(
                current,
                eviction=new,
                active=active,
                deactivated_by=by,
                queue=self._queue(key) or current.queue,
            )

        return on_state

    # -- write (async) --------------------------------------------------------------------------

    async def record_eviction(self, key: WorkloadKey, update: Update) -> EvictionRecord | None:
        """``change`` with ``eviction_change(key, update)``; the record ``update`` made when
        that write applied it, else None (``update`` made none, or the workload gets no
        record). Did MY update apply, not merely was something written: a write of the state
        held in memory may go out without it, so ``change``'s return alone does not say."""
        applied: list[EvictionRecord] = []
        state = await self.change(key, self.eviction_change(key, update, applied))
        return applied[0] if state is not None and applied else None

    async def change(
        self, key: WorkloadKey, change: Change, *, durable: bool = False
    ) -> RecordState | None:
        """Read-modify-write the workload's record — the one way a record is written (the
        changes: ``eviction_change`` through ``record_eviction``, ``life_change``, the gate's
        mirror, activation); returns what was written (None: nothing).
        ``durable`` (a person's ``:activate``/``:deactivate``): a failed write raises
        ``RecordWriteFailed`` and nothing is kept in memory — the person is told.

        A record that cannot be written gains its workload nothing (issue #36): the new state is
        kept in memory (``unwritten``), read back by this process as the record, and the caller
        goes on as if written — the PodsReady evictor deletes the pods, a preemption its
        victims, the backoff and deactivation hold. The failure is counted
        (``runway_record_write_failures_total``) and the record is not written again before
        ``policy.backoff.record_retry_wait`` (1 s doubling to 5 min): meanwhile changes stay
        in memory, however often the workload's pods change. The next write after the backoff
        writes the state kept in memory, and forgets it once written.

        A workload runway does not manage (``policy.scope``) is never given a record: every
        write path comes through here."""
        if self.cache.workload_unmanaged(key):
            return None
        where = (key.namespace, self.name_of(key))
        now = self.clock.now()
        unwritten = self._unwritten.get(where)
        if unwritten is not None and now < unwritten.retry_at and not durable:
            return self._keep(key, where, change, unwritten, None)
        held = unwritten.state if unwritten is not None else None

        def against(current: RecordState) -> RecordState | None:
            # What this process holds in memory is the record it could not write: start from
            # it (with the stored object's version), and write it even when nothing else changes.
            if held is None:
                return change(current)
            base = replace(
                held,
                version=current.version,
                uid=current.uid,
                owned=current.owned,
                workload=current.workload,
            )
            new = change(base)
            return base if new is None else new

        try:
            written = await self.store.update(
                key.namespace, where[1], (key.name, key.source), self._owners(key), against
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = exc.reason if isinstance(exc, RecordWriteFailed) else "error"
            if durable:
                metrics.RECORD_WRITE_FAILURES.labels(
                    reason if reason in WRITE_FAILURES else "error"
                ).inc()
                raise
            return self._keep(key, where, change, unwritten, (reason, exc))
        if unwritten is not None:
            self._forget_unwritten(key.namespace, where)
        return written

    def _keep(
        self,
        key: WorkloadKey,
        where: tuple[str, str],
        change: Change,
        unwritten: Unwritten | None,
        failed: tuple[str, Exception] | None,
    ) -> RecordState | None:
        """Apply ``change`` to the state kept in memory for ``where`` (after a failed write, or
        while its backoff runs); the new state, None when ``change`` changes nothing."""
        old = unwritten.state if unwritten is not None else self._get(key)
        base = old or EMPTY_STATE
        new = next_state(change, base)
        failures = unwritten.failures if unwritten is not None else 0
        retry_at = unwritten.retry_at if unwritten is not None else 0.0
        if failed is not None:
            reason, exc = failed
            failures += 1
            retry_at = self.clock.now() + record_retry_wait(failures)
            metrics.RECORD_WRITE_FAILURES.labels(
                reason if reason in WRITE_FAILURES else "error"
            ).inc()
            warn.warning(
                f"record-write:{reason}",
                "workload record not written: kept in memory, written again after a backoff",
                workload=str(key),
                record=f"{where[0]}/{where[1]}",
                reason=reason,
                failures=failures,
                error=str(exc),
            )
        state = new if new is not None else base
        if unwritten is None and new is None and failed is None:
            return None
        self._unwritten[where] = Unwritten(
            replace(state, workload=(key.name, key.source)), failures, retry_at
        )
        self._unwritten.move_to_end(where)
        while len(self._unwritten) > MEMO_LIMIT:
            self._unwritten.popitem(last=False)
        metrics.RECORDS_UNWRITTEN.set(len(self._unwritten))
        if new is not None:
            self._observe(key.namespace, old, new)
        return new

    def _forget_unwritten(self, namespace: str, where: tuple[str, str]) -> None:
        """The record was written: the store holds it, memory keeps nothing more."""
        gone = self._unwritten.pop(where, None)
        metrics.RECORDS_UNWRITTEN.set(len(self._unwritten))
        if gone is not None:
            self._observe(namespace, gone.state, self.store.get(*where))

    def unwritten(self) -> list[tuple[str, str, RecordState]]:
        """The records kept in memory only: ``(namespace, name, state)``."""
        return [(ns, name, u.state) for (ns, name), u in self._unwritten.items()]

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

        if self._get(key) is not None:
            await self.change(key, change)

    # -- retention of records whose workload is gone (``policy.retention``) ---------------------

    async def sweep_gone(self, now: float, retention: float) -> int:
        """Delete the records whose workload has had no pod for ``retention`` and that hold
        nothing any more (``policy.retention``), owned or not; returns how many were deleted
        (leader only; nothing before the pods are listed: none would look present)."""
        if not self.cache.pods_synced:
            return 0
        deleted = 0
        present: set[tuple[str, str]] = set()
        for namespace, name, state in self.store.all():
            if not state.workload[0]:
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
        # The victim's namespace reads its record: a preemptor of another namespace is named
        # by its sealed UID (``model.gate.seal``), which ``unseal`` maps back.
        preemptor = self.cache.pod(preemptor_uid)
        if preemptor is None or preemptor.metadata.namespace != victim.metadata.namespace:
            preemptor_uid = self._learn(preemptor_uid)

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
        written = await self.record_eviction(key, change)
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
                await self.change(
                    key, lambda s: replace(s, active=True, deactivated_by=""), durable=True
                )
            return None
        written: list[EvictionRecord] = []

        def change(current: RecordState) -> RecordState | None:
            if current.eviction is None:
                return replace(current, active=True, deactivated_by="")
            record = reactivate(current.eviction)
            written[:] = [record]
            return replace(current, eviction=record, active=True, deactivated_by="")

        state_written = await self.change(key, change, durable=True)
        return written[0] if state_written is not None and written else None

    async def deactivate(self, key: WorkloadKey) -> bool:
        """Deactivate the workload as an operator (``spec.active: false``, ``deactivatedBy:
        operator``): never admitted until an operator activates it. False when an operator's
        deactivation held it already (one by the requeue limit becomes an operator's)."""

        def change(current: RecordState) -> RecordState | None:
            if not current.active and current.deactivated_by == OPERATOR:
                return None  # said so already (a spec.active runway did not write gets said)
            return replace(current, active=False, deactivated_by=OPERATOR)

        return await self.change(key, change, durable=True) is not None
