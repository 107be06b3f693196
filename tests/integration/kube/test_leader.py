"""Lease leader election against a fake coordination.k8s.io API with compare-and-swap updates."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from app import metrics
from app.kube.leader import LeaderElector
from tests.integration.kube_helpers import client, until

BASE = "https://kube.test"
PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


class FakeLeases:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 1
        self.down = False
        self.router = respx.Router(base_url=BASE, assert_all_called=False)
        self.router.route(path__startswith=PATH).mock(side_effect=self.handle)
        self.holders: list[str | None] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            return httpx.Response(503, json={"kind": "Status", "code": 503, "message": "down"})
        if request.method == "GET":
            if self.lease is None:
                return httpx.Response(
                    404, json={"kind": "Status", "code": 404, "reason": "NotFound"}
                )
            return httpx.Response(200, json=self.lease)
        body = json.loads(request.content)
        if request.method == "POST":
            if self.lease is not None:
                return httpx.Response(409, json={"code": 409, "reason": "AlreadyExists"})
        elif body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:  # type: ignore[index]
            return httpx.Response(409, json={"code": 409, "reason": "Conflict"})
        self.rv += 1
        body["metadata"]["resourceVersion"] = str(self.rv)
        self.lease = body
        holder = body["spec"].get("holderIdentity")
        if not self.holders or self.holders[-1] != holder:
            self.holders.append(holder)
        return httpx.Response(201 if request.method == "POST" else 200, json=body)


def elector(
    fake: FakeLeases, identity: str, advertise: str | None = None, rest: str | None = None
) -> LeaderElector:
    return LeaderElector(
        client(httpx.MockTransport(fake.router.async_handler), retry_total=0),
        namespace="ns",
        name="runway",
        identity=identity,
        lease_duration=1.0,
        renew_deadline=0.6,
        retry_period=0.1,
        advertise=advertise,
        advertise_rest=rest,
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeLeases]:
    yield FakeLeases()


class Running:
    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, e: LeaderElector) -> None:
        self.tasks[e.identity] = asyncio.create_task(e.run())

    async def stop(self, e: LeaderElector) -> None:
        task = self.tasks.pop(e.identity)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    r = Running()
    yield r
    for task in r.tasks.values():
        task.cancel()
    for task in r.tasks.values():
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_exactly_one_leader_and_hand_over_on_clean_stop(
    fake: FakeLeases, running: Running
) -> None:
    a, b = elector(fake, "a"), elector(fake, "b")
    changes: list[tuple[str, bool]] = []
    a.on_change(lambda v: changes.append(("a", v)))
    b.on_change(lambda v: changes.append(("b", v)))
    running.start(a)
    running.start(b)
    await until(lambda: a.is_leader or b.is_leader, what="a leader")
    # Over many renewals, never two leaders at once.
    for _ in range(30):
        assert a.is_leader + b.is_leader == 1
        await asyncio.sleep(0.02)  # sampling interval across renewals
    leader, other = (a, b) if a.is_leader else (b, a)
    assert metrics.LEADER._value.get() == 1
    await running.stop(leader)
    # Released on a clean stop: holder cleared, so the other takes over well before expiry.
    assert fake.holders[-1] in (None, other.identity)
    await until(lambda: other.is_leader, within=0.9, what="hand-over after release")
    assert not leader.is_leader
    assert changes[0] == (leader.identity, True)
    assert (leader.identity, False) in changes and changes[-1] == (other.identity, True)
    assert fake.lease is not None and fake.lease["spec"]["leaseTransitions"] == 1


async def test_leader_that_cannot_renew_steps_down_before_others_take_over(
    fake: FakeLeases, running: Running
) -> None:
    a = elector(fake, "a")
    running.start(a)
    await until(lambda: a.is_leader, what="a leads")
    fake.down = True
    await until(lambda: not a.is_leader, within=2, what="a steps down")
    assert not a.leading.is_set()
    fake.down = False
    await until(lambda: a.is_leader, within=3, what="a leads again")


async def test_expired_lease_of_a_crashed_holder_is_taken_over(
    fake: FakeLeases, running: Running
) -> None:
    fake.lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "runway", "namespace": "ns", "resourceVersion": "1"},
        "spec": {
            "holderIdentity": "crashed",
            "leaseDurationSeconds": 1,
            "renewTime": "2020-01-01T00:00:00.000000Z",
            "leaseTransitions": 4,
        },
    }
    b = elector(fake, "b")
    running.start(b)
    await asyncio.sleep(0.5)  # less than the lease duration: b must still be waiting
    assert not b.is_leader
    await until(lambda: b.is_leader, within=2, what="b takes over the expired lease")
    assert fake.lease["spec"]["holderIdentity"] == "b"
    assert fake.lease["spec"]["leaseTransitions"] == 5


async def test_the_leader_advertises_its_url_and_followers_see_it_until_it_expires(
    fake: FakeLeases, running: Running
) -> None:
    a = elector(fake, "a", "https://10.0.0.1:8888/scheduler")
    running.start(a)
    await until(lambda: a.is_leader, what="a leads")
    assert fake.lease is not None
    assert fake.lease["metadata"]["annotations"] == {
        "runway.dev/leader-url": "https://10.0.0.1:8888/scheduler"
    }
    assert a.leader_url is None  # the leader forwards to nobody
    b = elector(fake, "b", "https://10.0.0.2:8888/scheduler")
    running.start(b)
    await until(lambda: b.leader_url is not None, what="b sees the leader's URL")
    assert b.leader_url == "https://10.0.0.1:8888/scheduler" and not b.is_leader
    # the leader dies without releasing: b stops forwarding once the lease expired, then leads
    # and advertises its own URL in place of a's
    task = running.tasks.pop("a")
    task.cancel()
    fake.down = True  # a's release fails too
    with contextlib.suppress(asyncio.CancelledError):
        await task
    fake.down = False
    await until(lambda: b.is_leader, within=3, what="b takes over")
    assert b.leader_url is None
    assert fake.lease["metadata"]["annotations"]["runway.dev/leader-url"].endswith(
        "10.0.0.2:8888/scheduler"
    )


async def test_the_leader_advertises_its_rest_url_and_followers_read_there_until_it_expires(
    fake: FakeLeases, running: Running
) -> None:
    a = elector(fake, "a", "https://10.0.0.1:8888/scheduler", "https://10.0.0.1:8889")
    running.start(a)
    await until(lambda: a.is_leader, what="a leads")
    assert fake.lease is not None
    assert fake.lease["metadata"]["annotations"] == {
        "runway.dev/leader-url": "https://10.0.0.1:8888/scheduler",
        "runway.dev/leader-rest-url": "https://10.0.0.1:8889",
    }
    assert a.leader_rest_url is None and not a.leader_known()  # the leader asks nobody
    b = elector(fake, "b", "https://10.0.0.2:8888/scheduler", "https://10.0.0.2:8889")
    running.start(b)
    await until(lambda: b.leader_rest_url is not None, what="b sees the leader's REST URL")
    assert b.leader_rest_url == "https://10.0.0.1:8889" and b.leader_known()
    task = running.tasks.pop("a")
    task.cancel()
    fake.down = True  # a's release fails too: b reads from it until the lease expired
    with contextlib.suppress(asyncio.CancelledError):
        await task
    fake.down = False
    await until(lambda: b.is_leader, within=3, what="b takes over")
    assert b.leader_rest_url is None and not b.leader_known()
    assert fake.lease["metadata"]["annotations"]["runway.dev/leader-rest-url"] == (
        "https://10.0.0.2:8889"
    )


async def test_a_leader_of_an_earlier_release_is_known_without_a_rest_url(
    fake: FakeLeases, running: Running
) -> None:
    # It advertises its verbs only: a follower knows there is a leader, not where to read.
    old = elector(fake, "old", "https://10.0.0.1:8888/scheduler")
    running.start(old)
    await until(lambda: old.is_leader, what="old leads")
    new = elector(fake, "new", "https://10.0.0.2:8888/scheduler", "https://10.0.0.2:8889")
    running.start(new)
    await until(lambda: new.leader_url is not None, what="new sees the leader")
    assert new.leader_known() and new.leader_rest_url is None
    assert "runway.dev/leader-rest-url" not in fake.lease["metadata"]["annotations"]


@pytest.mark.parametrize("url", ["ftp://x", "javascript:alert(1)", "https://" + "a" * 600, ""])
async def test_a_lease_url_runway_would_not_write_is_never_forwarded_to(
    fake: FakeLeases, url: str
) -> None:
    fake.lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "runway",
            "namespace": "ns",
            "resourceVersion": "1",
            "annotations": {"runway.dev/leader-url": url, "runway.dev/leader-rest-url": url},
        },
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 30},
    }
    b = elector(fake, "b")
    assert not await b._try_acquire_or_renew()  # held by "other", recently renewed
    assert b.leader_url is None and b.leader_rest_url is None and b.leader_known()
