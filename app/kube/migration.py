"""``python -m app migrate-annotations``: finds the eviction records earlier versions wrote as
``runway.dev/eviction-*`` annotations (on pods, and on the pods' controllers) and imports each
into its workload's WorkloadRecord through ``policy.migration.less_privileged``. Run once,
explicitly, by an operator with read access to pods and their controllers and write access to
WorkloadRecords; runway itself never reads those annotations. Dry-run unless ``apply``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import msgspec

from app.clock import Clock, SystemClock
from app.kube.client import KubeClient
from app.kube.discovery import Discovery
from app.kube.errors import KubeError
from app.kube.reflector import ObjectList
from app.kube.resources import PODS
from app.kube.workloadrecords import KubeRecordStore
from app.logs import get_logger
from app.model import Pod
from app.model.eviction import EvictionRecord
from app.model.owner import OwnerRef, owner_of
from app.model.record import OwnerTuple, RecordState, identity_matches, record_name
from app.model.timestamps import parse_time
from app.policy.migration import less_privileged
from app.policy.workload import WorkloadKey, workload_of

log = get_logger("kube.migration")


@dataclass(frozen=True)
class Found:
    """One workload's record as the annotations hold it, and where it was read."""

    key: WorkloadKey
    record: EvictionRecord
    where: str
    owners: tuple[OwnerTuple, ...]
    created: float | None = None
    """The earliest creation of the workload's pods (an imported time is never earlier)."""


@dataclass(frozen=True)
class Outcome:
    """What the import did (or would do) for one workload."""

    found: Found
    action: str
    """``create``, ``update`` or ``keep`` (runway's record is already as strict)."""


def newest(records: Iterable[tuple[EvictionRecord, str]]) -> tuple[EvictionRecord, str] | None:
    """The latest copy (later time, then higher count)."""
    best: tuple[EvictionRecord, str] | None = None
    for record, where in records:
        if best is None or (record.time, record.count) > (best[0].time, best[0].count):
            best = (record, where)
    return best


async def collect(client: KubeClient, page_size: int = 500) -> list[Found]:
    """Every workload with a retired eviction record on its pods or their controllers."""
    pods: list[Pod] = []
    cont: str | None = None
    while True:
        page = await client.list(
            PODS, into=ObjectList[Pod], limit=page_size or None, continue_=cont
        )
        pods += page.items or []
        cont = page.metadata.continue_ or None
        if not cont:
            break
    discovery = Discovery(client)
    copies: dict[WorkloadKey, list[tuple[EvictionRecord, str]]] = {}
    owners: dict[WorkloadKey, dict[str, OwnerTuple]] = {}
    created: dict[WorkloadKey, float] = {}
    owner_records: dict[str, EvictionRecord | None] = {}
    for pod in pods:
        key = workload_of(pod)
        born = parse_time(pod.metadata.creationTimestamp)
        if born is not None:
            created[key] = min(born, created.get(key, born))
        ref = owner_of(pod)
        if ref is not None:
            owners.setdefault(key, {})[ref.uid] = (ref.api_version, ref.kind, ref.name, ref.uid)
            label = str(ref)
            if label not in owner_records:
                owner_records[label] = await _owner_record(client, discovery, ref)
            found = owner_records[label]
            if found is not None:
                copies.setdefault(key, []).append((found, label))
        record = EvictionRecord.from_annotations(pod.metadata.annotations)
        if record is not None:
            copies.setdefault(key, []).append((record, f"Pod {pod.key}"))
    out: list[Found] = []
    for key, found_copies in sorted(copies.items()):
        best = newest(found_copies)
        if best is not None:
            out.append(
                Found(
                    key,
                    best[0],
                    best[1],
                    tuple(owners.get(key, {}).values()),
                    created.get(key),
                )
            )
    return out


class _Meta(msgspec.Struct, frozen=True):
    annotations: dict[str, str] | None = None


class _Object(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


async def _owner_record(
    client: KubeClient, discovery: Discovery, ref: OwnerRef
) -> EvictionRecord | None:
    """The retired record on a controller (GET as the operator running the import)."""
    try:
        resource = await discovery.resource_for(ref.api_version, ref.kind)
        obj = await client.get(resource, ref.name, ref.namespace, into=_Object)
    except KubeError as exc:
        log.warning(
            "owner not readable: its annotations are not imported", owner=str(ref), error=str(exc)
        )
        return None
    return EvictionRecord.from_annotations(obj.metadata.annotations)


async def import_records(
    client: KubeClient, found: list[Found], *, apply: bool, clock: Clock | None = None
) -> list[Outcome]:
    """Import each found record (``less_privileged``: never earlier than its pods' creation,
    nor beyond now); writes only when ``apply``."""
    clock = clock or SystemClock()
    store = KubeRecordStore(client, clock)
    await store.reflector.list_once()
    now = clock.now()
    outcomes: list[Outcome] = []
    for item in found:
        key = item.key
        name = record_name(key.name, key.source)
        current = store.get(key.namespace, name)
        if current is not None and not identity_matches(current, (key.name, key.source)):
            log.warning("a record of another workload holds the name: not imported", record=name)
            outcomes.append(Outcome(item, "keep"))
            continue
        merged = less_privileged(
            current.record if current else None, item.record, created=item.created, now=now
        )
        if merged is None:
            outcomes.append(Outcome(item, "keep"))
            continue
        outcomes.append(Outcome(item, "update" if current is not None else "create"))
        if not apply:
            continue

        def change(state: RecordState, new: EvictionRecord = merged) -> RecordState:
            return replace(state, eviction=new, active=state.active and not new.deactivated)

        await store.update(key.namespace, name, (key.name, key.source), item.owners, change)
    return outcomes
