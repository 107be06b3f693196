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
from app.model.gate import GATE_ANNOTATION, GateEntry, decode_entry
from app.policy.claims import Claim, room_after
from app.policy.gate import GateCheck, VictimState, check_gate
from app.policy.quantity import QuantityError, add_resources, parse_resources, pod_requests
from app.state.cache import CacheEvent, ClusterCache


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
    """Held preemptors by UID, and whether their preemption task still runs or has failed; the
    entries other replicas (or an earlier run) mirrored on pods; the claims they make.
    Not thread-safe: used from the event loop only."""

    def __init__(self, cache: ClusterCache | None = None) -> None:
        self.cache = cache if cache is not None else ClusterCache()
        self._entries: dict[str, GateEntry] = {}
        self._running: set[str] = set()
        self._failed: set[str] = set()
        self._mirrored: dict[str, GateEntry] = {}
        self._version = 0
        self.entries_version = 0
        """Bumped when an entry (local or mirrored) appears or goes: who is gated changed."""
        self._claims: tuple[int, tuple[Claim, ...]] | None = None
        self.listeners: list[Callable[[], None]] = []
        """Called when a task finishes or a mirrored gate appears or goes (cheap: they only
        poke), e.g. the gate keeper's."""
        self.cache.subscribe(self._observe)

    def _observe(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        # Every cache change may change a claim's room or a victim's state.
        self._version += 1
        if event.kind != "pod":
            return
        pod = event.new if event.new is not None else event.old
        if pod is None:
            return
        uid = pod.metadata.uid
        entry = None
        if event.new is not None and event.new.annotation(GATE_ANNOTATION):
            entry = decode_entry(event.new)
        if entry is None:
            changed = self._mirrored.pop(uid, None) is not None
        else:
            changed = uid not in self._mirrored
            self._mirrored[uid] = entry
        if changed:
            self.entries_version += 1
            for listener in self.listeners:
                listener()

    # -- writes (the executor and the gate keeper) ----------------------------------------------

    def hold(self, entry: GateEntry) -> None:
        """Hold ``entry.preemptor`` while its task runs (replaces an older entry for the pod)."""
        self._version += 1
        self.entries_version += 1
        uid = entry.preemptor.uid
        self._entries[uid] = entry
        self._running.add(uid)
        self._failed.discard(uid)
        metrics.GATE_PODS.set(len(self._entries))

    def finish(self, uid: str, *, ok: bool) -> None:
        """The task of ``uid`` ended; a failed one opens the gate at the next check."""
        self._version += 1
        self._running.discard(uid)
        if not ok and uid in self._entries:
            self._failed.add(uid)
        for listener in self.listeners:
            listener()

    def release(self, uid: str) -> GateEntry | None:
        """Open the gate for ``uid`` (the gate keeper's job); returns the entry held, if any.
        A mirrored entry of ``uid`` is forgotten too (its annotation is being removed)."""
        self._version += 1
        self.entries_version += 1
        entry = self._entries.pop(uid, None)
        self._mirrored.pop(uid, None)
        self._running.discard(uid)
        self._failed.discard(uid)
        metrics.GATE_PODS.set(len(self._entries))
        return entry

    # -- reads ----------------------------------------------------------------------------------

    def get(self, uid: str) -> GateEntry | None:
        """The local entry for a preemptor UID."""
        return self._entries.get(uid)

    def mirrored(self) -> list[GateEntry]:
        """Entries mirrored on pods that this book does not hold itself."""
        return [e for uid, e in self._mirrored.items() if uid not in self._entries]

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

    def claims(self, now: float) -> tuple[Claim, ...]:
        """The claims of every gate still holding (local and mirrored), memoised until the cache
        or the book changes (the filter asks on every call while a preemption is in flight)."""
        if not self._entries and not self._mirrored:
            return ()
        memo = self._claims
        if memo is None or memo[0] != self._version:
            found: dict[str, GateEntry] = dict(self._mirrored)
            found.update(self._entries)
            made = tuple(
                self._claim(entry) for entry in found.values() if not self.check(entry, now).open
            )
            memo = self._claims = (self._version, made)
        # A claim ends with its gate's bound, whatever else happens.
        return tuple(c for c in memo[1] if c.until is None or now < c.until)

    def _claim(self, entry: GateEntry) -> Claim:
        return Claim(
            node=entry.node,
            preemptor_uid=entry.preemptor.uid,
            preemptor=entry.preemptor.key,
            priority=entry.priority,
            room=self._room(entry),
            until=entry.deadline,
        )

    def _room(self, entry: GateEntry) -> dict[str, int] | None:
        node = self.cache.node(entry.node)
        preemptor = self.cache.pod(entry.preemptor.uid)
        if node is None or preemptor is None:
            return None
        victims = {v.uid for v in entry.victims}
        try:
            staying = add_resources(
                *(
                    pod_requests(p)
                    for p in self.cache.pods_on_node(entry.node)
                    if p.metadata.uid not in victims
                    and p.metadata.deletionTimestamp is None
                    and p.status.phase not in ("Succeeded", "Failed")
                )
            )
            return room_after(parse_resources(node.allocatable), staying, pod_requests(preemptor))
        except QuantityError:
            return None

    def __iter__(self) -> Iterator[GateEntry]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)
