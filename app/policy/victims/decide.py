"""The algorithm: one node and its victims, by the rules of the package docstring.

Read top to bottom: ``decide`` runs the steps — a node claimed at the preemptor's priority or
above is dropped (rule 0), each offered victim is awaited, kept or dropped (rules 0-2), dropped
victims are replaced by what the preemptor lacks (rule 3), one node wins (rule 4) — and each
step below it is a function named for what it decides, with predicates named for the rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from app.policy import minruntime, quantity
from app.policy.claims import Claim
from app.policy.minruntime import Protection
from app.policy.quantity import Resources
from app.policy.victims.facts import (
    PODS,
    NodeOffer,
    NodeOutcome,
    Outcome,
    PodFacts,
    Preemptor,
    WorkloadFacts,
)
from app.policy.victims.record import (
    Cause,
    Counts,
    Decision,
    NodeRecord,
    VictimRecord,
    protection,
)


def decide(
    preemptor: Preemptor,
    offers: Mapping[str, NodeOffer],
    workloads: Mapping[str, WorkloadFacts],
    now: float,
    *,
    gated: bool = False,
    gate_why: str = "",
    claims: Sequence[Claim] = (),
    reserved: Mapping[str, str] | None = None,
) -> Decision:
    """Choose the victims of a preemption on one offered node (DESIGN §3.5) and say why.

    ``offers`` maps each node kube-scheduler offered to its victims and the node's other cached
    pods; ``workloads`` holds the facts of every workload those pods belong to (pods missing a
    workload entry are workloads of their own). ``gated``: the preemptor's previous preemption
    is still in flight (or its failure backs off: ``gate_why`` then says until when) → veto.
    ``claims``: the other preemptions in flight (``policy.claims``): a node claimed by one of
    equal or higher priority is dropped; one claimed only by lower priorities may be taken (the
    decision's ``displaced``). ``reserved``: victim UID → the preemptor of the preemption in
    flight that chose it; such a pod is never chosen again (nor is a terminating one): it is
    awaited. The result does not depend on the order of any input.
    """
    if gated:
        return _vetoed_by_the_gate(preemptor, now, gate_why)
    ctx = _Context.of(preemptor, offers, workloads, now, reserved or {})
    claims_on = _claims_by_node(claims, preemptor)
    planned: list[_NodePlan] = []
    dropped: list[tuple[_NodePlan, str]] = []
    for node in sorted(offers):
        plan = _NodePlan(node=node, offer=offers[node])
        why_dropped = _plan_node(ctx, plan, claims_on.get(node, ()))
        if why_dropped is None:
            planned.append(plan)
        else:
            dropped.append((plan, why_dropped))
    return _choose_one_node(ctx, planned, dropped, offered=bool(offers))


def _plan_node(ctx: _Context, plan: _NodePlan, claims: Sequence[Claim]) -> str | None:
    """Rules 0-3 on one node: why it is dropped, or None when ``plan`` holds its victims."""
    holder = _claim_at_or_above(claims, ctx.preemptor) if claims else None
    if holder is not None:
        return (
            f"claimed by the preemption in flight of {holder.preemptor} (priority "
            f"{holder.priority}, not below {ctx.preemptor.priority}): not offered twice"
        )
    plan.displaced = tuple(claims)  # only lower claims are left: choosing the node takes them
    for pod in _sorted_pods(plan.offer.victims):
        _judge_offered_victim(ctx, plan, pod)
    why = _reselect(ctx, plan) if plan.dropped else None
    if why is None and plan.dropped and not (plan.victims or plan.off_node or plan.awaited):
        # Every offered victim dropped, nothing to evict and nothing going: by runway's count
        # the node has room already, by kube-scheduler's it does not (pods nominated there, a
        # plugin beyond resources). A "preemption" of nobody would only nominate the pod there
        # (two pods of one pending gang each nominated to the one node, each blocking the
        # other), so it is not made.
        return (
            f"no victim needed on {plan.node} by runway's count (its offered victims are "
            "dropped and the pods staying leave room): nothing to preempt; kube-scheduler "
            "retries the pod when the node changes"
        )
    return why


# --- rule 0: claims -----------------------------------------------------------------------


def _claims_by_node(claims: Sequence[Claim], preemptor: Preemptor) -> dict[str, list[Claim]]:
    """Other preemptions' claims per node, the highest priority first."""
    by_node: dict[str, list[Claim]] = {}
    for claim in sorted(claims, key=lambda c: (-c.priority, c.preemptor, c.preemptor_uid)):
        if claim.preemptor_uid != preemptor.uid:
            by_node.setdefault(claim.node, []).append(claim)
    return by_node


def _claim_at_or_above(claims: Sequence[Claim], preemptor: Preemptor) -> Claim | None:
    """A claim the preemptor may not take: of its priority or above (the nominator's rule)."""
    return next((c for c in claims if c.priority >= preemptor.priority), None)


# --- the shared facts of one decision ---------------------------------------------------------


class _Block(NamedTuple):
    """Why a gang may not be evicted at all."""

    cause: Cause
    text: str

    @property
    def reason(self) -> str:
        kind = "ineligible" if self.cause is Cause.GANG_INELIGIBLE else "protected"
        return f"{kind}: {self.text}"


@dataclass
class _Context:
    """Shared facts of one decision, with per-workload caches (gangs can be large)."""

    preemptor: Preemptor
    now: float
    workloads: Mapping[str, WorkloadFacts]
    claimed: Mapping[str, Sequence[PodFacts]]
    """Per workload key, the offered and other pods (every node) that claim it."""
    reserved: Mapping[str, str] = field(default_factory=dict)
    """Victim UID → the preemption in flight that chose it (``namespace/name`` of its
    preemptor): never chosen again."""
    _members: dict[str, list[PodFacts]] = field(default_factory=dict)
    _blockers: dict[str, _Block | None] = field(default_factory=dict)
    _elastic: dict[str, Protection | None] = field(default_factory=dict)
    _protection: dict[str, Protection] = field(default_factory=dict)
    _fallback: dict[str, WorkloadFacts] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        preemptor: Preemptor,
        offers: Mapping[str, NodeOffer],
        workloads: Mapping[str, WorkloadFacts],
        now: float,
        reserved: Mapping[str, str],
    ) -> _Context:
        # Pods seen in the offer that claim a workload join its members (the cache's view of
        # the workload may lag). A UID is one pod, so which duplicate wins does not matter.
        seen: dict[str, dict[str, PodFacts]] = {}
        for offer in offers.values():
            for pods in (offer.victims, offer.others):
                for pod in pods:
                    if pod.known:
                        seen.setdefault(pod.workload_key, {}).setdefault(pod.uid, pod)
        claimed = {k: list(v.values()) for k, v in seen.items()}
        return cls(preemptor, now, workloads, claimed, reserved)

    def going(self, pod: PodFacts) -> str | None:
        """Why ``pod`` is going already (and so is not chosen again), or None."""
        holder = self.reserved.get(pod.uid)
        if holder is not None:
            return f"already chosen by the preemption in flight of {holder}"
        return "already terminating" if pod.terminating else None

    def in_flight(self, wl: WorkloadFacts) -> bool:
        """Whether another preemption in flight is evicting ``wl`` already (one of its members
        is reserved): its eviction is recorded once, by that preemption."""
        return any(m.uid in self.reserved for m in self.members(wl))

    def floor_start(self, wl: WorkloadFacts) -> int:
        """Evictions of ``wl`` already under way (reserved members still running): the elastic
        floor counts them before this decision's own."""
        return sum(1 for m in wl.pods if m.uid in self.reserved and m.node)

    def protection(self, pod: PodFacts) -> Protection:
        found = self._protection.get(pod.uid)
        if found is None:
            found = self._protection[pod.uid] = protection(self.preemptor, pod, self.now)
        return found

    def workload(self, pod: PodFacts) -> WorkloadFacts:
        key = pod.workload_key
        found = self.workloads.get(key) or self._fallback.get(key)
        if found is None:
            # Not described by the caller: a gang (no minAvailable known) of the pods that claim it.
            pods = self.claimed.get(key) or (pod,)
            found = WorkloadFacts(key, len(pods), sum(1 for p in pods if p.node), tuple(pods))
            self._fallback[key] = found
        return found

    def members(self, wl: WorkloadFacts) -> list[PodFacts]:
        """The workload's pods, plus pods seen in the offer that claim it, by UID."""
        found = self._members.get(wl.key)
        if found is None:
            by_uid = {p.uid: p for p in wl.pods}
            for p in self.claimed.get(wl.key, ()):
                by_uid.setdefault(p.uid, p)
            found = self._members[wl.key] = [by_uid[u] for u in sorted(by_uid)]
        return found

    def blocker(self, wl: WorkloadFacts) -> _Block | None:
        """Why a gang may not be evicted at all (rules 1-2), or None when it may."""
        if wl.key not in self._blockers:
            self._blockers[wl.key] = self._ineligible_member(wl) or self._protected_member(wl)
        return self._blockers[wl.key]

    def _ineligible_member(self, wl: WorkloadFacts) -> _Block | None:
        for m in self.members(wl):
            if m.shield:  # a gang with a shielded member cannot go as a whole
                return _Block(Cause.GANG_INELIGIBLE, f"gang {wl.key}: member {m.key} {m.shield}")
            if m.priority >= self.preemptor.priority:
                return _Block(
                    Cause.GANG_INELIGIBLE,
                    f"gang {wl.key}: member {m.key} has priority {m.priority}, not below the "
                    f"preemptor's {self.preemptor.priority}",
                )
        return None

    def _protected_member(self, wl: WorkloadFacts) -> _Block | None:
        members = self.members(wl)
        for m in members:
            prot = self.protection(m)
            if prot.protected:
                whose = "" if len(members) == 1 else f"gang {wl.key} is protected as a whole: "
                return _Block(Cause.PROTECTED, f"{whose}{m.key} {prot.describe()}")
        return None

    def elastic_protection(self, wl: WorkloadFacts) -> Protection | None:
        """The protection of an elastic workload: the first protected member's, else None."""
        if wl.key not in self._elastic:
            self._elastic[wl.key] = next(
                (prot for m in self.members(wl) if (prot := self.protection(m)).protected), None
            )
        return self._elastic[wl.key]


@dataclass
class _NodePlan:
    """Mutable work of one node; frozen into a ``NodeRecord`` at the end."""

    node: str
    offer: NodeOffer
    victims: dict[str, PodFacts] = field(default_factory=dict)
    off_node: dict[str, PodFacts] = field(default_factory=dict)
    awaited: dict[str, PodFacts] = field(default_factory=dict)
    displaced: tuple[Claim, ...] = ()
    records: dict[str, VictimRecord] = field(default_factory=dict)
    dropped: list[PodFacts] = field(default_factory=list)
    gangs: set[str] = field(default_factory=set)
    floor_used: dict[str, int] = field(default_factory=dict)
    extras: list[PodFacts] = field(default_factory=list)
    """Gang siblings on this node that go with a victim (they free room too)."""
    node_uids: set[str] = field(default_factory=set)
    offered: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.offered = {p.uid for p in self.offer.victims}
        self.node_uids = self.offered | {p.uid for p in self.offer.others}

    def listed_here(self, pod: PodFacts) -> bool:
        """On this node and in its listing: only such a pod may go in the reply (a UID
        kube-scheduler does not know on the node fails the whole call)."""
        return pod.node == self.node and pod.uid in self.node_uids

    def used(self, ctx: _Context, wl: WorkloadFacts) -> int:
        """Evictions of ``wl`` the elastic floor counts: this decision's and those under way."""
        found = self.floor_used.get(wl.key)
        return ctx.floor_start(wl) if found is None else found

    def keep(self, ctx: _Context, pod: PodFacts, cause: Cause, reason: str) -> None:
        """An offered victim goes."""
        self.victims[pod.uid] = pod
        self.record(ctx, pod, "kept", cause, reason)

    def drop(self, ctx: _Context, pod: PodFacts, cause: Cause, reason: str) -> None:
        """An offered victim stays; re-selection must make up for it."""
        self.dropped.append(pod)
        self.record(ctx, pod, "dropped", cause, reason)

    def record(
        self, ctx: _Context, pod: PodFacts, outcome: Outcome, cause: Cause, reason: str
    ) -> None:
        self.records[pod.uid] = VictimRecord(
            uid=pod.uid,
            key=pod.key,
            node=pod.node,
            workload=pod.workload_key,
            priority=pod.priority,
            queue=pod.queue,
            outcome=outcome,
            reason=reason,
            offered=pod.uid in self.offered,
            protection=ctx.protection(pod),
            cause=cause,
        )


def _sorted_pods(pods: Iterable[PodFacts]) -> list[PodFacts]:
    # Priority first so an elastic floor keeps the lowest-priority victims; UID for determinism.
    unique = {p.uid: p for p in pods}
    return sorted(unique.values(), key=lambda p: (p.priority, p.uid))


def _floor_text(wl: WorkloadFacts, used: int) -> str:
    return minruntime.floor_text(wl.key, wl.min_available, wl.running, used)


# --- rules 0-2: each offered victim is awaited, kept or dropped ------------------------------


def _judge_offered_victim(ctx: _Context, plan: _NodePlan, pod: PodFacts) -> None:
    """Await a victim already going, keep one runway cannot judge, drop a shielded one; the
    rest by their workload: elastic pods one by one, a gang as a whole."""
    going = ctx.going(pod)
    if going is not None:
        plan.awaited[pod.uid] = pod
        reason = f"{going}: not chosen again; its room counts"
        plan.record(ctx, pod, "awaited", Cause.ALREADY_GOING, reason)
    elif not pod.known:
        reason = "not in runway's pod cache: start unknown, so not protected"
        plan.keep(ctx, pod, Cause.UNKNOWN_POD, reason)
    elif pod.shield:  # whatever the scheduler offered (issue #26)
        plan.drop(ctx, pod, Cause.SHIELDED, f"ineligible: {pod.key} {pod.shield}")
    else:
        wl = ctx.workload(pod)
        if wl.elastic:
            _judge_elastic_member(ctx, plan, pod, wl)
        else:
            _judge_gang_member(ctx, plan, pod, wl)


def _judge_elastic_member(ctx: _Context, plan: _NodePlan, pod: PodFacts, wl: WorkloadFacts) -> None:
    """Rule 1 for an elastic workload: unprotected, any pod may go; protected, only while
    minAvailable of its running pods stay (every eviction of this decision counted)."""
    prot = ctx.elastic_protection(wl)
    if prot is None:
        reason = f"elastic {wl.key} not protected: {ctx.protection(pod).describe()}"
        plan.keep(ctx, pod, Cause.NOT_PROTECTED, reason)
        return
    used = plan.used(ctx, wl)
    if wl.may_lose(used + 1):
        plan.floor_used[wl.key] = used + 1
        reason = f"{prot.describe()}, but {_floor_text(wl, used + 1)}"
        plan.keep(ctx, pod, Cause.ABOVE_ELASTIC_FLOOR, reason)
    else:
        reason = (
            f"protected: {prot.describe()}; "
            f"{_floor_text(wl, used)} — evicting it would break the floor"
        )
        plan.drop(ctx, pod, Cause.ELASTIC_FLOOR, reason)


def _judge_gang_member(ctx: _Context, plan: _NodePlan, pod: PodFacts, wl: WorkloadFacts) -> None:
    """Rules 1-2 for a gang: it goes as a whole, unless a member is protected, shielded or of
    the preemptor's priority or above."""
    if wl.key in plan.gangs:
        plan.keep(ctx, pod, Cause.GANG_GOES_WHOLE, f"gang {wl.key} is evicted as a whole")
        return
    block = ctx.blocker(wl)
    if block is not None:
        plan.drop(ctx, pod, block.cause, block.reason)
        return
    members = ctx.members(wl)
    note = ctx.protection(pod).describe()
    if len(members) > 1:
        note += f"; gang {wl.key} of {len(members)} pods goes as a whole"
    plan.keep(ctx, pod, Cause.NOT_PROTECTED, note)
    _expand_gang(ctx, plan, wl, members, pod, "offered victim")


def _expand_gang(
    ctx: _Context,
    plan: _NodePlan,
    wl: WorkloadFacts,
    members: Sequence[PodFacts],
    trigger: PodFacts,
    how: str,
) -> None:
    """Rule 2: the gang's other members go too — on this node in the reply, elsewhere (or
    missing from the node's listing) in ``off_node`` for the executor; a member already going
    is awaited, never deleted twice. Offered members are judged on their own."""
    plan.gangs.add(wl.key)
    for m in members:
        if m.uid == trigger.uid or m.uid in plan.offered or m.uid in plan.victims:
            continue
        going = ctx.going(m)
        if going is not None:
            if plan.listed_here(m):
                plan.awaited[m.uid] = m
            reason = f"gang {wl.key}: {going}; not chosen again"
            plan.record(ctx, m, "awaited", Cause.ALREADY_GOING, reason)
            continue
        reason = f"gang {wl.key}: evicted with {trigger.key} ({how})"
        if plan.listed_here(m):
            plan.victims[m.uid] = m
            plan.extras.append(m)
        else:
            plan.off_node[m.uid] = m
            reason += f"; on {m.node or 'no node'}, deleted by the executor"
        plan.record(ctx, m, "gang-expanded", Cause.GANG_MEMBER, reason)


# --- rule 3: re-selection ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """A re-selection candidate: one elastic pod, or a whole gang."""

    pods: tuple[PodFacts, ...]
    on_node: tuple[PodFacts, ...]
    workload: WorkloadFacts
    elastic_protected: bool
    freed: Mapping[str, int]

    def sort_key(self, now: float) -> tuple[int, float, int, str]:
        # Lowest priority, least work lost, fewest pods, then UID.
        return (
            max(p.priority for p in self.pods),
            work_lost(self.pods, now),
            len(self.pods),
            self.pods[0].uid,
        )


def _reselect(ctx: _Context, plan: _NodePlan) -> str | None:
    """Rule 3: make up for the dropped victims with the node's other pods — enough to free what
    the preemptor lacks, the cheapest first, none more than needed. Returns why the node must
    be dropped, or None."""
    needed = _shortfall(ctx, plan)
    if not needed:
        return None
    floor_used = dict(plan.floor_used)
    chosen = _cheapest_units_covering(ctx, plan, needed, floor_used)
    freed = quantity.add_resources(*(u.freed for u in chosen))
    if not quantity.covers(freed, needed):
        return (
            f"{len(plan.dropped)} needed victim(s) dropped ({_keys(plan.dropped)}); the node's "
            f"other pods of priority below {ctx.preemptor.priority} that are not protected free "
            f"only {quantity.format_resources(freed)} of the "
            f"{quantity.format_resources(needed)} still needed by {ctx.preemptor.key}"
        )
    _give_back_unneeded(chosen, needed, floor_used)
    plan.floor_used = floor_used
    _take_units(ctx, plan, chosen)
    return None


def _shortfall(ctx: _Context, plan: _NodePlan) -> Resources:
    """What the replacements must free: what the preemptor still lacks on the node once the
    kept victims (and their gangs' siblings there) and the awaited pods are gone.

    With the node's allocatable known: each resource the preemptor requests (and a pod slot),
    less what the node has free after the pods that stay. Without it: kube-scheduler's dry run
    found the node fits with every offered victim gone, so freeing, in each resource the
    preemptor requests, as much as the dropped victims did — or the whole request, whichever is
    less — suffices. Never the dropped victims' own requests in a resource the preemptor does
    not ask for: a shielded victim's memory is no reason to evict another pod's memory. A
    preemptor whose requests are unknown falls back to the dropped victims' requests."""
    allocatable = plan.offer.allocatable
    if ctx.preemptor.requests is None:
        need = _requested(plan.dropped)
    elif allocatable is not None:
        needs = _preemptor_needs(ctx.preemptor.requests, PODS in allocatable)
        free = _free_after(ctx, plan, allocatable)
        return _positive({k: v - free.get(k, 0) for k, v in needs.items()})
    else:
        dropped = _freed(plan.dropped)
        needs = _preemptor_needs(ctx.preemptor.requests, counts_pods=True)
        need = {k: min(v, dropped.get(k, 0)) for k, v in needs.items()}
    return _positive(_subtract(need, _freed(plan.extras)))


def _preemptor_needs(requests: Mapping[str, int], counts_pods: bool) -> Resources:
    """What the preemptor asks of a node: its requests, and a pod slot where the node counts
    them (``pods`` in its allocatable)."""
    needs = _positive(requests)
    if counts_pods:
        needs[PODS] = 1
    return needs


def _free_after(ctx: _Context, plan: _NodePlan, allocatable: Mapping[str, int]) -> Resources:
    """What the node has free once the pods going are gone: its allocatable less the requests
    of every pod that stays (the dropped victims included) and of the pods nominated to it."""
    going = set(plan.victims) | set(plan.awaited)
    going.update(p.uid for p in plan.offer.others if ctx.going(p) is not None)
    staying = {
        p.uid: p
        for p in (*plan.offer.victims, *plan.offer.others)
        if p.node == plan.node and p.uid not in going
    }
    used = quantity.add_resources(_freed(staying.values()), plan.offer.nominated)
    return _subtract(allocatable, used)


def _cheapest_units_covering(
    ctx: _Context, plan: _NodePlan, needed: Mapping[str, int], floor_used: dict[str, int]
) -> list[_Unit]:
    """Candidates in order (lowest priority, least work lost), each taken when it frees
    something still missing and its elastic floor allows, until ``needed`` is covered."""
    chosen: list[_Unit] = []
    total: Resources = {}
    for unit in _candidate_units(ctx, plan):
        if quantity.covers(total, needed):
            break
        if _frees_something_missing(unit, total, needed) and _within_floor(ctx, unit, floor_used):
            chosen.append(unit)
            total = quantity.add_resources(total, unit.freed)
    return chosen


def _frees_something_missing(
    unit: _Unit, total: Mapping[str, int], needed: Mapping[str, int]
) -> bool:
    return any(unit.freed.get(k, 0) > 0 and total.get(k, 0) < v for k, v in needed.items())


def _within_floor(ctx: _Context, unit: _Unit, floor_used: dict[str, int]) -> bool:
    """Whether a protected elastic unit may go without breaking its workload's floor (and count
    it against the floor when so); any other unit may."""
    if not unit.elastic_protected:
        return True
    wl = unit.workload
    used = floor_used.get(wl.key, ctx.floor_start(wl))
    if not wl.may_lose(used + 1):
        return False
    floor_used[wl.key] = used + 1
    return True


def _give_back_unneeded(
    chosen: list[_Unit], needed: Mapping[str, int], floor_used: dict[str, int]
) -> None:
    """The reprieve: give back units (the last chosen first) the others cover without."""
    for unit in list(reversed(chosen)):
        rest = quantity.add_resources(*(u.freed for u in chosen if u is not unit))
        if quantity.covers(rest, needed):
            chosen.remove(unit)
            if unit.elastic_protected:
                floor_used[unit.workload.key] -= 1


def _take_units(ctx: _Context, plan: _NodePlan, chosen: Sequence[_Unit]) -> None:
    """The chosen units become victims (a gang with its siblings), each record saying what it
    replaces and frees."""
    dropped_keys = _keys(plan.dropped)
    for unit in chosen:
        wl = unit.workload
        why = f"replaces dropped {dropped_keys}; frees {quantity.format_resources(unit.freed)}"
        if unit.elastic_protected:
            why += f"; {_floor_text(wl, plan.used(ctx, wl))}"
        for pod in unit.on_node:
            plan.victims[pod.uid] = pod
            plan.record(ctx, pod, "reselected", Cause.REPLACES_DROPPED, why)
        if not wl.elastic:
            trigger = unit.on_node[0] if unit.on_node else unit.pods[0]
            _expand_gang(ctx, plan, wl, unit.pods, trigger, "re-selected")


def _candidate_units(ctx: _Context, plan: _NodePlan) -> list[_Unit]:
    """Units of the node's other pods that may be evicted instead of the dropped victims."""
    taken = set(plan.victims) | set(plan.awaited) | {p.uid for p in plan.dropped}
    units: dict[tuple[str, str], _Unit] = {}
    for pod in _sorted_pods(plan.offer.others):
        if pod.uid in taken or not _may_stand_in(ctx, plan, pod):
            continue
        wl = ctx.workload(pod)
        if wl.elastic:
            unit = _elastic_unit(ctx, plan, pod, wl)
            if unit is not None:
                units["pod", pod.uid] = unit
        elif ("gang", wl.key) not in units:
            unit = _gang_unit(ctx, plan, wl)
            if unit is not None:
                units["gang", wl.key] = unit
    return sorted(units.values(), key=lambda u: u.sort_key(ctx.now))


def _may_stand_in(ctx: _Context, plan: _NodePlan, pod: PodFacts) -> bool:
    """A bystander that may replace a dropped victim: on this node, known to runway, not going
    already, below the preemptor's priority, not shielded."""
    return (
        pod.node == plan.node
        and pod.known
        and ctx.going(pod) is None
        and pod.priority < ctx.preemptor.priority
        and not pod.shield
    )


def _elastic_unit(ctx: _Context, plan: _NodePlan, pod: PodFacts, wl: WorkloadFacts) -> _Unit | None:
    """One pod of an elastic workload, unless its protection's floor is reached already."""
    prot = ctx.elastic_protection(wl)
    if prot is not None and not wl.may_lose(plan.used(ctx, wl) + 1):
        return None
    return _Unit((pod,), (pod,), wl, prot is not None, _freed([pod]))


def _gang_unit(ctx: _Context, plan: _NodePlan, wl: WorkloadFacts) -> _Unit | None:
    """A whole gang, freeing what its members listed on this node hold; None when it goes
    already, may not go, or holds nothing here."""
    if wl.key in plan.gangs or ctx.blocker(wl) is not None:
        return None
    members = ctx.members(wl)
    on_node = tuple(
        m
        for m in members
        if plan.listed_here(m) and m.uid not in plan.victims and ctx.going(m) is None
    )
    if not on_node:
        return None  # nothing of it left here to free
    return _Unit(tuple(members), on_node, wl, False, _freed(on_node))


def _freed(pods: Iterable[PodFacts]) -> Resources:
    """What ``pods`` free: their requests and a pod slot each."""
    return quantity.add_resources(*(dict(p.requests) | {PODS: 1} for p in pods))


def _requested(dropped: Sequence[PodFacts]) -> Resources:
    """What the dropped victims requested (only for a preemptor of unknown requests)."""
    need = _positive(quantity.add_resources(*(p.requests for p in dropped)))
    # Nothing measurable (best-effort pods): the scheduler still needed their pod slots.
    return need or {PODS: len(dropped)}


def _positive(resources: Mapping[str, int]) -> Resources:
    return {k: v for k, v in resources.items() if v > 0}


def _subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {k: v - b.get(k, 0) for k, v in a.items()}


def _keys(pods: Iterable[PodFacts]) -> str:
    return ", ".join(p.key for p in pods)


# --- rule 4: one node wins --------------------------------------------------------------------


def work_lost(pods: Iterable[PodFacts], now: float) -> float:
    """Work lost by evicting ``pods`` (DESIGN §3.5, step 5): the sum of the time each pod has run
    itself (``running_since``, not its workload's start); a pod with no known start (or a start
    in the future) counts 0."""
    return sum(max(now - p.running_since, 0.0) for p in pods if p.running_since is not None)


class Rank(NamedTuple):
    """A node's place in the choice: compared field by field, in this order; smaller wins."""

    displaced_claims: int
    """Claims of lower-priority preemptions taken: the last resort (it costs them a retry)."""
    pdb_violations: int
    max_priority: float
    """The highest victim priority; -inf with no victims."""
    priority_sum: int
    victim_count: int
    """Off-node gang siblings included; awaited pods are not this preemption's victims."""
    work_lost: float
    node: str

    @classmethod
    def of(cls, plan: _NodePlan, now: float) -> Rank:
        # The pods this preemption evicts itself: awaited ones go anyway, whichever node wins.
        pods = [*plan.victims.values(), *plan.off_node.values()]
        priorities = [p.priority for p in pods]
        return cls._make(  # in the fields' order (a node's choice is on the hot path)
            (
                len(plan.displaced),
                plan.offer.pdb_violations,
                max(priorities, default=-math.inf),
                sum(priorities),
                len(pods),
                work_lost(pods, now),
                plan.node,
            )
        )


CRITERIA: Mapping[str, str] = {
    "displaced_claims": "claims of lower-priority preemptions taken",
    "pdb_violations": "PDB violations",
    "max_priority": "highest victim priority",
    "priority_sum": "victim priority sum",
    "victim_count": "victim count",
    "work_lost": "work lost (sum of the victims' run times)",
    "node": "node name",
}
"""What each ``Rank`` field means, for the reasons an operator reads."""
assert tuple(CRITERIA) == Rank._fields


def _choose_one_node(
    ctx: _Context,
    planned: Sequence[_NodePlan],
    dropped: Sequence[tuple[_NodePlan, str]],
    *,
    offered: bool,
) -> Decision:
    """Rule 4: the best-ranked node wins; every node's record says why it won, lost or was
    dropped. No node left → a veto."""
    ranks = {plan.node: Rank.of(plan, ctx.now) for plan in planned}
    winner = min(planned, key=lambda p: ranks[p.node]) if planned else None
    records = [
        _node_record(plan, *_won_or_lost(plan, winner, ranks, len(planned)), ranks[plan.node])
        for plan in planned
    ]
    records += [_node_record(plan, "dropped", why, None) for plan, why in dropped]
    records.sort(key=lambda r: r.node)
    counts = Counts.of(records, len(dropped))
    if winner is None:
        return _vetoed(ctx, records, counts, offered=offered)
    return _chosen(ctx, winner, records, counts)


TAKES_THE_CLAIM: Final = "; takes the claim of the lower-priority preemption of "
"""How a chosen node's record names the claims it takes (never the decision's reason)."""


def _won_or_lost(
    plan: _NodePlan, winner: _NodePlan | None, ranks: Mapping[str, Rank], planned: int
) -> tuple[NodeOutcome, str]:
    assert winner is not None
    if plan is not winner:
        return "lost", _why_lost(ranks[plan.node], ranks[winner.node], winner.node)
    why = (
        "chosen: " + ", ".join(list(CRITERIA.values())[:-1]) + " compared in that order"
        if planned > 1
        else "chosen: the only node left after the rules"
    )
    if plan.displaced:
        why += TAKES_THE_CLAIM + ", ".join(
            f"{c.preemptor} (priority {c.priority})" for c in plan.displaced
        )
    return "chosen", why


def _why_lost(rank: Rank, best: Rank, winner: str) -> str:
    for name, mine, theirs in zip(Rank._fields, rank, best, strict=True):
        if mine == theirs:
            continue
        criterion = CRITERIA[name]
        if name == "work_lost":
            return (
                f"lost to {winner} on {criterion}: its victims lose less work "
                f"({_fmt(round(rank.work_lost, 3))}s > {_fmt(round(best.work_lost, 3))}s "
                "of run time)"
            )
        if name == "node":
            return f"lost to {winner} on {criterion} (tie on every other criterion)"
        return f"lost to {winner} on {criterion} ({_fmt(mine)} > {_fmt(theirs)})"
    return f"lost to {winner}"


def _fmt(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- the decision ---------------------------------------------------------------------------


def _vetoed_by_the_gate(preemptor: Preemptor, now: float, gate_why: str) -> Decision:
    reason = (
        f"{preemptor.key} is in the gate: {gate_why}; preemption is vetoed until the gate opens"
        if gate_why
        else f"{preemptor.key} is in the gate: its previous preemption is still in flight; "
        "preemption is vetoed until its victims are gone"
    )
    return Decision(preemptor=preemptor, now=now, chosen=None, vetoed_by_gate=True, reason=reason)


def _vetoed(
    ctx: _Context, records: Sequence[NodeRecord], counts: Counts, *, offered: bool
) -> Decision:
    reason = (
        "every offered node was dropped: its victims are protected and no other pods on it "
        "can replace them; preemption vetoed for this cycle"
        if offered
        else "no node offered"
    )
    return Decision(
        preemptor=ctx.preemptor,
        now=ctx.now,
        chosen=None,
        reason=reason,
        nodes=tuple(records),
        counts=counts,
    )


def _chosen(
    ctx: _Context, winner: _NodePlan, records: Sequence[NodeRecord], counts: Counts
) -> Decision:
    record = next(r for r in records if r.node == winner.node)
    evicted = [*winner.victims.values(), *winner.off_node.values()]
    # Victims whose workload another preemption in flight evicts already: recorded once, there.
    counted = sorted(p.uid for p in evicted if p.known and ctx.in_flight(ctx.workload(p)))
    return Decision(
        preemptor=ctx.preemptor,
        now=ctx.now,
        chosen=winner.node,
        # The node's record names the claims it takes, for operators; the decision's reason
        # reaches the preemptor's and the victims' Events, which name no other tenant's pod.
        reason=record.reason.partition(TAKES_THE_CLAIM)[0],
        victims=record.victims,
        off_node=record.off_node,
        pdb_violations=winner.offer.pdb_violations,
        awaited=record.awaited,
        displaced=record.displaced,
        counted=tuple(counted),
        nodes=tuple(records),
        counts=counts,
    )


def _node_record(
    plan: _NodePlan, outcome: NodeOutcome, reason: str, rank: Rank | None
) -> NodeRecord:
    keep = outcome != "dropped"
    max_priority = None
    if rank is not None and math.isfinite(rank.max_priority):
        max_priority = int(rank.max_priority)
    return NodeRecord(
        node=plan.node,
        outcome=outcome,
        reason=reason,
        pdb_violations=plan.offer.pdb_violations,
        victims=tuple(sorted(plan.victims)) if keep else (),
        off_node=tuple(sorted((u, p.node) for u, p in plan.off_node.items())) if keep else (),
        records=tuple(sorted(plan.records.values(), key=lambda r: (not r.offered, r.uid))),
        max_priority=max_priority,
        priority_sum=rank.priority_sum if rank is not None else 0,
        victim_count=rank.victim_count if rank is not None else 0,
        work_lost=rank.work_lost if rank is not None else 0.0,
        awaited=tuple(sorted(plan.awaited)) if keep else (),
        displaced=plan.displaced if keep else (),
    )
