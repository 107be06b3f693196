"""The gate book: a released gate's annotation, still on the cached pod until the watch shows its
removal, never holds the preemptor again; a newer gate on the same pod does."""

from __future__ import annotations

from app.model import Pod
from app.model.gate import GATE_ANNOTATION, GateEntry, PodRef, encode_entry
from app.state.cache import ClusterCache
from app.state.gate import GateBook
from tests.builders import pod as build_pod
from tests.builders import raw_pod

NOW = 1_800_000_000.0
P = PodRef("uid-p", "ns", "high")
V = (PodRef("uid-v", "ns", "low"),)


def entry(since: float) -> GateEntry:
    return GateEntry(P, "n1", V, since=since, deadline=since + 60, holder="me")


def preemptor(mirrored: GateEntry | None) -> Pod:
    annotations = {GATE_ANNOTATION: encode_entry(mirrored)} if mirrored else {}
    return build_pod(raw_pod(P.name, namespace="ns", uid=P.uid, annotations=annotations, node=None))


def book_with_victim() -> tuple[GateBook, ClusterCache]:
    cache = ClusterCache()
    victim = build_pod(raw_pod(V[0].name, namespace="ns", uid=V[0].uid, node="n1"))
    cache.replace_pods([victim, preemptor(None)])
    return GateBook(cache), cache


def test_a_released_gate_whose_annotation_is_still_cached_does_not_hold() -> None:
    book, cache = book_with_victim()
    held = entry(NOW)
    book.hold(held)
    cache.upsert_pod(preemptor(held))  # runway's own annotation write, seen by the watch
    book.finish(P.uid, ok=False)
    book.release(P.uid)
    # The nomination clear (a status write) arrives before the annotation removal: the cached
    # pod still carries the released gate.
    stale = preemptor(held)
    cache.upsert_pod(stale)
    assert book.held(stale, NOW + 1) is None
    assert book.lookup(stale) is None
    assert book.mirrored() == []
    assert book.claims(NOW + 1) == ()


def test_a_newer_gate_on_the_same_pod_holds_after_a_release() -> None:
    book, cache = book_with_victim()
    book.hold(entry(NOW))
    book.finish(P.uid, ok=False)
    book.release(P.uid)
    # Another replica (or this one after a restart) holds the retried preemptor later.
    newer = preemptor(entry(NOW + 5))
    cache.upsert_pod(newer)
    found = book.held(newer, NOW + 6)
    assert found is not None and found[0].since == NOW + 5
    assert [e.since for e in book.mirrored()] == [NOW + 5]


def test_a_released_mirrored_gate_of_another_replica_stays_released() -> None:
    book, cache = book_with_victim()
    theirs = preemptor(entry(NOW))
    cache.upsert_pod(theirs)
    assert book.held(theirs, NOW + 1) is not None
    book.release(P.uid)
    cache.upsert_pod(theirs)  # an unrelated update before the removal is seen
    assert book.held(theirs, NOW + 1) is None


def test_a_gate_mirrored_by_another_replica_claims_its_node_here() -> None:
    # Replicas share nothing but the cluster: a preemption decided on another replica reaches
    # this one as the annotation on its preemptor, and its claim must hold here too.
    book, cache = book_with_victim()
    assert book.claims(NOW + 1) == ()
    cache.upsert_pod(preemptor(GateEntry(P, "n1", V, since=NOW, deadline=NOW + 60, holder="b")))
    (claim,) = book.claims(NOW + 1)
    assert (claim.node, claim.preemptor_uid, claim.until) == ("n1", P.uid, NOW + 60)
    assert book.claims(NOW + 60) == ()  # it ends with the gate's bound
