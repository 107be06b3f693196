"""An in-memory API server for pods and nodes behind a respx router, with faults on demand.

It keeps objects with a global resourceVersion counter and an event history, serves paginated
LISTs (limit/continue), and WATCHes that replay history after the requested version and then
block for new events, the way kube-apiserver does. Faults: ``compact()`` drops history (watches
from older versions get a 410 ERROR event), ``gone_now()`` ends open watches with a 410 ERROR,
``cut_streams()`` breaks open watch connections mid-stream.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx

from app.clock import ManualClock
from app.config.requeue import RequeuingStrategyConfig
from app.kube.workloadrecords import WORKLOAD_RECORDS, KubeRecordStore
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.policy.backoff import no_jitter
from app.policy.queues import QueueTree
from app.state.cache import ClusterCache
from app.state.jobs import JobSizes
from app.state.records import RecordBook
from tests.builders import cluster_cache, pod, raw_node, raw_pod, record_book
from tests.integration.kube_helpers import client
from tests.jsonpatch import PatchFailed, apply_patch

BASE = "https://kube.test"


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    node: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod object as the API server would return it (resourceVersion set by the fake)."""
    obj = raw_pod(
        name,
        namespace=namespace,
        uid=uid or f"uid-{namespace}-{name}",
        labels=labels or {},
        node=node,
        containers=[{"name": "c", "image": "busybox"}],
        phase="Pending",
    )
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    return {"apiVersion": "v1", "kind": "Pod", **obj}


def make_node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A node object."""
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    obj = raw_node(name, uid=f"uid-node-{name}", labels=labels or {}, allocatable=allocatable)
    return {"apiVersion": "v1", "kind": "Node", **obj}


class _WatchStream(httpx.AsyncByteStream):
    def __init__(self, fake: FakeApiServer, kind: str, after: int, gen: int) -> None:
        self.fake = fake
        self.kind = kind
        self.after = after
        self.gen = gen

    async def __aiter__(self) -> AsyncIterator[bytes]:
        fake = self.fake
        sent = 0
        while True:
            async with fake.changed:
                if self.gen != fake.generation:
                    if fake.fault == "gone":
                        yield _line("ERROR", status(410, "Expired", "too old resource version"))
                        return
                    if fake.fault == "cut":
                        raise httpx.ReadError("connection reset by peer (fake)")
                    return
                pending = [e for e in fake.history[self.kind] if e[0] > self.after]
                if not pending:
                    await fake.changed.wait()
                    continue
            for rv, type_, obj in pending:
                self.after = rv
                sent += 1
                yield _line(type_, obj)

    async def aclose(self) -> None:
        return None


def _line(type_: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": type_, "object": obj}).encode() + b"\n"


def status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    """A Status object as kube-apiserver sends it (``details`` when given)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return body


VERSION = {"major": "1", "minor": "20", "gitVersion": "v1.20.2"}
"""What the fakes answer on ``/version``: the release the e2e suite also runs."""


@dataclass
class FakeApiServer:
    """Pods, nodes and Jobs with list/watch semantics; ``router`` is the respx router to inject.
    ``list_errors`` answer the next LISTs of any kind; ``refuse`` the LISTs and WATCHes of a kind
    with that code (403: no permission) while set."""

    rv: int = 100
    objects: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"pods": {}, "nodes": {}}
    )
    history: dict[str, list[tuple[int, str, dict[str, Any]]]] = field(
        default_factory=lambda: {"pods": [], "nodes": []}
    )
    compacted: int = 0
    generation: int = 0
    fault: str = ""
    lists: list[dict[str, str]] = field(default_factory=list)
    watches: list[dict[str, str]] = field(default_factory=list)
    list_errors: list[int] = field(default_factory=list)
    """HTTP codes to answer the next LISTs with (popped one per LIST)."""
    refuse: dict[str, int] = field(default_factory=dict)
    """kind → HTTP code answered to its every LIST and WATCH (403: RBAC says no)."""
    router: respx.Router = field(init=False)
    _wakers: set[asyncio.Task[None]] = field(init=False, default_factory=set)
    changed: asyncio.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = asyncio.Condition()
        self.router = respx.Router(base_url=BASE, assert_all_called=False)
        self.router.get(path="/api/v1/pods").mock(side_effect=self._handle("pods"))
        self.router.get(path="/api/v1/nodes").mock(side_effect=self._handle("nodes"))
        self.router.get(path="/apis/batch/v1/jobs").mock(side_effect=self._handle("jobs"))
        self.router.get(path="/apis/apps/v1/daemonsets").mock(
            side_effect=self._handle("daemonsets")
        )
        self.router.get(path="/version").mock(return_value=httpx.Response(200, json=VERSION))
        for kind in ("jobs", "daemonsets"):
            self.objects.setdefault(kind, {})
            self.history.setdefault(kind, [])

    @property
    def transport(self) -> httpx.MockTransport:
        """Hand this to ``KubeClient(transport=...)``."""
        return httpx.MockTransport(self.router.async_handler)

    # -- state changes (no await needed by tests: notification is scheduled) --------------

    def _key(self, kind: str, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        namespaced = kind in ("pods", "jobs", "daemonsets")
        return f"{meta.get('namespace', '')}/{meta['name']}" if namespaced else meta["name"]

    def _record(self, kind: str, type_: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj = json.loads(json.dumps(obj))
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = self._key(kind, obj)
        if type_ == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = obj
        self.history[kind].append((self.rv, type_, obj))
        self._notify()

    def _notify(self) -> None:
        async def wake() -> None:
            async with self.changed:
                self.changed.notify_all()

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # set up before any loop runs: no watcher to wake
        self._wakers.add(task := loop.create_task(wake()))
        task.add_done_callback(self._wakers.discard)

    def add(self, kind: str, obj: dict[str, Any]) -> None:
        """Create (ADDED) or, when it exists, update (MODIFIED) an object."""
        exists = self._key(kind, obj) in self.objects[kind]
        self._record(kind, "MODIFIED" if exists else "ADDED", obj)

    def delete(self, kind: str, key: str) -> None:
        """Delete an object by key (``ns/name`` for pods and jobs, name for nodes)."""
        self._record(kind, "DELETED", self.objects[kind][key])

    def silently(self, kind: str, change: str, obj: dict[str, Any] | str) -> None:
        """Change state without any watch seeing it (as if it happened while compacted)."""
        if change == "delete":
            assert isinstance(obj, str)
            self.objects[kind].pop(obj)
            self.rv += 1
            return
        assert isinstance(obj, dict)
        self.rv += 1
        obj = json.loads(json.dumps(obj))
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[kind][self._key(kind, obj)] = obj

    def compact(self) -> None:
        """Forget history up to now: watches from older versions get 410."""
        self.compacted = self.rv
        for kind in self.history:
            self.history[kind] = []

    def gone_now(self) -> None:
        """End every open watch with an ERROR 410 event."""
        self.fault = "gone"
        self.generation += 1
        self._notify()

    def cut_streams(self) -> None:
        """Break every open watch connection (ReadError in the client)."""
        self.fault = "cut"
        self.generation += 1
        self._notify()

    # -- HTTP ------------------------------------------------------------------------------

    def _handle(self, kind: str) -> Any:
        def handler(request: httpx.Request) -> httpx.Response:
            params = dict(request.url.params)
            code = self.refuse.get(kind)
            if code is not None:
                self.lists.append({"kind": kind, "refused": str(code), **params})
                reason = "Forbidden" if code == 403 else "NotFound"
                return httpx.Response(code, json=status(code, reason, f"{kind} is forbidden"))
            if params.get("watch") == "true":
                return self._watch(kind, params)
            return self._list(kind, params)

        return handler

    def _list(self, kind: str, params: dict[str, str]) -> httpx.Response:
        self.lists.append({"kind": kind, **params})
        if self.list_errors:
            code = self.list_errors.pop(0)
            return httpx.Response(code, json=status(code, "Expired", "continue token expired"))
        items = sorted(self.objects[kind].items())
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0) or len(items) or 1
        page = [obj for _, obj in items[start : start + limit]]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page}
        return httpx.Response(200, json=body)

    def _watch(self, kind: str, params: dict[str, str]) -> httpx.Response:
        self.watches.append({"kind": kind, **params})
        after = int(params.get("resourceVersion") or 0)
        if after < self.compacted:
            body = _line("ERROR", status(410, "Expired", f"too old resource version: {after}"))
            return httpx.Response(200, content=body)
        return httpx.Response(200, stream=_WatchStream(self, kind, after, self.generation))


# --- jobs, pods and records over a respx router (eviction records, PodsReady, the waker) ----

BATCH = {
    "kind": "APIResourceList",
    "groupVersion": "batch/v1",
    "resources": [
        {"name": "jobs", "kind": "Job", "namespaced": True},
        {"name": "jobs/status", "kind": "Job", "namespaced": True},
    ],
}

NS = r"/namespaces/(?P<namespace>[^/]+)"
NAME = r"/(?P<name>[^/]+)(?P<status>/status)?"
RECORDS = re.escape(f"/apis/{WORKLOAD_RECORDS.group}/{WORKLOAD_RECORDS.version}")
FAULT = "fault"

SideEffect = Callable[..., httpx.Response | None]
"""A respx side effect: the request (and the route, when it asks) in, an answer or None out."""
Obj = dict[str, Any]
Store = dict[str, Obj]
ObjectVerb = Callable[[httpx.Request, Store, str, Obj, bool], httpx.Response]
"""What a method does to one pod or Job: (request, its store, its key, it, /status?)."""


class _Hang(httpx.AsyncByteStream):
    """A watch that stays open and sends nothing until the test ends."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self.stop.wait()
        yield b""

    async def aclose(self) -> None:
        return None


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = v


def _body(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


def _status(code: int, reason: str, message: str) -> httpx.Response:
    return httpx.Response(
        code, json={"kind": "Status", "code": code, "reason": reason, "message": message}
    )


def _event(request: httpx.Request) -> httpx.Response:
    return httpx.Response(201 if request.method == "POST" else 200, json=_body(request))


def _pass_on(request: httpx.Request) -> None:
    """Answers nothing: the request goes on to the next route."""
    del request


def once(answer: httpx.Response) -> SideEffect:
    """A side effect that answers ``answer`` the first time and passes every request on after
    (a route records only the calls it answered)."""

    def side_effect(request: httpx.Request, route: respx.Route) -> httpx.Response | None:
        del request
        return None if route.called else answer

    return side_effect


@dataclass
class FakeApi:
    """Jobs and pods with discovery, GET, merge/strategic PATCH (with preconditions), DELETE,
    and a LIST + hanging WATCH of jobs. ``conflicts`` PATCHes of owners answer 409 first.
    ``router``: a route per method and path, each a path regex (respx replaces a route of the
    same pattern: a ``fault``'s plain path never is one), behind the one ``fault`` route."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    """WorkloadRecords by ``namespace/name`` (POST, GET, PUT status, merge PATCH, DELETE)."""
    rv: int = 100
    conflicts: int = 0
    between_conflicts: Any = None
    record_refusal: tuple[int, str] | None = None
    """``(code, reason)`` every record write is answered with (a quota, an old schema)."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    router: respx.Router = field(init=False)

    def __post_init__(self) -> None:
        r = self.router = respx.Router(base_url=BASE, assert_all_called=False)
        r.route(name=FAULT).mock(side_effect=_pass_on)  # first: see ``fault``
        r.get(path__regex=r"^/version$").respond(json=VERSION)
        r.get(path__regex=r"^/apis/batch/v1$").respond(json=BATCH)
        # Events: accepted (POST, or PATCH of a count), kept only in the router's calls
        events = r"^/api/v1/namespaces/[^/]+/events(?:/[^/]+)?$"
        r.route(path__regex=events).mock(side_effect=_event)
        r.get(path__regex=r"^/apis/apps/v1/daemonsets$").mock(side_effect=self._listed({}))
        jobs = r"^/apis/batch/v1(?:/namespaces/[^/]+)?/jobs$"
        r.get(path__regex=jobs).mock(side_effect=self._listed(self.jobs))
        for prefix, kind in (("/api/v1", "pods"), ("/apis/batch/v1", "jobs")):
            path = rf"^{prefix}{NS}/{kind}{NAME}$"
            r.get(path__regex=path).mock(side_effect=self._object(kind, self._get))
            r.delete(path__regex=path).mock(side_effect=self._object(kind, self._delete))
            r.patch(path__regex=path).mock(side_effect=self._object(kind, self._patch))
        records = rf"^{RECORDS}(?:/namespaces/[^/]+)?/workloadrecords$"
        r.get(path__regex=records).mock(side_effect=self._listed(self.records))
        r.post(path__regex=rf"^{RECORDS}{NS}/workloadrecords$").mock(
            side_effect=self._create_record
        )
        r.route(path__regex=rf"^{RECORDS}{NS}/workloadrecords{NAME}$").mock(
            side_effect=self._record
        )

    @property
    def transport(self) -> httpx.MockTransport:
        """Hand this to ``KubeClient(transport=...)``."""
        return httpx.MockTransport(self.router.async_handler)

    @property
    def requests(self) -> list[tuple[str, str, Any]]:
        """Every request answered, in order: ``(method, path, JSON body or None)``."""
        return [(c.request.method, c.request.url.path, _body(c.request)) for c in self.router.calls]

    def calls(self, method: str, prefix: str = "") -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] == method and r[1].startswith(prefix)]

    def fault(
        self, answer: httpx.Response | SideEffect | None = None, **pattern: Any
    ) -> respx.Route:
        """Answer the requests ``pattern`` matches (respx lookups: ``method``, ``path``…) with
        ``answer`` before the fake does: a response, or a side effect (None from it passes the
        request on to the fake, as ``once`` does after its first answer). ``fault()`` ends it.
        The route, for its ``calls`` (the fault's only: one fault at a time)."""
        route = self.router.route(name=FAULT, **pattern)  # a name's route keeps its place
        route.reset()
        if isinstance(answer, httpx.Response):
            return route.mock(return_value=answer)
        return route.mock(side_effect=answer or _pass_on)

    # -- routes ------------------------------------------------------------------------------

    def _listed(self, objects: dict[str, dict[str, Any]]) -> SideEffect:
        """A LIST of ``objects`` as they are then, or a WATCH that hangs until ``stop``."""

        def side_effect(request: httpx.Request) -> httpx.Response:
            if request.url.params.get("watch") == "true":
                return httpx.Response(200, stream=_Hang(self.stop))
            meta = {"resourceVersion": str(self.rv)}
            return httpx.Response(200, json={"metadata": meta, "items": list(objects.values())})

        return side_effect

    def _object(self, kind: str, verb: ObjectVerb) -> SideEffect:
        """A side effect for one pod or Job: 404 when there is none, else ``verb`` on it."""
        store = self.jobs if kind == "jobs" else self.pods

        def side_effect(
            request: httpx.Request, namespace: str, name: str, status: str | None
        ) -> httpx.Response:
            key = f"{namespace}/{name}"
            obj = store.get(key)
            if obj is None:
                return _status(404, "NotFound", f"{kind} {key} not found")
            return verb(request, store, key, obj, bool(status))

        return side_effect

    def _get(
        self, request: httpx.Request, store: Store, key: str, obj: Obj, status: bool
    ) -> httpx.Response:
        return httpx.Response(200, json=obj)

    def _delete(
        self, request: httpx.Request, store: Store, key: str, obj: Obj, status: bool
    ) -> httpx.Response:
        pre = (_body(request) or {}).get("preconditions", {})
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            return _status(409, "Conflict", "Precondition failed: UID")
        del store[key]
        return httpx.Response(200, json=obj)

    def _patch(
        self, request: httpx.Request, store: Store, key: str, obj: Obj, status: bool
    ) -> httpx.Response:
        body = _body(request)
        if request.headers.get("content-type") == "application/json-patch+json":
            try:
                patched = apply_patch(obj, body)
            except PatchFailed as exc:
                return _status(422, "Invalid", f"the server rejected our request: {exc}")
            store[key] = patched
            self.rv += 1
            patched["metadata"]["resourceVersion"] = str(self.rv)
            return httpx.Response(200, json=patched)
        meta = (body or {}).get("metadata", {})
        if store is self.jobs and self.conflicts > 0:
            self.conflicts -= 1
            if self.between_conflicts:
                self.between_conflicts(obj)
            return _status(409, "Conflict", "the object has been modified")
        if meta.get("uid") and meta["uid"] != obj["metadata"]["uid"]:
            return _status(409, "Conflict", "Precondition failed: UID")
        if (
            meta.get("resourceVersion")
            and meta["resourceVersion"] != obj["metadata"]["resourceVersion"]
        ):
            return _status(409, "Conflict", "the object has been modified")
        patch = json.loads(json.dumps(body))
        patch.get("metadata", {}).pop("uid", None)
        patch.get("metadata", {}).pop("resourceVersion", None)
        if status:  # strategic: conditions merged by type
            changes = patch.get("status", {})
            conds = obj.setdefault("status", {}).setdefault("conditions", [])
            for c in changes.pop("conditions", []):
                conds[:] = [x for x in conds if x["type"] != c["type"]] + [c]
            _merge(obj["status"], changes)
        else:
            _merge(obj, patch)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return httpx.Response(200, json=obj)

    def _create_record(self, request: httpx.Request, namespace: str) -> httpx.Response:
        if self.record_refusal is not None:
            return self._refused()
        body = _body(request)
        workload = body["spec"]["workload"]
        if len(workload["name"]) > 253 or len(workload["source"]) > 316:
            # the chart's CRD schema (maxLength), as the API server applies it
            return _status(422, "Invalid", "spec.workload: Too long")
        key = f"{namespace}/{body['metadata']['name']}"
        if key in self.records:
            return _status(409, "AlreadyExists", f"workloadrecords {key} exists")
        self.rv += 1
        obj = json.loads(json.dumps(body))
        obj["metadata"].update(
            uid=f"uid-wlr-{key}", resourceVersion=str(self.rv), namespace=namespace
        )
        obj.pop("status", None)  # the status subresource: ignored on create
        self.records[key] = obj
        return httpx.Response(201, json=obj)

    def _refused(self) -> httpx.Response:
        assert self.record_refusal is not None
        code, reason = self.record_refusal
        return _status(code, reason, f"workloadrecords refused: {reason}")

    def _record(
        self, request: httpx.Request, namespace: str, name: str, status: str | None
    ) -> httpx.Response:
        """GET, DELETE, PUT ``/status`` and merge PATCH of one WorkloadRecord."""
        if request.method != "GET" and self.record_refusal is not None:
            return self._refused()
        key = f"{namespace}/{name}"
        obj = self.records.get(key)
        if obj is None:
            return _status(404, "NotFound", f"workloadrecords {key} not found")
        if request.method == "GET":
            return httpx.Response(200, json=obj)
        if request.method == "DELETE":
            del self.records[key]
            return httpx.Response(200, json=obj)
        if self.conflicts > 0:
            self.conflicts -= 1
            if self.between_conflicts:
                self.between_conflicts(obj)
            return _status(409, "Conflict", "the object has been modified")
        body = _body(request)
        meta = (body or {}).get("metadata", {})
        if (
            meta.get("resourceVersion")
            and meta["resourceVersion"] != obj["metadata"]["resourceVersion"]
        ):
            return _status(409, "Conflict", "the object has been modified")
        if request.method == "PUT":
            assert status, "runway writes a record's status only through /status"
            obj["status"] = body.get("status", {})
        else:
            assert request.method == "PATCH"
            patch = json.loads(json.dumps(body))
            patch.get("metadata", {}).pop("resourceVersion", None)
            patch.pop("status", None)
            _merge(obj, patch)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return httpx.Response(200, json=obj)

    def record(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The WorkloadRecord ``namespace/name`` (None: none)."""
        return self.records.get(f"{namespace}/{name}")


# --- an eviction record book over the fake API server ---------------------------------------

T0 = 1_800_000_000.0


def cache_with(*pods: dict[str, Any]) -> ClusterCache:
    cache = cluster_cache()
    cache.replace_pods([pod(p) for p in pods])
    return cache


def make_store(
    api: FakeApi,
    cache: ClusterCache,
    cfg: RequeuingStrategyConfig | None = None,
    *,
    jobs: JobSizes | None = None,
) -> RecordBook:
    kube = client(api.transport)
    clock = ManualClock(T0)
    return record_book(
        cache,
        cfg or RequeuingStrategyConfig(backoff_limit_count=3),
        clock,
        queues=QueueTree(),
        store=KubeRecordStore(kube, clock),
        jitter=no_jitter,
        jobs=jobs,
    )


async def close_store(store: RecordBook, api: FakeApi) -> None:
    api.stop.set()
    assert isinstance(store.store, KubeRecordStore)
    await store.store.stop()
    await store.store.client.aclose()


RECORD = EvictionRecord(PODS_READY_TIMEOUT, T0, count=1, requeue_at=T0 + 60, first_eviction_time=T0)
