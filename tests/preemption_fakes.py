"""A fake of ``app.tasks.ports.PodApi`` (and of the eviction recorder): records calls, injects
latency and faults."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.model.gate import GateEntry, PodRef


class FakeApi:
    """Records calls; each call waits ``latency`` and may be made to fail.

    Calls are recorded as ``(op, namespace/name, arg)``: ``mirror`` (the gate mirrored on the
    preemptor's record, arg True, or removed, False), ``annotate`` (other annotations),
    ``condition``, ``ungate`` (arg: the JSONPatch), ``record`` (arg: the preemptor's UID),
    ``delete`` and ``nominate`` (arg: the node or None).
    """

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.calls: list[tuple[str, str, object]] = []
        self.fail: Callable[[str, PodRef], BaseException | None] = lambda op, pod: None
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self._refs: dict[str, PodRef] = {}

    async def _call(self, op: str, pod: PodRef, arg: object = None) -> None:
        self._refs.setdefault(pod.uid, pod)
        self.started.set()
        await self.release.wait()
        if self.latency:
            await asyncio.sleep(self.latency)  # injected API latency, not a wait for a condition
        error = self.fail(op, pod)
        if error is not None:
            raise error
        self.calls.append((op, pod.key, arg))

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> bool:
        await self._call("annotate", pod, dict(annotations))
        return True

    async def ungate(self, pod: PodRef, patch: Sequence[Mapping[str, Any]]) -> bool:
        await self._call("ungate", pod, [dict(op) for op in patch])
        return True

    async def mirror_gate(self, entry: GateEntry) -> bool:
        await self._call("mirror", entry.preemptor, True)
        return True

    async def unmirror_gate(self, preemptor: PodRef) -> None:
        await self._call("mirror", preemptor, False)

    async def add_condition(
        self, pod: PodRef, type_: str, reason: str, message: str, now: float
    ) -> bool:
        await self._call("condition", pod, message)
        return True

    async def record_preemption(
        self, victim_pod_uid: str, preemptor_uid: str, now: float, message: str | None = None
    ) -> None:
        victim = self._refs.get(victim_pod_uid, PodRef(victim_pod_uid, "?", victim_pod_uid))
        await self._call("record", victim, preemptor_uid)

    async def delete(self, pod: PodRef) -> bool:
        await self._call("delete", pod)
        return True

    async def nominate(self, pod: PodRef, node: str | None) -> None:
        await self._call("nominate", pod, node)
