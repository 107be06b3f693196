"""Writes eviction records to the API server (implements ``app.state.records.RecordWriter``).

On an owner: read fresh (``GET``), compute the new record from what it holds, write it by a JSON
merge patch with UID and resourceVersion preconditions; a 409 (someone else wrote in between)
starts over through ``app.kube.retry`` (``on_conflict``). On bare pods: a merge patch per pod with
a UID precondition (a pod already gone, or re-created under the same name, is skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from app.kube.client import KubeClient
from app.kube.errors import Conflict, NotFound
from app.kube.owners import Discovery, OwnerMeta, OwnerWatcher, get_owner, patch_annotations
from app.kube.pods import KubePodWriter
from app.kube.resources import Resource
from app.kube.retry import RetryPolicy, retrying
from app.logs import get_logger
from app.model import Pod
from app.model.eviction import EvictionRecord
from app.model.gate import PodRef
from app.model.owner import OwnerRef
from app.model.timestamps import parse_time

log = get_logger("kube.records")

Update = Callable[[EvictionRecord | None], EvictionRecord | None]
Annotate = Callable[[Mapping[str, str], float | None], Mapping[str, str | None] | None]


class KubeRecordWriter:
    """Eviction records on owners and bare pods, through the shared client."""

    def __init__(
        self,
        client: KubeClient,
        pods: KubePodWriter,
        *,
        owners: OwnerWatcher | None = None,
        discovery: Discovery | None = None,
        conflict_policy: RetryPolicy | None = None,
    ) -> None:
        self.client = client
        self.pods = pods
        self.owners = owners
        self.discovery = discovery or (owners.discovery if owners else Discovery(client))
        self.conflict_policy = conflict_policy or RetryPolicy(total=10.0)

    async def update_owner(
        self, ref: OwnerRef, change: Update, fallback: EvictionRecord | None
    ) -> EvictionRecord | None:
        """Read-modify-write the record on ``ref`` (see the module docstring)."""
        resource = await self.discovery.resource_for(ref.api_version, ref.kind)

        async def attempt() -> EvictionRecord | None:
            try:
                obj = await get_owner(self.client, self.discovery, ref)
            except NotFound:
                log.info("owner gone: record not written", owner=str(ref))
                return None
            meta = obj.metadata
            if ref.uid and meta.uid and meta.uid != ref.uid:
                log.info("owner re-created: record not written", owner=str(ref))
                return None
            current = EvictionRecord.from_annotations(meta.annotations)
            # The owner is the truth; the cached copy only fills in when the owner has none
            # (a record written in memory before the owner was known).
            new = change(current if current is not None else fallback)
            if new is None:
                return None
            await self._patch_owner(ref, resource, meta, new.to_annotations())
            log.info("eviction record written", owner=str(ref), **_fields(new))
            return new

        return await retrying(
            attempt,
            self.conflict_policy,
            idempotent=False,  # the client already retries 5xx of the GET and the PATCH
            on_conflict=True,
            what=f"eviction record of {ref}",
        )

    async def _patch_owner(
        self,
        ref: OwnerRef,
        resource: Resource,
        meta: OwnerMeta,
        annotations: Mapping[str, str | None],
    ) -> None:
        """Patch the owner's annotations with UID and resourceVersion preconditions (409 when it
        changed since ``meta`` was read) and fold the answer into the owner cache."""
        patched = await patch_annotations(
            self.client,
            resource,
            ref.name,
            ref.namespace,
            annotations,
            uid=meta.uid or None,
            resource_version=meta.resourceVersion or None,
        )
        if self.owners is not None:
            self.owners.put(
                ref,
                patched.metadata.uid,
                patched.metadata.annotations,
                patched.metadata.resourceVersion,
            )

    async def write_pods(self, pods: Iterable[Pod], record: EvictionRecord) -> list[Pod]:
        """The record on each bare pod; returns the pods as patched."""
        written = await self.annotate_pods(pods, record.to_annotations())
        for pod in written:
            log.info("eviction record written", pod=pod.key, **_fields(record))
        return written

    async def annotate_pods(
        self, pods: Iterable[Pod], annotations: Mapping[str, str | None]
    ) -> list[Pod]:
        """Merge ``annotations`` into each pod (UID precondition); returns the pods as patched."""
        written: list[Pod] = []
        for pod in pods:
            try:
                patched = await self.pods.patch_annotations(PodRef.of(pod), annotations)
            except (NotFound, Conflict):
                continue  # gone, or re-created under the same name: not this workload's pod
            written.append(patched)
        return written

    async def annotate_owner(self, ref: OwnerRef, change: Annotate) -> bool:
        """Read-modify-write annotations on ``ref``: ``change`` gets the owner's annotations and
        creationTimestamp (the workload's *created* fact); None = nothing to write."""
        resource = await self.discovery.resource_for(ref.api_version, ref.kind)

        async def attempt() -> bool:
            try:
                obj = await get_owner(self.client, self.discovery, ref)
            except NotFound:
                return False
            meta = obj.metadata
            if ref.uid and meta.uid and meta.uid != ref.uid:
                return False
            new = change(meta.annotations or {}, parse_time(meta.creationTimestamp))
            if new is None:
                return False
            await self._patch_owner(ref, resource, meta, new)
            log.info("workload facts written", owner=str(ref), annotations=dict(new))
            return True

        return await retrying(
            attempt,
            self.conflict_policy,
            idempotent=False,
            on_conflict=True,
            what=f"workload facts of {ref}",
        )


def _fields(record: EvictionRecord) -> dict[str, object]:
    return {
        "reason": record.reason,
        "count": record.count,
        "requeue_at": record.requeue_at,
        "deactivated": record.deactivated,
    }
