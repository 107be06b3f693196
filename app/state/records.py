"""Eviction records (SPEC §5) as runway reads them, and the read-modify-write that changes them.

A record lives on the workload's controller owner(s), else on each of its bare pods. Reading is
synchronous (the filter verb calls it): owners' ``runway.dev/eviction-*`` annotations come from the
owner index (``OwnerIndex``, kept by ``app.kube.owners``), bare pods' from the pod cache. Writing
goes through a ``RecordWriter`` (``app.kube.records``: fresh GET, compute, patch with UID and
resourceVersion preconditions, re-read on conflict). Without one (the embedded default) records
are logged as dry-run and kept in memory, so the verbs and the REST API behave the same.

A workload with pods of several controllers (a label-defined gang over two Jobs) has its record
on each of them; reading takes the newest.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from app import metrics
from app.clock import Clock
from app.config.requeue import RequeuingStrategyConfig
from app.logs import get_logger
from app.model import Pod
from app.model.eviction import PREEMPTED, EvictionRecord
from app.model.eviction import PREFIX as RECORD_PREFIX
from app.model.lifecycle import EMPTY, Life, merge
from app.model.owner import OwnerEntry, OwnerRef, owner_of
from app.policy.backoff import JitterSource, next_eviction_state, reactivate
from app.policy.budget import NO_BUDGET, PreemptionBudget, record_preemption, resolve_budget
from app.policy.lifecycle import LifeFacts, facts_of
from app.policy.queues import QueueTree
from app.policy.workload import WorkloadKey, queue_of, workload_of
from app.state.cache import ClusterCache, WorkloadView

log = get_logger("state.records")

Update = Callable[[EvictionRecord | None], EvictionRecord | None]
"""Computes the record to write from the current one; None = write nothing."""

Annotate = Callable[[Mapping[str, str], float | None], Mapping[str, str | None] | None]
"""Computes the annotations to merge into an owner from its current annotations and its
creationTimestamp (Unix seconds); None = write nothing."""

OWNER_MEMO_LIMIT = 10_000
"""Workloads whose last known owners are remembered (their pods may all be gone between an
eviction and the owner's re-creation); the oldest are forgotten first."""


class OwnerIndex(Protocol):
    """Owners' runway annotations, readable without I/O (``app.kube.owners.OwnerWatcher``)."""

    def get(self, ref: OwnerRef) -> OwnerEntry | None:
        """The cached entry of ``ref``; None when it has no runway annotation (or not synced)."""

    def ensure(self, ref: OwnerRef) -> None:
        """Start watching ``ref``'s kind unless already done (no await)."""


class RecordWriter(Protocol):
    """Writes records to the API server (``app.kube.records.KubeRecordWriter``)."""

    async def update_owner(
        self, ref: OwnerRef, change: Update, fallback: EvictionRecord | None
    ) -> EvictionRecord | None:
        """Read the owner fresh, apply ``change`` (to ``fallback`` when the owner has no record)
        and write the result; returns what was written (None: nothing, or the owner is gone)."""

    async def write_pods(self, pods: Iterable[Pod], record: EvictionRecord) -> list[Pod]:
        """Write ``record`` on each pod (UID precondition; gone pods skipped); returns the
        patched pods."""

    async def annotate_owner(self, ref: OwnerRef, change: Annotate) -> bool:
        """Read the owner fresh, compute annotations with ``change`` and merge them in
        (preconditions, conflict retry); False when nothing was written or the owner is gone."""

    async def annotate_pods(
        self, pods: Iterable[Pod], annotations: Mapping[str, str | None]
    ) -> list[Pod]:
        """Merge ``annotations`` into each pod (UID precondition; gone pods skipped); returns
        the patched pods."""


@dataclass(frozen=True)
class Targets:
    """Where a workload's record lives: its controller owners and its bare pods."""

    owners: tuple[OwnerRef, ...] = ()
    pods: tuple[Pod, ...] = ()


def _has_record_key(annotations: Mapping[str, str] | None) -> bool:
    return bool(annotations) and any(k.startswith(RECORD_PREFIX) for k in annotations or ())


def newest(records: Iterable[EvictionRecord | None]) -> EvictionRecord | None:
    """The latest of several copies of a record (later time, then higher count, wins)."""
    best: EvictionRecord | None = None
    for r in records:
        if r is not None and (best is None or (r.time, r.count) > (best.time, best.count)):
            best = r
    return best


class RecordBook:
    """Reads (sync, from the caches) and updates (async, through the writer) eviction records."""

    def __init__(
        self,
        cache: ClusterCache,
        config: RequeuingStrategyConfig,
        clock: Clock,
        *,
        owners: OwnerIndex | None = None,
        writer: RecordWriter | None = None,
        jitter: JitterSource = random.random,
        on_change: Callable[[], None] | None = None,
        owner_kinds: Iterable[tuple[str, str]] | None = None,
        queues: QueueTree | None = None,
        default_budget: PreemptionBudget = NO_BUDGET,
    ) -> None:
        self.cache = cache
        self.queues = queues if queues is not None else QueueTree()
        """The queue tree the victims' preemption budgets resolve through (``policy.budget``)."""
        self.default_budget = default_budget
        self.owner_kinds = frozenset(owner_kinds) if owner_kinds is not None else None
        """``(apiVersion, kind)`` of the controllers that hold records (``kubernetes.ownerKinds``);
        a pod controlled by another kind keeps the record itself, as a bare pod. None: any."""
        self.config = config
        self.clock = clock
        self.owners = owners
        self.writer = writer
        self.jitter = jitter
        self.on_change = on_change or (lambda: None)
        self._memory: OrderedDict[WorkloadKey, EvictionRecord] = OrderedDict()
        """Records written without an API server (dry-run) or for workloads with no target
        (bounded: ``OWNER_MEMO_LIMIT``, the oldest written forgotten first)."""
        self._owner_memo: OrderedDict[WorkloadKey, tuple[OwnerRef, ...]] = OrderedDict()
        """Last known owners of each workload (bounded: ``OWNER_MEMO_LIMIT``)."""
        self._life_memory: dict[WorkloadKey, Life] = {}
        """Life facts written without an API server (dry-run) or for workloads with no target."""
        self._life_memo: dict[WorkloadKey, tuple[WorkloadView, Life, float | None, LifeFacts]] = {}
        """The facts last computed per workload, valid while its view (the cache makes a new one
        on any change of its pods), its persisted facts and its eviction time are the same."""
        self._preempted: OrderedDict[tuple[WorkloadKey, str], None] = OrderedDict()
        """(victim workload, preemptor) evictions counted: a gang's pods count once."""

    # -- where ----------------------------------------------------------------------------------

    def targets(self, key: WorkloadKey, extra: Pod | None = None) -> Targets:
        """The owners and bare pods of workload ``key`` (plus ``extra``, the pod being filtered,
        which the cache may not have seen yet)."""
        pods = self.cache.workload_pods(key)
        if extra is not None and all(p.uid != extra.uid for p in pods):
            pods.append(extra)
        owners: dict[tuple[str, str, str], OwnerRef] = {}
        bare: list[Pod] = []
        for pod in pods:
            ref = owner_of(pod)
            if ref is None or (
                self.owner_kinds is not None and ref.kind_key not in self.owner_kinds
            ):
                bare.append(pod)
            else:
                owners.setdefault((ref.kind, ref.api_version, ref.name), ref)
        found = tuple(sorted(owners.values()))
        if found:
            if self._owner_memo.get(key) != found:
                self._owner_memo[key] = found
                self._owner_memo.move_to_end(key)
                while len(self._owner_memo) > OWNER_MEMO_LIMIT:
                    self._owner_memo.popitem(last=False)
            if self.owners is not None:
                for ref in found:
                    self.owners.ensure(ref)
        elif not bare:
            found = self._owner_memo.get(key, ())
        return Targets(found, tuple(bare))

    def watch_owners(self) -> None:
        """Start watching the owner kinds every cached workload names (startup)."""
        for key in self.cache.workload_keys():
            self.targets(key)

    # -- read (sync) ----------------------------------------------------------------------------

    def read(self, key: WorkloadKey, pod: Pod | None = None) -> EvictionRecord | None:
        """The workload's record from the caches (no I/O); None when it has none."""
        if self.writer is None:
            return self._memory.get(key)
        targets = self.targets(key, pod)
        copies: list[EvictionRecord | None] = [self._memory.get(key)]
        for ref in targets.owners:
            entry = self.owners.get(ref) if self.owners is not None else None
            copies.append(EvictionRecord.from_annotations(entry.annotations) if entry else None)
        for p in targets.pods:
            copies.append(EvictionRecord.from_annotations(p.metadata.annotations))
        return newest(copies)

    def may_have_record(self, key: WorkloadKey, pod: Pod | None = None) -> bool:
        """False only when the workload surely has no record: no ``runway.dev/eviction-*``
        annotation on its pods (and ``pod``) or their owners' cache entries, none in memory.
        Parses nothing, so a pass over every pending pod can skip the ones with no history."""
        if key in self._memory:
            return True
        if self.writer is None:
            return False
        view = self.cache.workload(key)
        pods = list(view.pods) if view is not None else []
        if pod is not None:
            pods.append(pod)
        if not pods:
            return bool(self._owner_memo.get(key))
        for p in pods:
            if _has_record_key(p.metadata.annotations):
                return True
            ref = owner_of(p)
            if ref is not None and self.owners is not None:
                entry = self.owners.get(ref)
                if entry is not None and _has_record_key(entry.annotations):
                    return True
        return False

    def read_pod(self, pod: Pod) -> EvictionRecord | None:
        """The record of ``pod``'s workload."""
        return self.read(workload_of(pod), pod)

    # -- the workload's life facts (SPEC §2) ----------------------------------------------------

    def persisted_life(self, key: WorkloadKey) -> Life:
        """The facts the annotations hold (owners', else bare pods'), or the in-memory copy."""
        if self.writer is None:
            return self._life_memory.get(key, EMPTY)
        targets = self.targets(key)
        copies: list[Life] = []
        for ref in targets.owners:
            entry = self.owners.get(ref) if self.owners is not None else None
            if entry is not None:
                copies.append(Life.from_annotations(entry.annotations))
        for p in targets.pods:
            copies.append(Life.from_annotations(p.metadata.annotations))
        memory = self._life_memory.get(key)
        if memory is not None:
            copies.append(memory)
        return merge(copies)

    def life(self, view: WorkloadView) -> LifeFacts:
        """The workload's facts now (persisted, moved by what its pods show: ``policy.lifecycle``);
        memoised until its pods, its persisted facts or its eviction record change."""
        key = view.key
        persisted = self.persisted_life(key)
        record = self.read(key)
        evicted = record.time if record is not None else None
        memo = self._life_memo.get(key)
        if memo is not None and memo[0] is view and memo[1] == persisted and memo[2] == evicted:
            return memo[3]
        facts = facts_of(view.pods, persisted, last_eviction=evicted)
        if len(self._life_memo) > OWNER_MEMO_LIMIT:
            self._life_memo.clear()
        self._life_memo[key] = (view, persisted, evicted, facts)
        return facts

    async def write_life(self, key: WorkloadKey, life: Life) -> bool:
        """Persist ``life`` on the workload's owners (``created`` = the owner's
        creationTimestamp when none is persisted yet) or bare pods; in memory without an API
        server. Returns True when something was written."""
        targets = self.targets(key) if self.writer is not None else Targets()
        if self.writer is None or (not targets.owners and not targets.pods):
            if self._life_memory.get(key) == life:
                return False
            self._life_memory[key] = life
            self.on_change()
            return True
        written = False

        def change(
            annotations: Mapping[str, str], owner_created: float | None
        ) -> dict[str, str | None] | None:
            current = Life.from_annotations(annotations)
            created = current.created or owner_created or life.created
            size = max((n for n in (current.size, life.size) if n is not None), default=None)
            new = Life(created, life.admitted, life.started, size).to_annotations()
            return None if all(annotations.get(k) == v for k, v in new.items()) else new

        for ref in targets.owners:
            written = await self.writer.annotate_owner(ref, change) or written
        if targets.pods:
            patched = await self.writer.annotate_pods(targets.pods, life.to_annotations())
            for pod in patched:
                if self.cache.pod(pod.uid) is not None:
                    self.cache.upsert_pod(pod)
            written = written or bool(patched)
        if written:
            # No ``on_change``: the patched pods (upserted above) and the owner cache (read
            # after write) tell their own subscribers; the facts only confirm what the pods
            # show, so the memos of every other workload stay valid.
            self._life_memory.pop(key, None)
        return written

    # -- write (async) --------------------------------------------------------------------------

    async def write(self, key: WorkloadKey, record: EvictionRecord) -> EvictionRecord | None:
        """Persist ``record`` as the workload's record (whatever it held before)."""
        return await self.update(key, lambda _: record)

    async def update(self, key: WorkloadKey, change: Update) -> EvictionRecord | None:
        """Read-modify-write the workload's record; returns what was written (None: nothing)."""
        targets = self.targets(key) if self.writer is not None else Targets()
        if self.writer is None or (not targets.owners and not targets.pods):
            new = change(self._memory.get(key))
            if new is not None:
                if self.writer is None:
                    log.info(
                        "dry-run: eviction record not written",
                        workload=str(key),
                        annotations=new.to_annotations(),
                    )
                else:  # no pod and no known owner: nothing to annotate
                    log.warning(
                        "workload has no pods or owner: record kept in memory only",
                        workload=str(key),
                    )
                self._memory[key] = new
                self._memory.move_to_end(key)
                while len(self._memory) > OWNER_MEMO_LIMIT:
                    self._memory.popitem(last=False)
                self.on_change()
            return new
        written: EvictionRecord | None = None
        current = self.read(key)
        for ref in targets.owners:
            written = await self.writer.update_owner(ref, change, current) or written
        if targets.pods:
            new = change(current)
            if new is not None:
                for patched in await self.writer.write_pods(targets.pods, new):
                    # Read after write: the watch brings the same version a moment later.
                    if self.cache.pod(patched.uid) is not None:
                        self.cache.upsert_pod(patched)
                written = new
        if written is not None:
            self._memory.pop(key, None)
            self.on_change()
        return written

    # -- the operations callers use -------------------------------------------------------------

    async def record_preemption(
        self, victim_pod_uid: str, preemptor_uid: str, now: float, message: str | None = None
    ) -> EvictionRecord | None:
        """Record that the victim's workload was preempted by ``preemptor_uid`` at ``now``, and
        append ``now`` to its preemption history (bounded by its queue's preemption budget).

        Called once per victim pod: a gang's other pods find the record already naming the same
        preemptor as its last ``Preempted`` eviction, and append nothing (one preemption of the
        workload). Where the record lives (owners, else every bare pod) the history lives too."""
        victim = self.cache.pod(victim_pod_uid)
        if victim is None:
            log.info("victim not in the cache: no eviction record", victim_uid=victim_pod_uid)
            return None
        budget = resolve_budget(self.queues, queue_of(victim), self.default_budget).budget

        def change(current: EvictionRecord | None) -> EvictionRecord:
            new = next_eviction_state(
                current,
                PREEMPTED,
                now,
                self.config,
                self.jitter,
                preemptor_uid=preemptor_uid,
                message=message,
            )
            same = (
                current is not None
                and current.reason == PREEMPTED
                and current.preemptor_uid == preemptor_uid
            )
            if same:
                return new
            history = record_preemption(new.preemption_history, now, budget)
            return replace(new, preemption_history=history)

        key = workload_of(victim)
        written = await self.update(key, change)
        if (key, preemptor_uid) not in self._preempted:
            self._preempted[(key, preemptor_uid)] = None
            while len(self._preempted) > OWNER_MEMO_LIMIT:
                self._preempted.popitem(last=False)
            metrics.count_eviction(queue_of(victim, self.cache.queue_labels), PREEMPTED)
        return written

    async def activate(self, key: WorkloadKey) -> EvictionRecord | None:
        """Reset count and requeueAt and clear deactivation; None when there is no record."""

        def change(current: EvictionRecord | None) -> EvictionRecord | None:
            return reactivate(current) if current is not None else None

        return await self.update(key, change)
