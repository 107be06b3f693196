"""What the requeue rules need to know, built from the cache, the record book and the gate.

``RequeueView`` answers the filter and prioritize verbs, the REST API, the PodsReady evictor and
the requeue waker, synchronously and cheaply, and only reads: a filter costs O(pods of the
workload) plus, for a StrictFIFO queue, the pending order of the queue, which is memoised per
cache generation (any pod, node or record change bumps it). Without a cluster (the embedded
default) the cache is empty and the records live in memory: every rule that needs the cache
simply has no data.
"""

from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field

from app.config.requeue import WaitForPodsReadyConfig
from app.model import Pod
from app.model.eviction import PREEMPTED
from app.policy import admission
from app.policy.admission import Blocker, FilterInput, FilterPolicy, GateHold
from app.policy.claims import Claim, blocks
from app.policy.lifecycle import LifeFacts
from app.policy.ordering import (
    PendingWorkload,
    QueueOrderStrategy,
    admissible,
    pending_order,
)
from app.policy.podsready import (
    PodsReadyCheck,
    PodsReadyState,
    block_until,
    evaluate_pods_ready,
    workload_state,
)
from app.policy.quantity import QuantityError, pod_requests
from app.policy.queues import QueueTree
from app.policy.scoring import ScoringInput
from app.policy.wakeup import Hold, hold_of
from app.policy.workload import (
    WorkloadKey,
    is_member,
    live_pods,
    workload_of,
)
from app.state.cache import CacheEvent, ClusterCache, WorkloadView
from app.state.gate import GateBook
from app.state.records import RecordBook
from app.supervise import run_through


@dataclass
class RequeueMemos:
    """Memos valid for one cache generation (bumped by every pod, node or record change)."""

    generation: int = 0
    _pending: dict[str, tuple[int, list[PendingWorkload]]] = field(default_factory=dict)
    _blockers: tuple[int, tuple[Blocker, ...]] | None = None
    listeners: list[Callable[[], None]] = field(default_factory=list)
    """Called on every bump (cheap: they only set a flag), e.g. the requeue waker's."""

    facts: int = 0
    """Bumped with ``generation`` when something other than a pod or a node changed: a record
    (in memory or an owner's annotations), the queue tree. A pod's own facts live on it."""

    def bump(self, *_: object) -> None:
        """Invalidate the memos and tell the listeners."""
        self.generation += 1
        for listener in self.listeners:
            listener()

    def bump_facts(self, *_: object) -> None:
        """A record or the queue tree changed: invalidate every memo, the per-pod ones too."""
        self.facts += 1
        self.bump()


@dataclass
class QueueCounts:
    """Workloads of one leaf queue by state (from the cache and the eviction records); also the
    ``counts`` of ``GET /v1/queues``."""

    pending: int = 0
    admitted: int = 0
    backoff: int = 0
    """In requeue backoff (now < requeueAt)."""
    deactivated: int = 0
    """Held until reactivated."""


WORKLOAD_STEP = 64
"""Workloads a pass over every workload looks at between two chances for the verbs to run
(``supervise.in_slices``): a settled one costs a dict lookup, so yielding after each would
double the cost of a quiet pass. Shared by every such pass (counts, the evictor, the list)."""

CHANGED_LIMIT = 100_000
"""Changed pods remembered between two waker passes; past it the next pass asks every pod."""


REFUSALS_KEPT = 100_000
"""The most filter refusals a replica remembers between two waker passes."""


class RequeueView:
    """The requeue facts of pods and workloads (read-only; see the module docstring)."""

    def __init__(
        self,
        cache: ClusterCache,
        records: RecordBook,
        gate: GateBook,
        queues: QueueTree,
        *,
        pods_ready: WaitForPodsReadyConfig,
        order: QueueOrderStrategy,
        policy: FilterPolicy,
        pool_label: str,
        index: RequeueMemos,
        pool_preference: bool = True,
        locality: bool = True,
    ) -> None:
        self.cache = cache
        self.records = records
        self.gate = gate
        self.queues = queues
        self.pods_ready = pods_ready
        self.order = order
        self.policy = policy
        self.pool_label = pool_label
        self.pool_preference = pool_preference
        """``prioritize.poolPreference`` as it applies (unset: with waitForPodsReady)."""
        self.locality = locality
        """``prioritize.locality``."""
        self.index = index
        self._found: dict[str, Hold | None] = {}
        """The last ``pending_holds``: every pending pod's hold (None: free)."""
        self._key_of: dict[str, WorkloadKey] = {}
        """The workload of each pod in ``_found`` (where a changed pod was)."""
        self._always: set[str] = set()
        """Pending pods of StrictFIFO queues: asked on every pass (their head moves)."""
        self._changed: set[str] | None = None
        """UIDs of pods changed since the last pass (None: look at every pending pod)."""
        self._stamp: tuple[int, int, tuple[Blocker, ...]] | None = None
        self._strict_memo: tuple[int, frozenset[str]] | None = None
        self._unsettled: set[WorkloadKey] | None = None
        """Workloads with a bound pod that are not all members and PodsReady by their pods: the
        only ones ``blockers`` evaluates (None: not known, look at every workload)."""
        self._unsettled_stale: set[WorkloadKey] = set()
        """Workloads whose pods changed since ``_unsettled`` was brought up to date."""
        self._refused: OrderedDict[str, Hold] = OrderedDict()
        """Pods this replica's filter refused since the waker last took them (``refused``)."""
        self.on_refusal: Callable[[], None] = lambda: None
        """Told when a pod is refused that was not refused before (the waker's poke)."""
        cache.subscribe(self._on_change)

    # -- refusals: what the filter held, for the waker ------------------------------------------

    def refused(self, uid: str, hold: Hold) -> None:
        """The filter just refused pod ``uid`` with ``hold``. The waker learns of it even when
        the hold ends before its next pass looks (a blocker Ready 0.3 s later): a pod refused,
        then free, is woken, not left to kube-scheduler's flush (60 s; 5 min from 1.27).
        Bounded: the oldest refusals are forgotten first (the pass still sees their holds)."""
        known = uid in self._refused
        self._refused[uid] = hold
        self._refused.move_to_end(uid)
        while len(self._refused) > REFUSALS_KEPT:
            self._refused.popitem(last=False)
        if not known:
            self.on_refusal()

    def take_refusals(self) -> dict[str, Hold]:
        """The refusals since the last call (and forget them); the next pass asks those pods
        again, whatever else changed."""
        taken, self._refused = dict(self._refused), OrderedDict()
        if self._changed is not None:
            self._changed.update(taken)
        return taken

    def _on_change(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        if event.kind != "pod":
            return
        if self._unsettled is not None:
            stale = self._unsettled_stale
            for changed_pod in (event.old, event.new):
                if changed_pod is not None:
                    stale.add(workload_of(changed_pod))
            if len(stale) > CHANGED_LIMIT:  # nobody asks: look at every workload next time
                self._unsettled, self._unsettled_stale = None, set()
        changed = self._changed
        if changed is None:
            return
        pod = event.new if event.new is not None else event.old
        if pod is not None:
            changed.add(pod.uid)
            if len(changed) > CHANGED_LIMIT:  # nobody asks (a follower): look at all later
                self._changed = None

    # --- PodsReady facts --------------------------------------------------------------------

    def life(self, view: WorkloadView) -> LifeFacts:
        """The workload's life facts (DESIGN §2; ``RecordBook.life``)."""
        return self.records.life(view)

    def pods_ready_state(self, view: WorkloadView) -> PodsReadyState:
        """The PodsReady facts of one workload: its clocks count from its *admitted* fact and
        its *lost* fact (the last loss of PodsReady, persisted in the record: it survives a
        restart and a new leader; ``policy.lifecycle.track_pods_ready``); PodsReady against
        its size (``LifeFacts.size``), not the pods alive now."""
        facts = self.records.life(view)
        life = facts.life
        ready = facts.pods_ready
        was = not ready and life.admitted is not None and life.ready is not None
        return PodsReadyState(
            admitted_at=life.admitted,
            pods_ready=ready,
            not_ready_since=life.lost if was else None,
            was_ready=was,
        )

    def blockers(self, now: float) -> tuple[Blocker, ...]:
        """Admitted workloads not PodsReady (``blockAdmission``): waiting for their start or
        recovering from a lost pod, as Kueue counts them (``policy.podsready.block_until``)."""
        cfg = self.pods_ready
        if not (cfg.enable and cfg.block_admission):
            return ()
        idx = self.index
        if idx._blockers is not None and idx._blockers[0] == idx.generation:
            return idx._blockers[1]
        found: list[Blocker] = []
        cache = self.cache
        for key in self._unsettled_workloads():
            view = cache.workload(key)
            if view is None:
                continue
            # ``now`` is not read: the filter compares each blocker's end with its own now.
            until = block_until(self.pods_ready_state(view), cfg)
            if until is not None:
                found.append(Blocker(str(key), None if until == math.inf else until))
        result = tuple(sorted(found, key=lambda b: (b.workload, b.timeout_at or math.inf)))
        idx._blockers = (idx.generation, result)
        return result

    def workload_changed(self, key: WorkloadKey) -> None:
        """Something ``blockers`` reads besides its pods changed for ``key`` (its Job's size):
        evaluate it again."""
        if self._unsettled is not None:
            self._unsettled_stale.add(key)

    def _unsettled_workloads(self) -> set[WorkloadKey]:
        """The workloads ``blockers`` must evaluate: a pod bound, and not Ready by their pods
        with none failed or going and no more than its Job wants (such a workload's size can
        exceed its members only for the moment between a pod's deletion and its replacement's
        creation, then pending: not ready). Brought up to date from the workloads whose pods
        changed since the last call (or whose Job's size did), so a filter after a pod event
        costs what changed, not every workload (bench.scale)."""
        cache = self.cache
        if self._unsettled is None:
            unsettled: set[WorkloadKey] = set()
            check: Iterable[WorkloadKey] = cache.workload_keys()
        else:
            unsettled, check = self._unsettled, self._unsettled_stale
        self._unsettled, self._unsettled_stale = unsettled, set()
        for key in check:
            view = cache.workload(key)
            if (
                view is None
                or not view.bound  # nothing bound: not admitted
                or (
                    view.pods_ready
                    and all(is_member(p) for p in view.pods)
                    # no more pods than its Job wants (a Job short of its parallelism is not)
                    and (self.records.job_size(view) or 0) <= len(view.pods)
                )
            ):
                unsettled.discard(key)
            else:
                unsettled.add(key)
        return unsettled

    def evaluate(self, view: WorkloadView, now: float) -> tuple[PodsReadyState, PodsReadyCheck]:
        """The PodsReady state and check of one workload (REST and evictor)."""
        state = self.pods_ready_state(view)
        return state, evaluate_pods_ready(state, now, self.pods_ready)

    # --- queues -----------------------------------------------------------------------------

    def pending_workloads(self, queue: str) -> list[PendingWorkload]:
        """The pending (not admitted) workloads of leaf queue ``queue``, head first (memoised)."""
        idx = self.index
        memo = idx._pending.get(queue)
        if memo is not None and memo[0] == idx.generation:
            return memo[1]
        cache = self.cache
        keys: dict[WorkloadKey, None] = {}
        for pod in cache.pending_in_queue(queue):
            if pod.metadata.deletionTimestamp is None:
                keys[workload_of(pod)] = None
        found: list[PendingWorkload] = []
        for key in keys:
            view = cache.workload(key)
            if view is None:
                continue
            life = self.records.life(view).life
            if life.admitted is not None:
                continue  # admitted: a replacement pod is not a pending workload
            pods = live_pods(view.pods)
            found.append(
                PendingWorkload(
                    name=str(key),
                    priority=max((p.priority for p in pods), default=0),
                    creation_time=life.created if life.created is not None else 0.0,
                    record=self.records.read(key),
                    pod_uids=frozenset(p.uid for p in pods),
                )
            )
        ordered = pending_order(found, self.order)
        idx._pending[queue] = (idx.generation, ordered)
        return ordered

    def head_of(self, queue: str, now: float) -> str | None:
        """``namespace/name`` of the first admissible pending workload of ``queue``
        (``queue_head`` on the memoised order, without sorting it again on every call)."""
        for workload in self.pending_workloads(queue):
            if admissible(workload, now):
                return workload.name
        return None

    # --- the gate ---------------------------------------------------------------------------

    def gate_hold(self, pod: Pod, now: float) -> GateHold | None:
        """The gate entry holding ``pod``, unless the gate is open already or only backs off
        after a failed preemption (then every node may take the pod; ``preempt`` vetoes)."""
        held = self.gate.held(pod, now)
        if held is None or self.gate.backing_off(pod.uid):
            return None
        entry, check = held
        return GateHold(
            entry.node,
            len(check.outstanding),
            entry.deadline,
            victims=tuple(v.key for v in check.outstanding),
        )

    # --- the verbs' inputs ------------------------------------------------------------------

    def filter_input(self, pod: Pod, now: float) -> FilterInput:
        """Everything the filter rule chain reads about ``pod``'s workload."""
        cache = self.cache
        key = workload_of(pod)
        record = self.records.read(key, pod)
        view = cache.workload(key)
        queue = cache.queue_of_pod(pod)
        preemptor_pending, preemptor_name = False, None
        if record is not None and record.reason == PREEMPTED and record.preemptor_uid:
            preemptor = cache.pod(record.preemptor_uid)
            if (
                preemptor is not None
                and not preemptor.spec.nodeName
                and preemptor.metadata.deletionTimestamp is None
            ):
                preemptor_pending, preemptor_name = True, preemptor.key
        admitted = view is not None and self.records.life(view).life.admitted is not None
        strict = self.is_strict(queue)
        head = None
        if strict and not admitted and cache.pods_synced:
            head = self.head_of(queue, now)
        return FilterInput(
            claims=self.claims_on(pod, now),
            workload=str(key),
            queue=queue,
            record=record,
            gate=self.gate_hold(pod, now),
            preemptor_pending=preemptor_pending,
            preemptor_name=preemptor_name,
            blockers=() if admitted else self.blockers(now),
            queueing_strategy="StrictFIFO" if strict else "BestEffortFIFO",
            queue_head=head,
            admitted=admitted,
        )

    def claims_on(self, pod: Pod, now: float) -> tuple[Claim, ...]:
        """The claims of preemptions in flight that keep ``pod`` off their node (none, at no
        cost, while no preemption is in flight)."""
        claims = self.gate.claims(now)
        if not claims:
            return ()
        try:
            requests = pod_requests(pod)
        except QuantityError:
            requests = {}
        return tuple(c for c in claims if blocks(c, pod.metadata.uid, pod.priority, requests))

    def admit(self, pod: Pod, now: float) -> admission.Admission:
        """The filter's verdict for ``pod`` now (``ADMIT`` at once when nothing could hold or
        restrict it: most pods, most of the time)."""
        if self.cache.unmanaged_reason(pod):
            return self._admit_unmanaged(pod, now)
        if self.surely_free(pod, workload_of(pod), now):
            return admission.ADMIT
        return admission.admit(self.filter_input(pod, now), now, self.policy)

    def _admit_unmanaged(self, pod: Pod, now: float) -> admission.Admission:
        """A pod runway does not manage (``policy.scope``): no queue rule holds it. Only what
        keeps a preemption in flight whole applies — its own gate, if runway decided its
        preemption, and the claims, which keep lower-priority pods off a node being freed (as
        kube-scheduler's nominator does)."""
        gate = self.gate_hold(pod, now) if self.gate.lookup(pod) is not None else None
        claims = self.claims_on(pod, now)
        if gate is None and not claims:
            return admission.ADMIT
        facts = FilterInput(
            workload=str(workload_of(pod)), queue="", gate=gate, admitted=True, claims=claims
        )
        return admission.admit(facts, now, self.policy)

    def surely_free(self, pod: Pod, key: WorkloadKey, now: float) -> bool:
        """True when no rule of the chain could hold ``pod`` (``admission.may_hold`` over the
        rules' own preconditions, each read the cheap way: a dict lookup for the record, the
        gate book, the blockers, the queue's strategy, the claims). Reads no record."""
        pre = admission.Preconditions(
            has_record=self.records.may_have_record(key, pod),
            gated=self.gate.lookup(pod) is not None,
            blockers=bool(self.blockers(now)),
            strict_queue=self.is_strict(self.cache.queue_of_pod(pod)),
            claims=bool(self.gate.claims(now)),
        )
        return not admission.may_hold(pre)

    def scoring_input(self, pod: Pod) -> ScoringInput:
        """Failed pools (from the record) and the nodes running the workload's pods, as far as
        the preferences are on (``prioritize.poolPreference``, ``prioritize.locality``)."""
        key = workload_of(pod)
        record = None
        if self.pool_preference and self.records.may_have_record(key, pod):
            record = self.records.read(key, pod)
        nodes: frozenset[str] = frozenset()
        if self.locality:
            nodes = frozenset(
                p.spec.nodeName for p in live_pods(self.cache.workload_pods(key)) if p.spec.nodeName
            )
        return ScoringInput(
            failed_pools=record.failed_pools if record is not None else (),
            workload_nodes=nodes,
            pool_label=self.pool_label,
        )

    def pending_holds(self, now: float) -> dict[str, Hold | None]:
        """Every pending pod's hold now (None: free), keyed by UID, in one go
        (``pending_holds_steps`` run to its end)."""
        return run_through(self.pending_holds_steps(now))

    def pending_holds_steps(self, now: float) -> Generator[None, None, dict[str, Hold | None]]:
        """Every pending pod's hold now (None: free), keyed by UID — what the waker compares
        between passes. Asks, pod by pod, the same facts and rule chain as the filter verb, so
        what the leader's waker expects matches what any replica answers.

        Yields after each pod, so the waker lets the verbs run during a pass over thousands of
        pods (``supervise.in_slices``): a pod that changes meanwhile is among the changed ones
        of the next pass; a change of the facts, the gate or the blockers meanwhile makes the
        next pass ask every pod again.

        A pass looks again only at what could have changed: pods whose workload changed since
        the last pass (a pod event; the workload's cache view is new), pods held last time
        (time ends holds) and pods of StrictFIFO queues (the head moves with other workloads).
        Every pending pod is asked again when the records or the queue tree
        (``RequeueMemos.facts``), the gate entries or the blockers change. Time alone never
        holds a free pod, so during a scheduling burst a pass costs what changed, not every
        pending pod. A pod nothing could hold (``surely_free``) is free without the rule chain.
        """
        stamp = (self.index.facts, self.gate.entries_version, self.blockers(now))
        changed, self._changed = self._changed, set()
        strict = self._strict_queues()
        if changed is None or stamp != self._stamp:
            self._found, self._key_of, self._always = {}, {}, set()
            recheck = self.cache.pending_pods()
        else:
            recheck = self._to_recheck(changed)
        self._stamp = None  # a pass that does not end (cancelled, failed): the next asks all
        found, key_of, always = self._found, self._key_of, self._always
        cache = self.cache
        for pod in recheck:
            uid = pod.uid
            if pod.metadata.deletionTimestamp is not None:
                continue
            key = cache.workload_key_of(uid) or workload_of(pod)
            key_of[uid] = key
            if strict and self.is_strict(cache.queue_of_pod(pod)):
                always.add(uid)
            found[uid] = self.hold(pod, now)
            yield
        self._stamp = stamp
        return dict(found)

    def hold(self, pod: Pod, now: float) -> Hold | None:
        """``pod``'s hold now (None: free), as a pass finds it."""
        key = self.cache.workload_key_of(pod.uid) or workload_of(pod)
        if self.surely_free(pod, key, now):
            return None
        if self.cache.unmanaged_reason(pod):
            return hold_of(self._admit_unmanaged(pod, now))
        return hold_of(self._admit_by_rules(pod, now))

    def _to_recheck(self, changed: set[str]) -> list[Pod]:
        """Forget what ``changed`` pods were found (and their workloads' pods); return the
        pending pods to ask again: those of the changed workloads, the held and the StrictFIFO
        ones."""
        cache = self.cache
        found, key_of, always = self._found, self._key_of, self._always
        keys: set[WorkloadKey] = set()
        for uid in changed:
            before = key_of.pop(uid, None)
            if before is not None:
                keys.add(before)
            found.pop(uid, None)
            always.discard(uid)
            now_key = cache.workload_key_of(uid)
            if now_key is not None:
                keys.add(now_key)
        again: dict[str, Pod] = {}
        for key in keys:
            for pod in cache.pending_workload_pods(key):
                again[pod.uid] = pod
        for uid in [u for u, hold in found.items() if hold is not None] + list(always):
            if uid not in again:
                cached = cache.pod(uid)
                if cached is not None and not cached.spec.nodeName:
                    again[uid] = cached
                else:  # gone or bound without an event seen here: forget it
                    found.pop(uid, None)
                    key_of.pop(uid, None)
                    always.discard(uid)
        return list(again.values())

    def _admit_by_rules(self, pod: Pod, now: float) -> admission.Admission:
        return admission.admit(self.filter_input(pod, now), now, self.policy)

    def is_strict(self, queue: str) -> bool:
        """Whether leaf queue ``queue`` is StrictFIFO: the one answer the filter, its shortcut
        and the waker's pass all use (a set lookup, memoised per tree change)."""
        return queue in self._strict_queues()

    def _strict_queues(self) -> frozenset[str]:
        """The leaf queues with ``queueingStrategy: StrictFIFO`` (memoised per tree change)."""
        facts = self.index.facts
        if self._strict_memo is None or self._strict_memo[0] != facts:
            names = frozenset(q.name for q in self.queues if q.queueing_strategy == "StrictFIFO")
            self._strict_memo = (facts, names)
        return self._strict_memo[1]

    # --- counts for the REST API and the gauges ---------------------------------------------

    def queue_counts(self, now: float) -> dict[str, QueueCounts]:
        """Per leaf queue, how many workloads are pending, admitted, in backoff, deactivated
        (``queue_counts_steps`` in one go: a scrape's gauges)."""
        return run_through(self.queue_counts_steps(now))

    def queue_counts_steps(self, now: float) -> Generator[None, None, dict[str, QueueCounts]]:
        """``queue_counts`` as a pass that yields every ``WORKLOAD_STEP`` workloads
        (``supervise.in_slices``: ``GET /v1/queues`` at 41,729 workloads held the loop ~200 ms
        in one go)."""
        cache = self.cache
        counts: dict[str, QueueCounts] = defaultdict(QueueCounts)
        for n, key in enumerate(cache.workload_keys()):
            if n % WORKLOAD_STEP == 0:
                yield
            view = cache.workload(key)
            if view is None or not view.pods:
                continue
            admitted = self.records.life(view).life.admitted
            state = workload_state(admitted, self.records.read(key), now)
            c = counts[cache.queue_of_pod(view.pods[0])]
            setattr(c, state, getattr(c, state) + 1)
        return dict(counts)

    def find_workload(self, namespace: str, name: str) -> WorkloadKey | None:
        """The cached workload called ``namespace/name`` (whatever its identity source)."""
        for key in self.cache.workload_keys():
            if key.namespace == namespace and key.name == name:
                return key
        return None
