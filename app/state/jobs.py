"""What runway knows of ``batch/v1`` Jobs: each Job's size, PodsReady's target for its workload
(DESIGN §2.2, KEP-349: ready + succeeded members ≥ the Job's ``parallelism``, no more than its
``completions``; ``app.policy.workload.job_size``).

``JobSizes`` is the store of the Job reflector (``app.kube.jobs``, plugged in by ``wiring``):
``(namespace, name) → (uid, size, created)``, nothing else, so 10,000s of Jobs cost a few MB.
``created`` (its creationTimestamp, set by the API server) is its workload's *created* fact
(DESIGN §2.3): the queue's ``Creation`` order, trusted because runway read it from the Job of
that UID, not from anything a tenant writes. A Job whose
size is not one (``≤ 0``, absurdly large) is not kept: its workload counts against the members it
has had. The record book (``RecordBook.life``) asks it about workloads named after their pods'
controlling Job (``owner:Job``); the size applies only when one of the pods names the Job's UID
as its controller (a Job deleted and re-created under the same name is another Job).

``on_change(namespace, name)`` is told when a Job's size appears, changes (a Job scaled) or goes;
not when only its status moves (most of a Job watch's events), so the memos that depend on a size
are invalidated only when it changes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from app import metrics
from app.model import Pod
from app.model.job import Job
from app.model.timestamps import parse_time
from app.policy.workload import JOB_SOURCE, WorkloadKey, job_size, owned_by


class JobSize(NamedTuple):
    """One Job's UID, size and creation."""

    uid: str
    size: int
    created: float | None = None
    """Its creationTimestamp (Unix seconds)."""


class JobSizes:
    """The sizes of the Jobs runway reads (``Store[Job]`` of the Job reflector). No I/O."""

    def __init__(self, on_change: Callable[[str, str], None] | None = None) -> None:
        self._sizes: dict[tuple[str, str], JobSize] = {}
        self.on_change = on_change or (lambda namespace, name: None)
        self._gauge = metrics.CACHE_OBJECTS.labels("jobs")

    def __len__(self) -> int:
        return len(self._sizes)

    # -- reads ---------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> JobSize | None:
        """The size of Job ``namespace/name`` (None: no such Job known, or it has no size)."""
        return self._sizes.get((namespace, name))

    def lookup(self, key: WorkloadKey) -> JobSize | None:
        """The size of the Job a workload ``key`` is named after (``owner:Job`` only), before
        its pods are checked (``size_of``); a dict lookup."""
        if key.source != JOB_SOURCE:
            return None
        return self._sizes.get((key.namespace, key.name))

    def size_of(self, key: WorkloadKey, pods: Sequence[Pod]) -> int | None:
        """The size of workload ``key`` from its Job: known, and controlling one of ``pods``."""
        found = self.lookup(key)
        return found.size if found is not None and owned_by(pods, found.uid) else None

    # -- the reflector's store -----------------------------------------------------------------

    def replace(self, items: Sequence[Job]) -> None:
        """Hold exactly the sizes of ``items`` (after a LIST; ``[]`` forgets every Job)."""
        old = self._sizes
        new: dict[tuple[str, str], JobSize] = {}
        for job in items:
            entry = _entry(job)
            if entry is not None:
                where = _where(job)
                held = old.get(where)
                new[where] = held if held == entry else entry
        self._sizes = new
        self._gauge.set(len(new))
        for where in old.keys() | new.keys():
            if old.get(where) != new.get(where):
                self.on_change(*where)

    def upsert(self, obj: Job) -> None:
        """A Job added or changed (its size may have moved, or gone)."""
        where = _where(obj)
        entry = _entry(obj)
        held = self._sizes.get(where)
        if entry == held:
            return  # the status moved, or nothing runway reads
        if entry is None:
            del self._sizes[where]
        else:
            self._sizes[where] = entry
        self._gauge.set(len(self._sizes))
        self.on_change(*where)

    def delete(self, obj: Job) -> None:
        """A Job deleted (a later one of the same name is kept)."""
        where = _where(obj)
        held = self._sizes.get(where)
        if held is None or (obj.metadata.uid and held.uid != obj.metadata.uid):
            return
        del self._sizes[where]
        self._gauge.set(len(self._sizes))
        self.on_change(*where)


def _where(job: Job) -> tuple[str, str]:
    # Namespaces repeat across Jobs: one string per namespace.
    return sys.intern(job.metadata.namespace), job.metadata.name


def _entry(job: Job) -> JobSize | None:
    size = job_size(job.spec.parallelism, job.spec.completions)
    if size is None or not job.metadata.uid:
        return None
    return JobSize(job.metadata.uid, size, parse_time(job.metadata.creationTimestamp))
