"""Where eviction records live (SPEC §5): on the workload's controller owner, else on its pods.

``EvictionRecordStore.read`` is synchronous (the filter verb calls it): it reads the owners'
``runway.dev/eviction-*`` annotations from the ``OwnerWatcher`` cache and the pods' from the pod
cache. Writes are read-modify-write with optimistic concurrency: the owner is read fresh
(``GET``), the new record computed from what it holds, and written by a JSON merge patch with
UID and resourceVersion preconditions; a 409 (someone else wrote in between) starts over, a
bounded number of times. A bare-pod workload keeps its record on every one of its pods
(UID precondition; a pod already gone is skipped).

A workload with pods of several controllers (a label-defined gang over two Jobs) has its record
on each of them; reading takes the newest. On the embedded default (no API server) writes are
logged as dry-run and kept in memory, so the verbs and the REST API behave the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.clock import Clock
from app.config.requeue import RequeuingStrategyConfig
from app.kube.client import KubeClient, log_dry_run
from app.kube.errors import Conflict, NotFound
from app.kube.owners import (
    Discovery,
    OwnerRef,
    OwnerWatcher,
    get_owner,
    owner_of,
    patch_annotations,
)
from app.kube.resources import PODS
from app.logs import get_logger
from app.model import Pod
from app.model.eviction import PREEMPTED, EvictionRecord
from app.policy.backoff import JitterSource, next_eviction_state, random_jitter, reactivate
from app.policy.workload import WorkloadKey, workload_of
from app.state.cache import ClusterCache

log = get_logger("kube.records")

Update = Callable[[EvictionRecord | None], EvictionRecord | None]
"""Computes the record to write from the current one; None = write nothing."""


@dataclass(frozen=True)
class Targets:
    """Where a workload's record lives: its controller owners and its bare pods."""

    owners: tuple[OwnerRef, ...] = ()
    pods: tuple[Pod, ...] = ()


def newest(records: Iterable[EvictionRecord | None]) -> EvictionRecord | None:
    """The latest of several copies of a record (later time, then higher count, wins)."""
    best: EvictionRecord | None = None
    for r in records:
        if r is not None and (best is None or (r.time, r.count) > (best.time, best.count)):
            best = r
    return best


class EvictionRecordStore:
    """Reads (sync, from caches) and writes (async, to the API server) eviction records."""

    def __init__(
        self,
        cache: ClusterCache,
        config: RequeuingStrategyConfig,
        clock: Clock,
        *,
        client: KubeClient | None = None,
        owners: OwnerWatcher | None = None,
        jitter: JitterSource = random_jitter,
        conflict_retries: int = 5,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.cache = cache
        self.config = config
        self.clock = clock
        self.client = client
        self.discovery = owners.discovery if owners else (Discovery(client) if client else None)
        self.owners = owners
        self.jitter = jitter
        self.conflict_retries = conflict_retries
        self.on_change = on_change or (lambda: None)
        self._memory: dict[WorkloadKey, EvictionRecord] = {}
        """Records written without an API server (dry-run) or for workloads with no target."""
        self._owner_memo: dict[WorkloadKey, tuple[OwnerRef, ...]] = {}
        """Last known owners of each workload: its pods may all be gone between re-creations."""

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
            if ref is None:
                bare.append(pod)
            else:
                owners.setdefault((ref.kind, ref.api_version, ref.name), ref)
        found = tuple(sorted(owners.values()))
        if found:
            self._owner_memo[key] = found
            if self.owners is not None:
                for ref in found:
                    self.owners.ensure(ref)
        elif not bare:
            found = self._owner_memo.get(key, ())
        return Targets(found, tuple(bare))

    # -- read (sync) ----------------------------------------------------------------------------

    def read(self, key: WorkloadKey, pod: Pod | None = None) -> EvictionRecord | None:
        """The workload's record from the caches (no I/O); None when it has none."""
        if self.client is None:
            return self._memory.get(key)
        targets = self.targets(key, pod)
        copies: list[EvictionRecord | None] = [self._memory.get(key)]
        for ref in targets.owners:
            entry = self.owners.get(ref) if self.owners is not None else None
            copies.append(EvictionRecord.from_annotations(entry.annotations) if entry else None)
        for p in targets.pods:
            copies.append(EvictionRecord.from_annotations(p.metadata.annotations))
        return newest(copies)

    def read_pod(self, pod: Pod) -> EvictionRecord | None:
        """The record of ``pod``'s workload."""
        return self.read(workload_of(pod), pod)

    # -- write (async) --------------------------------------------------------------------------

    async def write(self, key: WorkloadKey, record: EvictionRecord) -> EvictionRecord | None:
        """Persist ``record`` as the workload's record (whatever it held before)."""
        return await self.update(key, lambda _: record)

    async def update(self, key: WorkloadKey, change: Update) -> EvictionRecord | None:
        """Read-modify-write the workload's record; returns what was written (None: nothing)."""
        if self.client is None:
            new = change(self._memory.get(key))
            if new is not None:
                log_dry_run("patch", f"eviction record of workload {key}", new.to_annotations())
                self._memory[key] = new
                self.on_change()
            return new
        targets = self.targets(key)
        if not targets.owners and not targets.pods:
            # No pod and no known owner: nothing to annotate; keep it for this process.
            new = change(self._memory.get(key))
            if new is not None:
                log.warning(
                    "workload has no pods or owner: record kept in memory only", workload=str(key)
                )
                self._memory[key] = new
                self.on_change()
            return new
        written: EvictionRecord | None = None
        current = self.read(key)
        for ref in targets.owners:
            written = await self._update_owner(ref, change, current) or written
        if targets.pods:
            new = change(current)
            if new is not None:
                await self._write_pods(targets.pods, new)
                written = new
        if written is not None:
            self._memory.pop(key, None)
            self.on_change()
        return written

    async def _update_owner(
        self, ref: OwnerRef, change: Update, fallback: EvictionRecord | None
    ) -> EvictionRecord | None:
        assert self.client is not None and self.discovery is not None
        resource = await self.discovery.resource_for(ref.api_version, ref.kind)
        for attempt in range(self.conflict_retries + 1):
            try:
                obj = await get_owner(self.client, self.discovery, ref)
            except NotFound:
                log.info("owner gone: record not written", owner=str(ref))
                return None
            meta = obj.metadata
            if ref.uid and meta.uid and meta.uid != ref.uid:
                log.info("owner re-created: record not written", owner=str(ref))
                return None
            current = EvictionRecord.from_annotations(meta.annotations)
            # The owner is the truth; the cached copy only fills in when the owner has none
            # (a record written in memory before the owner was known).
            new = change(current if current is not None else fallback)
            if new is None:
                return None
            try:
                patched = await patch_annotations(
                    self.client,
                    resource,
                    ref.name,
                    ref.namespace,
                    new.to_annotations(),
                    uid=meta.uid or None,
                    resource_version=meta.resourceVersion or None,
                )
            except Conflict:
                log.info("record write conflicted, re-reading", owner=str(ref), attempt=attempt + 1)
                continue
            if self.owners is not None:
                self.owners.put(ref, patched.metadata.uid, patched.metadata.annotations)
            log.info("eviction record written", owner=str(ref), **_fields(new))
            return new
        raise Conflict(
            409, f"eviction record of {ref}: still conflicting after retries", "Conflict"
        )

    async def _write_pods(self, pods: Iterable[Pod], record: EvictionRecord) -> None:
        assert self.client is not None
        annotations = record.to_annotations()
        patch = {"metadata": {"annotations": annotations}}
        for pod in pods:
            try:
                patched = await self.client.patch(
                    PODS,
                    pod.metadata.name,
                    {"metadata": {**patch["metadata"], "uid": pod.uid}},
                    pod.metadata.namespace,
                    into=Pod,
                    patch_type="merge",
                )
            except (NotFound, Conflict):
                continue  # gone, or re-created under the same name: not this workload's pod
            # Read after write: the watch brings the same version a moment later.
            if self.cache.pod(pod.uid) is not None:
                self.cache.upsert_pod(patched)
            log.info("eviction record written", pod=pod.key, **_fields(record))

    # -- the operations callers use -------------------------------------------------------------

    async def record_preemption(
        self, victim_pod_uid: str, preemptor_uid: str, now: float, message: str | None = None
    ) -> EvictionRecord | None:
        """Record that the victim's workload was preempted by ``preemptor_uid`` at ``now``."""
        victim = self.cache.pod(victim_pod_uid)
        if victim is None:
            log.info("victim not in the cache: no eviction record", victim_uid=victim_pod_uid)
            return None

        def change(current: EvictionRecord | None) -> EvictionRecord:
            return next_eviction_state(
                current,
                PREEMPTED,
                now,
                self.config,
                self.jitter,
                preemptor_uid=preemptor_uid,
                message=message,
            )

        return await self.update(workload_of(victim), change)

    async def activate(self, key: WorkloadKey) -> EvictionRecord | None:
        """Reset count and requeueAt and clear deactivation; None when there is no record."""

        def change(current: EvictionRecord | None) -> EvictionRecord | None:
            return reactivate(current) if current is not None else None

        return await self.update(key, change)


def _fields(record: EvictionRecord) -> dict[str, object]:
    return {
        "reason": record.reason,
        "count": record.count,
        "requeue_at": record.requeue_at,
        "deactivated": record.deactivated,
    }
