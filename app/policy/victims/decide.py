"""The algorithm: one node and its victims, by the rules of the package docstring."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from app.policy.victims.record import Counts, Decision, NodeRecord, VictimRecord, protection

# --- the algorithm -------------------------------------------------------------------------


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
    _blockers: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    _elastic: dict[str, Protection | None] = field(default_factory=dict)
    _protection: dict[str, Protection] = field(default_factory=dict)
    _fallback: dict[str, WorkloadFacts] = field(default_factory=dict)

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

    def blocker(self, wl: WorkloadFacts) -> tuple[str, str] | None:
        """Why a gang may not be evicted at all: (kind, text), or None when it may."""
        if wl.key in self._blockers:
            return self._blockers[wl.key]
        members = self.members(wl)
        found: tuple[str, str] | None = None
        for m in members:
            if m.shield:  # a gang with a shielded member cannot go as a whole
                found = ("ineligible", f"gang {wl.key}: member {m.key} {m.shield}")
                break
            if m.priority >= self.preemptor.priority:
                found = (
                    "ineligible",
                    (
                        f"gang {wl.key}: member {m.key} has priority {m.priority}, not below the "
                        f"preemptor's {self.preemptor.priority}"
                    ),
                )
                break
        else:
            for m in members:
                prot = self.protection(m)
                if prot.protected:
                    whose = "" if len(members) == 1 else f"gang {wl.key} is protected as a whole: "
                    found = "protected", f"{whose}{m.key} {prot.describe()}"
                    break
        self._blockers[wl.key] = found
        return found

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
    node_uids: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.node_uids = {p.uid for p in (*self.offer.victims, *self.offer.others)}

    def used(self, ctx: _Context, wl: WorkloadFacts) -> int:
        """Evictions of ``wl`` the elastic floor counts: this decision's and those under way."""
        found = self.floor_used.get(wl.key)
        return ctx.floor_start(wl) if found is None else found

    def record(
        self, ctx: _Context, pod: PodFacts, outcome: Outcome, reason: str, offered: bool
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
            offered=offered,
            protection=ctx.protection(pod),
        )


def _sorted_pods(pods: Iterable[PodFacts]) -> list[PodFacts]:
    # Priority first so an elastic floor keeps the lowest-priority victims; UID for determinism.
    unique = {p.uid: p for p in pods}
    return sorted(unique.values(), key=lambda p: (p.priority, p.uid))


def _expand_gang(
    ctx: _Context,
    plan: _NodePlan,
    wl: WorkloadFacts,
    members: Sequence[PodFacts],
    offered: set[str],
    trigger: PodFacts,
    outcome_note: str,
) -> None:
    """Add the gang's other members: on this node to the reply, elsewhere to ``off_node``."""
    plan.gangs.add(wl.key)
    for m in members:
        if m.uid == trigger.uid or m.uid in offered or m.uid in plan.victims:
            continue
        going = ctx.going(m)
        if going is not None:
            # Another preemption evicts it (or it is terminating): never deleted twice.
            if m.node == plan.node and m.uid in plan.node_uids:
                plan.awaited[m.uid] = m
            plan.record(ctx, m, "awaited", f"gang {wl.key}: {going}; not chosen again", False)
            continue
        reason = f"gang {wl.key}: evicted with {trigger.key} ({outcome_note})"
        # Only pods the node's listing holds go in the reply: a UID kube-scheduler does not
        # know on that node fails the whole call. Anything else is left to the executor.
        if m.node == plan.node and m.uid in plan.node_uids:
            plan.victims[m.uid] = m
            plan.extras.append(m)
        else:
            plan.off_node[m.uid] = m
            reason += f"; on {m.node or 'no node'}, deleted by the executor"
        plan.record(ctx, m, "gang-expanded", reason, offered=False)


def _floor_text(wl: WorkloadFacts, used: int) -> str:
    return minruntime.floor_text(wl.key, wl.min_available, wl.running, used)


def _apply_rules_to_offer(ctx: _Context, plan: _NodePlan) -> None:
    """Steps 1-2 on the offered victims: keep, drop (protected/ineligible), expand gangs."""
    offered = {p.uid for p in plan.offer.victims}
    for pod in _sorted_pods(plan.offer.victims):
        going = ctx.going(pod)
        if going is not None:
            plan.awaited[pod.uid] = pod
            plan.record(
                ctx, pod, "awaited", f"{going}: not chosen again; its room counts", offered=True
            )
            continue
        if not pod.known:
            plan.victims[pod.uid] = pod
            plan.record(
                ctx,
                pod,
                "kept",
                "not in runway's pod cache: start unknown, so not protected",
                offered=True,
            )
            continue
        if pod.shield:  # whatever the scheduler offered (issue #26)
            plan.dropped.append(pod)
            plan.record(ctx, pod, "dropped", f"ineligible: {pod.key} {pod.shield}", offered=True)
            continue
        wl = ctx.workload(pod)
        members = ctx.members(wl)
        if wl.elastic:
            prot = ctx.elastic_protection(wl)
            if prot is None:
                plan.victims[pod.uid] = pod
                plan.record(
                    ctx,
                    pod,
                    "kept",
                    f"elastic {wl.key} not protected: {ctx.protection(pod).describe()}",
                    offered=True,
                )
                continue
            used = plan.used(ctx, wl)
            if wl.may_lose(used + 1):
                plan.floor_used[wl.key] = used + 1
                plan.victims[pod.uid] = pod
                plan.record(
                    ctx,
                    pod,
                    "kept",
                    f"{prot.describe()}, but {_floor_text(wl, used + 1)}",
                    offered=True,
                )
            else:
                plan.dropped.append(pod)
                plan.record(
                    ctx,
                    pod,
                    "dropped",
                    f"protected: {prot.describe()}; "
                    f"{_floor_text(wl, used)} — evicting it would break the floor",
                    offered=True,
                )
            continue
        if wl.key in plan.gangs:
            plan.victims[pod.uid] = pod
            plan.record(ctx, pod, "kept", f"gang {wl.key} is evicted as a whole", offered=True)
            continue
        block = ctx.blocker(wl)
        if block is not None:
            kind, text = block
            plan.dropped.append(pod)
            plan.record(ctx, pod, "dropped", f"{kind}: {text}", offered=True)
            continue
        plan.victims[pod.uid] = pod
        note = ctx.protection(pod).describe()
        plan.record(
            ctx,
            pod,
            "kept",
            note
            if len(members) == 1
            else f"{note}; gang {wl.key} of {len(members)} pods goes as a whole",
            offered=True,
        )
        _expand_gang(ctx, plan, wl, members, offered, pod, "offered victim")


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


def _candidate_units(ctx: _Context, plan: _NodePlan) -> list[_Unit]:
    """Units of the node's other pods that may be evicted instead of the dropped victims."""
    taken = set(plan.victims) | set(plan.awaited) | {p.uid for p in plan.dropped}
    units: dict[tuple[str, str], _Unit] = {}
    for pod in _sorted_pods(plan.offer.others):
        if pod.uid in taken or pod.node != plan.node or not pod.known:
            continue
        if ctx.going(pod) is not None:
            continue  # going already: not chosen again
        if pod.priority >= ctx.preemptor.priority or pod.shield:
            continue
        wl = ctx.workload(pod)
        if wl.elastic:
            prot = ctx.elastic_protection(wl)
            if prot is not None and not wl.may_lose(plan.used(ctx, wl) + 1):
                continue
            units["pod", pod.uid] = _Unit((pod,), (pod,), wl, prot is not None, _freed([pod]))
            continue
        if wl.key in plan.gangs or ("gang", wl.key) in units or ctx.blocker(wl) is not None:
            continue
        members = ctx.members(wl)
        on_node = tuple(
            m
            for m in members
            if m.node == plan.node
            and m.uid in plan.node_uids
            and m.uid not in plan.victims
            and ctx.going(m) is None
        )
        if not on_node:
            continue  # nothing of it left here to free
        units["gang", wl.key] = _Unit(tuple(members), on_node, wl, False, _freed(on_node))
    return sorted(units.values(), key=lambda u: u.sort_key(ctx.now))


def _freed(pods: Iterable[PodFacts]) -> Resources:
    return quantity.add_resources(*(dict(p.requests) | {PODS: 1} for p in pods))


def _needed(dropped: Sequence[PodFacts]) -> Resources:
    need = quantity.add_resources(*(p.requests for p in dropped))
    need = {k: v for k, v in need.items() if v > 0}
    # Nothing measurable (best-effort pods): the scheduler still needed their pod slots.
    return need or {PODS: len(dropped)}


def _reselect(ctx: _Context, plan: _NodePlan) -> str | None:
    """Step 3: replace dropped victims. Returns why the node must be dropped, or None."""
    need = _needed(plan.dropped)
    from_extras = _freed(plan.extras)
    remaining = {k: v - from_extras.get(k, 0) for k, v in need.items()}
    remaining = {k: v for k, v in remaining.items() if v > 0}
    dropped_keys = ", ".join(p.key for p in plan.dropped)
    if not remaining:
        return None
    chosen: list[_Unit] = []
    floor_used = dict(plan.floor_used)
    total: Resources = {}
    for unit in _candidate_units(ctx, plan):
        if quantity.covers(total, remaining):
            break
        if not any(unit.freed.get(k, 0) > 0 and total.get(k, 0) < v for k, v in remaining.items()):
            continue  # frees nothing still missing
        key = unit.workload.key
        if unit.elastic_protected:
            used = floor_used.get(key, ctx.floor_start(unit.workload))
            if not unit.workload.may_lose(used + 1):
                continue
            floor_used[key] = used + 1
        chosen.append(unit)
        total = quantity.add_resources(total, unit.freed)
    if not quantity.covers(total, remaining):
        return (
            f"{len(plan.dropped)} needed victim(s) dropped ({dropped_keys}); the node's other "
            f"pods of priority below {ctx.preemptor.priority} that are not protected free only "
            f"{quantity.format_resources(total)} of the {quantity.format_resources(remaining)} "
            "still needed"
        )
    # Reprieve: give back units (last chosen first) that coverage does not need.
    for unit in list(reversed(chosen)):
        rest = quantity.add_resources(*(u.freed for u in chosen if u is not unit))
        if quantity.covers(rest, remaining):
            chosen.remove(unit)
            if unit.elastic_protected:
                floor_used[unit.workload.key] -= 1
    plan.floor_used = floor_used
    offered = {p.uid for p in plan.offer.victims}
    for unit in chosen:
        wl = unit.workload
        trigger = unit.on_node[0] if unit.on_node else unit.pods[0]
        why = f"replaces dropped {dropped_keys}; frees {quantity.format_resources(unit.freed)}"
        if unit.elastic_protected:
            why += f"; {_floor_text(wl, floor_used.get(wl.key, ctx.floor_start(wl)))}"
        for pod in unit.on_node:
            plan.victims[pod.uid] = pod
            plan.record(ctx, pod, "reselected", why, offered=False)
        if not wl.elastic:
            _expand_gang(
                ctx, plan, wl, unit.pods, offered | set(plan.victims), trigger, "re-selected"
            )
    return None


_CRITERIA = (
    "claims of lower-priority preemptions taken",
    "PDB violations",
    "highest victim priority",
    "victim priority sum",
    "victim count",
    "work lost (sum of the victims' run times)",
    "node name",
)


def work_lost(pods: Iterable[PodFacts], now: float) -> float:
    """Work lost by evicting ``pods`` (DESIGN §3.5, step 5): the sum of the time each pod has run
    itself (``running_since``, not its workload's start); a pod with no known start (or a start
    in the future) counts 0."""
    return sum(max(now - p.running_since, 0.0) for p in pods if p.running_since is not None)


Rank = tuple[int, int, float, int, int, float, str]
"""A node's place in the choice (``_CRITERIA``), smaller wins."""


def _rank(plan: _NodePlan, now: float) -> Rank:
    # The pods this preemption evicts itself: awaited ones go anyway, whichever node wins.
    # Taking a lower-priority claim costs that preemptor a retry: the last resort.
    pods = list(plan.victims.values()) + list(plan.off_node.values())
    max_prio = max((p.priority for p in pods), default=-math.inf)
    return (
        len(plan.displaced),
        plan.offer.pdb_violations,
        max_prio,
        sum(p.priority for p in pods),
        len(pods),
        work_lost(pods, now),
        plan.node,
    )


def _why_lost(rank: tuple[Any, ...], best: tuple[Any, ...], winner: str) -> str:
    for i, (mine, theirs) in enumerate(zip(rank, best, strict=True)):
        if mine != theirs:
            if i == 5:
                return (
                    f"lost to {winner} on {_CRITERIA[i]}: its victims lose less work "
                    f"({_fmt(round(mine, 3))}s > {_fmt(round(theirs, 3))}s of run time)"
                )
            if i == 6:
                return f"lost to {winner} on {_CRITERIA[i]} (tie on every other criterion)"
            return f"lost to {winner} on {_CRITERIA[i]} ({_fmt(mine)} > {_fmt(theirs)})"
    return f"lost to {winner}"


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


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
        return Decision(
            preemptor=preemptor,
            now=now,
            chosen=None,
            vetoed_by_gate=True,
            reason=(
                f"{preemptor.key} is in the gate: {gate_why}; preemption is vetoed until the "
                "gate opens"
                if gate_why
                else f"{preemptor.key} is in the gate: its previous preemption is still in "
                "flight; preemption is vetoed until its victims are gone"
            ),
        )
    # Pods seen in the offer that claim a workload join its members (the cache's view of the
    # workload may lag). A UID is one pod, so which duplicate wins does not matter.
    seen: dict[str, dict[str, PodFacts]] = {}
    for offer in offers.values():
        for pods in (offer.victims, offer.others):
            for pod in pods:
                if pod.known:
                    seen.setdefault(pod.workload_key, {}).setdefault(pod.uid, pod)
    ctx = _Context(
        preemptor, now, workloads, {k: list(v.values()) for k, v in seen.items()}, reserved or {}
    )
    by_node: dict[str, list[Claim]] = {}
    for claim in sorted(claims, key=lambda c: (-c.priority, c.preemptor, c.preemptor_uid)):
        if claim.preemptor_uid != preemptor.uid:
            by_node.setdefault(claim.node, []).append(claim)
    plans: list[_NodePlan] = []
    dropped_nodes: list[tuple[_NodePlan, str]] = []
    for node in sorted(offers):
        plan = _NodePlan(node=node, offer=offers[node])
        held = by_node.get(node, [])
        holder = next((c for c in held if c.priority >= preemptor.priority), None)
        if holder is not None:
            dropped_nodes.append(
                (
                    plan,
                    f"claimed by the preemption in flight of {holder.preemptor} (priority "
                    f"{holder.priority}, not below {preemptor.priority}): not offered twice",
                )
            )
            continue
        plan.displaced = tuple(held)
        _apply_rules_to_offer(ctx, plan)
        failure = _reselect(ctx, plan) if plan.dropped else None
        if failure is not None:
            dropped_nodes.append((plan, failure))
        else:
            plans.append(plan)

    ranks = {plan.node: _rank(plan, now) for plan in plans}
    winner = min(plans, key=lambda p: ranks[p.node]) if plans else None
    records: list[NodeRecord] = []
    chosen_reason = ""
    for plan in plans:
        if plan is winner:
            outcome: NodeOutcome = "chosen"
            why = chosen_reason = (
                "chosen: " + ", ".join(_CRITERIA[:6]) + " compared in that order"
                if len(plans) > 1
                else "chosen: the only node left after the rules"
            )
            if plan.displaced:
                # Named for operators (the node's record) only: the decision's reason reaches
                # the preemptor's and the victims' Events, which name no other tenant's pod.
                why += "; takes the claim of the lower-priority preemption of " + ", ".join(
                    f"{c.preemptor} (priority {c.priority})" for c in plan.displaced
                )
        else:
            assert winner is not None
            outcome, why = "lost", _why_lost(ranks[plan.node], ranks[winner.node], winner.node)
        records.append(_node_record(plan, outcome, why, ranks[plan.node]))
    for plan, failure in dropped_nodes:
        records.append(_node_record(plan, "dropped", failure, None))
    records.sort(key=lambda r: r.node)
    counts = _counts(records, len(dropped_nodes))
    if winner is None:
        reason = (
            "no node offered"
            if not offers
            else "every offered node was dropped: its victims are protected and no other "
            "pods on it can replace them; preemption vetoed for this cycle"
        )
        return Decision(
            preemptor=preemptor,
            now=now,
            chosen=None,
            reason=reason,
            nodes=tuple(records),
            counts=counts,
        )
    chosen_record = next(r for r in records if r.node == winner.node)
    evicted = [*winner.victims.values(), *winner.off_node.values()]
    return Decision(
        preemptor=preemptor,
        now=now,
        chosen=winner.node,
        reason=chosen_reason,
        victims=chosen_record.victims,
        off_node=chosen_record.off_node,
        pdb_violations=winner.offer.pdb_violations,
        awaited=chosen_record.awaited,
        displaced=chosen_record.displaced,
        counted=tuple(sorted(p.uid for p in evicted if p.known and ctx.in_flight(ctx.workload(p)))),
        nodes=tuple(records),
        counts=counts,
    )


def _node_record(
    plan: _NodePlan,
    outcome: NodeOutcome,
    reason: str,
    rank: Rank | None,
) -> NodeRecord:
    keep = outcome != "dropped"
    victims = tuple(sorted(plan.victims)) if keep else ()
    off_node = tuple(sorted((u, p.node) for u, p in plan.off_node.items())) if keep else ()
    max_prio = None
    if rank is not None:
        max_prio = int(rank[2]) if math.isfinite(rank[2]) else None
    return NodeRecord(
        node=plan.node,
        outcome=outcome,
        reason=reason,
        pdb_violations=plan.offer.pdb_violations,
        victims=victims,
        off_node=off_node,
        records=tuple(sorted(plan.records.values(), key=lambda r: (not r.offered, r.uid))),
        max_priority=max_prio,
        priority_sum=rank[3] if rank is not None else 0,
        victim_count=rank[4] if rank is not None else 0,
        work_lost=rank[5] if rank is not None else 0.0,
        awaited=tuple(sorted(plan.awaited)) if keep else (),
        displaced=plan.displaced if keep else (),
    )


def _counts(records: Sequence[NodeRecord], nodes_dropped: int) -> Counts:
    buckets: dict[str, dict[str, int]] = {
        k: {}
        for k in (
            "kept",
            "protected",
            "budget",
            "ineligible",
            "reselected",
            "gang_expanded",
            "awaited",
        )
    }
    for node in records:
        for rec in node.records:
            if rec.outcome == "kept":
                bucket = "kept"
            elif rec.outcome == "dropped":
                if rec.reason.startswith("ineligible"):
                    bucket = "ineligible"
                elif rec.protection.by_budget_only:
                    bucket = "budget"
                else:
                    bucket = "protected"
            elif rec.outcome == "reselected":
                bucket = "reselected"
            elif rec.outcome == "awaited":
                bucket = "awaited"
            else:
                bucket = "gang_expanded"
            kind = rec.protection.action
            buckets[bucket][kind] = buckets[bucket].get(kind, 0) + 1
    return Counts(
        kept=buckets["kept"],
        protected=buckets["protected"],
        ineligible=buckets["ineligible"],
        reselected=buckets["reselected"],
        gang_expanded=buckets["gang_expanded"],
        nodes_dropped=nodes_dropped,
        budget=buckets["budget"],
        awaited=buckets["awaited"],
    )
