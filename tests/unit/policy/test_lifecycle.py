"""A workload's life facts over pod churn (DESIGN §2.3, ``app.policy.lifecycle``): tables for the
rules, hypothesis for the invariants — created never changes, started only moves on a full
eviction, admitted is the first bind since the last full eviction."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.lifecycle import EMPTY, Life
from app.model.pod import ObjectMeta, Pod, PodCondition, PodSpec, PodStatus
from app.model.timestamps import format_time
from app.policy.lifecycle import facts_of, life_to_write, observation, observe

T0 = 1_700_000_000.0
MIN_AVAILABLE = "runway.dev/min-available"


def pod(
    name: str,
    *,
    created: float = T0,
    bound_at: float | None = None,
    phase: str | None = None,
    deleting: bool = False,
    min_available: int | None = None,
) -> Pod:
    conditions = None
    if bound_at is not None:
        conditions = [PodCondition("PodScheduled", "True", format_time(bound_at))]
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="ns",
            uid=f"uid-{name}",
            creationTimestamp=format_time(created),
            deletionTimestamp=format_time(T0) if deleting else None,
            annotations=None if min_available is None else {MIN_AVAILABLE: str(min_available)},
        ),
        spec=PodSpec(nodeName="n1" if bound_at is not None else None),
        status=PodStatus(phase=phase, conditions=conditions),
    )


# --- the rules, one table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("previous", "pods", "expected"),
    [
        # first sight: created from the earliest pod, nothing bound yet
        (EMPTY, [pod("a", created=T0 + 1), pod("b", created=T0)], Life(T0, None, None)),
        # a gang partly bound is admitted (first bind) but not started (KEP-349's deadlock)
        (EMPTY, [pod("a", bound_at=T0 + 5), pod("b")], Life(T0, T0 + 5, None)),
        # the gang's last bind starts it
        (EMPTY, [pod("a", bound_at=T0 + 5), pod("b", bound_at=T0 + 9)], Life(T0, T0 + 5, T0 + 9)),
        # a replaced pod (pending replacement) moves neither admitted nor started
        (
            Life(T0, T0 + 5, T0 + 9),
            [pod("a", bound_at=T0 + 5), pod("c", created=T0 + 60)],
            Life(T0, T0 + 5, T0 + 9),
        ),
        # a Failed pod is not a member: the rest of the gang is what must be bound
        (EMPTY, [pod("a", bound_at=T0 + 5), pod("b", phase="Failed")], Life(T0, T0 + 5, T0 + 5)),
        # no member bound: a full eviction resets admitted and started, never created
        (Life(T0 - 99, T0 + 5, T0 + 9), [pod("c", created=T0 + 60)], Life(T0 - 99, None, None)),
        (
            Life(T0, T0 + 5, T0 + 9),
            [pod("a", bound_at=T0 + 5, deleting=True), pod("b", bound_at=T0 + 9, deleting=True)],
            Life(T0, None, None),
        ),
        # elastic (minAvailable 2 of 4): the 2nd bind starts it; losing pods does not move it
        (
            EMPTY,
            [pod(f"p{i}", bound_at=T0 + i, min_available=2) for i in range(1, 5)],
            Life(T0, T0 + 1, T0 + 2),
        ),
        (
            Life(T0, T0 + 1, T0 + 2),
            [pod("p4", bound_at=T0 + 4, min_available=2), pod("p5", min_available=2)],
            Life(T0, T0 + 1, T0 + 2),
        ),
        # a declared minAvailable is not capped by the pods seen: 2 of 5 bound is not started
        (
            EMPTY,
            [
                pod("a", bound_at=T0 + 1, min_available=5),
                pod("b", bound_at=T0 + 2, min_available=5),
            ],
            Life(T0, T0 + 1, None),
        ),
    ],
)
def test_observe(previous: Life, pods: list[Pod], expected: Life) -> None:
    assert times(observe(previous, observation(pods))) == times(expected)


def times(life: Life) -> tuple[float | None, float | None, float | None]:
    """The time facts (size has its own table)."""
    return life.created, life.admitted, life.started


@pytest.mark.parametrize(
    ("previous", "pods", "size"),
    [
        (EMPTY, [pod("a"), pod("b")], 2),  # the members seen
        (Life(size=3), [pod("a"), pod("b")], 3),  # never shrinks: the most it has had
        (Life(size=3), [pod(f"p{i}") for i in range(4)], 4),  # grows
        # a failed pod is not a member, but the size it had is kept
        (Life(size=3), [pod("a"), pod("b"), pod("c", phase="Failed")], 3),
        (EMPTY, [pod("a"), pod("c", phase="Failed")], 1),
        # a full eviction resets admitted and started, not the size
        (Life(T0, T0 + 5, T0 + 9, 2), [pod("c", created=T0 + 60)], 2),
    ],
)
def test_size_is_the_most_members_the_workload_has_had(
    previous: Life, pods: list[Pod], size: int
) -> None:
    assert observe(previous, observation(pods)).size == size


def test_a_partial_view_does_not_move_the_size() -> None:
    assert observe(Life(size=5), observation([pod("a")], complete=False)).size == 5
    assert observe(EMPTY, observation([pod("a")], complete=False)).size is None


def ready(name: str, *, created: float = T0) -> Pod:
    p = pod(name, created=created, bound_at=T0 + 1, phase="Running")
    conditions = [*(p.status.conditions or ()), PodCondition("Ready", "True", format_time(T0))]
    return Pod(p.metadata, p.spec, PodStatus(phase="Running", conditions=conditions))


@pytest.mark.parametrize(
    ("pods", "persisted", "parallelism", "size", "source", "is_ready"),
    [
        # KEP-349: a Job of 3 with 2 Ready and 1 Failed (no replacement yet) is not PodsReady
        (
            [ready("a"), ready("b"), pod("c", phase="Failed")],
            Life(size=3),
            None,
            3,
            "members",
            False,
        ),
        # ... however the size is known: the owner's parallelism
        ([ready("a"), ready("b"), pod("c", phase="Failed")], EMPTY, 3, 3, "parallelism", False),
        ([ready("a"), ready("b")], EMPTY, None, 2, "members", True),
        # a declared minAvailable is the target, whatever else is known
        (
            [ready("a"), ready("b"), pod("c", phase="Failed")],
            Life(size=3),
            3,
            1,
            "declared",
            True,
        ),
        # succeeded pods count as ready
        ([ready("a"), pod("b", phase="Succeeded")], Life(size=2), None, 2, "members", True),
    ],
)
def test_pods_ready_counts_against_the_workloads_size(
    pods: list[Pod],
    persisted: Life,
    parallelism: int | None,
    size: int,
    source: str,
    is_ready: bool,
) -> None:
    if source == "declared":
        pods = [
            Pod(
                ObjectMeta(
                    name=p.metadata.name,
                    namespace="ns",
                    uid=p.metadata.uid,
                    creationTimestamp=p.metadata.creationTimestamp,
                    annotations={MIN_AVAILABLE: "1"},
                ),
                p.spec,
                p.status,
            )
            for p in pods
        ]
    facts = facts_of(pods, persisted, parallelism=parallelism)
    assert (facts.size, facts.size_source, facts.pods_ready) == (size, source, is_ready)


def ready_at(name: str, at: float, *, bound: float = T0 + 1) -> Pod:
    p = pod(name, bound_at=bound, phase="Running")
    conditions = [*(p.status.conditions or ()), PodCondition("Ready", "True", format_time(at))]
    return Pod(p.metadata, p.spec, PodStatus(phase="Running", conditions=conditions))


@pytest.mark.parametrize(
    ("pods", "persisted", "expected"),
    [
        # reached: the latest Ready transition of the members that made it so
        ([ready_at("a", T0 + 20), ready_at("b", T0 + 30)], EMPTY, T0 + 30),
        # not every pod Ready: not reached
        ([ready_at("a", T0 + 20), pod("b", bound_at=T0 + 2, phase="Running")], EMPTY, None),
        # once reached it stays, whatever the pods do after (KEP-349's recovery clock needs it)
        (
            [ready_at("a", T0 + 20), pod("b", bound_at=T0 + 2, phase="Failed")],
            Life(T0, T0 + 1, T0 + 2, 2, T0 + 30),
            T0 + 30,
        ),
        # a full eviction resets it with admitted
        ([pod("c", created=T0 + 60)], Life(T0, T0 + 1, T0 + 2, 1, T0 + 30), None),
        # a Ready transition older than the admission (a clock skew) is not before admitted
        ([ready_at("a", T0 - 50, bound=T0 + 5)], EMPTY, T0 + 5),
    ],
)
def test_the_ready_fact(pods: list[Pod], persisted: Life, expected: float | None) -> None:
    facts = facts_of(pods, persisted)
    assert facts.life.ready == expected
    if expected is not None and persisted.ready is None:
        assert facts.dirty and facts.source("ready") == "derived"


def test_a_partial_view_never_sets_the_ready_fact() -> None:
    assert facts_of([ready_at("a", T0 + 20)], complete=False).life.ready is None


def test_ready_round_trips_at_second_precision() -> None:
    life = Life(T0, T0 + 1, T0 + 2, 3, T0 + 4.7)
    assert life.persisted().ready == T0 + 4


def test_partial_view_never_fails_open() -> None:
    # The embedded default sees only the 2 offered victims of a workload declaring 5: its start
    # is the latest seen bind (not "unknown", which would leave it unprotected), its floor 5.
    victims = [
        pod("a", bound_at=T0 + 1, min_available=5),
        pod("b", bound_at=T0 + 2, min_available=5),
    ]
    facts = facts_of(victims, complete=False)
    assert facts.life.started == T0 + 2
    assert facts.min_available == 5 and facts.min_available_source == "declared"


def test_owner_creation_is_the_created_fact() -> None:
    assert observe(EMPTY, observation([pod("a")], owner_created=T0 - 500)).created == T0 - 500


def test_a_missed_full_eviction_is_seen_through_the_eviction_record() -> None:
    # The facts predate the last eviction and every member bound now was bound after it.
    before = Life(T0, T0 + 5, T0 + 9)
    rebound = [pod("c", created=T0 + 100, bound_at=T0 + 120)]
    seen = observation(rebound, last_eviction=T0 + 50)
    assert observe(before, seen) == Life(T0, None, None, 1)
    # ...but an elastic workload that lost one pod to that eviction keeps its facts.
    kept = [pod("a", bound_at=T0 + 5), pod("c", created=T0 + 100, bound_at=T0 + 120)]
    assert observe(before, observation(kept, last_eviction=T0 + 50)) == replace(before, size=2)


def test_sources() -> None:
    pods = [pod("a", bound_at=T0 + 5)]
    derived = facts_of(pods)
    assert [derived.source(f) for f in ("created", "admitted", "started")] == ["derived"] * 3
    assert derived.dirty and derived.min_available_source == "derived"
    persisted = facts_of(pods, derived.life)
    assert [persisted.source(f) for f in ("created", "admitted", "started")] == ["persisted"] * 3
    assert not persisted.dirty
    assert facts_of([pod("b")]).source("admitted") == "unknown"


@pytest.mark.parametrize(
    ("case", "persisted", "observed", "owner_created", "written"),
    [
        (
            "first write: as observed",
            EMPTY,
            Life(T0, T0 + 5, None, 2),
            None,
            Life(T0, T0 + 5, None, 2),
        ),
        (
            "created never moves later (a re-created pod's time)",
            Life(T0, size=1),
            Life(T0 + 60, size=1),
            None,
            Life(T0, size=1),
        ),
        (
            "but earlier to the owner runway read",
            Life(T0, size=1),
            Life(T0, size=1),
            T0 - 9,
            Life(T0 - 9, size=1),
        ),
        (
            "the owner's later creation moves nothing",
            Life(T0, size=1),
            Life(T0),
            T0 + 9,
            Life(T0, size=1),
        ),
        (
            "size never shrinks",
            Life(T0, size=4),
            Life(T0, T0 + 5, None, 2),
            None,
            Life(T0, T0 + 5, None, 4),
        ),
        ("size grows", Life(T0, size=2), Life(T0, size=5), None, Life(T0, size=5)),
        (
            "a full eviction's reset of admitted/started is written",
            Life(T0, T0 + 5, T0 + 6, 2),
            Life(T0, size=2),
            None,
            Life(T0, size=2),
        ),
    ],
)
def test_what_the_leader_writes_over_the_persisted_facts(
    case: str, persisted: Life, observed: Life, owner_created: float | None, written: Life
) -> None:
    assert life_to_write(persisted, observed, owner_created) == written, case


def test_size_round_trips_and_merges_to_the_largest() -> None:
    life = Life(T0, T0 + 5, None, 4)
    assert life.persisted() == life
    assert Life(T0 + 0.7, size=4).persisted() == Life(T0, size=4)


# --- the invariants, over random pod churn --------------------------------------------------------


@dataclass
class Slot:
    name: str
    created: float
    bound_at: float | None = None
    phase: str | None = None
    deleting: bool = False


@dataclass
class Workload:
    """A gang of ``size`` slots (or elastic with ``min_available``), as its owner keeps it."""

    size: int
    min_available: int | None
    slots: list[Slot] = field(default_factory=list)
    serial: int = 0
    now: float = T0

    def new_pod(self) -> Slot:
        self.serial += 1
        return Slot(f"p{self.serial}", self.now)

    def pods(self) -> list[Pod]:
        return [
            pod(
                s.name,
                created=s.created,
                bound_at=s.bound_at,
                phase=s.phase,
                deleting=s.deleting,
                min_available=self.min_available,
            )
            for s in self.slots
        ]

    def any_bound(self) -> bool:
        return any(
            s.bound_at is not None and not s.deleting and s.phase != "Failed" for s in self.slots
        )


EVENTS = st.sampled_from(["bind", "fail", "delete", "replace", "evict", "tick"])


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 4),
    elastic=st.booleans(),
    events=st.lists(st.tuples(EVENTS, st.integers(0, 3)), max_size=40),
)
def test_facts_over_pod_churn(size: int, elastic: bool, events: list[tuple[str, int]]) -> None:
    wl = Workload(size, 1 if elastic and size > 1 else None)
    wl.slots = [wl.new_pod() for _ in range(size)]
    life = observe(EMPTY, observation(wl.pods()))
    created = life.created
    first_bind: float | None = None  # the model's admitted: first bind since the last full eviction
    for kind, i in events:
        wl.now += 1
        slot = wl.slots[i % len(wl.slots)] if wl.slots else None
        if kind == "bind" and slot and slot.bound_at is None and not slot.deleting:
            slot.bound_at = wl.now
            if first_bind is None:
                first_bind = wl.now
        elif kind == "fail" and slot and slot.bound_at is not None:
            slot.phase = "Failed"
        elif kind == "delete" and slot:
            slot.deleting = True
        elif kind == "replace" and slot and (slot.deleting or slot.phase == "Failed"):
            wl.slots.remove(slot)
            wl.slots.append(wl.new_pod())
        elif kind == "evict":
            wl.slots = [wl.new_pod() for _ in range(size)]
        previous = life
        life = observe(previous, observation(wl.pods()))
        full_eviction = not wl.any_bound()
        if full_eviction:
            first_bind = None
        # created never changes
        assert life.created == created
        # started only moves on a full eviction (which resets it), or becomes known once
        if previous.started is not None and life.started != previous.started:
            assert full_eviction and life.started is None
        # admitted is the first bind since the last full eviction
        assert life.admitted == first_bind
        assert life.started is None or (life.admitted is not None and life.started >= life.admitted)
        # size: the most members it has had, whatever fails, goes or is evicted (KEP-349)
        members_now = sum(
            1
            for p in wl.pods()
            if p.metadata.deletionTimestamp is None and p.status.phase != "Failed"
        )
        assert (life.size or 0) == max(previous.size or 0, members_now)


# --- PodsReady's transitions: the recovery clock (Kueue's PodsReady condition, KEP-349) ----------


def member(
    name: str,
    *,
    ready: bool,
    at: float,
    created: float = T0,
    phase: str = "Running",
) -> Pod:
    """A bound pod started at T0 + 1 whose Ready condition last moved at ``at``."""
    p = pod(name, created=created, bound_at=max(T0 + 1, created), phase=phase)
    conditions = (*(p.status.conditions or ()), PodCondition("Ready", str(ready), format_time(at)))
    status = PodStatus(
        phase=phase, startTime=format_time(max(T0 + 1, created)), conditions=conditions
    )
    return Pod(p.metadata, p.spec, status)


def failed(name: str, at: float) -> Pod:
    """A pod that was Ready and failed at ``at`` (a Job keeps it)."""
    return member(name, ready=False, at=at, phase="Failed")


ADMITTED = Life(T0, T0 + 1, T0 + 1, 2)
REACHED = replace(ADMITTED, ready=T0 + 10)


@pytest.mark.parametrize(
    ("case", "persisted", "pods", "ready", "lost", "recovered"),
    [
        # Kueue's job_controller_test cases, the PodsReady condition over the Job's pods:
        (
            "WaitForStart: admitted, not all pods ready",
            ADMITTED,
            [member("a", ready=True, at=T0 + 10), member("b", ready=False, at=T0 + 1)],
            None,
            None,
            None,
        ),
        (
            "Started: all pods ready",
            ADMITTED,
            [member("a", ready=True, at=T0 + 8), member("b", ready=True, at=T0 + 10)],
            T0 + 10,
            None,
            None,
        ),
        (
            "WaitForRecovery: one pod failed after the workload was running",
            REACHED,
            [member("a", ready=True, at=T0 + 8), failed("b", T0 + 50)],
            T0 + 10,
            T0 + 50,
            None,
        ),
        (
            "still WaitForRecovery: the clock stays at the first loss (its lastTransitionTime)",
            replace(REACHED, lost=T0 + 50),
            [
                failed("a", T0 + 70),
                failed("b", T0 + 50),
                member("c", ready=False, at=T0 + 62, created=T0 + 60),
            ],
            T0 + 10,
            T0 + 50,
            None,
        ),
        (
            "Recovered: the replacement is ready",
            replace(REACHED, lost=T0 + 50),
            [
                member("a", ready=True, at=T0 + 8),
                failed("b", T0 + 50),
                member("c", ready=True, at=T0 + 65, created=T0 + 55),
            ],
            T0 + 10,
            None,
            T0 + 65,
        ),
        (
            "lost and recovered between two observations: the kept failed pod dates the loss",
            REACHED,
            [
                member("a", ready=True, at=T0 + 8),
                failed("b", T0 + 50),
                member("c", ready=True, at=T0 + 52, created=T0 + 51),
            ],
            T0 + 10,
            None,
            T0 + 52,
        ),
        (
            "lost within the flip margin of its start and recovered unseen: the replacement",
            REACHED,
            [
                member("a", ready=True, at=T0 + 8),
                # Ready at T0 + 10, failed 1 s after its start: no evidence it had been Ready
                member("b", ready=False, at=T0 + 10, created=T0 + 9, phase="Failed"),
                member("c", ready=True, at=T0 + 13, created=T0 + 11),
            ],
            T0 + 10,
            None,
            T0 + 13,
        ),
        (
            "that recovery seen again: nothing moves",
            replace(REACHED, recovered=T0 + 52),
            [
                member("a", ready=True, at=T0 + 8),
                failed("b", T0 + 50),
                member("c", ready=True, at=T0 + 52, created=T0 + 51),
            ],
            T0 + 10,
            None,
            T0 + 52,
        ),
        # issue #37: recovered from one failed pod, then another pod lost 30 s ago
        (
            "a second loss counts from itself, not from the pod that failed before recovery",
            replace(REACHED, recovered=T0 + 65),
            [
                failed("a", T0 + 200),
                failed("b", T0 + 50),
                member("c", ready=True, at=T0 + 65, created=T0 + 55),
            ],
            T0 + 10,
            T0 + 200,
            T0 + 65,
        ),
        (
            "a pending replacement of the second loss: the loss is the earlier of the two",
            replace(REACHED, recovered=T0 + 65),
            [
                pod("d", created=T0 + 201),
                failed("a", T0 + 200),
                failed("b", T0 + 50),
                member("c", ready=True, at=T0 + 65, created=T0 + 55),
            ],
            T0 + 10,
            T0 + 200,
            T0 + 65,
        ),
        (
            "the failed pod deleted, its replacement pending: the replacement's creation",
            replace(REACHED, recovered=T0 + 65),
            [
                pod("d", created=T0 + 201),
                failed("b", T0 + 50),
                member("c", ready=True, at=T0 + 65, created=T0 + 55),
            ],
            T0 + 10,
            T0 + 201,
            T0 + 65,
        ),
        (
            "nothing on the pods dates the loss (a pod deleted, no replacement yet): noticed",
            replace(REACHED, recovered=T0 + 65),
            [member("c", ready=True, at=T0 + 65, created=T0 + 55)],
            T0 + 10,
            T0 + 300,
            T0 + 65,
        ),
        (
            "PodsReady while nobody watched, lost since: the pods show both",
            ADMITTED,
            [member("a", ready=True, at=T0 + 8), failed("b", T0 + 50)],
            T0 + 1,
            T0 + 50,
            None,
        ),
        (
            "never PodsReady as a whole (one pod crashed at its start): the start clock",
            ADMITTED,
            [member("a", ready=True, at=T0 + 8), failed("b", T0 + 1)],
            None,
            None,
            None,
        ),
    ],
)
def test_the_recovery_clock_counts_from_the_last_loss(
    case: str,
    persisted: Life,
    pods: list[Pod],
    ready: float | None,
    lost: float | None,
    recovered: float | None,
) -> None:
    life = facts_of(pods, persisted, observed_at=T0 + 300).life
    assert (life.ready, life.lost, life.recovered) == (ready, lost, recovered), case


def test_the_pods_ready_facts_round_trip_and_reset_with_a_full_eviction() -> None:
    life = replace(REACHED, lost=T0 + 50.7, recovered=T0 + 40.2)
    assert (life.persisted().lost, life.persisted().recovered) == (T0 + 50, T0 + 40)
    # every member gone: a full eviction resets the facts of the admission with it
    again = facts_of([pod("z", created=T0 + 400)], life, observed_at=T0 + 500).life
    assert (again.admitted, again.ready, again.lost, again.recovered) == (None,) * 4


@pytest.mark.parametrize(
    ("case", "persisted", "pods", "owner_created", "created"),
    [
        (
            "first sight, no owner read: the earliest pod",
            EMPTY,
            [pod("a", created=T0 + 9)],
            None,
            T0 + 9,
        ),
        ("first sight, the owner read: its creation", EMPTY, [pod("a", created=T0 + 9)], T0, T0),
        (
            "a re-created pending pod never moves it",
            Life(T0 + 9, size=1),
            [pod("b", created=T0 + 60)],
            None,
            T0 + 9,
        ),
        (
            "the owner read after its pods were first seen: earlier, once",
            Life(T0 + 9, size=1),
            [pod("a", created=T0 + 9)],
            T0,
            T0,
        ),
        (
            "an older pod that joins later (a relabel: tenants write labels) moves nothing",
            Life(T0 + 9, size=1),
            [pod("old", created=T0 - 999), pod("a", created=T0 + 9)],
            None,
            T0 + 9,
        ),
    ],
)
def test_the_created_fact(
    case: str, persisted: Life, pods: list[Pod], owner_created: float | None, created: float
) -> None:
    assert facts_of(pods, persisted, owner_created=owner_created).life.created == created, case
