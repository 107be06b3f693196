"""Turn a preempt request plus what runway knows into the plain facts ``policy.victims`` decides on.

Victims are looked up by UID in the pod cache; without a cache (the embedded default) the pods the
scheduler sent (``NodeNameToVictims``) stand in, and a UID-only offer is an unknown pod (never
protected). Min-runtime is resolved per (victim queue, node pool) through the queue tree; the
preemption budget per victim queue, against the preemption history in the workload's record.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from app import metrics
from app.clock import Clock
from app.config.queues import MinRuntimeConfig
from app.logs import get_logger
from app.model import Pod
from app.model.gate import PREEMPTED_BY, GateEntry, PodRef, PreemptionPlan
from app.policy import minruntime
from app.policy.budget import BudgetResolution, default_budget, resolve_budget
from app.policy.crosscheck import Refusal, check_preemptor, check_victims
from app.policy.gate import may_clear_nomination
from app.policy.lifecycle import facts_of
from app.policy.quantity import (
    QuantityError,
    Resources,
    add_resources,
    parse_resources,
    pod_requests,
)
from app.policy.queues import QueueTree
from app.policy.releases import UNKNOWN as UNKNOWN_RELEASE
from app.policy.releases import Release
from app.policy.shield import NO_SHIELD, Shield, shielded
from app.policy.victims import (
    PODS,
    Decision,
    NodeOffer,
    PodFacts,
    Preemptor,
    WorkloadFacts,
    decide,
    protection,
)
from app.policy.workload import (
    WorkloadKey,
    active_pods,
    is_active,
    min_available,
    workload_of,
)
from app.state.cache import ClusterCache, WorkloadView
from app.state.decisions import DecisionLog
from app.state.gate import GateBook
from app.state.records import RecordBook
from app.wire import PreemptionArgs

log = get_logger("preemption")


@dataclass
class PreemptionFacts:
    """Everything ``policy.victims.decide`` needs, and the pods behind the UIDs."""

    preemptor: Preemptor
    offers: dict[str, NodeOffer]
    workloads: dict[str, WorkloadFacts]
    pods: dict[str, Pod] = field(default_factory=dict)
    """Every pod known by UID (cache or payload): names for the API calls."""


class _Builder:
    def __init__(
        self,
        cache: ClusterCache,
        queues: QueueTree,
        min_runtime: MinRuntimeConfig,
        args: PreemptionArgs,
        preemptor: Pod,
        records: RecordBook | None = None,
        shield: Shield = NO_SHIELD,
    ) -> None:
        self.records = records
        self.shield = shield
        self.queues = queues
        self.min_runtime = min_runtime
        self.args = args
        self.preemptor = Preemptor.from_pod(preemptor, cache.queue_of_pod(preemptor))
        self.cache = cache
        self.pods: dict[str, Pod] = {}
        # The scheduler's own copies of the victims (NodeList mode) stand in for the cache.
        self.payload: dict[str, Pod] = {
            c.uid: c.pod for cands in args.victims.values() for c in cands if c.pod is not None
        }
        self.payload_by_workload: dict[WorkloadKey, list[Pod]] = {}
        for p in self.payload.values():
            self.payload_by_workload.setdefault(workload_of(p), []).append(p)
        self.resolutions: dict[tuple[str, str | None], minruntime.Resolution] = {}
        self.workload_members: dict[str, list[Pod]] = {}
        self.starts: dict[str, float | None] = {}
        self.histories: dict[str, tuple[float, ...]] = {}
        self.budgets: dict[str, BudgetResolution] = {}
        self.default_budget = default_budget(min_runtime)
        self.facts_by_uid: dict[str, PodFacts] = {}
        self.nominees: dict[str, list[Pod]] | None = None

    def lookup(self, uid: str) -> Pod | None:
        pod = self.cache.pod(uid) or self.payload.get(uid)
        if pod is not None:
            self.pods[uid] = pod
        return pod

    def resolution(self, victim_queue: str, node: str) -> minruntime.Resolution:
        labels = self.cache.node_labels(node) if node else {}
        pool = labels.get(self.min_runtime.pool_label)
        key = (victim_queue, pool)
        res = self.resolutions.get(key)
        if res is None:
            for queue in (victim_queue, self.preemptor.queue):
                if not self.queues.is_known(queue):
                    metrics.UNKNOWN_QUEUE.labels(metrics.UNKNOWN_QUEUE_LABELS(queue)).inc()
            defaults = minruntime.defaults_for_pool(self.min_runtime, labels)
            res = minruntime.resolve(self.queues, defaults, self.preemptor.queue, victim_queue)
            self.resolutions[key] = res
        return res

    def budget(self, victim_queue: str) -> BudgetResolution:
        found = self.budgets.get(victim_queue)
        if found is None:
            found = resolve_budget(self.queues, victim_queue, self.default_budget)
            self.budgets[victim_queue] = found
        return found

    def members(self, pod: Pod) -> tuple[str, list[Pod]]:
        key = workload_of(pod)
        name = str(key)
        members = self.workload_members.get(name)
        if members is None and not self.cache.is_managed(pod):
            # Not runway's (policy.scope): a victim only as kube-scheduler offers it, with no
            # min-runtime, budget or gang of runway's — whatever record it may have from before.
            members = [pod]
            self.histories[name] = ()
            self.starts[name] = None
            self.workload_members[name] = members
            self.pods.setdefault(pod.metadata.uid, pod)
            return name, members
        if members is None:
            self.histories[name] = preemption_history(self.records, key, pod)
            view = self.cache.workload(key)  # memoised by the cache, start time included
            if view is not None and any(p.metadata.uid == pod.metadata.uid for p in view.pods):
                members = list(view.pods)
                self.starts[name] = started(view, self.records)
            else:
                members = list(self.payload_by_workload.get(key, ()))
                if not any(p.metadata.uid == pod.metadata.uid for p in members):
                    members = [*members, pod]
                # The payload shows only the offered victims: a partial view (DESIGN §2).
                self.starts[name] = facts_of(members, complete=False).life.started
            self.workload_members[name] = members
            for member in members:
                self.pods.setdefault(member.metadata.uid, member)
        return name, members

    def facts(self, pod: Pod, node: str) -> PodFacts:
        # A pod is both an offered victim and a member of its workload: build its facts once.
        known = self.facts_by_uid.get(pod.metadata.uid)
        if known is not None:
            return known
        made = self._facts(pod, node)
        self.facts_by_uid[pod.metadata.uid] = made
        return made

    def _facts(self, pod: Pod, node: str) -> PodFacts:
        name, _ = self.members(pod)
        queue = self.cache.queue_of_pod(pod)
        try:
            return PodFacts.from_pod(
                pod,
                start=self.starts[name],
                resolution=self.resolution(queue, pod.spec.nodeName or node),
                workload=name,
                queue=queue,
                budget=self.budget(queue),
                preemption_history=self.histories.get(name, ()),
                shield=shielded(self.shield, pod.metadata.namespace, pod.metadata.labels),
            )
        except QuantityError:
            return PodFacts.unknown(pod.metadata.uid, node)

    def allocatable(self, node: str) -> Resources | None:
        """The node's allocatable as integers; None when the cache does not hold the node (or
        it reports nothing yet, or an invalid quantity)."""
        found = self.cache.node(node)
        if found is None or not found.allocatable:
            return None
        try:
            return parse_resources(found.allocatable)
        except QuantityError:
            return None

    def nominated(self, node: str) -> Resources:
        """The summed requests (and count, as ``pods``) of the pending pods nominated to
        ``node`` at the preemptor's priority or above: kube-scheduler keeps their room."""
        if self.nominees is None:
            self.nominees = {}
            for p in self.cache.pending_pods():
                to = p.status.nominatedNodeName
                if to and p.priority >= self.preemptor.priority and p.uid != self.preemptor.uid:
                    self.nominees.setdefault(to, []).append(p)
        room: Resources = {}
        for p in self.nominees.get(node, ()):
            try:
                room = add_resources(room, pod_requests(p), {PODS: 1})
            except QuantityError:
                room = add_resources(room, {PODS: 1})
        return room

    def build(self) -> PreemptionFacts:
        offers: dict[str, NodeOffer] = {}
        for node, cands in self.args.victims.items():
            offered = {c.uid for c in cands}
            victims = []
            for cand in cands:
                pod = self.lookup(cand.uid)
                victims.append(
                    PodFacts.unknown(cand.uid, node) if pod is None else self.facts(pod, node)
                )
            # Terminating pods are going and finished ones hold nothing: neither is a bystander.
            others = [
                self.facts(p, node)
                for p in self.cache.pods_on_node(node)
                if p.metadata.uid not in offered and is_active(p)
            ]
            offers[node] = NodeOffer(
                victims=victims,
                pdb_violations=self.args.pdb_violations.get(node, 0),
                others=others,
                allocatable=self.allocatable(node),
                # a dict lookup: the pending pods are scanned only when one is nominated here
                nominated=self.nominated(node) if self.cache.nominated_to(node) else {},
            )
        workloads = {}
        for name, members in self.workload_members.items():
            facts: Sequence[PodFacts] = [self.facts(p, p.spec.nodeName or "") for p in members]
            workloads[name] = WorkloadFacts.from_pods(name, members, facts)
        return PreemptionFacts(self.preemptor, offers, workloads, self.pods)


def preemption_history(
    records: RecordBook | None, key: WorkloadKey, pod: Pod | None = None
) -> tuple[float, ...]:
    """When the workload was last preempted (its eviction record; none without a record book)."""
    if records is None or not records.may_have_record(key, pod):
        return ()  # nothing to parse: most victims were never preempted
    record = records.read(key, pod)
    return record.preemption_history if record is not None else ()


def started(view: WorkloadView, records: RecordBook | None) -> float | None:
    """The workload's *started* fact (DESIGN §2): min-runtime counts from it. Without a record
    book, what its pods show (no persisted facts)."""
    if records is not None:
        return records.life(view).life.started
    return facts_of(view.pods).life.started


@dataclass(frozen=True)
class PreemptOutcome:
    """A preempt call's decision and, when a node was chosen, the work for the executor; or why
    the call was refused before any decision (then the verb answers ``{}``)."""

    decision: Decision | None
    plan: PreemptionPlan | None = None
    refusal: Refusal | None = None


def _message(decision: Decision) -> tuple[str, str]:
    """The DisruptionTarget messages: for the preemptor's namespace (its name, queue and
    priority) and for a victim of another namespace (``PREEMPTED_BY``: none of them)."""
    p = decision.preemptor
    rules = sorted(
        {
            rec.protection.describe()
            for n in decision.nodes
            if n.node == decision.chosen
            for rec in n.records
            if rec.outcome != "dropped"
        }
    )
    rule = rules[0] if len(rules) == 1 else f"{len(rules)} rules" if rules else "no rule"
    tail = f"to run on node {decision.chosen}; victim's min-runtime: {rule}"
    return (
        f"Preempted by {p.key} (queue {p.queue}, priority {p.priority}) {tail}",
        f"{PREEMPTED_BY} {tail}",
    )


class AwaitedPreemptors:
    """Preemptors whose preempt call was refused because runway's cache did not know them yet
    (their ADDED event had not reached runway's watch). kube-scheduler parks such a pod as
    unschedulable and, unless something about it changes, retries it only at its 60 s flush; the
    requeue waker touches it when its ADDED arrives (``take``), so it is retried at once.
    Bounded (the oldest are forgotten first) and short-lived (``ttl``): a pod that never shows
    up is nobody's to wake."""

    def __init__(self, limit: int = 1024, ttl: float = 300.0) -> None:
        self.limit = limit
        self.ttl = ttl
        self._since: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._since)

    def add(self, uid: str, now: float) -> None:
        """Remember ``uid``, refused at ``now``."""
        self._since[uid] = now
        self._since.move_to_end(uid)
        while len(self._since) > self.limit:
            self._since.popitem(last=False)

    def take(self, uid: str, now: float) -> bool:
        """Whether ``uid`` was refused as unknown within ``ttl`` (and forget it)."""
        since = self._since.pop(uid, None) if self._since else None
        return since is not None and now - since <= self.ttl


class PreemptDecider:
    """The preempt verb's state side: the cross-check against the cache (DESIGN §4), facts from the
    cache (or the payload) → ``policy.victims`` → the executor's plan; every decision is kept in
    the decision log. Reads only.

    ``verify``: runway has a cluster cache, so a preemption is acted on only when the cache
    confirms it. The embedded default (no cluster) cannot check, and makes no API calls anyway.
    """

    def __init__(
        self,
        cache: ClusterCache,
        queues: QueueTree,
        min_runtime: MinRuntimeConfig,
        gate: GateBook,
        decisions: DecisionLog,
        clock: Clock,
        *,
        verify: bool = False,
        scheduler_names: Collection[str] = ("default-scheduler",),
        records: RecordBook | None = None,
        shield: Shield = NO_SHIELD,
        scheduler_executes: Callable[[], bool] = lambda: False,
    ) -> None:
        self.scheduler_executes = scheduler_executes
        """Whether kube-scheduler executes the preemptions runway answers (``preemption.async``
        false, or auto on 1.33+), asked on each call: the mode follows the detected release."""
        self.records = records
        self.shield = shield
        """Pods never chosen as victims (protected namespaces, runway's own)."""
        self.cache = cache
        self.queues = queues
        self.min_runtime = min_runtime
        self.gate = gate
        self.decisions = decisions
        self.clock = clock
        self.verify = verify
        self.scheduler_names = frozenset(scheduler_names)
        self.release: Release = UNKNOWN_RELEASE
        """The scheduler's release (``Runway.detect_release``): what its preempt reply accepts."""
        self.awaited = AwaitedPreemptors()
        """Preemptors refused as unknown to the cache: woken when they arrive."""

    def facts(self, args: PreemptionArgs, preemptor: Pod | None = None) -> PreemptionFacts:
        """The facts of one preempt call (no I/O: cache and payload only)."""
        who = preemptor if preemptor is not None else args.pod
        return _Builder(
            self.cache, self.queues, self.min_runtime, args, who, self.records, self.shield
        ).build()

    def decide(self, args: PreemptionArgs) -> PreemptOutcome:
        """Cross-check, decide and record one preempt call: the preemptor as the cache knows it,
        the decision on the facts (logged, whatever it says), the victims as the cache knows
        them, then the executor's plan."""
        now = self.clock.now()
        # Victims and nominations are read from the cache: with every event that has arrived.
        self.cache.refresh()
        preemptor, refusal = self._confirmed_preemptor(args, now)
        if preemptor is None:
            return self._refuse(args.pod, refusal)
        facts = self.facts(args, preemptor)
        decision = self._decide(facts, preemptor, now)
        self.decisions.add(decision)
        if decision.chosen is None:
            return PreemptOutcome(decision)
        refusal = self._unconfirmed_victim(decision, facts.preemptor.priority)
        if refusal is not None:
            return self._refuse(preemptor, refusal, decision)
        return PreemptOutcome(decision, self._plan(decision, facts, preemptor, now))

    def _confirmed_preemptor(
        self, args: PreemptionArgs, now: float
    ) -> tuple[Pod | None, Refusal | None]:
        """The preemptor to decide for: the cache's copy (its priority and labels, not the
        payload's), or None and why not. Without ``verify`` the payload's, unchecked."""
        if not self.verify:
            return args.pod, None
        uid = args.pod.uid
        # expect: its ADDED event may still be on the watch's socket
        cached = self.cache.expect(uid) if uid else None
        if cached is None:
            if uid:
                self.awaited.add(uid, now)  # woken when its ADDED event arrives
            return None, check_preemptor(uid, cached, self.scheduler_names)
        refusal = check_preemptor(uid, cached, self.scheduler_names)
        return (None, refusal) if refusal is not None else (cached, None)

    def _decide(self, facts: PreemptionFacts, preemptor: Pod, now: float) -> Decision:
        """``policy.victims.decide`` with the gate's view: held (vetoed), the other preemptions'
        claims and their reserved victims."""
        own = preemptor.metadata.uid
        held = self.gate.held(preemptor, now)
        if held is not None and self.scheduler_executes() and not self.gate.backing_off(own):
            left = self.gate.left_by_the_scheduler(held[0], now)
            if left:
                # Asked again with victims still running: kube-scheduler's calls are over and
                # did not delete them. Decide afresh rather than park the pod (DESIGN §4.4).
                log.info(
                    "kube-scheduler's preemption left victims running: deciding again",
                    preemptor=preemptor.key,
                    node=held[0].node,
                    left=[v.key for v in left],
                )
                metrics.PREEMPTIONS_LEFT_BY_SCHEDULER.inc()
                # A failure without back-off: the gate opens at once (a held answer would park
                # the pod where, from 1.32, nothing runway does re-queues it).
                self.gate.finish(own, ok=False)
                held = None
        # Only a failure's back-off has its own veto reason; in flight is the default one.
        why = held[1].why if held is not None and self.gate.backing_off(own) else ""
        return decide(
            facts.preemptor,
            facts.offers,
            facts.workloads,
            now,
            gated=held is not None,
            gate_why=why,
            claims=tuple(c for c in self.gate.claims(now) if c.preemptor_uid != own),
            reserved=self.gate.reserved(now, besides=own),
        )

    def _unconfirmed_victim(self, decision: Decision, priority: int) -> Refusal | None:
        """Why a chosen victim may not be deleted on the request's word (never without the
        cache's confirmation: unknown, elsewhere, not below the preemptor); None when all are
        confirmed or runway cannot check (no cluster)."""
        if not self.verify:
            return None
        for uid, node in decision.all_victims():
            refusal = check_victims(priority, node or "", [(uid, self.cache.pod(uid))])
            if refusal is not None:
                return refusal
        return None

    def _plan(
        self, decision: Decision, facts: PreemptionFacts, preemptor: Pod, now: float
    ) -> PreemptionPlan:
        """The executor's work for a chosen node: the victims (off-node siblings named), the
        pods it awaits, the lower claims it displaces and the nominations it clears."""
        assert decision.chosen is not None
        victims = decision.all_victims()
        refs = [self._ref(facts, uid) for uid, _ in victims]
        off_node = [
            ref for ref, (_, node) in zip(refs, victims, strict=True) if node != decision.chosen
        ]
        displaced, their_victims = self._displaced(decision, now)
        # The taken preemptions' victims stay reserved under this gate (their tasks, if still
        # running, delete them; nobody else may choose them again); a victim is not awaited.
        awaited = {uid: self._ref(facts, uid) for uid in decision.awaited}
        for victim in their_victims:
            awaited.setdefault(victim.uid, victim)
        for ref in refs:
            awaited.pop(ref.uid, None)
        unnominate = {r.uid: r for r in self._lower_nominations(decision.chosen, preemptor)}
        for ref in displaced:
            unnominate.setdefault(ref.uid, ref)
        message, public_message = _message(decision)
        return PreemptionPlan(
            preemptor=PodRef.of(preemptor),
            node=decision.chosen,
            victims=tuple(refs),
            message=message,
            public_message=public_message,
            rule=decision.reason,
            priority=facts.preemptor.priority,
            off_node=tuple(off_node),
            unnominate=tuple(unnominate.values()),
            awaited=tuple(awaited.values()),
            displaced=tuple(displaced),
            counted=decision.counted,
        )

    def _displaced(self, decision: Decision, now: float) -> tuple[list[PodRef], list[PodRef]]:
        """The preemptors whose claims the decision takes (as the gate book holds them, here or
        mirrored), and their victims still outstanding."""
        preemptors: list[PodRef] = []
        victims: list[PodRef] = []
        for claim in decision.displaced:
            entry = self.gate.get(claim.preemptor_uid) or self._mirrored(claim.preemptor_uid)
            if entry is not None:
                preemptors.append(entry.preemptor)
                victims.extend(self.gate.check(entry, now).outstanding)
        return preemptors, victims

    @staticmethod
    def _ref(facts: PreemptionFacts, uid: str) -> PodRef:
        pod = facts.pods.get(uid)
        # A UID-only victim unknown to runway (no cache): the name is unknown too.
        return PodRef.of(pod) if pod is not None else PodRef(uid, "", uid)

    def _mirrored(self, uid: str) -> GateEntry | None:
        pod = self.cache.pod(uid)
        return self.gate.lookup(pod) if pod is not None else None

    def _lower_nominations(self, node: str, preemptor: Pod) -> tuple[PodRef, ...]:
        """Pending pods of lower priority nominated to ``node`` (kube-scheduler's preemption
        clears their nomination: they no longer fit once the preemptor takes the room)."""
        if not self.verify or not self.cache.nominated_to(node):
            return ()  # (a dict lookup: a scan of every pending pod only when one is nominated)
        now = self.clock.now()
        return tuple(
            PodRef.of(p)
            for p in self.cache.pending_pods()
            if p.status.nominatedNodeName == node
            and p.priority < preemptor.priority
            and p.metadata.uid != preemptor.metadata.uid
            and self._nominated_by_runway(p, node, now)
        )

    def _nominated_by_runway(self, pod: Pod, node: str, now: float) -> bool:
        """``policy.gate.may_clear_nomination`` for ``pod``'s nomination to ``node``."""
        entry = self.gate.lookup(pod)
        gate_open = entry is not None and self.gate.check(entry, now).open
        return may_clear_nomination(entry, node, gate_open, self.release.scheduler_nominates)

    def _refuse(
        self, pod: Pod, refusal: Refusal | None, decision: Decision | None = None
    ) -> PreemptOutcome:
        refusal = refusal or Refusal("preemptor-unknown", "no preemptor UID")
        metrics.PREEMPTIONS_REFUSED.labels(refusal.reason).inc()
        log.warning(
            "preemption refused: the cache does not confirm the request",
            preemptor=pod.key,
            reason=refusal.reason,
            detail=refusal.message,
        )
        return PreemptOutcome(decision, None, refusal)

    def explain(self, preemptor: Pod, victim: Pod) -> dict[str, object]:
        """``explain_pair`` now."""
        return explain_pair(
            self.cache,
            self.queues,
            self.min_runtime,
            self.clock.now(),
            preemptor,
            victim,
            records=self.records,
        )


def explain_pair(
    cache: ClusterCache,
    queues: QueueTree,
    min_runtime: MinRuntimeConfig,
    now: float,
    preemptor: Pod,
    victim: Pod,
    *,
    records: RecordBook | None = None,
) -> dict[str, object]:
    """Min-runtime of (preemptor, victim) resolved at ``now`` and the victim's preemption budget,
    with protection and eligibility."""
    pre = Preemptor.from_pod(preemptor, cache.queue_of_pod(preemptor))
    key = workload_of(victim)
    members = cache.workload_pods(key) or [victim]
    view = cache.workload(key)
    start = (
        started(view, records)
        if view is not None
        else facts_of(members, complete=False).life.started
    )
    queue = cache.queue_of_pod(victim)
    labels = cache.node_labels(victim.spec.nodeName) if victim.spec.nodeName else {}
    defaults = minruntime.defaults_for_pool(min_runtime, labels)
    res = minruntime.resolve(queues, defaults, pre.queue, queue)
    facts = PodFacts(
        uid=victim.metadata.uid,
        key=victim.key,
        node=victim.spec.nodeName,
        priority=victim.priority,
        queue=queue,
        workload=str(key),
        start=start,
        resolution=res,
        budget=resolve_budget(queues, queue, default_budget(min_runtime)),
        preemption_history=preemption_history(records, key, victim),
    )
    live = active_pods(members)  # the pods the elastic floor counts, as in decide()
    floor = min_available(live) if live else 0
    answer = minruntime.explain(
        protection(pre, facts, now),
        victim_priority=victim.priority,
        preemptor_priority=pre.priority,
        min_available=floor,
        pods=len(live),
    )
    return {
        "preemptor": preemptor.key,
        "victim": victim.key,
        **answer.to_dict(),
        "workload": {
            "name": str(key),
            "pods": len(live),
            "minAvailable": floor,
            "elastic": answer.elastic,
            "running": sum(1 for p in live if p.spec.nodeName),
        },
    }
