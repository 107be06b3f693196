"""The gate book: gates mirrored on WorkloadRecords (``set_mirrored``) hold the preemptor on
every replica, but only as far as the cache confirms them (``trusted``); a released gate whose
mirror is still in the store never holds again; a newer gate on the same pod does; a gate
annotation a tenant writes on its pod is never read."""

from __future__ import annotations

from dataclasses import replace

from app.model import Pod
from app.model.gate import GATE_ANNOTATION, GateEntry, PodRef
from app.state.cache import ClusterCache
from app.state.gate import GateBook
from tests.builders import cluster_cache, raw_pod
from tests.builders import pod as build_pod

NOW = 1_800_000_000.0
P = PodRef("uid-p", "ns", "high")
V = (PodRef("uid-v", "ns", "low"),)


def entry(since: float, **kw: object) -> GateEntry:
    return replace(GateEntry(P, "n1", V, since=since, deadline=since + 60, holder="me"), **kw)


def preemptor(annotations: dict[str, str] | None = None, priority: int = 0) -> Pod:
    raw = raw_pod(P.name, namespace="ns", uid=P.uid, annotations=annotations or {}, node=None)
    raw["spec"]["priority"] = priority
    return build_pod(raw)


def book_with_victim(priority: int = 0) -> tuple[GateBook, ClusterCache]:
    cache = cluster_cache()
    victim = build_pod(raw_pod(V[0].name, namespace="ns", uid=V[0].uid, node="n1"))
    cache.replace_pods([victim, preemptor(priority=priority)])
    return GateBook(cache, gate_bound_s=60), cache


def test_a_released_gate_whose_mirror_is_still_in_the_store_does_not_hold() -> None:
    book, _ = book_with_victim()
    held = entry(NOW)
    book.hold(held)
    book.set_mirrored(P.uid, held)  # runway's own record write, seen by the watch
    book.finish(P.uid, ok=False)
    book.release(P.uid)
    # The record's update (mirror removed) arrives after a re-delivery of the old version.
    book.set_mirrored(P.uid, held)
    pod = preemptor()
    assert book.held(pod, NOW + 1) is None
    assert book.lookup(pod) is None
    assert book.mirrored() == []
    assert book.claims(NOW + 1) == ()


def test_a_newer_gate_on_the_same_pod_holds_after_a_release() -> None:
    book, _ = book_with_victim()
    book.hold(entry(NOW))
    book.finish(P.uid, ok=False)
    book.release(P.uid)
    # Another replica (or this one after a restart) holds the retried preemptor later.
    book.set_mirrored(P.uid, entry(NOW + 5))
    found = book.held(preemptor(), NOW + 6)
    assert found is not None and found[0].since == NOW + 5
    assert [e.since for e in book.mirrored()] == [NOW + 5]


def test_a_released_mirrored_gate_of_another_replica_stays_released() -> None:
    book, _ = book_with_victim()
    book.set_mirrored(P.uid, entry(NOW))
    assert book.held(preemptor(), NOW + 1) is not None
    book.release(P.uid)
    book.set_mirrored(P.uid, entry(NOW))  # an unrelated update before the removal is seen
    assert book.held(preemptor(), NOW + 1) is None


def test_a_gate_annotation_on_the_pod_is_never_read() -> None:
    book, cache = book_with_victim()
    forged = '{"node":"n1","victims":[["uid-v","ns","low"]],"since":0,"deadline":1e12}'
    cache.upsert_pod(preemptor({GATE_ANNOTATION: forged}))
    assert book.held(preemptor({GATE_ANNOTATION: forged}), NOW) is None
    assert book.mirrored() == [] and book.claims(NOW) == ()


def test_a_mirrored_entry_takes_priority_from_the_cache_and_its_bound_is_capped() -> None:
    book, _ = book_with_victim(priority=10)
    book.set_mirrored(P.uid, entry(NOW, priority=10**12, deadline=NOW + 10 * 365 * 86400))
    (mirrored,) = book.mirrored()
    assert mirrored.priority == 10
    assert mirrored.deadline == NOW + 60
    (claim,) = book.claims(NOW + 1)
    assert claim.priority == 10 and claim.until == NOW + 60
    assert book.claims(NOW + 61) == ()


def test_a_mirrored_entry_whose_preemptor_the_cache_does_not_confirm_holds_nothing() -> None:
    book, cache = book_with_victim()
    elsewhere = replace(entry(NOW), preemptor=PodRef(P.uid, "other-ns", P.name))
    book.set_mirrored(P.uid, elsewhere)
    assert book.mirrored() == [] and book.claims(NOW) == ()
    stranger = replace(entry(NOW), preemptor=PodRef("uid-unknown", "ns", "ghost"))
    book.set_mirrored("uid-unknown", stranger)
    assert book.mirrored() == []
    assert cache.pod("uid-unknown") is None


# --- many preemptions at once (issue #27) ----------------------------------------------------


def test_reserved_names_the_victims_of_every_gate_still_holding() -> None:
    book, _ = book_with_victim()
    assert book.reserved(NOW) == {}
    book.hold(entry(NOW))
    assert book.reserved(NOW + 1) == {V[0].uid: P.key}
    assert book.reserved(NOW + 1, besides=P.uid) == {}  # its own preemption left out
    assert book.reserved(NOW + 61) == {}  # past the gate's bound
    book.finish(P.uid, ok=False, now=NOW + 1)
    assert book.reserved(NOW + 2) == {}  # a failed preemption backing off reserves nothing


def test_reserved_counts_a_gate_mirrored_by_another_replica() -> None:
    book, _ = book_with_victim()
    book.set_mirrored(P.uid, entry(NOW))  # on the preemptor's WorkloadRecord
    assert book.reserved(NOW + 1) == {V[0].uid: P.key}


def test_a_displaced_gate_opens_and_its_claim_ends() -> None:
    book, _ = book_with_victim()
    pokes: list[int] = []
    book.listeners.append(lambda: pokes.append(1))
    held = entry(NOW)
    book.hold(held)
    assert len(book.claims(NOW + 1)) == 1
    why = "its claim on node n1 was taken by the preemption of ns/higher (priority 9)"
    assert book.displace(P.uid, why)
    assert pokes  # the gate keeper is told: it releases the gate at once
    check = book.check(held, NOW + 1)
    assert check.open and check.why == why
    assert book.claims(NOW + 1) == () and book.reserved(NOW + 1) == {}
    assert book.displaced(P.uid) == why
    book.release(P.uid)
    assert book.displaced(P.uid) == why  # its task, still running, must not nominate
    book.hold(entry(NOW + 5))  # a preemption of its own later
    assert book.displaced(P.uid) is None
    assert not book.displace("uid-nobody", why)
