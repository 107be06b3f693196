"""List+watch one resource into a store, forever: the informer pattern without the informer.

LIST (paginated with limit/continue) → ``store.replace`` → WATCH from the list's
resourceVersion with bookmarks → ``store.upsert``/``store.delete`` per event. A watch that ends
or breaks is re-opened from the last resourceVersion seen (with backoff when it broke); 410 Gone
(the version was compacted away) means a fresh LIST, which the store diffs against what it has,
so no object is lost or duplicated across the gap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from app import metrics
from app.kube.client import KubeClient
from app.kube.errors import ApiError, Gone, KubeError, Status, error_from_status
from app.kube.objects import AnyObject, ListMeta, WatchEvent
from app.kube.resources import Resource
from app.kube.retry import Backoff
from app.kube.watch import decode_raw
from app.logs import get_logger
from app.supervise import Turns, in_slices

log = get_logger("kube.reflector")

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Store(Protocol[T_contra]):
    """Where a reflector puts what it sees."""

    def replace(self, items: Sequence[T_contra]) -> None:
        """Hold exactly ``items`` (after a LIST)."""

    def upsert(self, obj: T_contra) -> None:
        """Add or update one object."""

    def delete(self, obj: T_contra) -> None:
        """Remove one object."""


class ObjectList(msgspec.Struct, Generic[T], frozen=True):
    """A ``<Kind>List``: its metadata and items decoded as ``T``."""

    metadata: ListMeta = ListMeta()
    items: list[T] | None = None


_status_decoder = msgspec.json.Decoder(Status)
_any_decoder = msgspec.json.Decoder(AnyObject)


def _resource_version(obj: Any) -> str:
    rv: str = obj.metadata.resourceVersion
    return rv


class Reflector(Generic[T]):
    """Keeps ``store`` in step with ``resource`` on the API server. ``synced`` is set after the
    first complete LIST."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        item_type: type[T],
        store: Store[T],
        *,
        namespace: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        label_selector: str | None = None,
        field_selector: str | None = None,
        backoff: Backoff | None = None,
        transform: Callable[[T], T] | None = None,
        batch_window: float = 0.0,
        refused: tuple[type[KubeError], ...] = (),
    ) -> None:
        self.client = client
        self.refused = refused
        """Errors that end ``run`` (raised to the caller) instead of being retried: what a
        caller can live without the resource for (the Job sizes: 403, no permission)."""
        self.resource = resource
        self.name = resource.plural
        self.store = store
        self.namespace = namespace
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.backoff = backoff or Backoff(base=0.5, cap=10.0)
        self.transform = transform or getattr(store, "prepare", None)
        """Applied to each listed object as its page arrives (default: the store's ``prepare``,
        if any; the pod cache compacts pods there, so a 50,000-pod LIST never holds 50,000
        full-size objects at once). ``store.replace`` then receives the transformed objects."""
        self._list_type: type[ObjectList[T]] = ObjectList[item_type]  # type: ignore[valid-type]
        self._raw_list_type: type[ObjectList[msgspec.Raw]] = ObjectList[msgspec.Raw]
        self._item_decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(item_type)
        self._event_decoder: msgspec.json.Decoder[WatchEvent[T]] = msgspec.json.Decoder(
            WatchEvent[item_type]  # type: ignore[valid-type]
        )
        self.batch_window = batch_window
        """Under load (a batch of watch events came within this long of asking for it), wait
        this long after applying it before reading the next: the events that arrive meanwhile
        are read and applied in one wake (``app.kube.stream``)."""
        self._napping: asyncio.Future[None] | None = None
        self._drain: Callable[[], list[bytes]] | None = None
        """The open stream's lines that have arrived, without waiting (``hurry``)."""
        self._caught: Exception | None = None
        """What a catch-up (``hurry``) met, for the watch loop to raise."""
        self.synced = asyncio.Event()
        self.resource_version: str | None = None
        """The last version seen; the next watch starts here. None: LIST first."""
        self.lists = 0
        self.events = 0
        self._event_counters: dict[str, Any] = {}
        """Watch events applied so far."""
        self.failing_since: float | None = None
        """``time.monotonic()`` of the first failure of the current streak; None while fed."""

    def starving(self, threshold: float, now: float | None = None) -> bool:
        """Whether list/watch has been failing for longer than ``threshold`` seconds (the cache
        is not being fed: ``/readyz`` fails)."""
        since = self.failing_since
        return since is not None and (now or time.monotonic()) - since > threshold

    def _fed(self) -> None:
        self.failing_since = None

    def _failed(self) -> None:
        if self.failing_since is None:
            self.failing_since = time.monotonic()

    async def run(self) -> None:
        """List and watch until cancelled. Never raises (except CancelledError, and the errors
        the caller said it handles: ``refused``)."""
        failures = 0
        last_gone = -1e9
        while True:
            seen = self.events
            try:
                if self.resource_version is None:
                    await self.list_once()
                    failures = 0
                    self._fed()
                opened = time.monotonic()
                events = await self.watch_once(self.resource_version)
                self._fed()  # the watch ran until the server ended it
                if events:
                    failures = 0
                if events or time.monotonic() - opened > 1.0:
                    continue  # the server closed the watch at timeoutSeconds: re-open at once
                # An empty watch that ended at once (a proxy cutting it?): back off, no hot loop.
            except Gone as exc:
                log.info("resource version too old, relisting", resource=self.name, error=str(exc))
                self.resource_version = None
                now = time.monotonic()
                again, last_gone = now - last_gone < 5.0, now
                if not again:
                    continue  # relist at once, unless 410s come back to back
            except KubeError as exc:
                if isinstance(exc, self.refused):
                    raise
                self._failed()
                if self.events > seen:
                    failures = 0  # the stream worked for a while: a fresh break, short wait
                log.warning(
                    "list/watch failed, retrying",
                    resource=self.name,
                    resume_from=self.resource_version,
                    error=str(exc),
                )
            except Exception:  # a decoding bug must not kill the cache forever
                self._failed()
                log.exception("reflector error", resource=self.name)
                self.resource_version = None
            await asyncio.sleep(self.backoff.delay(failures))
            failures = min(failures + 1, 64)  # the delay is capped long before

    async def list_once(self) -> None:
        """One complete (paginated) LIST into the store; sets ``resource_version``."""
        items: list[T] = []
        cont: str | None = None
        while True:
            try:
                meta = await self._list_page(items, cont)
            except Gone:
                if cont is None:
                    raise
                # The continue token outlived etcd's compaction: start the LIST over.
                log.info("continue token expired, restarting list", resource=self.name)
                items, cont = [], None
                continue
            cont = meta.continue_
            if not cont:
                rv = meta.resourceVersion
                break
        if self.lists:
            metrics.WATCH_RELISTS.labels(self.name).inc()
        self.lists += 1
        count = len(items)
        steps = getattr(self.store, "replace_steps", None)
        if steps is None:
            self.store.replace(items)
        else:
            # A store that can apply a LIST in steps (the pod cache): the event loop runs
            # between them, so the verbs are answered during a resync of 150,000 pods. It
            # holds the only reference to the listed objects, releasing them as it goes.
            replace = steps(items)
            del items
            await in_slices(replace)
        self.resource_version = rv
        self.synced.set()
        log.info("listed", resource=self.name, count=count, resource_version=rv)

    async def _list_page(self, items: list[T], cont: str | None) -> ListMeta:
        """One page of the LIST, its objects appended to ``items``; returns its metadata. With
        a transform (the pod cache's compaction) the objects are decoded and transformed one
        by one, the verbs answered between them: a page of 500 pods decoded at once would hold
        the event loop for tens of ms."""
        params: dict[str, Any] = {
            "limit": self.page_size or None,
            "continue_": cont,
            "label_selector": self.label_selector,
            "field_selector": self.field_selector,
        }
        transform = self.transform
        if transform is None:
            page = await self.client.list(
                self.resource, self.namespace, into=self._list_type, **params
            )
            items.extend(page.items or ())
            return page.metadata
        raw = await self.client.list(
            self.resource, self.namespace, into=self._raw_list_type, **params
        )
        decode = self._item_decoder.decode
        turns = Turns()
        for item in raw.items or ():
            items.append(transform(decode(item)))
            await turns.take()
        return raw.metadata

    def _apply(self, line: bytes) -> None:
        """One watch event into the store (its resourceVersion is where the next watch starts)."""
        try:
            event = self._event_decoder.decode(line)
            kind, obj = event.type, event.object
        except msgspec.DecodeError:
            # Not a typed event: an ERROR (its object is a Status), or an object runway cannot
            # read (raised below, as the decoding error it is: the reflector relists).
            raw = decode_raw(line, self.resource.path(self.namespace))
            kind = raw.type
            if kind == "ERROR":
                self._count(kind)
                raise _watch_error(_status_decoder.decode(raw.object)) from None
            if kind == "BOOKMARK":
                self._count(kind)
                self.resource_version = _any_decoder.decode(raw.object).metadata.resourceVersion
                return
            obj = self._item_decoder.decode(raw.object)  # raises what is wrong with it
        self._count(kind)
        if kind == "ADDED" or kind == "MODIFIED":
            self.store.upsert(obj)
        elif kind == "DELETED":
            self.store.delete(obj)
        elif kind != "BOOKMARK":
            return  # an event type of a newer API server: nothing to apply
        self.resource_version = _resource_version(obj)

    def _count(self, kind: str) -> None:
        counter = self._event_counters.get(kind)
        if counter is None:  # each type's child once (labels() costs a lookup)
            counter = self._event_counters[kind] = metrics.WATCH_EVENTS.labels(self.name, kind)
        counter.inc()

    async def _nap(self, seconds: float) -> None:
        """Sleep ``seconds`` unless ``hurry`` ends it first."""
        loop = asyncio.get_running_loop()
        nap: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _wake, nap)
        self._napping = nap
        try:
            await nap
        finally:
            self._napping = None
            timer.cancel()

    def _set_drain(self, drain: Callable[[], list[bytes]] | None) -> None:
        self._drain = drain

    def hurry(self) -> None:
        """Apply now, synchronously, the events that have arrived on the socket, and end the
        batch window (a verb asks about a pod the cache does not hold yet). What goes wrong
        here (a broken stream, an ERROR event) is raised by the watch loop when it resumes."""
        nap = self._napping
        if nap is not None:
            _wake(nap)
        self.catch_up()

    def catch_up(self) -> int:
        """Apply now, synchronously, the events that have arrived on the socket; how many.
        The batch window goes on. Errors are raised by the watch loop, as ``hurry``'s."""
        drain = self._drain
        if drain is None:
            return 0
        before = self.events
        try:
            self._apply_lines(drain())
        except Exception as exc:  # raised in the watch loop, which handles it
            self._drain = None
            self._caught = exc
        return self.events - before

    def _apply_lines(self, lines: list[bytes]) -> int:
        """Apply a batch of event lines in order, counting each in ``events``; how many."""
        for line in lines:
            self._apply(line)
            self.events += 1
        return len(lines)

    async def watch_once(self, resource_version: str | None) -> int:
        """One watch from ``resource_version`` until the server ends it; returns the number of
        events applied. Raises ``Gone`` (relist) or another ``KubeError`` (resume later)."""
        count = 0
        stream = self.client.watch(
            self.resource,
            self.namespace,
            resource_version=resource_version or "",
            timeout_seconds=self.watch_timeout,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            on_open=self._set_drain,
        )
        window = self.batch_window
        waiting_since = time.monotonic()
        self._caught = None
        try:
            async for lines in stream:
                self._raise_caught()
                arrived = time.monotonic()
                count += self._apply_lines(lines)
                self.failing_since = None  # events (bookmarks included) arrive: fed
                if window and arrived - waiting_since < window:
                    # Under load only (this batch came within the window): let the next events
                    # gather. An event after a quiet spell is applied at once — kube-scheduler
                    # asks about a new pod within milliseconds of its creation.
                    await self._nap(window)
                    self._raise_caught()
                waiting_since = time.monotonic()
            self._raise_caught()
        finally:
            await stream.aclose()
        return count

    def _raise_caught(self) -> None:
        caught, self._caught = self._caught, None
        if caught is not None:
            raise caught


def _wake(nap: asyncio.Future[None]) -> None:
    if not nap.done():
        nap.set_result(None)


def _watch_error(status: Status) -> ApiError:
    # An ERROR event's HTTP answer was 200; the real code is in the Status (410 → Gone).
    return error_from_status(status.code or 500, status, method="WATCH")
