"""Invariants of the victim policy over random clusters (hypothesis)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import TypeVar

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.policy.claims import Claim
from app.policy.quantity import add_resources, covers
from app.policy.victims import (
    Decision,
    NodeOffer,
    PodFacts,
    Preemptor,
    Rule,
    WorkloadFacts,
    decide,
    protection,
)

NOW = 50_000.0
P = Preemptor(uid="p", key="ns/p", priority=1000, queue="q0", workload="ns/p")
NODES = ("n0", "n1", "n2", "n3")
T = TypeVar("T")


@dataclass
class Cluster:
    offers: dict[str, NodeOffer]
    workloads: dict[str, WorkloadFacts]
    pods: dict[str, PodFacts]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True))
    pods: dict[str, PodFacts] = {}
    workloads: dict[str, WorkloadFacts] = {}
    for w in range(draw(st.integers(1, 6))):
        key = f"ns/w{w}"
        size = draw(st.integers(1, 4))
        priority = draw(st.sampled_from([0, 50, 100, 999, 1000, 2000]))
        queue = draw(st.sampled_from(["q0", "q1", "q2"]))
        ago = draw(st.sampled_from([None, 10.0, 299.5, 300.0, 700.0, 5000.0]))
        rule = draw(st.one_of(st.none(), st.sampled_from([0.0, 300.0, 1000.0])))
        members = []
        for i in range(size):
            uid = f"w{w}-{i}"
            facts = PodFacts(
                uid=uid,
                key=f"ns/{uid}",
                node=draw(st.one_of(st.sampled_from(nodes), st.none())),
                # Mostly one priority per workload, sometimes a stray member
                priority=draw(st.sampled_from([priority, priority, priority, 1000, 10])),
                queue=queue,
                workload=key,
                start=None if ago is None else NOW - ago,
                resolution=None
                if rule is None
                else Rule(
                    "preempt" if queue == P.queue else "reclaim", rule, f"{queue} sets {rule}s"
                ),
                requests={
                    k: v
                    for k, v in {
                        "cpu": draw(st.sampled_from([0, 500, 1000, 2000])),
                        "memory": draw(st.sampled_from([0, 1 << 30])),
                    }.items()
                    if v
                },
            )
            members.append(facts)
            pods[uid] = facts
        running = sum(1 for m in members if m.node) - draw(st.integers(0, 1))
        workloads[key] = WorkloadFacts(
            key=key,
            min_available=draw(st.integers(1, size)),
            running=max(0, running),
            pods=tuple(members),
        )
    offers: dict[str, NodeOffer] = {}
    for node in nodes:
        on_node = [p for p in pods.values() if p.node == node]
        eligible = [p for p in on_node if p.priority < P.priority]
        victims = draw(
            st.lists(st.sampled_from(eligible), min_size=1, unique_by=lambda p: p.uid)
            if eligible
            else st.just([])
        )
        if draw(st.booleans()) and draw(st.booleans()):
            victims.append(PodFacts.unknown(f"ghost-{node}", node))
        taken = {v.uid for v in victims}
        others = [p for p in on_node if p.uid not in taken]
        offers[node] = NodeOffer(victims, draw(st.integers(0, 2)), others)
    return Cluster(offers, workloads, pods)


def run(c: Cluster) -> Decision:
    return decide(P, c.offers, c.workloads, NOW)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_reply_is_one_offered_node_with_its_own_pods(c: Cluster) -> None:
    d = run(c)
    reply = d.reply()
    assert len(reply) <= 1
    assert set(reply) <= set(c.offers)
    for node, (uids, pdb) in reply.items():
        offer = c.offers[node]
        on_node = {p.uid for p in list(offer.victims) + list(offer.others)}
        assert set(uids) <= on_node
        assert len(uids) == len(set(uids))
        assert pdb == offer.pdb_violations
    for uid, elsewhere in d.off_node:
        assert elsewhere != d.chosen and uid not in d.victims
    json.dumps(d.to_dict(), allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_chosen_node_frees_at_least_what_the_scheduler_asked_for(c: Cluster) -> None:
    """With the preemptor's requests unknown (``P.requests`` None), re-selection's last resort:
    what the offered victims held. (With them known it frees what the preemptor lacks:
    ``test_reselection_makes_the_preemptor_fit_and_finds_a_fit_when_one_exists``.)"""
    assert P.requests is None
    d = run(c)
    if d.chosen is None:
        return
    offer = c.offers[d.chosen]
    by_uid = {p.uid: p for p in list(offer.victims) + list(offer.others)}
    freed = add_resources(*(by_uid[u].requests for u in d.victims))
    assert covers(freed, add_resources(*(v.requests for v in offer.victims)))


def _evicted(d: Decision) -> set[str]:
    return {uid for uid, _ in d.all_victims()}


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_no_protected_victim_and_elastic_floor_holds(c: Cluster) -> None:
    d = run(c)
    evicted = _evicted(d)
    for wl in c.workloads.values():
        gone = [p for p in wl.pods if p.uid in evicted]
        if not gone:
            continue
        protected = [p for p in wl.pods if protection(P, p, NOW).protected]
        if wl.elastic:
            if protected:
                assert len(gone) <= max(0, wl.running - wl.min_available)
        else:
            assert not protected, f"protected gang {wl.key} evicted"
            assert {p.uid for p in wl.pods} <= evicted, f"gang {wl.key} evicted partly"
            assert all(p.priority < P.priority for p in wl.pods)
    for uid in evicted:
        facts = c.pods.get(uid)
        if facts is not None:
            assert facts.priority < P.priority


@settings(max_examples=100, deadline=None)
@given(clusters(), st.randoms(use_true_random=False))
def test_answer_does_not_depend_on_input_order(c: Cluster, rnd: random.Random) -> None:
    def shuffled(items: list[T]) -> list[T]:
        out = list(items)
        rnd.shuffle(out)
        return out

    offers = {
        node: NodeOffer(shuffled(list(o.victims)), o.pdb_violations, shuffled(list(o.others)))
        for node, o in shuffled(list(c.offers.items()))
    }
    workloads = {
        key: WorkloadFacts(w.key, w.min_available, w.running, tuple(shuffled(list(w.pods))))
        for key, w in shuffled(list(c.workloads.items()))
    }
    again = decide(P, offers, workloads, NOW)
    assert again.to_dict() == run(c).to_dict()


@settings(max_examples=100, deadline=None)
@given(clusters())
def test_gate_always_vetoes(c: Cluster) -> None:
    d = decide(P, c.offers, c.workloads, NOW, gated=True)
    assert d.reply() == {} and d.all_victims() == ()


@settings(max_examples=150, deadline=None)
@given(clusters(), st.data())
def test_a_shielded_pod_is_never_a_victim(c: Cluster, data: st.DataObject) -> None:
    """Whatever the scheduler offers (issue #26): shield any subset of the pods."""
    chosen = data.draw(st.sets(st.sampled_from(sorted(c.pods))))

    def mark(p: PodFacts) -> PodFacts:
        return replace(p, shield="is shielded") if p.uid in chosen else p

    offers = {
        n: NodeOffer([mark(v) for v in o.victims], o.pdb_violations, [mark(p) for p in o.others])
        for n, o in c.offers.items()
    }
    workloads = {
        k: WorkloadFacts(w.key, w.min_available, w.running, tuple(mark(p) for p in w.pods))
        for k, w in c.workloads.items()
    }
    d = decide(P, offers, workloads, NOW)
    evicted = _evicted(d)
    assert not evicted & chosen
    for wl in c.workloads.values():  # a gang with a shielded member stays whole
        uids = {p.uid for p in wl.pods}
        if not wl.elastic and uids & chosen:
            assert not uids & evicted


# --- many preemptions at once (issue #27): one victim, one preemption; priority on claims -----


def _claim(node: str, who: str, priority: int) -> Claim:
    return Claim(node=node, preemptor_uid=who, preemptor=f"ns/{who}", priority=priority, room=None)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.data())
def test_a_pod_reserved_by_a_preemption_in_flight_is_never_chosen_again(
    c: Cluster, data: st.DataObject
) -> None:
    uids = sorted(c.pods)
    reserved = {
        u: "ns/other" for u in data.draw(st.lists(st.sampled_from(uids), unique=True), "reserved")
    }
    claims = [
        _claim(node, f"c-{node}", data.draw(st.sampled_from([10, 999, 1000, 2000]), node))
        for node in data.draw(st.lists(st.sampled_from(sorted(c.offers)), unique=True), "claimed")
    ]
    d = decide(P, c.offers, c.workloads, NOW, claims=claims, reserved=reserved)
    evicted = _evicted(d)
    assert not evicted & set(reserved), "a reserved victim chosen a second time"
    assert set(d.awaited) <= set(reserved)
    assert not set(d.awaited) & evicted
    if d.chosen is None:
        return
    on_chosen = [cl for cl in claims if cl.node == d.chosen]
    # Equal or higher priority never yields its node; a lower one is taken, and said so.
    assert all(cl.priority < P.priority for cl in on_chosen)
    assert set(d.displaced) == set(on_chosen)
    assert set(d.counted) <= evicted
    # A gang goes as a whole: whatever of it is not already going goes now.
    for wl in c.workloads.values():
        gone = {p.uid for p in wl.pods if p.uid in evicted}
        if gone and not wl.elastic:
            assert {p.uid for p in wl.pods} - set(reserved) <= evicted
    json.dumps(d.to_dict(), allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.sampled_from([500, 1000, 1500]))
def test_two_preemptors_in_a_row_never_share_a_victim(c: Cluster, second_priority: int) -> None:
    # The first preemption's victims are reserved and its node claimed while it is in flight.
    first = decide(P, c.offers, c.workloads, NOW)
    if first.chosen is None:
        return
    reserved = {uid: P.key for uid, _ in first.all_victims()}
    claims = [_claim(first.chosen, P.uid, P.priority)]
    p2 = Preemptor(uid="p2", key="ns/p2", priority=second_priority, queue="q0", workload="ns/p2")
    second = decide(p2, c.offers, c.workloads, NOW, claims=claims, reserved=reserved)
    assert not _evicted(first) & _evicted(second)
    if second.chosen == first.chosen:
        assert second_priority > P.priority  # only a higher priority takes the claim
        assert [cl.preemptor_uid for cl in second.displaced] == [P.uid]
    else:
        assert second.displaced == ()


# --- re-selection counts what the preemptor lacks (issue #35) ---------------------------------

GI = 1 << 30
_PROTECTED = Rule("reclaim", 600.0, "q1 sets 600s")


@dataclass
class OneNode:
    """A node kube-scheduler offers, its pods, and the victims its dry run chose."""

    preemptor: Preemptor
    allocatable: dict[str, int]
    nominated: dict[str, int]
    pods: list[PodFacts]
    offered: list[PodFacts]

    def fits(self, gone: set[str]) -> bool:
        """Whether the preemptor fits once ``gone`` have left (kube-scheduler's count: the
        pods that stay and the nominated ones hold their requests and a pod slot each)."""
        staying = [p for p in self.pods if p.uid not in gone]
        used = add_resources(*(p.requests for p in staying), self.nominated)
        used["pods"] = len(staying) + self.nominated.get("pods", 0)
        needs = dict(self.preemptor.requests or {}) | {"pods": 1}
        return all(self.allocatable.get(k, 0) - used.get(k, 0) >= v for k, v in needs.items())

    def eligible(self, p: PodFacts) -> bool:
        """May be a victim: lower priority, not shielded, not protected."""
        return p.priority < P.priority and not p.shield and not protection(P, p, NOW).protected


@st.composite
def offered_nodes(draw: st.DrawFn) -> OneNode:
    allocatable = {
        "cpu": draw(st.sampled_from([2000, 4000, 8000])),
        "memory": draw(st.sampled_from([4 * GI, 8 * GI])),
        "pods": draw(st.sampled_from([3, 5, 110])),
    }
    room = dict(allocatable)

    def take(requests: dict[str, int]) -> bool:
        """Place ``requests`` (and a pod slot) if they fit what is left: a real node."""
        ask = requests | {"pods": 1}
        if any(room[k] < v for k, v in ask.items()):
            return False
        for k, v in ask.items():
            room[k] -= v
        return True

    nominated: dict[str, int] = {}
    if draw(st.booleans()):
        ask = {"cpu": draw(st.sampled_from([250, 1000])), "memory": draw(st.sampled_from([0, GI]))}
        if take(ask):
            nominated = {k: v for k, v in ask.items() if v} | {"pods": 1}
    pods: list[PodFacts] = []
    for i in range(draw(st.integers(1, 7))):
        requests = {
            k: v
            for k, v in {
                "cpu": draw(st.sampled_from([0, 250, 500, 1000, 2000])),
                "memory": draw(st.sampled_from([0, GI // 4, GI, 2 * GI])),
            }.items()
            if v
        }
        protected = draw(st.booleans()) and draw(st.booleans())
        shield = "is in protected namespace kube-system" if draw(st.integers(0, 3)) == 0 else ""
        if not take(requests):
            continue
        pods.append(
            PodFacts(
                uid=f"p{i}",
                key=f"ns/p{i}",
                node="n0",
                priority=draw(st.sampled_from([0, 10, 100, 999, 1000, 2000])),
                queue="q1",
                start=NOW - 10 if protected else None,
                resolution=_PROTECTED if protected else None,
                requests=requests,
                shield=shield,
            )
        )
    requests = {
        k: v
        for k, v in {
            "cpu": draw(st.sampled_from([0, 500, 1000, 2000, 4000])),
            "memory": draw(st.sampled_from([0, GI // 2, 2 * GI])),
        }.items()
        if v
    }
    node = OneNode(replace(P, requests=requests), allocatable, nominated, pods, [])
    lower = {p.uid for p in pods if p.priority < P.priority}
    # kube-scheduler preempts only where the pod does not fit, and where removing every
    # lower-priority pod makes it fit; it knows nothing of runway's shield or protection.
    assume(not node.fits(set()) and node.fits(lower))
    victims = set(lower)
    for p in sorted(pods, key=lambda p: (-p.priority, p.uid)):  # reprieve the highest first
        if p.uid in victims and node.fits(victims - {p.uid}):
            victims.discard(p.uid)
    node.offered = [p for p in pods if p.uid in victims]
    return node


def _decide_one(node: OneNode, allocatable_known: bool) -> Decision:
    offer = NodeOffer(
        node.offered,
        others=[p for p in node.pods if p not in node.offered],
        allocatable=node.allocatable if allocatable_known else None,
        nominated=node.nominated if allocatable_known else {},
    )
    return decide(node.preemptor, {"n0": offer}, {}, NOW)


@settings(max_examples=300, deadline=None)
@given(offered_nodes(), st.booleans())
def test_reselection_makes_the_preemptor_fit_and_finds_a_fit_when_one_exists(
    node: OneNode, allocatable_known: bool
) -> None:
    d = _decide_one(node, allocatable_known)
    by_uid = {p.uid: p for p in node.pods}
    chosen = set(d.victims)
    # Never a shielded, protected or higher-priority pod, whatever was offered.
    assert all(node.eligible(by_uid[u]) for u in chosen)
    if d.chosen is not None:
        # The victims make room for the preemptor (with the node's allocatable or without:
        # then bounded by what kube-scheduler's dry run showed is enough).
        assert node.fits(chosen), d.to_dict()
    eligible = {p.uid for p in node.pods if node.eligible(p)}
    if allocatable_known and node.fits(eligible):
        # Some set of evictable pods makes it fit: runway finds one (not the refused
        # victims' own requests, which the preemptor may not even ask for).
        assert d.chosen == "n0", d.to_dict()
