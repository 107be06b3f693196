"""A fake of ``app.tasks.preemption.PreemptionApi``: records calls, injects latency and faults."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.policy.gate import GateEntry, PodRef


class FakeApi:
    """Records calls; each call waits ``latency`` and may be made to fail."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.calls: list[tuple[str, str, object]] = []
        self.fail: Callable[[str, PodRef], BaseException | None] = lambda op, pod: None
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def _call(self, op: str, pod: PodRef, arg: object = None) -> None:
        self.started.set()
        await self.release.wait()
        if self.latency:
            await asyncio.sleep(self.latency)  # injected API latency, not a wait for a condition
        error = self.fail(op, pod)
        if error is not None:
            raise error
        self.calls.append((op, pod.key, arg))

    async def mirror_gate(self, preemptor: PodRef, entry: GateEntry | None) -> None:
        await self._call("mirror", preemptor, entry is not None)

    async def mark_disruption(self, victim: PodRef, message: str) -> None:
        await self._call("condition", victim, message)

    async def record_eviction(self, victim: PodRef, preemptor: PodRef, now: float) -> None:
        await self._call("record", victim, preemptor.uid)

    async def delete_pod(self, victim: PodRef) -> None:
        await self._call("delete", victim)

    async def nominate(self, preemptor: PodRef, node: str | None) -> None:
        await self._call("nominate", preemptor, node)
