"""The event loop: a heap of simulated-time events and a scheduling pass after each instant.

Every decision is made by runway's own policy functions, fed from the simulated state:

- order of pending workloads: ``policy.ordering`` (queue-order key, pending preemptor anchors,
  StrictFIFO head), across queues by that key (priority first), as kube-scheduler's active queue
  sorts by priority;
- may a workload be placed now: ``policy.admission.admit`` (deactivated, backoff, anti-flapping,
  blockAdmission, StrictFIFO) with blockers from ``policy.podsready.block_until``;
- preemption: ``policy.victims.decide`` on the candidate nodes kube-scheduler's dry run would
  offer, each victim's min-runtime resolved by ``policy.minruntime`` through ``policy.queues``;
- a workload's admitted/started facts: ``policy.lifecycle.observe``;
- PodsReady timeouts: ``policy.podsready.evaluate_pods_ready``; the eviction record, backoff and
  deactivation: ``policy.backoff.next_eviction_state`` (jitter from the seeded generator).

Simulated time only; one ``random.Random(seed)`` draws the backoff jitter and the dry run's
random start node, so a trace, a config and a seed give the same result every time.

The model's own rules (docs/simulator.md): a preemption is executed at once (victims deleted,
the preemptor bound on the chosen node in the same instant); a workload runs — and its
``duration`` counts — from the moment it is PodsReady; losing PodsReady (a victim pod of an
elastic workload) loses its progress; evicted pods are re-created pending at once (the owner's
controller); as kube-scheduler 1.20's queue does, a new or woken pod is tried alone, and a pod
deletion or the 60 s flush of unschedulable pods retries every pending pod.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.config.model import RunwayConfig
from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionReason, EvictionRecord
from app.model.lifecycle import Life
from app.policy import admission, eviction, lifecycle, minruntime, ordering, podsready
from app.policy.admission import Blocker, FilterInput, FilterPolicy
from app.policy.backoff import held_by_record
from app.policy.budget import BudgetResolution, default_budget, resolve_budget
from app.policy.minruntime import PoolDefaults, Resolution
from app.policy.queues import QueueTree
from app.policy.victims import NodeOffer, PodFacts, Preemptor, WorkloadFacts, decide
from app.simulator.cluster import Cluster, SimNode
from app.simulator.trace import NodeGroup, Trace, WorkloadSpec

FLUSH_SECONDS = 60.0
"""kube-scheduler 1.20 moves a pod left unschedulable for 60 s back to the active queue."""
QUIET_SECONDS = 86400.0
"""The run ends when nothing but retries is left and nothing changed for this long."""
MIN_CANDIDATES = 100
"""kube-scheduler's ``minCandidateNodesAbsolute`` (with ``minCandidateNodesPercentage`` 10)."""

_EVERYONE = "*"
"""What ``_apply`` returns when every pending pod is to be retried."""

# Event kinds, in the order they apply within one instant.
_FINISH, _READY, _PODSREADY, _ARRIVE, _WAKE, _FLUSH = range(6)


@dataclass(slots=True)
class SimPod:
    """One pod of a workload (re-created pending when evicted: same ``uid`` in the model, a new
    ``api_uid``)."""

    uid: str
    node: str | None = None
    bound_at: float | None = None
    ready: bool = False
    token: int = 0
    """Bumped at each bind: a Ready event of an earlier bind is stale."""
    incarnation: int = 0
    """Bumped when the pod is evicted (and re-created)."""

    @property
    def api_uid(self) -> str:
        """The UID the API server would give this incarnation: a re-created pod is a new pod
        (the eviction record tells one preemption from the next by its preemptor's UID)."""
        return f"{self.uid}.{self.incarnation}" if self.incarnation else self.uid


@dataclass(slots=True)
class SimWorkload:
    """A workload's simulated state."""

    spec: WorkloadSpec
    pods: list[SimPod]
    uids: frozenset[str]
    shape: tuple[tuple[str, int], ...]
    """What one pod asks for, hashable."""
    life: Life = field(default_factory=Life)
    record: EvictionRecord | None = None
    state: str = "waiting"
    """``waiting`` (not arrived), ``active``, ``finished`` or ``deactivated``."""
    run_token: int = 0
    """Bumped whenever the workload stops running: a Finish event of an earlier run is stale."""
    ready_since: float | None = None
    not_ready_since: float | None = None
    pending_since: float | None = None
    wait: float = 0.0
    times_preempted: int = 0
    finished_at: float | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def bound(self) -> list[SimPod]:
        return [p for p in self.pods if p.node is not None]

    def ready_count(self) -> int:
        return sum(1 for p in self.pods if p.ready)

    @property
    def pods_ready(self) -> bool:
        return self.ready_count() >= self.spec.floor

    @property
    def has_pending(self) -> bool:
        return self.state == "active" and any(p.node is None for p in self.pods)


@dataclass(frozen=True)
class Decision:
    """One decision the simulator made, in order: what the agreement test compares."""

    time: float
    kind: str
    """``preempted`` (workload lost pods to a preemptor), ``evicted`` (PodsReadyTimeout),
    ``deactivated``, ``bound`` (a pod), ``started``, ``finished``."""
    workload: str
    detail: str = ""
    """The preemptor's workload (``preempted``), the node (``bound``), the pod count."""
    started: float | None = field(default=None, compare=False)
    """``preempted``: when the victim had started (its min-runtime counted from there)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "time": round(self.time, 3),
            "kind": self.kind,
            "workload": self.workload,
            "detail": self.detail,
        }


@dataclass
class Outcome:
    """What a run measured (``app.simulator.report`` turns it into a table and JSON)."""

    workloads: Sequence[SimWorkload]
    decisions: list[Decision]
    end: float
    capacity: Mapping[str, int]
    used_seconds: Mapping[str, float]
    """Per resource, the integral of the allocated amount over time."""
    preemptions: int = 0
    """Preemptions executed (one preemptor pod, one node)."""
    preempted_workloads: int = 0
    """Workload evictions by preemption (a workload preempted twice counts twice)."""
    evicted_pods: int = 0
    work_lost: float = 0.0
    """Victim pod-seconds thrown away: the sum over preempted pods of the time they had run."""
    pods_ready_evictions: int = 0
    deactivations: int = 0
    lost_series: list[tuple[float, float]] = field(default_factory=list)
    """(time, work lost by that preemption)."""
    wait_series: list[tuple[float, str, float]] = field(default_factory=list)
    """(time a workload started, its queue, how long it had waited for that start)."""
    bad_nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SimOptions:
    """Knobs of the model (the defaults are kube-scheduler 1.20's)."""

    seed: int = 0
    flush_seconds: float = FLUSH_SECONDS
    quiet_seconds: float = QUIET_SECONDS
    until: float | None = None
    """Stop at this simulated time (None: when the trace has played out)."""
    record_binds: bool = False
    """Keep ``bound``/``started``/``finished`` decisions too (tests; large traces skip them)."""
    check_invariants: bool = False
    """Check after every instant that no node is over capacity (tests)."""


class Simulation:
    """One replay of a trace under one config."""

    def __init__(
        self,
        config: RunwayConfig,
        trace: Trace,
        cluster: Sequence[NodeGroup] | None = None,
        options: SimOptions | None = None,
    ) -> None:
        self.config = config
        self.options = options or SimOptions()
        groups = cluster if cluster is not None else trace.cluster
        if not groups:
            raise ValueError("no cluster: the trace has no cluster line and no nodes were given")
        self.cluster = Cluster(groups)
        self.rng = random.Random(self.options.seed)
        self.tree = QueueTree.from_config(config.queues)
        self.strategy = ordering.QueueOrderStrategy.from_sections(
            config.wait_for_pods_ready, config.requeue_strategy
        )
        self.filter_policy = FilterPolicy(config.requeue_strategy.anti_flapping_timeout)
        self.wait_cfg = config.wait_for_pods_ready
        self.workloads: list[SimWorkload] = []
        self._index: dict[str, int] = {}
        self._active_set: dict[str, SimWorkload] = {}
        self._admitted: set[str] = set()
        self.by_uid: dict[str, tuple[SimWorkload, SimPod]] = {}
        for spec in trace.workloads:
            pods = [SimPod(f"{spec.name}/{i}") for i in range(spec.pods)]
            w = SimWorkload(
                spec, pods, frozenset(p.uid for p in pods), tuple(sorted(spec.requests.items()))
            )
            self._index[spec.name] = len(self.workloads)
            self.workloads.append(w)
            for p in pods:
                self.by_uid[p.uid] = (w, p)
        self.heap: list[tuple[float, int, int, int, int, int]] = []
        self._seq = 0
        self._deleted = False
        self._unarrived = len(trace.workloads)
        self._max_rounds = 1 + len({w.priority for w in trace.workloads})
        self._open = sum(1 for w in trace.workloads if w.ready_after is not None)
        """Workloads that can get ready and have not finished (nor been deactivated)."""
        self._pending: dict[str, SimWorkload] = {}
        """Active workloads with a pod not bound."""
        self._flush_at: float | None = None
        self.now = 0.0
        self.last_change = 0.0
        self.bound_priorities: Counter[int] = Counter()
        self._defaults: dict[str | None, PoolDefaults] = {}
        self._resolutions: dict[tuple[str, str, str | None], Resolution] = {}
        self._budgets: dict[str, BudgetResolution] = {}
        self._workload_cache: dict[
            tuple[str, str],
            tuple[tuple[tuple[int, ...], float | None, EvictionRecord | None], WorkloadFacts],
        ] = {}
        self._fact_cache: dict[
            tuple[str, str], tuple[tuple[int, float | None, EvictionRecord | None], PodFacts]
        ] = {}
        self._default_budget = default_budget(config.min_runtime)
        self._last_integral = 0.0
        self.outcome = Outcome(
            workloads=self.workloads,
            decisions=[],
            end=0.0,
            capacity=dict(self.cluster.capacity),
            used_seconds=dict.fromkeys(self.cluster.capacity, 0.0),
        )
        for i, w in enumerate(self.workloads):
            self._push(w.spec.arrival, _ARRIVE, i)

    # -- the heap --------------------------------------------------------------------------

    def _push(self, at: float, kind: int, index: int = -1, a: int = 0, b: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (at, kind, self._seq, index, a, b))

    def run(self) -> Outcome:
        """Play the trace out; returns what was measured.

        The run ends when every workload that can get ready has finished (or was deactivated),
        at ``until``, or when nothing progressed (an arrival, a bind of a workload that can get
        ready, a finish) for ``quiet_seconds`` — the rest could only retry forever."""
        until = self.options.until
        quiet = self.options.quiet_seconds
        while self.heap and (self._open > 0 or self._unarrived > 0):
            at = self.heap[0][0]
            if until is not None and at > until:
                self._advance(until)
                break
            if at - self.last_change > quiet:
                self._advance(self.last_change + quiet)
                break
            self._advance(at)
            # As kube-scheduler 1.20 moves pods to its active queue: a new (or woken) pod is
            # tried alone; a pod deletion or the flush retries every pending pod.
            everyone = False
            some: set[str] = set()
            while self.heap and self.heap[0][0] == at:
                _, kind, _, index, a, b = heapq.heappop(self.heap)
                if kind == _FLUSH:
                    everyone = True
                    self._flush_at = None
                else:
                    retry = self._apply(kind, index, a, b)
                    if retry is _EVERYONE:
                        everyone = True
                    elif retry is not None:
                        some.add(retry)
            scope: set[str] | None = None if everyone else some
            for _ in range(self._max_rounds):
                if not self._pending or scope == set():
                    break
                self._deleted = False
                self._pass(scope)
                if not self._deleted:
                    break
                scope = None  # a preemption deleted pods: everyone is retried
            if self._pending:
                self._schedule_flush()
            if self.options.check_invariants:
                self.outcome.bad_nodes.extend(self.cluster.over_capacity())
        end = self.now
        self.outcome.end = end
        for w in self.workloads:
            if w.state == "active" and w.pending_since is not None:
                w.wait += max(end - w.pending_since, 0.0)
                w.pending_since = None
        return self.outcome

    def _advance(self, to: float) -> None:
        if to > self.now:
            self._integrate(to)
            self.now = to

    def _schedule_flush(self) -> None:
        at = self.now + self.options.flush_seconds
        if self._flush_at is None or self._flush_at > at:
            self._flush_at = at
            self._push(at, _FLUSH)

    def _integrate(self, to: float) -> None:
        dt = to - self._last_integral
        if dt > 0:
            used = self.outcome.used_seconds
            for k, v in self.cluster.allocated.items():
                if v:
                    used[k] = used.get(k, 0.0) + v * dt  # type: ignore[index]
        self._last_integral = max(self._last_integral, to)

    # -- events ----------------------------------------------------------------------------

    def _apply(self, kind: int, index: int, a: int, b: int) -> str | None:
        """Apply one event; returns whom to retry: a workload's name, everyone, or None."""
        w = self.workloads[index] if index >= 0 else None
        if kind == _ARRIVE:
            assert w is not None
            w.state = "active"
            self._unarrived -= 1
            w.life = Life(created=self.now)
            w.pending_since = self.now
            self._active_set[w.name] = w
            self._pending[w.name] = w
            self.last_change = self.now
            return w.name
        if kind == _WAKE:
            return w.name if w is not None and w.state == "active" else None
        assert w is not None
        if w.state != "active":
            return None
        if kind == _READY:
            pod = w.pods[a]
            if pod.token != b or pod.node is None or pod.ready:
                return None
            pod.ready = True
            self._readiness_changed(w)
            # Readiness frees nothing; it matters to scheduling only through blockAdmission
            # (runway's waker touches the pods held by it).
            blocking = self.wait_cfg.enable and self.wait_cfg.block_admission
            return _EVERYONE if blocking else None
        if kind == _FINISH:
            if w.run_token != a:
                return None
            self._finish(w)
            return _EVERYONE
        if kind == _PODSREADY:
            return _EVERYONE if self._check_pods_ready(w) else None
        raise AssertionError(f"unknown event kind {kind}")

    def _readiness_changed(self, w: SimWorkload) -> None:
        ready = w.pods_ready
        if ready and w.ready_since is None:
            w.ready_since = self.now
            w.not_ready_since = None
            self._push(self.now + w.spec.duration, _FINISH, self._index[w.name], w.run_token)
        elif not ready and w.ready_since is not None:
            # Lost PodsReady: the run is lost (docs/simulator.md); recoveryTimeout counts.
            w.ready_since = None
            w.run_token += 1
            if w.life.admitted is not None:
                w.not_ready_since = self.now
        self._watch_pods_ready(w)

    def _watch_pods_ready(self, w: SimWorkload) -> None:
        check = podsready.evaluate_pods_ready(self._pr_state(w), self.now, self.wait_cfg)
        if check.deadline is not None:
            self._push(max(check.deadline, self.now), _PODSREADY, self._index[w.name])

    def _pr_state(self, w: SimWorkload) -> podsready.PodsReadyState:
        return podsready.PodsReadyState(
            admitted_at=w.life.admitted, pods_ready=w.pods_ready, not_ready_since=w.not_ready_since
        )

    def _check_pods_ready(self, w: SimWorkload) -> bool:
        check = podsready.evaluate_pods_ready(self._pr_state(w), self.now, self.wait_cfg)
        if not check.due:
            return False
        bound = w.bound()
        pools = sorted(
            {p for p in (self.cluster.by_name[x.node].pool for x in bound if x.node) if p}
        )
        record = eviction.timed_out(
            w.record,
            self.now,
            self.wait_cfg.requeuing_strategy,
            self.rng.random,
            admitted=w.life.admitted,
            message=podsready.timeout_message(w.name, check, self.wait_cfg),
            failed_pools=pools,
        )
        if record is None:  # this admission's eviction is recorded already
            return False
        w.record = record
        self.outcome.pods_ready_evictions += 1
        self._decide("evicted", w.name, PODS_READY_TIMEOUT)
        self._evict(w, bound, PODS_READY_TIMEOUT)
        if w.record.deactivated:
            self.outcome.deactivations += 1
            self._decide("deactivated", w.name, w.record.message or "")
            self._deactivate(w)
        elif w.record.requeue_at is not None and w.record.requeue_at > self.now:
            self._push(w.record.requeue_at, _WAKE, self._index[w.name])
        return True

    def _finish(self, w: SimWorkload) -> None:
        for pod in w.bound():
            self._unbind(w, pod)
        w.state = "finished"
        w.finished_at = self.now
        self._active_set.pop(w.name, None)
        self._pending.pop(w.name, None)
        self._open -= 1
        self.last_change = self.now
        if self.options.record_binds:
            self._decide("finished", w.name)

    def _deactivate(self, w: SimWorkload) -> None:
        w.state = "deactivated"
        self._active_set.pop(w.name, None)
        self._pending.pop(w.name, None)
        if w.spec.ready_after is not None:
            self._open -= 1
        if w.pending_since is not None:
            w.wait += self.now - w.pending_since
            w.pending_since = None

    def _decide(
        self, kind: str, workload: str, detail: str = "", started: float | None = None
    ) -> None:
        self.outcome.decisions.append(Decision(self.now, kind, workload, detail, started))

    # -- binds and evictions ---------------------------------------------------------------

    def _bind(self, w: SimWorkload, pod: SimPod, node: SimNode) -> None:
        self.cluster.bind(pod.uid, node, w.spec.requests)
        pod.node = node.name
        pod.bound_at = self.now
        pod.token += 1
        self.bound_priorities[w.spec.priority] += 1
        if w.spec.ready_after is not None:
            self.last_change = self.now
        if all(p.node is not None for p in w.pods):
            self._pending.pop(w.name, None)
        if self.options.record_binds:
            self._decide("bound", w.name, node.name)
        before = w.life
        self._observe(w)
        if before.admitted is None and w.life.admitted is not None:
            self._admitted.add(w.name)
            self._watch_pods_ready(w)
        if before.started is None and w.life.started is not None and w.pending_since is not None:
            waited = self.now - w.pending_since
            w.wait += waited
            w.pending_since = None
            self.outcome.wait_series.append((self.now, w.spec.queue, waited))
            if self.options.record_binds:
                self._decide("started", w.name)
        ready_after = w.spec.ready_after
        if ready_after is not None:
            self._push(
                self.now + ready_after, _READY, self._index[w.name], w.pods.index(pod), pod.token
            )

    def _unbind(self, w: SimWorkload, pod: SimPod) -> None:
        self.cluster.unbind(pod.uid)
        self.bound_priorities[w.spec.priority] -= 1
        pod.node = None
        pod.bound_at = None
        pod.ready = False
        pod.token += 1

    def _observe(self, w: SimWorkload) -> None:
        binds = tuple(sorted(p.bound_at for p in w.pods if p.bound_at is not None))
        seen = lifecycle.Observation(
            created=w.spec.arrival,
            binds=binds,
            min_available=w.spec.floor,
            last_eviction=w.record.time if w.record is not None else None,
        )
        w.life = lifecycle.observe(w.life, seen)
        if w.life.admitted is None:
            self._admitted.discard(w.name)

    def _evict(self, w: SimWorkload, pods: Sequence[SimPod], reason: EvictionReason) -> float:
        """Delete ``pods`` (re-created pending at once); returns the pod-seconds they had run."""
        lost = 0.0
        for pod in pods:
            if pod.node is None:
                continue
            if pod.bound_at is not None:
                lost += self.now - pod.bound_at
            self._unbind(w, pod)
            pod.incarnation += 1
            self._pending[w.name] = w
        was_started = w.life.started is not None
        self._observe(w)
        if w.ready_since is not None and not w.pods_ready:
            w.ready_since = None
            w.run_token += 1
            if w.life.admitted is not None:
                w.not_ready_since = self.now
        if w.life.admitted is None:
            w.not_ready_since = None
        if was_started and w.life.started is None and w.pending_since is None:
            w.pending_since = self.now  # waits again for its next start
        self._watch_pods_ready(w)
        return lost

    # -- the scheduling pass ---------------------------------------------------------------

    def _pending_view(self, w: SimWorkload) -> ordering.PendingWorkload:
        record = w.record if w.life.admitted is None else None
        return ordering.PendingWorkload(
            name=w.name,
            priority=w.spec.priority,
            creation_time=w.life.created if w.life.created is not None else w.spec.arrival,
            record=record,
            pod_uids=w.uids,
        )

    def _pass(self, scope: set[str] | None) -> None:
        """One scheduling pass over the pending workloads (those named in ``scope``; None:
        all)."""
        now = self.now
        lowest = min((p for p, n in self.bound_priorities.items() if n > 0), default=None)
        cluster = self.cluster
        # Leave out what this pass cannot change: a workload in backoff or deactivated (the
        # filter's first two rules, ``policy.backoff``), and one that fits no node and may
        # preempt no one (binds only ever lower what is free).
        candidates = (
            self._pending.values()
            if scope is None
            else [self._pending[n] for n in sorted(scope) if n in self._pending]
        )
        pending = [
            w
            for w in candidates
            if not held_by_record(w.record, now)
            and (
                not cluster.surely_unfit(w.spec.requests)
                or (lowest is not None and w.spec.priority > lowest)
            )
        ]
        if not pending:
            return
        views = {w.name: self._pending_view(w) for w in pending}
        by_queue: dict[str, list[ordering.PendingWorkload]] = {}
        for w in pending:
            by_queue.setdefault(w.spec.queue, []).append(views[w.name])
        keys: dict[str, ordering.OrderKey] = {}
        for items in by_queue.values():
            anchors = ordering.preemptor_anchors(items, self.strategy)
            for v in items:
                keys[v.name] = ordering.queue_order_key(v, self.strategy, anchors)
        pending.sort(key=lambda w: keys[w.name])
        heads: dict[str, str | None] = {}
        unfit: set[tuple[tuple[str, int], ...]] = set()
        unpreemptible: set[tuple[int, str, tuple[tuple[str, int], ...]]] = set()
        pending_uids = {p.uid for w in self._pending.values() for p in w.pods if p.node is None}
        for w in pending:
            q = w.spec.queue
            strategy = self.tree.node(q).queueing_strategy
            head: str | None = None
            if strategy == "StrictFIFO":
                if q not in heads:
                    found = ordering.queue_head(
                        [
                            self._pending_view(x)
                            for x in self._pending.values()
                            if x.spec.queue == q and x.has_pending and x.life.admitted is None
                        ],
                        self.strategy,
                        self.now,
                    )
                    heads[q] = found.name if found is not None else None
                head = heads[q]
            shape = w.shape
            if shape in unfit and (w.spec.priority, q, shape) in unpreemptible:
                continue  # nothing would change for it: neither a fit nor a preemption
            verdict = admission.admit(
                self._filter_input(w, head, pending_uids), self.now, self.filter_policy
            )
            if not verdict.allowed:
                continue
            for pod in w.pods:
                if pod.node is not None:
                    continue
                node = None if shape in unfit else self.cluster.place(w.spec.requests)
                if node is None:
                    unfit.add(shape)
                    key = (w.spec.priority, q, shape)
                    if key not in unpreemptible:
                        node = self._preempt(w, pod)
                        if node is None:
                            unpreemptible.add(key)
                        else:
                            unfit.clear()
                            unpreemptible.clear()
                if node is None:
                    break
                self._bind(w, pod, node)
                pending_uids.discard(pod.uid)
            if strategy == "StrictFIFO" and w.life.admitted is not None:
                heads.pop(q, None)

    def _filter_input(
        self, w: SimWorkload, head: str | None, pending_uids: set[str]
    ) -> FilterInput:
        record = w.record
        preemptor_pending = False
        preemptor_name = None
        if record is not None and record.preemptor_uid:
            preemptor_pending = record.preemptor_uid in pending_uids
            owner = self.by_uid.get(record.preemptor_uid)
            preemptor_name = owner[0].name if owner else None
        blockers: tuple[Blocker, ...] = ()
        if self.wait_cfg.enable and self.wait_cfg.block_admission:
            blockers = tuple(self._blockers())
        return FilterInput(
            workload=w.name,
            queue=w.spec.queue,
            record=record,
            preemptor_pending=preemptor_pending,
            preemptor_name=preemptor_name,
            blockers=blockers,
            queueing_strategy=self.tree.node(w.spec.queue).queueing_strategy,
            queue_head=head,
            admitted=w.life.admitted is not None,
        )

    def _blockers(self) -> Iterable[Blocker]:
        for name in sorted(self._admitted):
            w = self._active_set.get(name)
            if w is None or w.life.admitted is None:
                continue
            # the service's rule (state/requeue.blockers): recovering workloads block too
            until = podsready.block_until(self._pr_state(w), self.wait_cfg)
            if until is not None and until > self.now:
                yield Blocker(name, None if until == math.inf else until)

    # -- preemption ------------------------------------------------------------------------

    def _pool_defaults(self, pool: str | None) -> PoolDefaults:
        found = self._defaults.get(pool)
        if found is None:
            labels = {self.config.min_runtime.pool_label: pool} if pool is not None else None
            found = self._defaults[pool] = minruntime.defaults_for_pool(
                self.config.min_runtime, labels
            )
        return found

    def _resolution(self, preemptor_queue: str, victim_queue: str, pool: str | None) -> Resolution:
        key = (preemptor_queue, victim_queue, pool)
        found = self._resolutions.get(key)
        if found is None:
            found = self._resolutions[key] = minruntime.resolve(
                self.tree, self._pool_defaults(pool), preemptor_queue, victim_queue
            )
        return found

    def _budget(self, victim_queue: str) -> BudgetResolution:
        found = self._budgets.get(victim_queue)
        if found is None:
            found = self._budgets[victim_queue] = resolve_budget(
                self.tree, victim_queue, self._default_budget
            )
        return found

    def _candidates(self, w: SimWorkload) -> dict[str, list[str]]:
        """kube-scheduler's dry run (``selectVictimsOnNode``): per node, the fewest pods of lower
        priority whose removal lets the pod fit — every lower one removed, then reprieved highest
        priority first (earlier start first) while the pod still fits; nodes from a random
        start, until ``max(10 %, 100)`` candidates."""
        prio = w.spec.priority
        req = w.spec.requests
        nodes = self.cluster.nodes
        count = len(nodes)
        want = min(count, max(math.ceil(count * 0.1), MIN_CANDIDATES))
        start = self.rng.randrange(count)
        out: dict[str, list[str]] = {}
        by_uid = self.by_uid
        for i in range(count):
            node = nodes[(start + i) % count]
            lower = []
            for uid in node.pods:
                owner, pod = by_uid[uid]
                if owner.spec.priority < prio:
                    lower.append((owner.spec.priority, pod.bound_at or 0.0, uid))
            if not lower or not node.fits_without(req, (u for _, _, u in lower)):
                continue
            # Most important first: higher priority, then earlier start.
            lower.sort(key=lambda t: (-t[0], t[1], t[2]))
            victims = [u for _, _, u in lower]
            for _, _, uid in lower:
                trial = [v for v in victims if v != uid]
                if node.fits_without(req, trial):
                    victims = trial  # reprieved
            out[node.name] = victims
            if len(out) >= want:
                break
        return out

    def _facts(self, uid: str, preemptor_queue: str) -> PodFacts:
        """The pod's facts for a preemptor of ``preemptor_queue``; remembered until the pod is
        re-bound or its workload's start or record changes."""
        owner, pod = self.by_uid[uid]
        stamp = (pod.token, owner.life.started, owner.record)
        cached = self._fact_cache.get((uid, preemptor_queue))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        pool = self.cluster.by_name[pod.node].pool if pod.node is not None else None
        found = PodFacts(
            uid=uid,
            key=uid,
            node=pod.node,
            priority=owner.spec.priority,
            queue=owner.spec.queue,
            workload=owner.name,
            start=owner.life.started,
            resolution=self._resolution(preemptor_queue, owner.spec.queue, pool),
            requests=owner.spec.requests,
            budget=self._budget(owner.spec.queue),
            preemption_history=owner.record.preemption_history if owner.record else (),
            running_since=pod.bound_at,
        )
        self._fact_cache[uid, preemptor_queue] = (stamp, found)
        return found

    def _workload_facts(
        self, o: SimWorkload, preemptor_queue: str, fact: Callable[[str], PodFacts]
    ) -> WorkloadFacts:
        """The workload's facts for ``victims.decide``; remembered like the pods' facts."""
        stamp = (tuple(p.token for p in o.pods), o.life.started, o.record)
        cached = self._workload_cache.get((o.name, preemptor_queue))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = WorkloadFacts(
            key=o.name,
            min_available=o.spec.floor,
            running=sum(1 for p in o.pods if p.node is not None),
            pods=tuple(fact(p.uid) for p in o.pods),
        )
        self._workload_cache[o.name, preemptor_queue] = (stamp, found)
        return found

    def _preempt(self, w: SimWorkload, pod: SimPod) -> SimNode | None:
        prio = w.spec.priority
        if not any(n > 0 and p < prio for p, n in self.bound_priorities.items()):
            return None
        candidates = self._candidates(w)
        if not candidates:
            return None
        q = w.spec.queue
        facts: dict[str, PodFacts] = {}

        def fact(uid: str) -> PodFacts:
            found = facts.get(uid)
            if found is None:
                found = facts[uid] = self._facts(uid, q)
            return found

        offers: dict[str, NodeOffer] = {}
        owners: dict[str, SimWorkload] = {}
        for name, victims in candidates.items():
            node = self.cluster.by_name[name]
            chosen = set(victims)
            offers[name] = NodeOffer(
                victims=[fact(u) for u in victims],
                others=[fact(u) for u in node.pods if u not in chosen],
                allocatable=node.allocatable,
            )
            for u in node.pods:
                owner = self.by_uid[u][0]
                owners[owner.name] = owner
        workloads = {key: self._workload_facts(o, q, fact) for key, o in owners.items()}
        preemptor = Preemptor(pod.uid, pod.uid, prio, q, w.name, w.spec.requests)
        decision = decide(preemptor, offers, workloads, self.now)
        if decision.chosen is None:
            return None
        by_workload: dict[str, list[SimPod]] = {}
        for uid, _node in decision.all_victims():
            owner, victim = self.by_uid[uid]
            by_workload.setdefault(owner.name, []).append(victim)
        self.outcome.preemptions += 1
        self._deleted = True
        lost_here = 0.0
        for name in sorted(by_workload):
            owner = self._active_set[name]
            owner.record = eviction.preempted(
                owner.record,
                pod.api_uid,
                self.now,
                self.wait_cfg.requeuing_strategy,
                self._budget(owner.spec.queue).budget,
                self.rng.random,
                message=f"preempted by {w.name}",
            )
            owner.times_preempted += 1
            gone = by_workload[name]
            self.outcome.preempted_workloads += 1
            self.outcome.evicted_pods += sum(1 for v in gone if v.node is not None)
            self._decide("preempted", name, w.name, owner.life.started)
            lost_here += self._evict(owner, gone, PREEMPTED)
        self.outcome.work_lost += lost_here
        self.outcome.lost_series.append((self.now, lost_here))
        node = self.cluster.by_name[decision.chosen]
        return node if node.fits(w.spec.requests) else None


def simulate(
    config: RunwayConfig,
    trace: Trace,
    cluster: Sequence[NodeGroup] | None = None,
    options: SimOptions | None = None,
) -> Outcome:
    """Replay ``trace`` under ``config``; see :class:`Simulation`."""
    sim = Simulation(config, trace, cluster, options)
    return sim.run()
