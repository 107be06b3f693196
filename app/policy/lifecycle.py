"""How a workload's life facts change over pod observations (DESIGN §2). Pure.

The facts (``app.model.lifecycle.Life``) are persisted; each observation of the workload's pods
moves them by these rules, and nothing else does:

- **created** is fixed at first sight: the creationTimestamp of the workload's controlling owner
  when runway read that owner (a Job of the pods' controller UID: a tenant writes its pods'
  ownerReferences, never its Job's creationTimestamp), else the earliest pod's; persisted then,
  before any bind. Re-created pods never move it; only the owner's, read later than its pods
  were first seen, moves it earlier (``Observation.owner_created``).
- **admitted** is the first bind of a member since created or the last full eviction.
- **started** is the minAvailable-th bind of members; once known it stays however pods fail, get
  replaced or the workload scales.
- a **full eviction** (no member left bound) resets admitted and started. If the observer missed
  that moment (no leader then), the eviction record tells: the facts predate the last eviction and
  every member bound now was bound after it.
- **ready** is when the workload first reached PodsReady (ready + succeeded members ≥ its size)
  since admitted: the latest Ready transition among the members that made it so. A full eviction
  resets it with admitted; losing readiness does not (KEP-349's recovery clock needs it).
- **lost** is when PodsReady last went false after it had been reached (KEP-349's recovery
  clock, Kueue's ``WaitForRecovery`` lastTransitionTime): the pods' own evidence of the loss
  after the last moment the workload was PodsReady (``policy.podsready.loss_time``), else the
  moment runway noticed; cleared when PodsReady is reached again, which sets **recovered**
  (the latest Ready transition then) — also when the loss and the recovery both fell between
  two observations, which the pods still show. A loss is only looked for after ``recovered``: a pod
  that failed before the workload recovered is not the next loss. A workload runway never saw
  PodsReady whose pods show it was (``was_pods_ready``: it happened while no runway watched)
  gets ``ready`` = its start and a ``lost`` from the pods after it.
- **size** is the most members the workload has had (never shrinks; a partial view does not
  move it): PodsReady's target when neither a declared minAvailable nor the owner's parallelism
  gives one (``app.policy.workload.workload_size``).
- **members** are pods neither ``Failed`` nor being deleted (``app.policy.workload.is_member``);
  a declared minAvailable holds even when fewer pods are seen (a *partial* view — the embedded
  default sees only the offered victims — then takes its latest seen bind as the start, so
  protection never fails open).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from app.model import Pod
from app.model.lifecycle import EMPTY, Life
from app.model.timestamps import parse_time
from app.policy.podsready import loss_time, missed_loss, was_pods_ready
from app.policy.workload import (
    SizeSource,
    bind_time,
    declared_min_available,
    is_ready,
    members,
    pods_ready,
    workload_size,
)

Source = Literal["persisted", "derived", "declared", "unknown"]
"""Where a fact came from: read back from the annotations, derived from the pods now, declared by
the user (the ``runway.dev/min-available`` annotation), or not known."""


@dataclass(frozen=True)
class Observation:
    """What the workload's pods show now."""

    created: float | None
    """The owner's creationTimestamp when known, else the earliest pod's (None: none known)."""
    binds: tuple[float, ...]
    """Bind times of the bound members, ascending."""
    min_available: int
    """Declared, else the member count."""
    complete: bool = True
    """Every pod of the workload is seen (False: the payload's victims only)."""
    last_eviction: float | None = None
    """Time of the workload's eviction record, if any."""
    members: int = 0
    """Members now (pods neither failed nor being deleted)."""
    owner_created: float | None = None
    """The creationTimestamp of the controlling owner runway read (trusted: the API server's)."""


def observation(
    pods: Sequence[Pod],
    *,
    owner_created: float | None = None,
    complete: bool = True,
    last_eviction: float | None = None,
) -> Observation:
    """The observation of ``pods`` (every pod of the workload runway sees, members or not)."""
    live = members(pods)
    created = owner_created
    if created is None:
        times = [t for t in (parse_time(p.metadata.creationTimestamp) for p in pods) if t]
        created = min(times) if times else None
    binds = tuple(sorted(t for t in (bind_time(p) for p in live) if t is not None))
    declared = declared_min_available(pods)
    return Observation(
        created=created,
        owner_created=owner_created,
        binds=binds,
        min_available=len(live) if declared is None else declared,
        complete=complete,
        last_eviction=last_eviction,
        members=len(live),
    )


def fully_evicted(previous: Life, seen: Observation) -> bool:
    """The workload has been fully evicted since ``previous`` was recorded: no member is bound
    now, or (a missed moment) every bound member was bound after an eviction that followed the
    recorded admission."""
    if not seen.binds:
        return True
    return (
        previous.admitted is not None
        and seen.last_eviction is not None
        and seen.last_eviction >= previous.admitted
        and seen.binds[0] > seen.last_eviction
    )


def derived_start(seen: Observation) -> float | None:
    """The minAvailable-th bind (a partial view short of minAvailable: its latest bind)."""
    needed = max(seen.min_available, 1)
    if len(seen.binds) >= needed:
        return seen.binds[needed - 1]
    if not seen.complete and seen.binds:
        return seen.binds[-1]
    return None


def observe(previous: Life, seen: Observation) -> Life:
    """The facts after observing ``seen`` (see the module docstring)."""
    created = previous.created if previous.created is not None else seen.created
    if seen.owner_created is not None and (created is None or seen.owner_created < created):
        created = seen.owner_created  # the owner, read after its pods were first seen
    size = previous.size
    if seen.complete and seen.members > (size or 0):
        size = seen.members
    if fully_evicted(previous, seen):
        return Life(created, None, None, size)
    admitted = previous.admitted if previous.admitted is not None else seen.binds[0]
    started = previous.started if previous.started is not None else derived_start(seen)
    return replace(previous, created=created, admitted=admitted, started=started, size=size)


def ready_time(pods: Sequence[Pod], admitted: float) -> float:
    """When PodsReady was reached, as the pods show it: the latest Ready transition (else bind)
    of the ready or succeeded members, never before ``admitted`` (or the loss it recovers
    from)."""
    times = [admitted]
    for pod in members(pods):
        if pod.status.phase != "Succeeded" and not is_ready(pod):
            continue
        cond = pod.condition("Ready")
        t = parse_time(cond.lastTransitionTime) if cond is not None else None
        if t is None:
            t = bind_time(pod)
        if t is not None:
            times.append(t)
    return max(times)


def life_to_write(persisted: Life, observed: Life, owner_created: float | None = None) -> Life:
    """What the leader writes over the ``persisted`` facts after ``observed`` (``observe``):
    ``created`` never moves once known, but earlier to ``owner_created`` (the creationTimestamp
    of the owner runway read itself: trusted); ``size`` never shrinks (the most members the
    workload has had, KEP-349); every other fact as observed."""
    created = persisted.created if persisted.created is not None else observed.created
    if owner_created is not None and (created is None or owner_created < created):
        created = owner_created
    sizes = [n for n in (persisted.size, observed.size) if n is not None]
    return replace(observed, created=created, size=max(sizes) if sizes else None)


def track_pods_ready(
    life: Life,
    pods: Sequence[Pod],
    ready: bool,
    size: int,
    observed_at: float | None = None,
) -> Life:
    """The PodsReady facts (``ready``, ``lost``, ``recovered``; module docstring) after seeing
    the workload's ``pods`` PodsReady (``ready``, against ``size``) or not. ``observed_at``:
    now, the moment of a loss the pods do not show (None: left unknown)."""
    if life.admitted is None:
        return life
    if ready:
        if life.ready is None:
            return replace(life, ready=ready_time(pods, life.admitted))
        if life.lost is not None:
            return replace(life, lost=None, recovered=ready_time(pods, life.lost))
        # a loss and its recovery both between two observations: the pods still show the loss
        # (the failed pod the Job keeps, its replacement), so the recovery is a fact all the same
        missed = missed_loss(pods, life.recovered if life.recovered is not None else life.ready)
        if missed is not None:
            return replace(life, recovered=ready_time(pods, missed))
        return life
    if life.lost is not None:
        return life  # the clock runs from the loss already known
    if life.ready is not None:
        since = life.recovered if life.recovered is not None else life.ready
    elif life.started is not None and was_pods_ready(pods, life.started, size, most=life.size):
        since = life.started  # PodsReady while nobody watched: no earlier than its start
    else:
        return life  # never PodsReady: the start clock runs
    lost = loss_time(pods, since)
    if lost is None:
        lost = observed_at
    if lost is None:
        return replace(life, ready=since) if life.ready is None else life
    return replace(life, ready=since if life.ready is None else life.ready, lost=max(lost, since))


@dataclass(frozen=True)
class LifeFacts:
    """A workload's facts now, with where each came from (the REST API shows both)."""

    life: Life
    persisted: Life
    """What the WorkloadRecord's ``status.life`` holds (the leader writes ``life`` there when
    they differ)."""
    min_available: int
    members: int
    min_available_source: Source
    size: int = 0
    """PodsReady's target (``workload_size``): declared, the owner's parallelism, or the most
    members the workload has had."""
    size_source: SizeSource = "members"
    pods_ready: bool = False
    """Ready + succeeded members ≥ ``size`` now (DESIGN §5)."""
    owner_created: float | None = None
    """The owner's creationTimestamp runway read (``Observation.owner_created``), if any."""

    def source(
        self, fact: Literal["created", "admitted", "started", "ready", "lost", "recovered"]
    ) -> Source:
        """``persisted`` when the WorkloadRecord holds the value, ``derived`` when it comes from
        the pods now, ``unknown`` when there is none."""
        value = getattr(self.life, fact)
        if value is None:
            return "unknown"
        return "persisted" if getattr(self.persisted, fact) == value else "derived"

    @property
    def dirty(self) -> bool:
        """The WorkloadRecord does not hold the facts yet: the leader should write them."""
        return self.life.persisted() != self.persisted


def facts_of(
    pods: Sequence[Pod],
    persisted: Life = EMPTY,
    *,
    owner_created: float | None = None,
    complete: bool = True,
    last_eviction: float | None = None,
    parallelism: int | None = None,
    observed_at: float | None = None,
) -> LifeFacts:
    """The facts of a workload from its pods and what was persisted (``parallelism``: its
    owner's, when it is a Job and known; ``observed_at``: now, for a loss of PodsReady the pods
    do not date, ``track_pods_ready``)."""
    seen = observation(
        pods, owner_created=owner_created, complete=complete, last_eviction=last_eviction
    )
    declared = declared_min_available(pods)
    life = observe(persisted, seen)
    size, size_source = workload_size(pods, parallelism=parallelism, most=life.size)
    ready = pods_ready(pods, size)
    if complete:
        life = track_pods_ready(life, pods, ready, size, observed_at)
    return LifeFacts(
        life=life,
        persisted=persisted,
        min_available=seen.min_available,
        members=seen.members,
        min_available_source="declared" if declared is not None else "derived",
        size=size,
        size_source=size_source,
        pods_ready=ready,
        owner_created=owner_created,
    )
