"""Workload owners (a Job, a JobSet...): their REST resource, their runway annotations, patches.

* ``Discovery`` maps an ownerReference's ``apiVersion``/``kind`` to its REST resource by asking
  the API server's discovery (``GET /apis/<group>/<version>``), once per group/version.
* ``OwnerWatcher`` keeps, per owner kind seen, a lean reflector (list+watch) whose store holds
  only name, UID and the ``runway.dev/`` annotations of the owners that have any: the eviction
  records runway wrote, readable synchronously (the filter verb never awaits) by every replica,
  and again after a restart. Our own PATCH answers are folded in at once (read after write).
* ``patch_annotations`` writes annotations with a JSON merge patch carrying UID and
  resourceVersion preconditions (409 when the owner changed or was re-created).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from app.kube.client import KubeClient
from app.kube.errors import KubeError
from app.kube.reflector import Reflector
from app.kube.resources import Resource
from app.logs import get_logger
from app.model.eviction import invalid_record_fields
from app.model.lifecycle import PREFIX as LIFE_PREFIX
from app.model.owner import OwnerEntry, OwnerRef, runway_annotations
from app.supervise import supervise

log = get_logger("kube.owners")


class UnknownKind(KubeError):
    """The API server does not serve this apiVersion/kind (a CRD not installed...)."""


# --- discovery --------------------------------------------------------------------------------


class _ApiResource(msgspec.Struct, frozen=True):
    name: str = ""
    kind: str = ""
    namespaced: bool = False


class _ApiResourceList(msgspec.Struct, frozen=True):
    resources: list[_ApiResource] = []


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class Discovery:
    """apiVersion/kind → ``Resource``, from the API server's discovery documents (cached)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._kinds: dict[str, dict[str, Resource]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def cached(self, api_version: str, kind: str) -> Resource | None:
        """The resource if its group/version was discovered already (no I/O)."""
        return self._kinds.get(api_version, {}).get(kind)

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        """The REST resource serving ``kind`` in ``api_version``; ``UnknownKind`` if none."""
        found = self.cached(api_version, kind)
        if found is not None:
            return found
        lock = self._locks.setdefault(api_version, asyncio.Lock())
        async with lock:
            if api_version not in self._kinds:
                await self._discover(api_version)
        found = self.cached(api_version, kind)
        if found is None:
            raise UnknownKind(f"the API server serves no kind {kind} in {api_version}")
        return found

    async def _discover(self, api_version: str) -> None:
        group, version = _split(api_version)
        path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
        resp = await self.client.request("GET", path, verb="get", resource="discovery")
        listing = msgspec.json.decode(resp.content, type=_ApiResourceList)
        self._kinds[api_version] = {
            r.kind: Resource(group, version, r.name, namespaced=r.namespaced)
            for r in listing.resources
            if "/" not in r.name  # subresources (jobs/status) share the kind
        }
        log.debug("discovered", api_version=api_version, kinds=len(self._kinds[api_version]))


# --- the lean owner cache ---------------------------------------------------------------------


class OwnerMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of an owner, as far as runway cares."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    annotations: dict[str, str] | None = None


class OwnerObject(msgspec.Struct, frozen=True, omit_defaults=True):
    """Any owner object reduced to its metadata (unknown fields are skipped while decoding)."""

    metadata: OwnerMeta = OwnerMeta()


def _older(new: OwnerEntry, old: OwnerEntry) -> bool:
    """Whether ``new`` was read at an older resourceVersion than ``old`` (same object; opaque or
    missing versions are never called older)."""
    a, b = new.resource_version, old.resource_version
    return (
        new.uid == old.uid
        and a.isdigit()
        and b.isdigit()
        and len(a) <= 20
        and len(b) <= 20
        and int(a) < int(b)
    )


def _life_only(old: OwnerEntry, new: OwnerEntry) -> bool:
    """Whether only ``runway.dev/workload-*`` annotations differ between two entries."""
    keys = old.annotations.keys() | new.annotations.keys()
    changed = [k for k in keys if old.annotations.get(k) != new.annotations.get(k)]
    return all(k.startswith(LIFE_PREFIX) for k in changed)


class _KindStore:
    """The reflector store of one owner kind: ``namespace/name`` → entry, only owners that carry
    ``runway.dev/`` annotations (the others cost nothing)."""

    def __init__(
        self,
        on_change: Callable[[], None],
        on_invalid: Callable[[str, list[str]], None] | None = None,
        on_life_change: Callable[[], None] | None = None,
    ) -> None:
        self.entries: dict[str, OwnerEntry] = {}
        self.on_change = on_change
        self.on_life_change = on_life_change or on_change
        """Called instead of ``on_change`` when only ``runway.dev/workload-*`` (life facts)
        changed: a workload's pods already show those, so the per-pod memos stay valid."""
        self.on_invalid = on_invalid

    @staticmethod
    def _key(obj: OwnerObject) -> str:
        return f"{obj.metadata.namespace}/{obj.metadata.name}"

    def _put(self, obj: OwnerObject, before: Mapping[str, OwnerEntry] | None = None) -> bool:
        """Store ``obj``'s entry; whether it changed (``self.life_only``: only life facts)."""
        key = self._key(obj)
        kept = runway_annotations(obj.metadata.annotations)
        old = self.entries.get(key)
        if not kept:
            self.life_only = False
            return self.entries.pop(key, None) is not None
        entry = OwnerEntry(obj.metadata.uid, kept, obj.metadata.resourceVersion)
        if old == entry or (old is not None and _older(entry, old)):
            # Unchanged; or our own PATCH's answer (read after write) arriving after the watch
            # brought a newer version: keep the newer one.
            return False
        self.life_only = old is not None and old.uid == entry.uid and _life_only(old, entry)
        known = old if before is None else before.get(key)
        if self.on_invalid is not None and known != entry:  # once per change of the record
            bad = invalid_record_fields(kept)
            if bad:
                self.on_invalid(key, bad)
        self.entries[key] = entry
        return True

    def replace(self, items: Sequence[OwnerObject]) -> None:
        before = self.entries
        self.entries = {}
        for obj in items:
            self._put(obj, before)
        if before != self.entries:
            self.on_change()

    life_only = False

    def upsert(self, obj: OwnerObject) -> None:
        if self._put(obj):
            (self.on_life_change if self.life_only else self.on_change)()

    def delete(self, obj: OwnerObject) -> None:
        entry = self.entries.get(self._key(obj))
        if entry is not None and (not obj.metadata.uid or entry.uid == obj.metadata.uid):
            del self.entries[self._key(obj)]
            self.on_change()


@dataclass
class _Kind:
    store: _KindStore
    task: asyncio.Task[None] | None = None
    reflector: Reflector[OwnerObject] | None = None
    failed: str = ""
    """Why the kind cannot be watched (discovery failed); empty while fine."""

    @property
    def synced(self) -> bool:
        return self.reflector is not None and self.reflector.synced.is_set()


class OwnerWatcher:
    """One lean reflector per owner kind, started the first time the kind is needed."""

    def __init__(
        self,
        client: KubeClient,
        discovery: Discovery | None = None,
        *,
        page_size: int = 500,
        watch_timeout: int = 300,
        on_change: Callable[[], None] | None = None,
        kinds: Iterable[tuple[str, str]] | None = None,
        on_invalid: Callable[[str, list[str]], None] | None = None,
        on_life_change: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.on_life_change = on_life_change
        self.discovery = discovery or Discovery(client)
        self.allowed = frozenset(kinds) if kinds is not None else None
        """``(apiVersion, kind)`` that may be watched (``kubernetes.ownerKinds``); None: any."""
        self.on_invalid = on_invalid
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.on_change = on_change or (lambda: None)
        self._kinds: dict[tuple[str, str], _Kind] = {}
        self._closed = False

    # -- sync reads (the hot path) ---------------------------------------------------------

    def get(self, ref: OwnerRef) -> OwnerEntry | None:
        """The cached entry of ``ref`` (None: no runway annotation, or kind not synced yet).
        An entry of a different UID (the owner was re-created) is not returned."""
        kind = self._kinds.get(ref.kind_key)
        if kind is None:
            return None
        entry = kind.store.entries.get(f"{ref.namespace}/{ref.name}")
        if entry is None or (ref.uid and entry.uid and entry.uid != ref.uid):
            return None
        return entry

    def synced(self, api_version: str, kind: str) -> bool:
        """Whether the owners of this kind have been listed."""
        found = self._kinds.get((api_version, kind))
        return found is not None and found.synced

    def feeding(self, threshold: float, now: float | None = None) -> bool:
        """Whether every owner kind being watched is still fed: its task runs and its list/watch
        has not been failing for longer than ``threshold`` seconds (``/readyz``). A kind whose
        discovery failed is not watched at all (reported in ``kinds``), so it does not count."""
        for kind in self._kinds.values():
            if kind.failed or kind.reflector is None:
                continue
            if (kind.task is not None and kind.task.done()) or kind.reflector.starving(
                threshold, now
            ):
                return False
        return True

    def kinds(self) -> dict[str, str]:
        """``Kind apiVersion`` → ``synced``, ``syncing`` or why it is not watched (REST API)."""
        out: dict[str, str] = {}
        for (api_version, kind), k in self._kinds.items():
            out[f"{kind} {api_version}"] = k.failed or ("synced" if k.synced else "syncing")
        return out

    # -- writes ----------------------------------------------------------------------------

    def put(
        self,
        ref: OwnerRef,
        uid: str,
        annotations: Mapping[str, str] | None,
        resource_version: str = "",
    ) -> None:
        """Fold an object we just read or patched into the cache (read after write)."""
        kind = self._ensure_entry(ref.kind_key)
        obj = OwnerObject(
            OwnerMeta(
                ref.name, ref.namespace, uid, resource_version, annotations=dict(annotations or {})
            )
        )
        kind.store.upsert(obj)

    def ensure(self, ref: OwnerRef) -> None:
        """Start watching ``ref``'s kind unless already done (no await; safe on the hot path)."""
        if self.allowed is not None and ref.kind_key not in self.allowed:
            return  # never list or watch a kind the config does not name (a Secret...)
        kind = self._ensure_entry(ref.kind_key)
        if kind.task is None and not self._closed:
            with contextlib.suppress(RuntimeError):  # no running loop (sync tests): skip
                name = f"owners-{ref.kind}"
                kind.task = asyncio.get_running_loop().create_task(
                    supervise(
                        name,
                        lambda: self._run(ref.api_version, ref.kind, kind),
                        restart_on_return=False,  # discovery failed: reported in kinds()
                    ),
                    name=name,
                )

    def _ensure_entry(self, key: tuple[str, str]) -> _Kind:
        kind = self._kinds.get(key)
        if kind is None:
            kind = _Kind(_KindStore(self.on_change, self.on_invalid, self.on_life_change))
            self._kinds[key] = kind
        return kind

    async def wait_synced(self, within: float) -> bool:
        """Wait (bounded) until every kind started so far is listed or has failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            pending = [k for k in self._kinds.values() if k.task and not (k.synced or k.failed)]
            if not pending:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)  # polling interval

    async def _run(self, api_version: str, kind_name: str, kind: _Kind) -> None:
        try:
            resource = await self.discovery.resource_for(api_version, kind_name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # discovery down or kind unknown: records of this kind are
            # still written (and read back from our own writes), just not watched.
            kind.failed = f"cannot discover {kind_name} {api_version}: {exc}"
            log.warning(
                "owner kind not watched", kind=kind_name, api_version=api_version, error=str(exc)
            )
            return
        kind.reflector = Reflector(
            self.client,
            resource,
            OwnerObject,
            kind.store,
            page_size=self.page_size,
            watch_timeout=self.watch_timeout,
        )
        log.info("watching owners for eviction records", kind=kind_name, api_version=api_version)
        await kind.reflector.run()

    async def stop(self) -> None:
        """Cancel every reflector and wait for them."""
        self._closed = True
        tasks = [k.task for k in self._kinds.values() if k.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for k in self._kinds.values():
            k.task = None


# --- patches ----------------------------------------------------------------------------------


async def get_owner(client: KubeClient, discovery: Discovery, ref: OwnerRef) -> OwnerObject:
    """GET the owner (fresh from the API server, not the cache)."""
    resource = await discovery.resource_for(ref.api_version, ref.kind)
    return await client.get(resource, ref.name, ref.namespace, into=OwnerObject)


async def patch_annotations(
    client: KubeClient,
    resource: Resource,
    name: str,
    namespace: str | None,
    annotations: Mapping[str, str | None],
    *,
    uid: str | None = None,
    resource_version: str | None = None,
) -> OwnerObject:
    """JSON merge patch of ``metadata.annotations`` (None removes a key) with optional UID and
    resourceVersion preconditions: a mismatch is a 409 ``Conflict``."""
    meta: dict[str, Any] = {"annotations": dict(annotations)}
    if uid:
        meta["uid"] = uid
    if resource_version:
        meta["resourceVersion"] = resource_version
    return await client.patch(
        resource,
        name,
        {"metadata": meta},
        namespace,
        into=OwnerObject,
        patch_type="merge",
    )
