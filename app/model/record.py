"""runway's own resource: ``WorkloadRecord`` (``runway.dev/v1alpha1``), one per workload runway
keeps state for, in the workload's namespace (docs/state.md).

The only place runway keeps state that outlives a process: a workload's life facts, its eviction
record, whether it is active, and the preemptions in flight whose preemptor belongs to it (the
gate and the claim). Tenants may read it; only runway (and whoever the cluster's RBAC lets,
administrators) writes it, so nothing a tenant writes on its pods or Jobs is read as state.

* ``spec`` — ``workload`` (the identity runway derived: name and source), ``active`` (false:
  deactivated; ``kubectl patch`` or ``:activate``/``:deactivate`` set it).
* ``status`` — written by runway only (the status subresource, resourceVersion preconditions):
  ``queue``, ``life``, ``eviction``, ``preemptions`` and ``conditions`` for people.

This module is the wire shape (lenient msgspec structs: a value runway cannot use reads as
absent, never as an error) and the conversions to the domain values runway computes with
(``EvictionRecord``, ``Life``, ``GateEntry``). The record's name is derived from the workload's
identity (``record_name``), so finding a workload's record needs no index.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Final

import msgspec

from app.model.eviction import DEACTIVATED, EvictionRecord, is_reason
from app.model.eviction import KEYS as EVICTION_KEYS
from app.model.gate import GATE_ANNOTATION, GateEntry, PodRef, seal
from app.model.lifecycle import EMPTY, Life
from app.model.lifecycle import KEYS as LIFE_KEYS
from app.model.pod import PodCondition
from app.model.timestamps import format_time, parse_stored_time

GROUP: Final = "runway.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "WorkloadRecord"
PLURAL: Final = "workloadrecords"

RETIRED_ANNOTATIONS: Final = frozenset((*EVICTION_KEYS, *LIFE_KEYS, GATE_ANNOTATION))
"""Annotations earlier versions kept state in: never read as state (only ``app migrate`` imports
them, once, in the direction that makes a workload less privileged)."""

MAX_LIST: Final = 1024
"""Longer lists (victims, pools, history) are not ones runway wrote: the field reads as absent."""


# --- the wire shape -----------------------------------------------------------------------------


class RecordOwner(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata.ownerReferences[]`` of a record: the workload's controllers."""

    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""


class RecordMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of a record."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    ownerReferences: list[RecordOwner] | None = None


class WorkloadIdentity(msgspec.Struct, frozen=True, omit_defaults=True):
    """``spec.workload``: the identity runway derived from the pods (``policy.workload``)."""

    name: str = ""
    source: str = ""


class RecordSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """``spec``."""

    workload: WorkloadIdentity = WorkloadIdentity()
    active: bool = True


class LifeStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """``status.life``."""

    created: str | None = None
    admitted: str | None = None
    started: str | None = None
    size: int | None = None
    ready: str | None = None
    lost: str | None = None
    recovered: str | None = None


class EvictionStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """``status.eviction``."""

    reason: str | None = None
    time: str | None = None
    preemptorUID: str | None = None
    count: int | None = None
    requeueAt: str | None = None
    firstEvictionTime: str | None = None
    deactivated: bool | None = None
    message: str | None = None
    failedPools: list[str] | None = None
    preemptionHistory: list[str] | None = None


class VictimStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """``status.preemptions[].victims[]``."""

    uid: str = ""
    namespace: str = ""
    name: str = ""


class PreemptionStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """``status.preemptions[]``: one preemption in flight of one of the workload's pods."""

    preemptorUID: str = ""
    preemptor: str = ""
    node: str = ""
    victims: list[VictimStatus] | None = None
    since: str | None = None
    deadline: str | None = None
    priority: int | None = None
    rule: str | None = None
    holder: str | None = None


class ProtectionStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """``status.protection``: until when min-runtime protects the workload."""

    preemptUntil: str | None = None
    """From preemption by a pod of its own leaf queue (its queue's resolved preemptMinRuntime
    from its start); reclaim by other queues depends on the preemptor's queue (``explain``)."""


class RecordStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """``status``."""

    queue: str | None = None
    deactivatedBy: str | None = None
    """Who deactivated the workload (``spec.active: false``): ``runway`` (the requeue limit) or
    ``operator`` (``:deactivate``, or ``spec.active`` written by someone else)."""
    protection: ProtectionStatus | None = None
    life: LifeStatus | None = None
    eviction: EvictionStatus | None = None
    preemptions: list[PreemptionStatus] | None = None
    conditions: list[PodCondition] | None = None  # the Kubernetes condition shape


class WorkloadRecordObject(msgspec.Struct, frozen=True, omit_defaults=True):
    """A ``WorkloadRecord`` as the API server returns it."""

    metadata: RecordMeta = RecordMeta()
    spec: RecordSpec = RecordSpec()
    status: RecordStatus = RecordStatus()


# --- the domain value -------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordState:
    """What a record says, as runway computes with it (times in Unix seconds)."""

    active: bool = True
    queue: str = ""
    life: Life = EMPTY
    eviction: EvictionRecord | None = None
    preemptions: tuple[GateEntry, ...] = ()
    protected_until: float | None = None
    """Min-runtime protection from a same-queue preemption ends then (None: not protected or
    not started)."""
    version: str = field(default="", compare=False)
    """The resourceVersion this state was read at ("" = no record yet)."""
    uid: str = field(default="", compare=False)
    """The record's UID (the delete's precondition)."""
    owned: bool = field(default=False, compare=False)
    """Owned by the workload's controllers (garbage-collected with them)."""
    workload: tuple[str, str] = field(default=("", ""), compare=False)
    """``spec.workload``: (name, source) of the workload the record is for."""
    deactivated_by: str = ""
    """Who deactivated it (``RUNWAY``, ``OPERATOR``; "" when active or not said: ``authority``
    then tells)."""

    @property
    def authority(self) -> str | None:
        """Who may lift the deactivation (None: active): ``OPERATOR`` for an operator's (or a
        ``spec.active: false`` runway did not write), ``RUNWAY`` for the requeue limit's —
        lifted by whoever may activate workloads in the namespace (docs/state.md)."""
        if self.active:
            return None
        if self.deactivated_by in (RUNWAY, OPERATOR):
            return self.deactivated_by
        deactivated = self.eviction is not None and self.eviction.deactivated
        return RUNWAY if deactivated else OPERATOR

    @property
    def record(self) -> EvictionRecord | None:
        """The eviction record with ``active`` applied: a deactivated workload reads as
        deactivated whatever its status says, and one reactivated by editing ``spec.active``
        reads with its count and requeueAt reset (as Kueue resets ``requeueState``)."""
        record = self.eviction
        if not self.active:
            if record is None:
                # Deactivated by hand before any eviction: the record only says so (Kueue's
                # reason Deactivated: the queue order keeps its creation).
                return EvictionRecord(
                    reason=DEACTIVATED,
                    time=self.life.created or 0.0,
                    deactivated=True,
                    message="deactivated by an operator (spec.active: false)",
                )
            return record if record.deactivated else replace(record, deactivated=True)
        if record is not None and record.deactivated:
            return replace(
                record, deactivated=False, count=0, requeue_at=None, first_eviction_time=None
            )
        return record


RUNWAY: Final = "runway"
"""``deactivatedBy``: the requeue limit (``backoffLimitCount``/``backoffLimitTimeout``)."""
OPERATOR: Final = "operator"
"""``deactivatedBy``: an operator (``:deactivate`` with the cluster-wide permission)."""

EMPTY_STATE: Final = RecordState()

Change = Callable[[RecordState], RecordState | None]
"""Computes the state to write from the current one; None = write nothing."""


def next_state(change: Change, current: RecordState) -> RecordState | None:
    """What ``change`` makes of ``current``; None when there is nothing to write (it said so, or
    the state would not change). Every store writes through this."""
    new = change(current)
    return None if new is None or new == current else new


Listener = Callable[[str, RecordState | None, RecordState | None], None]
"""Called with (namespace, old, new) on every change of a record in a store."""
OwnerTuple = tuple[str, str, str, str]
"""``(apiVersion, kind, name, uid)`` of a workload's controller (a record's owner)."""


WRITE_FAILURES: Final = ("invalid", "forbidden", "foreign", "capped", "conflict", "unavailable")
"""Why a record write failed (``RecordWriteFailed.reason``; ``error`` for anything else)."""


class RecordWriteFailed(Exception):
    """A record could not be written: ``reason`` is one of ``WRITE_FAILURES`` — the API server
    refused it (``invalid``: its schema; ``forbidden``: RBAC or the namespace's ResourceQuota),
    a record of another workload holds its name (``foreign``), the namespace has as many records
    as runway keeps for it (``capped``), conflicts outlasted the retries (``conflict``), or the
    API server was not reachable (``unavailable``)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


MAX_RECORD_NAME: Final = 253
"""A Kubernetes object name (a DNS subdomain) is at most this long."""
_READABLE: Final = 200
"""The readable part of a record name kept before its hash (the rest is cut)."""
_PREFIXES: Final = {"label": "wl", "pod-group": "pg", "pod": "pod"}


@lru_cache(maxsize=1 << 16)
def record_name(name: str, source: str) -> str:
    """The record's object name for a workload (namespace implied): a DNS-1123 subdomain of at
    most 211 characters derived from the identity, whatever the identity is. Deterministic: the
    same (name, source) always gives the same name, so finding a record needs no index. A name
    that had to be changed to be valid, or cut, carries a hash of the whole identity, so two
    identities share a name only when their lowercased kinds coincide (``Job`` and ``JOB``, which
    the record's ``spec.workload`` then tells apart: ``identity_matches``); an owner kind that
    reads as another source's prefix (``Pod``, ``Wl``, ``Pg``) always carries the hash. Memoised:
    a preempt call looks up the record of every offered victim's workload."""
    kind = source.split(":", 1)
    prefix = _PREFIXES.get(source) or (
        kind[1].lower() if kind[0] == "owner" and len(kind) == 2 else "wl"
    )
    borrowed = source not in _PREFIXES and prefix in _PREFIXES.values()
    prefix = _subdomain(prefix)[:40].rstrip("-.") or "wl"
    clean = _subdomain(name)
    candidate = f"{prefix}.{clean}" if clean else prefix
    if clean != name or borrowed or len(candidate) > _READABLE:
        digest = hashlib.sha256(f"{source}\0{name}".encode()).hexdigest()[:10]
        candidate = f"{candidate[:_READABLE].rstrip('-.')}-{digest}"
    return candidate


def _subdomain(value: str) -> str:
    """``value`` made a DNS-1123 subdomain (lowercase alphanumerics and ``-``, dot-separated
    labels that start and end alphanumeric); "" when nothing of it is left."""
    labels = (_SUBDOMAIN_BAD.sub("-", part).strip("-") for part in value.lower().split("."))
    return ".".join(label for label in labels if label)


_SUBDOMAIN_BAD = re.compile(r"[^a-z0-9-]+")
SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""What the API server accepts as an object name (``IsDNS1123Subdomain``), with the length."""


def identity_matches(state: RecordState, identity: tuple[str, str]) -> bool:
    """Whether the record ``state`` (its ``spec.workload``) is the workload ``identity``'s:
    a record written for another identity of the same name (``record_name``) is not (a record
    with no identity, written by hand, is taken as the workload's)."""
    return state.workload in (bounded_identity(*identity), ("", ""))


MAX_IDENTITY_NAME: Final = 253
MAX_IDENTITY_SOURCE: Final = 316
"""The record schema's ``spec.workload`` bounds (helm/runway/crds): a longer identity is stored
cut, with a hash (``bounded_identity``), so the write never fails on it."""


def bounded_identity(name: str, source: str) -> tuple[str, str]:
    """``spec.workload`` for the identity (name, source), within the schema's bounds: as is when
    it fits (every identity ``policy.workload`` derives does), else cut with a hash."""
    return _bounded(name, MAX_IDENTITY_NAME), _bounded(source, MAX_IDENTITY_SOURCE)


def _bounded(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:10]
    return f"{value[: limit - 11]}-{digest}"


def state_of(obj: WorkloadRecordObject) -> RecordState:
    """The record's state (never raises: a field runway cannot use reads as absent)."""
    status = obj.status
    return RecordState(
        active=obj.spec.active,
        queue=status.queue or "",
        life=_life(status.life),
        eviction=_eviction(status.eviction),
        preemptions=tuple(
            e
            for e in (_entry(p, obj.metadata.namespace) for p in (status.preemptions or ())[:64])
            if e is not None
        ),
        protected_until=parse_stored_time(status.protection.preemptUntil)
        if status.protection
        else None,
        version=obj.metadata.resourceVersion,
        uid=obj.metadata.uid,
        owned=bool(obj.metadata.ownerReferences),
        workload=(obj.spec.workload.name, obj.spec.workload.source),
        deactivated_by=status.deactivatedBy
        if not obj.spec.active and status.deactivatedBy in (RUNWAY, OPERATOR)
        else "",
    )


def status_of(state: RecordState, now: float, hold_by: str = "") -> dict[str, Any]:
    """The ``status`` to write for ``state`` (a full replacement of runway's fields);
    ``hold_by``: what holds a held workload's pods (``conditions``)."""
    out: dict[str, Any] = {"queue": state.queue or None, "deactivatedBy": state.authority}
    if state.protected_until is not None:
        out["protection"] = {"preemptUntil": _fmt(math.ceil(state.protected_until))}
    life = state.life
    out["life"] = {
        "created": _fmt(life.created),
        "admitted": _fmt(life.admitted),
        "started": _fmt(life.started),
        "size": life.size,
        "ready": _fmt(life.ready),
        "lost": _fmt(life.lost),
        "recovered": _fmt(life.recovered),
    }
    rec = state.eviction
    out["eviction"] = (
        None
        if rec is None
        else {
            "reason": rec.reason,
            "time": _fmt(rec.time),
            "preemptorUID": rec.preemptor_uid,
            "count": rec.count,
            "requeueAt": None if rec.requeue_at is None else _fmt(math.ceil(rec.requeue_at)),
            "firstEvictionTime": _fmt(rec.first_eviction_time),
            "deactivated": rec.deactivated or None,
            "message": rec.message,
            "failedPools": list(rec.failed_pools) or None,
            "preemptionHistory": [format_time(t) for t in rec.preemption_history] or None,
        }
    )
    out["preemptions"] = [
        {
            "preemptorUID": e.preemptor.uid,
            "preemptor": e.preemptor.name,
            "node": e.node,
            "victims": [_victim(v, e.preemptor.namespace) for v in e.victims],
            "since": _fmt_precise(e.since),
            "deadline": _fmt_precise(e.deadline),
            "priority": e.priority,
            "rule": e.rule or None,
            "holder": e.holder or None,
        }
        for e in state.preemptions
    ] or None
    out["conditions"] = conditions(state, now, hold_by)
    cleaned: dict[str, Any] = _drop_none(out)
    return cleaned


def _victim(victim: PodRef, namespace: str) -> dict[str, str]:
    """A victim as the preemptor's record (read by the preemptor's namespace) shows it: by name
    in that namespace, else sealed (``model.gate.seal``: no namespace, name or UID of another
    tenant; runway finds the pod again among those on the gate's node)."""
    if victim.namespace == namespace:
        return {"uid": victim.uid, "namespace": victim.namespace, "name": victim.name}
    return {"uid": seal(victim.uid)}


HELD_BY = {
    "schedulingGate": (
        "SchedulingGate",
        "its pending pods carry the scheduling gate runway.dev/admission (kubectl get pods: "
        "SchedulingGated); runway's leader removes it when the workload is admitted",
    ),
    "filter": (
        "Filter",
        "runway's filter rejects its pending pods on every node (they look Unschedulable)",
    ),
}
"""The ``Held`` condition's reason and message per hold (``policy.schedgate.HoldBy``)."""


def conditions(state: RecordState, now: float, hold_by: str = "") -> list[dict[str, str]]:
    """The conditions a person reads (``kubectl describe``): Admitted, Started, PodsReady,
    Evicted, Deactivated, BackingOff, Held (while backing off or deactivated: whether a
    scheduling gate or the filter holds the pods, ``hold_by``; DESIGN §5.8),
    PreemptionInFlight.

    PodsReady follows Kueue's condition (KEP-349): ``False``/``WaitForStart`` from admission
    until ready + succeeded members first reach the workload's size (``timeout`` counts from
    Admitted); ``True``/``Started`` then; ``False``/``WaitForRecovery`` from the moment it was
    lost (``recoveryTimeout`` counts from its lastTransitionTime); ``True``/``Recovered`` when
    reached again. Each transition is a write (the life facts ``ready``, ``lost``,
    ``recovered``), as Kueue writes its Workload's condition: that is what carries the recovery
    clock across a restart and a new leader."""
    out: list[dict[str, str]] = []
    stamp = format_time(now)

    def add(kind: str, on: bool, reason: str, message: str, since: float | None) -> None:
        out.append(
            {
                "type": kind,
                "status": "True" if on else "False",
                "reason": reason,
                "message": message,
                "lastTransitionTime": format_time(since) if since is not None else stamp,
            }
        )

    life, rec = state.life, state.record
    add(
        "Admitted",
        life.admitted is not None,
        "Bound" if life.admitted is not None else "Pending",
        "a pod of the workload is bound" if life.admitted is not None else "no pod bound yet",
        life.admitted,
    )
    add(
        "Started",
        life.started is not None,
        "MinAvailableBound" if life.started is not None else "NotStarted",
        "min-runtime counts from here" if life.started is not None else "not all pods bound",
        life.started,
    )
    if life.admitted is not None:
        add("PodsReady", *_pods_ready_condition(life))
    held = False
    if rec is not None:
        add("Evicted", True, rec.reason, rec.message or rec.reason, rec.time or None)
        if rec.requeue_at is not None and rec.requeue_at > now:
            held = True
            add(
                "BackingOff",
                True,
                "Backoff",
                f"not admitted before {format_time(math.ceil(rec.requeue_at))}",
                rec.time or None,
            )
    held = held or not state.active or (rec is not None and rec.deactivated)
    if held and hold_by in HELD_BY:
        reason, message = HELD_BY[hold_by]
        add("Held", True, reason, message, rec.time if rec is not None and rec.time else None)
    by = state.authority
    add(
        "Deactivated",
        not state.active,
        ("ByOperator" if by == OPERATOR else "RequeuingLimitExceeded")
        if not state.active
        else "Active",
        (
            (rec.message if rec is not None and rec.message else "spec.active is false")
            + (
                "; only an operator may activate it"
                if by == OPERATOR
                else "; whoever may activate workloads in this namespace may activate it"
            )
        )
        if not state.active
        else "spec.active is true",
        None,
    )
    if state.preemptions:
        e = state.preemptions[0]
        add(
            "PreemptionInFlight",
            True,
            "Preempting",
            f"{len(e.victims)} victim(s) on node {e.node}",
            e.since,
        )
    return out


def _pods_ready_condition(life: Life) -> tuple[bool, str, str, float | None]:
    """(status, reason, message, since) of an admitted workload's PodsReady condition."""
    size = _of(life.size)
    if life.ready is None:
        return (
            False,
            "WaitForStart",
            f"fewer ready + succeeded pods than the workload's size{size} since admitted "
            "(waitForPodsReady.timeout counts from Admitted)",
            life.admitted,
        )
    if life.lost is not None:
        return (
            False,
            "WaitForRecovery",
            f"a pod was lost after ready + succeeded pods had reached the workload's size{size} "
            "(waitForPodsReady.recoveryTimeout counts from here)",
            life.lost,
        )
    if life.recovered is not None:
        return (
            True,
            "Recovered",
            f"ready + succeeded pods reached the workload's size{size} again",
            life.recovered,
        )
    return (
        True,
        "Started",
        f"ready + succeeded pods reached the workload's size{size} since admitted",
        life.ready,
    )


def _of(size: int | None) -> str:
    return "" if size is None else f" ({size})"


def new_object(
    namespace: str,
    name: str,
    source: str,
    owners: tuple[tuple[str, str, str, str], ...],
    *,
    active: bool = True,
) -> dict[str, Any]:
    """A new record (``POST``; its status is written after, through the subresource).
    ``owners``: ``(apiVersion, kind, name, uid)`` of the workload's controllers: the record is
    garbage-collected with them."""
    bounded = bounded_identity(name, source)
    meta: dict[str, Any] = {
        "name": record_name(name, source),
        "namespace": namespace,
        "labels": {"runway.dev/workload-source": _label_value(source)},
    }
    refs = [
        {"apiVersion": a, "kind": k, "name": n, "uid": u}
        for a, k, n, u in owners
        if a and k and u and 0 < len(n) <= MAX_IDENTITY_NAME  # owner_of's refs already are
    ]
    if refs:
        meta["ownerReferences"] = refs
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": meta,
        "spec": {
            "workload": {"name": bounded[0], "source": bounded[1]},
            "active": active,
        },
    }


def _label_value(source: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", source)[:63].strip("-._") or "unknown"


# --- lenient readers --------------------------------------------------------------------------


def _fmt(value: float | None) -> str | None:
    return None if value is None else format_time(value)


def _fmt_precise(value: float) -> str:
    # Gate times keep sub-second precision (the gate's bound and release memo compare them).
    whole = math.floor(value)
    frac = value - whole
    base = format_time(whole)
    return base if frac == 0 else f"{base[:-1]}.{int(frac * 1e6):06d}Z"


def _life(status: LifeStatus | None) -> Life:
    if status is None:
        return EMPTY
    size = status.size if isinstance(status.size, int) and 0 < status.size < 10**6 else None
    return Life(
        created=parse_stored_time(status.created),
        admitted=parse_stored_time(status.admitted),
        started=parse_stored_time(status.started),
        size=size,
        ready=parse_stored_time(status.ready),
        lost=parse_stored_time(status.lost),
        recovered=parse_stored_time(status.recovered),
    )


def _eviction(status: EvictionStatus | None) -> EvictionRecord | None:
    if status is None or not is_reason(status.reason):
        return None
    time = parse_stored_time(status.time)
    if time is None:
        return None
    count = status.count if isinstance(status.count, int) and 0 <= status.count < 10**9 else 0
    history = status.preemptionHistory or []
    times = [t for t in (parse_stored_time(h) for h in history[:MAX_LIST]) if t is not None]
    pools = [p for p in (status.failedPools or [])[:MAX_LIST] if isinstance(p, str) and p]
    return EvictionRecord(
        reason=status.reason,
        time=time,
        preemptor_uid=status.preemptorUID or None,
        count=count,
        requeue_at=parse_stored_time(status.requeueAt),
        first_eviction_time=parse_stored_time(status.firstEvictionTime),
        deactivated=bool(status.deactivated),
        message=status.message or None,
        failed_pools=tuple(sorted(set(pools))),
        preemption_history=tuple(sorted(times)) if len(times) == len(history) else (),
    )


def _entry(status: PreemptionStatus, namespace: str) -> GateEntry | None:
    since, deadline = parse_stored_time(status.since), parse_stored_time(status.deadline)
    victims = status.victims or []
    if (
        not status.preemptorUID
        or not status.preemptor
        or not status.node
        or since is None
        or deadline is None
        or len(victims) > MAX_LIST
    ):
        return None
    priority = status.priority if isinstance(status.priority, int) else 0
    return GateEntry(
        # The preemptor is one of the workload's pods: always in the record's namespace.
        preemptor=PodRef(status.preemptorUID, namespace, status.preemptor),
        node=status.node,
        victims=tuple(PodRef(v.uid, v.namespace, v.name) for v in victims if v.uid),
        since=since,
        deadline=deadline,
        rule=status.rule or "",
        holder=status.holder or "",
        priority=max(-(2**31), min(priority, 2**31)),
    )


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
