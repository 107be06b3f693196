"""``WorkloadRecord`` objects (``app.model.record``): list+watch into a store readable without
I/O, and the read-modify-write that changes one.

* ``RecordStore`` is the reflector's store: ``(namespace, name)`` → the record's state. It tells
  its listener of every change (old and new state), so the gate book sees preemptions in flight
  that another replica (or an earlier run) wrote.
* ``KubeRecordStore`` runs the reflector and writes: a record is created (``POST``, with the
  workload's controllers as ownerReferences) the first time runway has state for the workload,
  then its status is replaced through the status subresource with a resourceVersion
  precondition; a 409 re-reads the record (``GET``) and computes again
  (``app.kube.retry``, ``on_conflict``). ``spec.active`` is written on the object itself.

Without the resource — the CRD not installed (``helm install --skip-crds``, a forgotten
``kubectl apply`` when running from a kubeconfig: the API server answers 404) or no permission
(403) — runway has nowhere to keep state, so it says so once, clearly (``refusal``: what is
wrong and the command that fixes it), is not ready (``/readyz`` answers the reason),
``runway_records_available`` is 0 (the chart's alert ``RunwayRecordsUnavailable``), writes
nothing (``available``: the evictor and the life recorder wait) and asks again quietly every
``REFUSED_RETRY_S``: installing the CRD is picked up without a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from app import metrics
from app.clock import Clock
from app.kube.client import KubeClient
from app.kube.errors import (
    AlreadyExists,
    ApiError,
    ApiUnavailable,
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
)
from app.kube.reflector import ObjectList, Reflector
from app.kube.resources import Resource
from app.kube.retry import RetryPolicy, retrying
from app.logs import get_logger
from app.model.record import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    Change,
    Listener,
    OwnerTuple,
    RecordState,
    RecordWriteFailed,
    WorkloadRecordObject,
    identity_matches,
    new_object,
    next_state,
    state_of,
    status_of,
)
from app.supervise import stop_task, supervise, wait_within

log = get_logger("kube.workloadrecords")

WORKLOAD_RECORDS = Resource(GROUP, VERSION, PLURAL)

CRD_FIX = "kubectl apply -f helm/runway/crds/"
"""The command that installs (or upgrades) the WorkloadRecord CRD from the chart."""

REFUSED_RETRY_S = 10.0
"""How often a refused WorkloadRecord list is asked again (quietly)."""


class RecordsUnavailable(KubeError, RecordWriteFailed):
    """The API server refuses WorkloadRecords (no CRD, no permission): nothing was written
    (``RecordWriteFailed`` ``unavailable``: the record book keeps the state in memory)."""

    def __init__(self, message: str) -> None:
        RecordWriteFailed.__init__(self, "unavailable", message)


def refusal(exc: ApiError) -> str:
    """What an operator reads when the API server refuses WorkloadRecords: the cause and the
    fix (the start log, ``/readyz``, ``check-config --kubeconfig``)."""
    if isinstance(exc, NotFound):
        return (
            f"the WorkloadRecord CRD ({PLURAL}.{GROUP}, {API_VERSION}) is not installed "
            f"(404 on the list): runway keeps its state there; install it: {CRD_FIX}"
        )
    return (
        f"runway may not list {PLURAL}.{GROUP} ({exc.code} {exc.reason or 'Forbidden'}: "
        f"{exc.message}): grant get, list, watch, create, patch and delete on {PLURAL} and "
        f"get and update on {PLURAL}/status (the chart's ClusterRole does; the CRD itself: "
        f"{CRD_FIX})"
    )


def _failure_reason(exc: KubeError) -> str:
    """``RecordWriteFailed.reason`` of an API error (``model.record.WRITE_FAILURES``)."""
    if isinstance(exc, Invalid):
        return "invalid"
    if isinstance(exc, Forbidden):  # RBAC, or the namespace's ResourceQuota is used up
        return "forbidden"
    if isinstance(exc, Conflict):
        return "conflict"
    if isinstance(exc, ApiUnavailable | ServerError | TooManyRequests):
        return "unavailable"
    return "error"


def _check_identity(
    current: RecordState, identity: tuple[str, str], namespace: str, name: str
) -> None:
    """A record of that name written for another workload is not this one's to change."""
    if current.version and not identity_matches(current, identity):
        raise RecordWriteFailed(
            "foreign",
            f"workload record {namespace}/{name} belongs to workload {current.workload[0]!r} "
            f"({current.workload[1]}), not {identity[0]!r} ({identity[1]})",
        )


def _key(obj: WorkloadRecordObject) -> tuple[str, str]:
    return obj.metadata.namespace, obj.metadata.name


def _newer_or_same(new: WorkloadRecordObject, old: WorkloadRecordObject) -> bool:
    """Whether ``new`` is not older than ``old`` (opaque versions are never called older)."""
    a, b = new.metadata.resourceVersion, old.metadata.resourceVersion
    if new.metadata.uid != old.metadata.uid or not (a.isdigit() and b.isdigit()):
        return True
    return len(a) > 20 or len(b) > 20 or int(a) >= int(b)


async def probe(client: KubeClient) -> str | None:
    """Whether the cluster serves runway's WorkloadRecords to ``client``'s identity (one LIST
    of one item, ``check-config --kubeconfig``): None when it does, else what is wrong and what
    to do (``refusal``), or why the API server could not be asked."""
    try:
        await client.list(WORKLOAD_RECORDS, into=ObjectList[msgspec.Raw], limit=1)
    except (Forbidden, NotFound) as exc:
        return refusal(exc)
    except KubeError as exc:
        return f"cannot ask the API server for {PLURAL}.{GROUP}: {exc}"
    return None


class RecordStore:
    """The records runway has read, by ``(namespace, name)``."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], WorkloadRecordObject] = {}
        self.states: dict[tuple[str, str], RecordState] = {}
        self.listeners: list[Listener] = []
        self.per_namespace: dict[str, int] = {}
        """Records held per namespace (``kubernetes.recordsPerNamespace``)."""

    @property
    def available(self) -> bool:
        """Whether the records are there (``KubeRecordStore``: not refused)."""
        return True

    def get(self, namespace: str, name: str) -> RecordState | None:
        """The state of a record (None: runway has none for that workload)."""
        return self.states.get((namespace, name))

    def object(self, namespace: str, name: str) -> WorkloadRecordObject | None:
        """The record as last read (for writes: its resourceVersion)."""
        return self.objects.get((namespace, name))

    def _tell(self, namespace: str, old: RecordState | None, new: RecordState | None) -> None:
        if old == new:
            return
        for listener in list(self.listeners):
            listener(namespace, old, new)

    def _put(self, obj: WorkloadRecordObject) -> None:
        key = _key(obj)
        held = self.objects.get(key)
        if held is not None and not _newer_or_same(obj, held):
            return  # our own write's answer arrived after the watch brought a newer version
        if held is None:
            self.per_namespace[key[0]] = self.per_namespace.get(key[0], 0) + 1
        self.objects[key] = obj
        old = self.states.get(key)
        new = state_of(obj)
        self.states[key] = new
        self._tell(key[0], old, new)

    def replace(self, items: Sequence[WorkloadRecordObject]) -> None:
        """Hold exactly ``items`` (after a LIST)."""
        seen = {_key(o) for o in items}
        for key in [k for k in self.objects if k not in seen]:
            self._forget(key)
        for obj in items:
            self._put(obj)

    def upsert(self, obj: WorkloadRecordObject) -> None:
        """Add or update one record."""
        self._put(obj)

    def delete(self, obj: WorkloadRecordObject) -> None:
        """Forget one record."""
        key = _key(obj)
        held = self.objects.get(key)
        if held is None or (obj.metadata.uid and held.metadata.uid != obj.metadata.uid):
            return
        self._forget(key)

    def _forget(self, key: tuple[str, str]) -> None:
        del self.objects[key]
        left = self.per_namespace.get(key[0], 1) - 1
        if left > 0:
            self.per_namespace[key[0]] = left
        else:
            self.per_namespace.pop(key[0], None)
        self._tell(key[0], self.states.pop(key, None), None)

    def all(self) -> list[tuple[str, str, RecordState]]:
        """Every record: ``(namespace, name, state)``."""
        return [(ns, name, s) for (ns, name), s in self.states.items()]


class KubeRecordStore(RecordStore):
    """The store fed by a reflector on ``workloadrecords``, and the writes."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        page_size: int = 500,
        watch_timeout: int = 300,
        conflict_policy: RetryPolicy | None = None,
        refused_retry: float = REFUSED_RETRY_S,
        records_per_namespace: int = 0,
    ) -> None:
        super().__init__()
        self.client = client
        self.clock = clock
        self.records_per_namespace = records_per_namespace
        """No record is created in a namespace holding this many (0: no cap)."""
        self.hold_by = ""
        """What holds a held workload's pods, said in its ``Held`` condition: ``schedulingGate``
        or ``filter`` (set at start from the release; empty: no such condition)."""
        self.conflict_policy = conflict_policy or RetryPolicy(total=10.0)
        self.refused_retry = refused_retry
        self.reflector: Reflector[WorkloadRecordObject] = Reflector(
            client,
            WORKLOAD_RECORDS,
            WorkloadRecordObject,
            self,
            page_size=page_size,
            watch_timeout=watch_timeout,
            refused=(Forbidden, NotFound),
        )
        self.error: str | None = None
        """Why the API server refuses the records (``refusal``), while it does."""
        self.settled = asyncio.Event()
        """Set at the first answer: listed or refused."""
        self._task: asyncio.Task[None] | None = None
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    # -- whether the records are there ------------------------------------------------------

    @property
    def available(self) -> bool:
        """False while the API server refuses WorkloadRecords (writes are not attempted)."""
        return self.error is None

    def replace(self, items: Sequence[WorkloadRecordObject]) -> None:
        """A LIST went through: the records are there (again)."""
        if self.error is not None:
            log.info("WorkloadRecords readable again: runway keeps its state there")
        self.error = None
        metrics.RECORDS_AVAILABLE.set(1)
        super().replace(items)
        self.settled.set()

    def _refused(self, exc: ApiError) -> None:
        message = refusal(exc)
        if self.error != message:  # once, not once per retry
            log.error(message, code=exc.code, retry_every_s=self.refused_retry)
        self.error = message
        metrics.RECORDS_AVAILABLE.set(0)
        self.reflector.resource_version = None  # next time: a fresh LIST
        self.settled.set()

    async def _run(self) -> None:
        while True:
            try:
                await self.reflector.run()
            except (Forbidden, NotFound) as exc:
                self._refused(exc)
            await asyncio.sleep(self.refused_retry)  # a refusal lasts: ask again now and then

    # -- the reflector ---------------------------------------------------------------------

    def start(self) -> None:
        """List and watch in a supervised task."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                supervise("workloadrecords", self._run), name="workloadrecords"
            )

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        await stop_task(task)

    @property
    def synced(self) -> bool:
        """Whether the records have been listed."""
        return self.reflector.synced.is_set()

    async def wait_synced(self, within: float) -> bool:
        """Wait (bounded) for the first LIST; False when the bound passed first or the API
        server refused (``error`` says why)."""
        await wait_within(self.settled.wait(), within)
        return self.synced

    def feeding(self, threshold: float) -> bool:
        """Whether list/watch works (``/readyz``)."""
        task = self._task
        return (
            self.available
            and not (task is not None and task.done())
            and not self.reflector.starving(threshold)
        )

    # -- writes ----------------------------------------------------------------------------

    async def update(
        self,
        namespace: str,
        name: str,
        identity: tuple[str, str],
        owners: tuple[OwnerTuple, ...],
        change: Change,
    ) -> RecordState | None:
        """Read-modify-write the record ``namespace/name`` (created for the workload
        ``identity`` = (name, source) when absent); returns the state written (None: nothing
        to write). Writes to one record from this process are serialised. While the API
        server refuses the records (``available``) nothing is sent: ``RecordsUnavailable``.
        Raises ``RecordWriteFailed`` (with why) when the record cannot be written."""
        if self.error is not None:
            raise RecordsUnavailable(self.error)
        lock = self._locks.setdefault((namespace, name), asyncio.Lock())
        attempts = 0

        async def attempt() -> RecordState | None:
            nonlocal attempts
            attempts += 1
            if attempts > 1:  # a 409: someone wrote in between; read what they wrote
                await self.refresh(namespace, name)
            return await self._attempt(namespace, name, identity, owners, change)

        try:
            async with lock:
                return await retrying(
                    attempt,
                    self.conflict_policy,
                    idempotent=False,
                    on_conflict=True,
                    what=f"workload record {namespace}/{name}",
                )
        except KubeError as exc:
            raise RecordWriteFailed(_failure_reason(exc), str(exc)) from exc
        finally:
            if not lock.locked() and len(self._locks) > 10_000:
                self._locks.pop((namespace, name), None)

    async def _attempt(
        self,
        namespace: str,
        name: str,
        identity: tuple[str, str],
        owners: tuple[OwnerTuple, ...],
        change: Change,
    ) -> RecordState | None:
        obj = self.object(namespace, name)
        current = state_of(obj) if obj is not None else RecordState()
        _check_identity(current, identity, namespace, name)
        new = next_state(change, current)
        if new is None:
            return None
        if obj is None:
            obj = await self._create(namespace, identity, owners, active=new.active)
            current = state_of(obj)
            _check_identity(current, identity, namespace, name)
            new = change(current)  # against what the API server holds now
            if new is None or new == current:
                return None
        if new.active != obj.spec.active:
            obj = await self._write_active(obj, new.active)
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": obj.metadata.name,
                "namespace": namespace,
                "resourceVersion": obj.metadata.resourceVersion,
            },
            "spec": msgspec.to_builtins(obj.spec),
            "status": status_of(new, self.clock.now(), self.hold_by),
        }
        written = await self.client.replace(
            WORKLOAD_RECORDS,
            obj.metadata.name,
            body,
            namespace,
            into=WorkloadRecordObject,
            subresource="status",
        )
        self.upsert(written)  # read after write: the watch brings it a moment later
        log.debug("workload record written", record=f"{namespace}/{name}")
        return state_of(written)

    async def _create(
        self,
        namespace: str,
        identity: tuple[str, str],
        owners: tuple[OwnerTuple, ...],
        *,
        active: bool,
    ) -> WorkloadRecordObject:
        cap = self.records_per_namespace
        if cap and self.per_namespace.get(namespace, 0) >= cap:
            raise RecordWriteFailed(
                "capped",
                f"namespace {namespace} holds {cap} workload records "
                "(kubernetes.recordsPerNamespace): no new one is created",
            )
        body = new_object(namespace, identity[0], identity[1], owners, active=active)
        name = body["metadata"]["name"]
        try:
            created = await self.client.create(
                WORKLOAD_RECORDS, body, namespace, into=WorkloadRecordObject
            )
        except AlreadyExists:
            created = await self.client.get(
                WORKLOAD_RECORDS, name, namespace, into=WorkloadRecordObject
            )
        self.upsert(created)
        return created

    async def _write_active(self, obj: WorkloadRecordObject, active: bool) -> WorkloadRecordObject:
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": obj.metadata.resourceVersion},
            "spec": {"active": active},
        }
        written = await self.client.patch(
            WORKLOAD_RECORDS,
            obj.metadata.name,
            patch,
            obj.metadata.namespace,
            into=WorkloadRecordObject,
            patch_type="merge",
        )
        self.upsert(written)
        return written

    async def refresh(self, namespace: str, name: str) -> None:
        """GET the record again into the store (after a 409 elsewhere)."""
        try:
            obj = await self.client.get(
                WORKLOAD_RECORDS, name, namespace, into=WorkloadRecordObject
            )
        except NotFound:
            held = self.object(namespace, name)
            if held is not None:
                self.delete(held)
            return
        self.upsert(obj)

    async def remove(self, namespace: str, name: str, uid: str) -> bool:
        """Delete a record (UID precondition); False when it was gone already (or re-created:
        a 409 names a newer record, which is not this one's to delete)."""
        try:
            await self.client.delete(WORKLOAD_RECORDS, name, namespace, uid=uid or None)
        except (NotFound, Conflict):
            return False
        held = self.object(namespace, name)
        if held is not None and (not uid or held.metadata.uid == uid):
            self.delete(held)
        return True
