"""``batch/v1`` Jobs, read only: list+watch of their size fields (``app.model.job``) into a store
(``app.state.jobs.JobSizes``, plugged in by ``wiring``). runway never writes a Job.

A Job's ``parallelism`` (no more than its ``completions``) is PodsReady's target for its workload
(DESIGN §2.2). Without the permission (the API server answers 403 — a chart installed with an
older ClusterRole, a hand-made role — or 404: the resource is not served) runway keeps working
with the fallback size, the most members the workload has had: it says so once in the log
(``readable`` goes False: ``runway_jobs_readable`` 0, ``GET /v1/cache/summary`` ``jobsReadable``),
forgets the sizes it had, and asks again every ``REFUSED_RETRY_S`` without a word, so a
permission granted later is picked up. Other failures are the reflector's (retried with backoff,
as the pod watch's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from app import metrics
from app.kube.client import KubeClient
from app.kube.errors import ApiError, Forbidden, NotFound
from app.kube.reflector import Reflector, Store
from app.kube.resources import JOBS
from app.logs import get_logger
from app.model.job import Job
from app.supervise import stop_task, supervise, wait_within

log = get_logger("kube.jobs")

REFUSED_RETRY_S = 300.0
"""How often a refused Job list is asked again (quietly)."""


class JobSource:
    """The Job reflector, and whether the API server lets runway read Jobs."""

    def __init__(
        self,
        client: KubeClient,
        store: Store[Job],
        *,
        page_size: int = 500,
        watch_timeout: int = 300,
        batch_window: float = 0.0,
        refused_retry: float = REFUSED_RETRY_S,
    ) -> None:
        self.store = store
        self.refused_retry = refused_retry
        self.reflector: Reflector[Job] = Reflector(
            client,
            JOBS,
            Job,
            self,
            page_size=page_size,
            watch_timeout=watch_timeout,
            batch_window=batch_window,
            refused=(Forbidden, NotFound),
        )
        self.readable: bool | None = None
        """True once Jobs are listed; False while the API server refuses (403/404); None
        before the first answer."""
        self.error: str | None = None
        """The refusal, while it lasts."""
        self.settled = asyncio.Event()
        """Set at the first answer: listed or refused."""
        self._gauge = metrics.JOBS_READABLE
        self._task: asyncio.Task[None] | None = None

    # -- the reflector's store: forwards, and learns that a LIST went through ------------------

    def replace(self, items: Sequence[Job]) -> None:
        """A LIST: Jobs are readable."""
        if self.readable is False:
            log.info("batch/v1 Jobs readable again: PodsReady counts against their parallelism")
        self.readable, self.error = True, None
        self._gauge.set(1)
        self.store.replace(items)
        self.settled.set()

    def upsert(self, obj: Job) -> None:
        """A watch event (ADDED, MODIFIED)."""
        self.store.upsert(obj)

    def delete(self, obj: Job) -> None:
        """A watch event (DELETED)."""
        self.store.delete(obj)

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> None:
        """List and watch Jobs in the background."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                supervise("reflector-jobs", self._run), name="reflector-jobs"
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
                "cannot read batch/v1 Jobs: PodsReady's target for a Job's pods is the most "
                "members the workload has had, not the Job's parallelism; grant get, list and "
                "watch on jobs.batch (the chart's ClusterRole does)",
                code=exc.code,
                error=exc.message,
                retry_every_s=self.refused_retry,
            )
        self.readable, self.error = False, f"{exc.code} {exc.reason or 'Error'}: {exc.message}"
        self._gauge.set(0)
        self.reflector.resource_version = None  # next time: a fresh LIST
        self.store.replace([])  # a size runway can no longer follow is not used
        self.settled.set()

    async def wait_settled(self, within: float) -> bool:
        """Wait (bounded) for the first answer, listed or refused; True when it came."""
        return await wait_within(self.settled.wait(), within)

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        await stop_task(task)
