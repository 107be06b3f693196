"""``KubeEventRecorder`` against a fake API server (a respx router): the POST of a new Event,
the PATCH of a repeat's count, a 404 on PATCH (expired) creating it anew, errors counted and
never raised, a full queue dropping, ``emit`` never waiting for the API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import respx

from app import metrics
from app.clock import ManualClock
from app.kube.events import KubeEventRecorder
from app.model.event import EventNote, ObjectRef
from app.policy.events import EventCorrelator
from tests.integration.kube_helpers import client, until

POD = ObjectRef("v1", "Pod", "team-a", "victim-0", "uid-v0")
JOB = ObjectRef("batch/v1", "Job", "team-a", "train", "uid-job")
NOTE = EventNote(POD, "Preempted", "Preempted by team-b/p on node n1: reclaim", action="Preempt")


EVENTS = r"^/api/v1/namespaces/(?P<ns>[^/]+)/events"


class FakeEvents:
    """Just enough of the events resource over a respx router: POST stores, merge-PATCH
    updates, scripted faults. Any other request is unmocked and fails the test."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        """Each request as it arrives (before ``gate``): respx records a call only once answered."""
        self.fail_next: list[int] = []
        self.gate: asyncio.Event | None = None
        self.router = respx.Router(base_url="https://kube.test", assert_all_called=False)
        self.router.post(path__regex=rf"{EVENTS}$").mock(side_effect=self._create)
        self.router.patch(path__regex=rf"{EVENTS}/(?P<name>[^/]+)$").mock(side_effect=self._patch)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.router.async_handler)

    async def _arrive(self, request: httpx.Request) -> httpx.Response | None:
        """Note the call, hold it while gated; the scripted fault, if one is due."""
        self.calls.append((request.method, request.url.path))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            code = self.fail_next.pop(0)
            return httpx.Response(code, json={"kind": "Status", "code": code, "message": "no"})
        return None

    async def _create(self, request: httpx.Request, ns: str) -> httpx.Response:
        if fault := await self._arrive(request):
            return fault
        body = json.loads(request.content)
        self.events[(ns, body["metadata"]["name"])] = body
        return httpx.Response(201, json=body)

    async def _patch(self, request: httpx.Request, ns: str, name: str) -> httpx.Response:
        if fault := await self._arrive(request):
            return fault
        assert request.headers["content-type"] == "application/merge-patch+json"
        found = self.events.get((ns, name))
        if found is None:
            return httpx.Response(404, json={"kind": "Status", "code": 404, "message": "gone"})
        found.update(json.loads(request.content))
        return httpx.Response(200, json=found)


def recorder(fake: FakeEvents, clock: ManualClock, **kw: Any) -> KubeEventRecorder:
    return KubeEventRecorder(
        client(fake.transport(), retry_total=0.05), clock, instance="runway-0", **kw
    )


async def test_new_event_is_posted_with_involved_object_and_source() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock)
    assert await rec.write(NOTE) == "created"
    assert fake.calls == [("POST", "/api/v1/namespaces/team-a/events")]
    [event] = fake.events.values()
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "team-a",
        "name": "victim-0",
        "uid": "uid-v0",
    }
    assert event["reason"] == "Preempted"
    assert event["message"] == NOTE.message
    assert event["type"] == "Normal"
    assert event["count"] == 1
    assert event["source"] == {"component": "runway"}
    assert event["reportingComponent"] == "runway"
    assert event["reportingInstance"] == "runway-0"
    assert event["action"] == "Preempt"
    assert event["firstTimestamp"] == event["lastTimestamp"]


async def test_repeat_patches_count_instead_of_a_new_event() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock)
    await rec.write(NOTE)
    clock.advance(30)
    assert await rec.write(NOTE) == "patched"
    clock.advance(30)
    assert await rec.write(NOTE) == "patched"
    assert [m for m, _ in fake.calls] == ["POST", "PATCH", "PATCH"]
    [event] = fake.events.values()
    assert event["count"] == 3
    assert event["lastTimestamp"] > event["firstTimestamp"]
    # Another object: its own Event.
    assert await rec.write(EventNote(JOB, NOTE.reason, NOTE.message)) == "created"
    assert len(fake.events) == 2


async def test_expired_event_is_created_anew() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock)
    await rec.write(NOTE)
    fake.events.clear()  # the API server's event TTL passed
    clock.advance(1)
    assert await rec.write(NOTE) == "created"
    assert [m for m, _ in fake.calls] == ["POST", "PATCH", "POST"]
    [event] = fake.events.values()
    assert event["count"] == 1


async def test_errors_are_counted_not_raised_and_the_next_one_is_created() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock)
    errors = metrics.EVENTS.labels("Preempted", "error")
    before = errors._value.get()
    fake.fail_next = [403]
    assert await rec.write(NOTE) == "error"
    assert errors._value.get() == before + 1
    assert await rec.write(NOTE) == "created"


async def test_spam_filter_drops_without_a_call() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock, correlator=EventCorrelator("runway", burst=2))
    results = [await rec.write(EventNote(POD, "R", f"m{i}")) for i in range(4)]
    assert results == ["created", "created", "dropped", "dropped"]
    assert len(fake.calls) == 2


async def test_emit_returns_at_once_and_the_task_writes_in_the_background() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    fake.gate = asyncio.Event()  # the API server hangs
    rec = recorder(fake, clock)
    rec.start()
    try:
        for i in range(3):
            rec.emit(EventNote(POD, "Preempted", f"m{i}"))  # never awaits the API
        assert fake.events == {}
        fake.gate.set()
        assert await rec.flush(5.0)
        assert len(fake.events) == 3
    finally:
        await rec.stop()


async def test_full_queue_drops_and_counts() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock, queue_size=2)  # not started: nothing drains the queue
    dropped = metrics.EVENTS.labels("Full", "dropped")
    before = dropped._value.get()
    for i in range(5):
        rec.emit(EventNote(POD, "Full", f"m{i}"))
    assert dropped._value.get() == before + 3


async def test_stop_gives_up_on_a_hung_api_within_the_grace() -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    fake.gate = asyncio.Event()
    rec = recorder(fake, clock)
    rec.start()
    rec.emit(NOTE)
    await until(lambda: bool(fake.calls), what="the POST to start")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await rec.stop(grace=0.2)
    assert loop.time() - t0 < 2.0


@pytest.mark.parametrize("reason", ["Preempted", "Preempting", "PodsReadyTimeout"])
async def test_owner_events_name_the_owner(reason: str) -> None:
    fake, clock = FakeEvents(), ManualClock(1_800_000_000.0)
    rec = recorder(fake, clock)
    await rec.write(EventNote(JOB, reason, "m", type="Warning"))
    [event] = fake.events.values()
    assert event["involvedObject"]["kind"] == "Job"
    assert event["involvedObject"]["apiVersion"] == "batch/v1"
    assert event["type"] == "Warning"
    assert event["metadata"]["name"].startswith("train.")
