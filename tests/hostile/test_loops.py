"""Issue 14 row 3 and deliverable 2: no background loop ends silently. The reflector survives
any number of failures (the backoff exponent is capped), every loop is supervised (restarted
with backoff, counted), and ``/readyz`` turns 503 while a cache is not fed or a loop is dead."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from app import metrics
from app.kube.errors import ApiUnavailable
from app.kube.reflector import Reflector
from app.kube.resources import PODS
from app.kube.retry import Backoff
from app.model import Pod
from app.supervise import capped_delay, supervise
from app.tasks.loop import Ticker
from tests.hostile.conftest import Embedded


async def until(check: Any, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)  # polling interval


def restarts(loop: str) -> float:
    return metrics.REGISTRY.get_sample_value("runway_loop_restarts_total", {"loop": loop}) or 0.0


@pytest.mark.parametrize("attempt", [0, 1, 63, 64, 1024, 10**9])
def test_backoff_never_overflows(attempt: int) -> None:
    assert 0 < Backoff(base=0.5, cap=10.0).delay(attempt) <= 10.0
    assert capped_delay(attempt, 0.5, 30.0) <= 30.0


class _DownClient:
    """An API server that refuses every LIST (a lasting outage or 403)."""

    def __init__(self) -> None:
        self.calls = 0

    async def list(self, *a: Any, **kw: Any) -> Any:
        self.calls += 1
        raise ApiUnavailable("connection refused")


class _Store:
    def replace(self, items: Any) -> None: ...
    def upsert(self, obj: Any) -> None: ...
    def delete(self, obj: Any) -> None: ...


async def test_row3_reflector_survives_1100_consecutive_failures() -> None:
    client = _DownClient()
    reflector: Reflector[Pod] = Reflector(
        cast(Any, client), PODS, Pod, _Store(), backoff=Backoff(base=0.0, cap=0.0)
    )
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: client.calls > 1100 or task.done(), within=30)
        assert not task.done(), task.exception()
        assert reflector.failing_since is not None
        assert reflector.starving(0.0, now=time.monotonic() + 1)  # /readyz would say 503
        assert not reflector.starving(3600.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_supervise_restarts_a_failing_loop_with_backoff() -> None:
    calls: list[int] = []
    waits: list[float] = []
    forever = asyncio.Event()

    async def run() -> None:
        calls.append(1)
        if len(calls) <= 3:
            raise OverflowError("2.0 ** 1024")
        await forever.wait()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    before = restarts("test-loop")
    task = asyncio.create_task(supervise("test-loop", run, base=1.0, cap=3.0, sleep=sleep))
    try:
        await until(lambda: len(calls) == 4)
        assert not task.done()
        assert waits == [1.0, 2.0, 3.0]
        assert restarts("test-loop") == before + 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class _Broken(Ticker):
    def __init__(self) -> None:
        super().__init__("broken-ticker", tick=0.01, debounce=0.0)
        self.passes = 0
        self.rests = 0

    async def run_once(self) -> float:
        self.passes += 1
        return 0.0

    def rest(self) -> float:
        self.rests += 1
        if self.rests == 1:
            raise RuntimeError("a bug outside the pass")
        return 0.0


async def test_a_ticker_outliving_a_bug_outside_its_pass() -> None:
    ticker = _Broken()
    before = restarts("broken-ticker")
    ticker.start()
    try:
        await until(lambda: ticker.passes >= 3, within=10)
        assert ticker.alive and restarts("broken-ticker") == before + 1
    finally:
        await ticker.stop()


async def test_readyz_fails_while_a_loop_is_dead(embedded: Embedded) -> None:
    rw = embedded.runway
    assert (await embedded.http.get("/readyz")).status_code == 200
    rw.gatekeeper.start()
    try:
        assert (await embedded.http.get("/readyz")).status_code == 200
        task = rw.gatekeeper._task
        assert task is not None
        task.cancel()  # what an uncaught BaseException would do
        await asyncio.gather(task, return_exceptions=True)
        assert (await embedded.http.get("/readyz")).status_code == 503
    finally:
        await rw.gatekeeper.stop()
