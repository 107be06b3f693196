"""A read-only list+watch of a resource runway may or may not be allowed to read: Jobs (their
sizes, ``app.kube.jobs``) and DaemonSets (their UIDs, ``app.kube.daemonsets``). runway never
writes them.

Without the permission (the API server answers 403 — a chart installed with an older ClusterRole,
a hand-made role — or 404: the resource is not served) runway keeps working without them: it says
so once in the log (``readable`` goes False, and the gauge 0), forgets what it had read, and asks
again every ``REFUSED_RETRY_S`` without a word, so a permission granted later is picked up.
Other failures are the reflector's (retried with backoff, as the pod watch's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Generic, TypeVar

from prometheus_client import Gauge

from app.kube.client import KubeClient
from app.kube.errors import ApiError, Forbidden, NotFound
from app.kube.reflector import Reflector, Store
from app.kube.resources import Resource
from app.logs import get_logger
from app.supervise import stop_task, supervise, wait_within

log = get_logger("kube.readonly")

REFUSED_RETRY_S = 300.0
"""How often a refused list is asked again (quietly)."""

T = TypeVar("T")


class ReadOnlySource(Generic[T]):
    """A reflector on ``resource`` into ``store``, and whether the API server lets runway read
    it. ``without``: what runway does without it (the warning's words)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        kind: type[T],
        store: Store[T],
        *,
        gauge: Gauge,
        without: str,
        page_size: int = 500,
        watch_timeout: int = 300,
        batch_window: float = 0.0,
        refused_retry: float = REFUSED_RETRY_S,
    ) -> None:
        self.resource = resource
        self.store = store
        self.without = without
        self.refused_retry = refused_retry
        self.reflector: Reflector[T] = Reflector(
            client,
            resource,
            kind,
            self,
            page_size=page_size,
            watch_timeout=watch_timeout,
            batch_window=batch_window,
            refused=(Forbidden, NotFound),
        )
        self.readable: bool | None = None
        """True once listed; False while the API server refuses (403/404); None before the
        first answer."""
        self.error: str | None = None
        """The refusal, while it lasts."""
        self.settled = asyncio.Event()
        """Set at the first answer: listed or refused."""
        self._gauge = gauge
        self._task: asyncio.Task[None] | None = None

    @property
    def what(self) -> str:
        """``jobs.batch``, ``daemonsets.apps``: the resource as RBAC names it."""
        r = self.resource
        return f"{r.plural}.{r.group}" if r.group else r.plural

    # -- the reflector's store: forwards, and learns that a LIST went through ------------------

    def replace(self, items: Sequence[T]) -> None:
        """A LIST: the resource is readable."""
        if self.readable is False:
            log.info("readable again", resource=self.what)
        self.readable, self.error = True, None
        self._gauge.set(1)
        self.store.replace(items)
        self.settled.set()

    def upsert(self, obj: T) -> None:
        """A watch event (ADDED, MODIFIED)."""
        self.store.upsert(obj)

    def delete(self, obj: T) -> None:
        """A watch event (DELETED)."""
        self.store.delete(obj)

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> None:
        """List and watch in the background."""
        if self._task is None:
            name = f"reflector-{self.resource.plural}"
            self._task = asyncio.get_running_loop().create_task(
                supervise(name, self._run), name=name
            )

    async def _run(self) -> None:
        while True:
            try:
                await self.reflector.run()
            except (Forbidden, NotFound) as exc:
                self._refused(exc)
            await asyncio.sleep(self.refused_retry)  # a refusal lasts: ask again now and then

    def _refused(self, exc: ApiError) -> None:
        if self.readable is not False:
            log.warning(
                f"cannot read {self.what}: {self.without}; grant get, list and watch on "
                f"{self.what} (the chart's ClusterRole does)",
                code=exc.code,
                error=exc.message,
                retry_every_s=self.refused_retry,
            )
        self.readable, self.error = False, f"{exc.code} {exc.reason or 'Error'}: {exc.message}"
        self._gauge.set(0)
        self.reflector.resource_version = None  # next time: a fresh LIST
        self.store.replace([])  # what runway can no longer follow is not used
        self.settled.set()

    async def wait_settled(self, within: float) -> bool:
        """Wait (bounded) for the first answer, listed or refused; True when it came."""
        return await wait_within(self.settled.wait(), within)

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        await stop_task(task)
