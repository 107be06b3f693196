"""The book of held preemptors (KEP-4832's gate), and the read-only check of an entry against
the cache.

The in-memory book answers the hot path; the annotation ``runway.dev/preemption-gate`` on the
preemptor (``app.model.gate``) carries the same entry so that another replica (reading it through
its pod cache) and this replica after a restart hold the pod too. Reading never writes: a check
that finds a gate open only says so; ``app.tasks.gatekeeper`` releases it and removes the
annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from app import metrics
from app.model import Pod
from app.model.gate import GateEntry, decode_entry
from app.policy.gate import GateCheck, VictimState, check_gate
from app.state.cache import ClusterCache


def victim_state(cache: ClusterCache, uid: str) -> VictimState:
    """What the cache says of a victim (``UNKNOWN`` without a cluster)."""
    if not cache.pods_synced:  # the embedded default never lists pods
        return VictimState.UNKNOWN
    pod = cache.pod(uid)
    if pod is None:
        return VictimState.GONE
    if pod.metadata.deletionTimestamp is not None or pod.status.phase in ("Succeeded", "Failed"):
        return VictimState.TERMINATING
    return VictimState.PRESENT


class GateBook:
    """Held preemptors by UID, and whether their preemption task still runs or has failed.
    Not thread-safe: used from the event loop only."""

    def __init__(self, cache: ClusterCache | None = None) -> None:
        self.cache = cache if cache is not None else ClusterCache()
        self._entries: dict[str, GateEntry] = {}
        self._running: set[str] = set()
        self._failed: set[str] = set()
        self.listeners: list[Callable[[], None]] = []
        """Called when a task finishes (cheap: they only poke), e.g. the gate keeper's."""

    # -- writes (the executor and the gate keeper) ----------------------------------------------

    def hold(self, entry: GateEntry) -> None:
        """Hold ``entry.preemptor`` while its task runs (replaces an older entry for the pod)."""
        uid = entry.preemptor.uid
        self._entries[uid] = entry
        self._running.add(uid)
        self._failed.discard(uid)
        metrics.GATE_PODS.set(len(self._entries))

    def finish(self, uid: str, *, ok: bool) -> None:
        """The task of ``uid`` ended; a failed one opens the gate at the next check."""
        self._running.discard(uid)
        if not ok and uid in self._entries:
            self._failed.add(uid)
        for listener in self.listeners:
            listener()

    def release(self, uid: str) -> GateEntry | None:
        """Open the gate for ``uid``; returns the entry that was held, if any."""
        entry = self._entries.pop(uid, None)
        self._running.discard(uid)
        self._failed.discard(uid)
        metrics.GATE_PODS.set(len(self._entries))
        return entry

    # -- reads ----------------------------------------------------------------------------------

    def get(self, uid: str) -> GateEntry | None:
        """The local entry for a preemptor UID."""
        return self._entries.get(uid)

    def lookup(self, pod: Pod) -> GateEntry | None:
        """The entry holding ``pod``: this replica's, else one mirrored on the pod by another."""
        return self._entries.get(pod.metadata.uid) or decode_entry(pod)

    def running(self, uid: str) -> bool:
        """Whether this replica's task for ``uid`` is still making its calls."""
        return uid in self._running

    def check(self, entry: GateEntry, now: float) -> GateCheck:
        """Whether ``entry`` still holds (no side effect)."""
        uid = entry.preemptor.uid
        if uid in self._failed:
            return GateCheck(True, "preemption failed")
        return check_gate(
            entry,
            lambda v: victim_state(self.cache, v),
            now,
            task_done=not self.running(uid),
        )

    def held(self, pod: Pod, now: float) -> tuple[GateEntry, GateCheck] | None:
        """The entry still holding ``pod`` and its check; None when none holds it (or the gate is
        open already and only waits for the gate keeper to release it)."""
        entry = self.lookup(pod)
        if entry is None:
            return None
        check = self.check(entry, now)
        return None if check.open else (entry, check)

    def __iter__(self) -> Iterator[GateEntry]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)
