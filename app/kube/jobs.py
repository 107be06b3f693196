"""``batch/v1`` Jobs, read only: list+watch of their size fields (``app.model.job``) into a store
(``app.state.jobs.JobSizes``, plugged in by ``wiring``). runway never writes a Job.

A Job's ``parallelism`` (no more than its ``completions``) is PodsReady's target for its workload
(DESIGN §2.2). Without the permission runway keeps working with the fallback size, the most
members the workload has had (``app.kube.readonly``: ``runway_jobs_readable`` 0,
``GET /v1/cache/summary`` ``jobsReadable``).
"""

from __future__ import annotations

from app import metrics
from app.kube.client import KubeClient
from app.kube.readonly import REFUSED_RETRY_S, ReadOnlySource
from app.kube.reflector import Store
from app.kube.resources import JOBS
from app.model.job import Job

__all__ = ["REFUSED_RETRY_S", "JobSource"]


class JobSource(ReadOnlySource[Job]):
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
        super().__init__(
            client,
            JOBS,
            Job,
            store,
            gauge=metrics.JOBS_READABLE,
            without="PodsReady's target for a Job's pods is the most members the workload has "
            "had, not the Job's parallelism",
            page_size=page_size,
            watch_timeout=watch_timeout,
            batch_window=batch_window,
            refused_retry=refused_retry,
        )
