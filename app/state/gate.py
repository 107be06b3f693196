"""The book of held preemptors (KEP-4832's gate), and the read-only check of an entry against
the cache.

The in-memory book answers the hot path; the preemptor's ``WorkloadRecord``
(``status.preemptions``, ``app.state.records``) carries the same entry so that another replica
and this replica after a restart hold the pod too (``set_mirrored``). A mirrored entry is used
only while it agrees with the cache (``trusted``): its preemptor is a pending pod of that UID in
the record's namespace, its priority is the cached pod's, its bound is at most the gate's bound.
Reading never writes: a check that finds a gate open only says so; ``app.tasks.gatekeeper``
releases it and removes the mirror.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace

from app import metrics
from app.model import Pod
from app.model.gate import GateEntry, PodRef, is_sealed, seal
from app.model.timestamps import format_time
from app.policy.claims import Claim, room_after
from app.policy.gate import (
    GateCheck,
    VictimState,
    check_gate,
    failed_retry_wait,
    left_by_the_scheduler,
)
from app.policy.quantity import QuantityError, add_resources, parse_resources, pod_requests
from app.policy.workload import is_active
from app.state.cache import CacheEvent, ClusterCache


def victim_state(cache: ClusterCache, uid: str) -> VictimState:
    """What the cache says of a victim (``UNKNOWN`` without a cluster)."""
    if not cache.pods_synced:  # the embedded default never lists pods
        return VictimState.UNKNOWN
    pod = cache.pod(uid)
    if pod is None:
        return VictimState.GONE
    if not is_active(pod):  # being deleted, or finished
        return VictimState.TERMINATING
    return VictimState.PRESENT


MEMO_LIMIT = 4096
"""Preemptors remembered per memo (released gates, so that their mirror, still in the record
store until the watch shows its removal, does not hold the pod again; consecutive failures);
the oldest are forgotten first."""


class GateBook:
    """Held preemptors by UID, and whether their preemption task still runs or has failed; the
    entries other replicas (or an earlier run) mirrored on WorkloadRecords; the claims they make.
    Not thread-safe: used from the event loop only."""

    def __init__(self, cache: ClusterCache, *, gate_bound_s: float = 60.0) -> None:
        self.cache = cache
        self.gate_bound_s = gate_bound_s
        """No mirrored gate holds longer than this past its start (``preemption.gateTimeout``)."""
        self._entries: dict[str, GateEntry] = {}
        self._running: set[str] = set()
        self._failed: dict[str, float] = {}
        """Preemptors whose task failed → when their gate opens (the failure back-off)."""
        self._failures: OrderedDict[str, int] = OrderedDict()
        """Consecutive failed preemptions per preemptor (bounded; a success resets it)."""
        self._mirrored: dict[str, GateEntry] = {}
        self._unsealed_memo: dict[str, tuple[GateEntry, int, GateEntry]] = {}
        self._released: OrderedDict[str, float] = OrderedDict()
        self._version = 0
        self.entries_version = 0
        """Bumped when an entry (local or mirrored) appears or goes: who is gated changed."""
        self._claims: tuple[int, tuple[Claim, ...], dict[str, GateEntry]] | None = None
        self._displaced: OrderedDict[str, str] = OrderedDict()
        """Preemptors whose claim a higher-priority preemption took → why (bounded): their gate
        is open (the gate keeper releases it) and their task, still running, must not nominate
        them."""
        self.listeners: list[Callable[[], None]] = []
        """Called when a task finishes or a mirrored gate appears or goes (cheap: they only
        poke), e.g. the gate keeper's."""
        self.cache.subscribe(self._observe)

    def _observe(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        # Every cache change may change a claim's room, a victim's state, or whether a mirrored
        # entry agrees with the cache.
        self._version += 1

    def set_mirrored(self, uid: str, entry: GateEntry | None) -> None:
        """A preemption in flight appeared on (or left) a ``WorkloadRecord`` (``RecordBook``)."""
        self._version += 1
        if entry is None or entry.preemptor.uid != uid:
            changed = self._mirrored.pop(uid, None) is not None
        else:
            changed = self._mirrored.get(uid) != entry
            self._mirrored[uid] = entry
        if changed:
            self.entries_version += 1
            for listener in self.listeners:
                listener()

    def trusted(self, entry: GateEntry) -> GateEntry | None:
        """``entry`` as far as the cache confirms it (None: not at all). Records are written by
        runway only, but a preemption is never acted on beyond what the cache shows: the
        preemptor must be a live pod of that UID in that namespace, its priority is the cached
        one, and the bound is capped at the gate's bound past its start. Without a cluster (no
        pod list) the entry stands as written."""
        if not self.cache.pods_synced:
            return entry
        pod = self.cache.pod(entry.preemptor.uid)
        if (
            pod is None
            or pod.metadata.namespace != entry.preemptor.namespace
            or pod.metadata.deletionTimestamp is not None
        ):
            return None
        entry = self._unsealed(entry)
        deadline = min(entry.deadline, entry.since + self.gate_bound_s)
        if entry.priority == pod.priority and deadline == entry.deadline:
            return entry
        return replace(entry, priority=pod.priority, deadline=deadline)

    def _unsealed(self, entry: GateEntry) -> GateEntry:
        """``entry`` with its sealed victims (pods of another namespace than the preemptor's,
        as its record names them: ``model.gate.seal``) found again among the pods on its node;
        one not found there is gone (a victim is on the gate's node, or is a gang sibling whose
        deletion does not hold the preemptor). Memoised per entry and cache version."""
        if not any(is_sealed(v.uid) for v in entry.victims):
            return entry
        memo = self._unsealed_memo.get(entry.preemptor.uid)
        if memo is not None and memo[0] == entry and memo[1] == self._version:
            return memo[2]
        on_node = {seal(p.metadata.uid): p for p in self.cache.pods_on_node(entry.node)}
        victims = tuple(
            PodRef.of(on_node[v.uid]) if is_sealed(v.uid) and v.uid in on_node else v
            for v in entry.victims
        )
        found = replace(entry, victims=victims)
        self._unsealed_memo[entry.preemptor.uid] = (entry, self._version, found)
        while len(self._unsealed_memo) > MEMO_LIMIT:
            self._unsealed_memo.pop(next(iter(self._unsealed_memo)))
        return found

    # -- writes (the executor and the gate keeper) ----------------------------------------------

    def hold(self, entry: GateEntry) -> None:
        """Hold ``entry.preemptor`` while its task runs (replaces an older entry for the pod)."""
        self._version += 1
        self.entries_version += 1
        uid = entry.preemptor.uid
        self._entries[uid] = entry
        self._running.add(uid)
        self._failed.pop(uid, None)
        self._displaced.pop(uid, None)  # a new preemption of its own
        metrics.GATE_PODS.set(len(self._entries))

    def displace(self, uid: str, why: str) -> bool:
        """A higher-priority preemption took the claim of ``uid`` (kube-scheduler's nominator:
        a higher priority ignores a lower nomination): its claim ends and its gate opens at
        once (the gate keeper releases it, so kube-scheduler retries it); its task, if still
        running, goes on deleting the victims (the taker awaits them) but does not nominate.
        Returns whether ``uid`` was held."""
        if uid not in self._entries and uid not in self._mirrored:
            return False
        self._version += 1
        self.entries_version += 1
        self._displaced[uid] = why
        self._displaced.move_to_end(uid)
        while len(self._displaced) > MEMO_LIMIT:
            self._displaced.popitem(last=False)
        self._failed.pop(uid, None)
        for listener in self.listeners:
            listener()
        return True

    def displaced(self, uid: str) -> str | None:
        """Why ``uid``'s claim was taken by a higher-priority preemption (None: it was not, or
        it preempted again since)."""
        return self._displaced.get(uid)

    def finish(self, uid: str, *, ok: bool, now: float | None = None) -> None:
        """The task of ``uid`` ended. A failed one keeps the gate closed for its back-off
        (``policy.gate.failed_retry_wait``, counted from ``now``; at once without it), then the
        gate keeper opens it; its claim ends at once."""
        self._version += 1
        self._running.discard(uid)
        if ok:
            self._failures.pop(uid, None)
        elif uid in self._entries:
            failures = self._failures.pop(uid, 0) + 1
            self._failures[uid] = failures
            while len(self._failures) > MEMO_LIMIT:
                self._failures.popitem(last=False)
            wait = failed_retry_wait(failures) if now is not None else 0.0
            self._failed[uid] = (now or 0.0) + wait
        for listener in self.listeners:
            listener()

    def left_by_the_scheduler(self, entry: GateEntry, now: float) -> tuple[PodRef, ...]:
        """``policy.gate.left_by_the_scheduler`` on the cache: the victims on ``entry``'s node
        that kube-scheduler did not delete (scheduler-executes mode, asked again)."""

        def node_of(uid: str) -> str:
            pod = self.cache.pod(uid)
            return (pod.spec.nodeName or "") if pod is not None else ""

        return left_by_the_scheduler(
            entry,
            lambda uid: victim_state(self.cache, uid),
            node_of,
            self.reserved(now, besides=entry.preemptor.uid),
        )

    def backing_off(self, uid: str) -> bool:
        """Whether ``uid``'s last preemption failed and its gate waits out the back-off (the
        pod may be placed anywhere meanwhile; only a new preemption is vetoed)."""
        return uid in self._failed

    def failures(self, uid: str) -> int:
        """Consecutive failed preemptions of ``uid`` (0 after a success)."""
        return self._failures.get(uid, 0)

    def release(self, uid: str) -> GateEntry | None:
        """Open the gate for ``uid`` (the gate keeper's job); returns the entry held, if any.
        A mirrored entry of ``uid`` is forgotten too (its mirror is being removed)."""
        self._version += 1
        self.entries_version += 1
        entry = self._entries.pop(uid, None)
        mirrored = self._mirrored.pop(uid, None)
        self._running.discard(uid)
        since = max((e.since for e in (entry, mirrored) if e is not None), default=None)
        if since is not None:
            self._released[uid] = since
            self._released.move_to_end(uid)
            while len(self._released) > MEMO_LIMIT:
                self._released.popitem(last=False)
        self._failed.pop(uid, None)
        metrics.GATE_PODS.set(len(self._entries))
        return entry

    # -- reads ----------------------------------------------------------------------------------

    def get(self, uid: str) -> GateEntry | None:
        """The local entry for a preemptor UID."""
        return self._entries.get(uid)

    def mirrored(self) -> list[GateEntry]:
        """Entries mirrored on records that this book does not hold itself (as the cache
        confirms them)."""
        out = []
        for uid, e in self._mirrored.items():
            if uid in self._entries:
                continue
            live = self._live(e)
            if live is not None:
                out.append(live)
        return out

    def lookup(self, pod: Pod) -> GateEntry | None:
        """The entry holding ``pod``: this replica's, else one mirrored by another."""
        uid = pod.metadata.uid
        return self._entries.get(uid) or self._live(self._mirrored.get(uid))

    def _live(self, mirrored: GateEntry | None) -> GateEntry | None:
        """``mirrored`` (as ``trusted`` confirms it) unless it is a gate already released here:
        the record keeps it until the watch shows its removal, and kube-scheduler may retry the
        preemptor in that window; a held answer then would leave it unschedulable until its
        queue's next flush. A new gate on the pod starts later."""
        if mirrored is None:
            return None
        released = self._released.get(mirrored.preemptor.uid)
        if released is not None and mirrored.since <= released:
            return None
        return self.trusted(mirrored)

    def running(self, uid: str) -> bool:
        """Whether this replica's task for ``uid`` is still making its calls."""
        return uid in self._running

    def check(self, entry: GateEntry, now: float) -> GateCheck:
        """Whether ``entry`` still holds (no side effect)."""
        uid = entry.preemptor.uid
        displaced = self._displaced.get(uid)
        if displaced is not None:
            return GateCheck(True, displaced)
        retry_at = self._failed.get(uid)
        if retry_at is not None:
            if now >= retry_at:
                return GateCheck(True, "preemption failed")
            return GateCheck(
                False,
                f"its preemption failed ({self.failures(uid)} in a row); retried after "
                f"{format_time(retry_at)}",
            )
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
        memo = self._in_flight(now)
        if memo is None:
            return ()
        # A claim ends with its gate's bound, whatever else happens.
        return tuple(c for c in memo[1] if c.until is None or now < c.until)

    def reserved(self, now: float, *, besides: str = "") -> dict[str, str]:
        """Victim UID → ``namespace/name`` of the preemptor whose preemption in flight (local or
        mirrored, gate still holding) chose it; the preemption of ``besides`` left out. Such a
        victim is never chosen again (``policy.victims``): one victim, one preemption."""
        memo = self._in_flight(now)
        if memo is None:
            return {}
        return {
            v.uid: entry.preemptor.key
            for uid, entry in memo[2].items()
            if uid != besides and now < entry.deadline
            for v in entry.victims
        }

    def _in_flight(self, now: float) -> tuple[int, tuple[Claim, ...], dict[str, GateEntry]] | None:
        """The claims and the entries of the gates still holding, memoised per book version."""
        if not self._entries and not self._mirrored:
            return None
        memo = self._claims
        if memo is None or memo[0] != self._version:
            found: dict[str, GateEntry] = {e.preemptor.uid: e for e in self.mirrored()}
            found.update(self._entries)
            # A failed preemption backing off claims nothing: its nomination is cleared; nor
            # does one whose claim a higher priority took.
            holding = {
                uid: entry
                for uid, entry in found.items()
                if uid not in self._failed and not self.check(entry, now).open
            }
            made = tuple(self._claim(entry) for entry in holding.values())
            memo = self._claims = (self._version, made, holding)
        return memo

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
                    if p.metadata.uid not in victims and is_active(p)
                )
            )
            return room_after(parse_resources(node.allocatable), staying, pod_requests(preemptor))
        except QuantityError:
            return None

    def __iter__(self) -> Iterator[GateEntry]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)
