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
    book, cache = book_with_victim()
    cache.upsert_pod(preemptor(entry(NOW)))
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
