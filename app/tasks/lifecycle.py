"""The life recorder (DESIGN §2, leader only): persists each workload's facts — created, admitted,
started, PodsReady's transitions — when one first becomes known or a full eviction resets them.

Writes are few: none for a pod that is a workload alone (its own fields are its facts) or for
DaemonSet and static pods; for the others one at first sight (created: the record is made then,
so a re-created pending pod never moves its workload in the queue), one at the first bind
(admitted, often started too), one when started becomes known later, one when PodsReady is
reached, lost or reached again (Kueue writes its Workload's condition as often), one on a full
eviction.

Readers never need it to be right now: ``RecordBook.life`` applies the same rules
(``app.policy.lifecycle``) to the persisted facts and the pods it sees. Persisting is what makes
the facts outlive the pods they were seen on (a replaced pod, a re-created gang, a restart or a
new leader). It wakes on cache changes (debounced), looks only at the workloads whose pods
changed, and sweeps every workload when it starts and when this process becomes the leader
(which also migrates the records written before these facts existed: missing facts are derived
once, then persisted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from app.logs import get_logger
from app.model import Pod
from app.model.node import Node
from app.policy.workload import WorkloadKey, workload_of
from app.state.cache import CacheEvent, ClusterCache
from app.state.records import RecordBook
from app.supervise import Turns
from app.tasks.loop import Ticker

log = get_logger("tasks.lifecycle")


class LifeRecorder(Ticker):
    """Writes the workloads' life facts where they differ from what is persisted."""

    def __init__(
        self,
        cache: ClusterCache,
        records: RecordBook,
        *,
        tick: float = 30.0,
        debounce: float = 0.05,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__("lifecycle", tick=tick, debounce=debounce)
        self.cache = cache
        self.records = records
        self.is_leader = is_leader
        self._dirty: dict[WorkloadKey, None] = {}
        """Workloads whose pods changed, in the order they did (a dict: not sorted, which
        costs ~100 ms for the 40,000 a resync marks)."""
        self._sweep = True
        self.written = 0
        """Workloads whose facts this process wrote (for tests and the log)."""

    def start(self) -> None:
        """Subscribe to the cache and start the loop."""
        self.follow(lambda: self.cache.subscribe(self._on_event))
        super().start()

    def _on_event(self, event: CacheEvent[Pod] | CacheEvent[Node]) -> None:
        if event.kind != "pod":
            return
        changed = False
        for pod in (event.old, event.new):
            if isinstance(pod, Pod):
                key = workload_of(pod)
                if key.source != "pod":  # a pod alone has no facts to write (``record``)
                    self._dirty[key] = None
                    changed = True
        if changed:
            self.poke()

    def workload_changed(self, key: WorkloadKey) -> None:
        """Something the facts read besides the pods changed for ``key`` (its Job: the created
        fact from the Job's creation): look at it again."""
        if key.source != "pod":
            self._dirty[key] = None
            self.poke()

    async def run_once(self) -> float:
        """One pass (``Ticker``): the changed workloads, or all of them on a sweep."""
        if not self.is_leader() or not self.cache.pods_synced or not self.records.available:
            self._sweep = True  # a new leader (or the CRD installed) looks at everything once
            self._dirty.clear()
            return self.tick
        keys: Iterable[WorkloadKey]
        if self._sweep:
            keys = self.cache.workload_keys()
            self._sweep = False
            self._dirty.clear()
        else:
            keys, self._dirty = self._dirty, {}
        turns = Turns()  # a sweep or a resync: 40,000 workloads, the verbs answered meanwhile
        for key in keys:
            await self.record(key)
            await turns.take()
        return self.tick

    async def record(self, key: WorkloadKey) -> bool:
        """Persist ``key``'s facts if they differ from what its WorkloadRecord holds."""
        if key.source == "pod":
            return False  # a pod alone: its own creationTimestamp and bind are its facts
        view = self.cache.workload(key)
        if view is None:
            return False  # no pod: nothing to observe (the re-created pods will tell)
        if not self.records.is_queued(view.pods):
            return False  # DaemonSet and static pods: not queued, no facts to keep
        facts = self.records.life(view)
        if not facts.dirty:
            return False
        # Written at first sight, admitted or not: a pending workload's pod deleted and
        # re-created (its controller's choice) must not move it to the back of its queue.
        try:
            change = self.records.life_change(key, facts.life, owner_created=facts.owner_created)
            written = await self.records.change(key, change) is not None
        except Exception as exc:  # e.g. the API server refused or timed out the record's write
            # Retried when its pods change again or on the next leader's sweep, not in a loop.
            log.warning("workload facts not written", workload=str(key), error=str(exc))
            return False
        if written:
            self.written += 1
        return written
