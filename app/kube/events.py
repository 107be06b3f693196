"""Kubernetes Events (core/v1): what ``kubectl describe pod`` shows of runway's decisions.

``KubeEventRecorder`` implements ``app.tasks.ports.EventSink``. ``emit`` never blocks and never
raises: it puts the Event on a bounded queue (full: dropped and counted) and one tracked task
writes them, so a slow or failing API server never holds a preemption up. Each Event goes through
``app.policy.events.EventCorrelator`` first, as client-go's recorder does: over the per-object
spam limit it is dropped; identical to a recent one it becomes a PATCH of that Event's ``count``
and ``lastTimestamp`` (a 404 there: the Event expired, so it is created anew). Errors are logged
and counted (``runway_events_total{result="error"}``), never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec

from app import metrics
from app.clock import Clock
from app.kube.client import KubeClient
from app.kube.errors import AlreadyExists, NotFound
from app.kube.resources import EVENTS
from app.logs import get_logger
from app.model.event import EventNote
from app.model.timestamps import format_time
from app.policy.events import Correlation, EventCorrelator
from app.supervise import wait_within

log = get_logger("kube.events")

COMPONENT = "runway"
"""``source.component`` and ``reportingComponent`` of runway's Events."""
QUEUE_SIZE = 1000
"""Events waiting to be written; beyond it new ones are dropped (and counted)."""


def event_body(
    note: EventNote, corr: Correlation, now: float, *, host: str = "", instance: str = ""
) -> dict[str, Any]:
    """The core/v1 Event object for a new Event."""
    ref = note.regarding
    involved = {"apiVersion": ref.api_version, "kind": ref.kind, "namespace": ref.namespace}
    involved["name"] = ref.name
    if ref.uid:
        involved["uid"] = ref.uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": corr.name, "namespace": ref.namespace},
        "involvedObject": involved,
        "reason": note.reason,
        "message": note.message,
        "type": note.type,
        "action": note.action or note.reason,
        "source": {"component": COMPONENT, **({"host": host} if host else {})},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance or COMPONENT,
        "firstTimestamp": format_time(corr.first_seen),
        "lastTimestamp": format_time(now),
        "count": corr.count,
    }


def count_patch(corr: Correlation, now: float) -> dict[str, Any]:
    """The merge patch of a repeated Event: one more, seen now."""
    return {"count": corr.count, "lastTimestamp": format_time(now)}


class KubeEventRecorder:
    """Writes Events in the background, deduplicated and rate-limited (``EventSink``)."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        correlator: EventCorrelator | None = None,
        host: str = "",
        instance: str = "",
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self._client = client
        self._clock = clock
        self.correlator = correlator or EventCorrelator(COMPONENT)
        self._host = host
        self._instance = instance
        self._queue: asyncio.Queue[EventNote] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None

    # -- EventSink ------------------------------------------------------------------------------

    def emit(self, note: EventNote) -> None:
        """Queue ``note`` for writing; drops it (counted) when the queue is full."""
        try:
            self._queue.put_nowait(note)
        except asyncio.QueueFull:
            metrics.EVENTS.labels(note.reason, "dropped").inc()
            log.debug(
                "event queue full: event dropped", reason=note.reason, about=str(note.regarding)
            )

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer task."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="events")

    async def flush(self, within: float) -> bool:
        """Wait (bounded) until every queued Event is written; True when it was."""
        return await wait_within(self._queue.join(), within)

    async def stop(self, grace: float = 1.0) -> None:
        """Write what is queued within ``grace``, then stop."""
        if self._task is None:
            return
        await self.flush(grace)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    # -- writing --------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            note = await self._queue.get()
            try:
                await self.write(note)
            finally:
                self._queue.task_done()

    async def write(self, note: EventNote) -> str:
        """Correlate and write one Event; returns what happened (``created``, ``patched``,
        ``dropped``, ``error``). Never raises but for cancellation."""
        now = self._clock.now()
        corr = self.correlator.correlate(note, now)
        result: str
        try:
            if corr.action == "drop":
                result = "dropped"
            elif corr.action == "patch":
                try:
                    await self._client.patch(
                        EVENTS,
                        corr.name,
                        count_patch(corr, now),
                        note.regarding.namespace,
                        into=msgspec.Raw,
                        patch_type="merge",
                    )
                    result = "patched"
                except NotFound:  # expired (the API server's event TTL): write it anew
                    self.correlator.forget(note)
                    return await self.write(note)
            else:
                body = event_body(note, corr, now, host=self._host, instance=self._instance)
                with contextlib.suppress(AlreadyExists):
                    await self._client.create(
                        EVENTS, body, note.regarding.namespace, into=msgspec.Raw
                    )
                result = "created"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.correlator.forget(note)
            result = "error"
            log.warning(
                "event not written",
                reason=note.reason,
                about=str(note.regarding),
                error=f"{type(exc).__name__}: {exc}",
            )
        metrics.EVENTS.labels(note.reason, result).inc()
        return result
