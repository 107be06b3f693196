"""A follower forwards kube-scheduler's preempt calls to the leader (issue #27 item 3): over real
HTTP with runway's own protocol, the follower's reply is the leader's; when the leader cannot be
reached it answers ``{}`` and closes the connection; a forwarded call is never forwarded again."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import respx

from app import metrics
from app.config import RunwayConfig
from app.config.security import TLSConfig
from app.connections import bounded_protocol
from app.kube.peers import LeaderForwarder
from app.server import create_app
from app.wire.forwarding import FORWARDED_HEADER
from tests.reference import wire_cases
from tests.served import serve_in_thread

PREEMPT = json.dumps(next(c for c in wire_cases() if c["name"] == "nodecache-preempt")["request"])
LEADER_REPLY = b'{"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"from-the-leader"}]}}}'


class _Follower:
    leadership = False


class _Forwarder:
    """Answers what the test says; counts the calls."""

    def __init__(self, reply: bytes | None, known: bool = True) -> None:
        self.reply, self.known, self.calls = reply, known, 0

    def leader_known(self) -> bool:
        return self.known

    async def forward(self, verb: str, body: bytes) -> bytes | None:
        self.calls += 1
        return self.reply


@contextmanager
def follower(forwarder: _Forwarder | None) -> Iterator[str]:
    """A replica that is not the leader, served with runway's protocol (direct verbs)."""
    app = create_app()
    ctx = app.state.context
    app.state.context = dataclasses.replace(ctx, cluster=_Follower(), forwarder=forwarder)
    protocol = bounded_protocol(RunwayConfig().server, direct=app.direct_verbs())
    with serve_in_thread(app, http=protocol) as url:
        yield url


def preempt(http: httpx.Client, url: str, **headers: str) -> httpx.Response:
    return http.post(
        f"{url}/scheduler/preempt",
        content=PREEMPT,
        headers={"content-type": "application/json", **headers},
    )


def calls(outcome: str) -> float:
    return metrics.VERB_CALLS._calls.get(("preempt", outcome), 0)


def test_the_followers_reply_is_the_leaders_and_the_connection_stays() -> None:
    fwd = _Forwarder(LEADER_REPLY)
    before = calls("forwarded")
    with follower(fwd) as url, httpx.Client(timeout=10) as http:
        for _ in range(3):  # one connection, kept: kube-scheduler's way
            r = preempt(http, url)
            assert r.status_code == 200 and r.content == LEADER_REPLY
            assert r.headers.get("connection") != "close"
    assert fwd.calls == 3
    assert calls("forwarded") == before + 3


@pytest.mark.parametrize("known", [True, False])
def test_no_leader_to_reach_answers_nothing_and_closes(known: bool) -> None:
    fwd = _Forwarder(None, known=known)
    refused = metrics.PREEMPTIONS_REFUSED.labels("not-leader")._value.get()
    with follower(fwd) as url, httpx.Client(timeout=10) as http:
        r = preempt(http, url)
    assert r.status_code == 200 and r.json() == {"NodeNameToMetaVictims": {}}
    assert r.headers.get("connection") == "close"  # the next connection may reach the leader
    assert fwd.calls == (1 if known else 0)
    assert metrics.PREEMPTIONS_REFUSED.labels("not-leader")._value.get() == refused + 1


def test_a_forwarded_call_is_never_forwarded_again() -> None:
    # two replicas that each believe the other leads must not bounce a call between them
    fwd = _Forwarder(LEADER_REPLY)
    with follower(fwd) as url, httpx.Client(timeout=10) as http:
        r = preempt(http, url, **{FORWARDED_HEADER: "other-replica"})
    assert r.json() == {"NodeNameToMetaVictims": {}} and fwd.calls == 0


def test_filter_is_never_forwarded() -> None:
    fwd = _Forwarder(LEADER_REPLY)
    case = next(c for c in wire_cases() if c["name"] == "nodecache-filter")["request"]
    with follower(fwd) as url, httpx.Client(timeout=10) as http:
        r = http.post(f"{url}/scheduler/filter", json=case)
    assert r.status_code == 200 and fwd.calls == 0


FAKED_LEADER = "http://leader.test/scheduler"


def faked_leader(*, timeout: float) -> tuple[LeaderForwarder, respx.Route]:
    """A forwarder whose leader is a respx router, and that router's route of the preempt verb
    (the test mocks its answer)."""
    router = respx.Router(base_url=FAKED_LEADER, assert_all_called=False)
    route = router.post("/preempt")
    forwarder = LeaderForwarder(
        lambda: FAKED_LEADER,
        TLSConfig(),
        identity="f",
        timeout=timeout,
        transport=httpx.MockTransport(router.async_handler),
    )
    return forwarder, route


# --- the forwarder itself, against a real leader ------------------------------------------


@contextmanager
def leader() -> Iterator[str]:
    """A replica that decides (the embedded default: no election)."""
    app = create_app()
    protocol = bounded_protocol(RunwayConfig().server, direct=app.direct_verbs())
    with serve_in_thread(app, http=protocol) as url:
        yield url + "/scheduler"


async def test_the_forwarder_relays_the_leaders_answer_and_marks_the_call() -> None:
    seen: list[httpx.Request] = []
    with leader() as url:

        async def spy(request: httpx.Request) -> None:
            seen.append(request)

        fwd = LeaderForwarder(lambda: url, TLSConfig(), identity="follower-1", timeout=5)
        fwd._current_client().event_hooks["request"] = [spy]
        ok = metrics.PREEMPT_FORWARDED.labels("ok")._value.get()
        try:
            reply = await fwd.forward("preempt", PREEMPT.encode())
        finally:
            await fwd.aclose()
    assert reply is not None and "NodeNameToMetaVictims" in json.loads(reply)
    assert seen[0].headers[FORWARDED_HEADER] == "follower-1"
    assert metrics.PREEMPT_FORWARDED.labels("ok")._value.get() == ok + 1


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (httpx.Response(500, text="boom"), "error"),
        (httpx.Response(400, json={"error": "bad"}), "error"),
    ],
)
async def test_a_leader_that_fails_gives_none(answer: httpx.Response, outcome: str) -> None:
    before = metrics.PREEMPT_FORWARDED.labels(outcome)._value.get()
    fwd, route = faked_leader(timeout=1)
    route.mock(return_value=answer)
    try:
        assert await fwd.forward("preempt", b"{}") is None
    finally:
        await fwd.aclose()
    assert metrics.PREEMPT_FORWARDED.labels(outcome)._value.get() == before + 1


async def test_a_connection_error_is_tried_once_more() -> None:
    fwd, route = faked_leader(timeout=1)
    # respx raises an exception type given as a side effect, made with the request
    route.mock(side_effect=[httpx.RemoteProtocolError, httpx.Response(200, content=LEADER_REPLY)])
    try:
        assert await fwd.forward("preempt", b"{}") == LEADER_REPLY
    finally:
        await fwd.aclose()
    assert route.call_count == 2


async def test_the_whole_forward_retry_included_stays_within_forward_timeout() -> None:
    # httpx's timeout is per phase: a leader that refuses once, then accepts and answers slowly,
    # must not hold kube-scheduler past forwardTimeout (its own httpTimeout is next: then it
    # skips an ignorable extender and preempts without runway).
    hung = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        hung.set()  # respx records a call once answered: this one never is
        await asyncio.sleep(30)
        return httpx.Response(200, content=LEADER_REPLY)

    fwd, route = faked_leader(timeout=0.3)
    route.mock(side_effect=[httpx.ConnectError, hang])
    before = metrics.PREEMPT_FORWARDED.labels("timeout")._value.get()
    start = time.monotonic()
    try:
        assert await fwd.forward("preempt", b"{}") is None
    finally:
        await fwd.aclose()
    assert time.monotonic() - start < 2.0 and route.call_count == 1 and hung.is_set()
    assert metrics.PREEMPT_FORWARDED.labels("timeout")._value.get() == before + 1


async def test_unreachable_and_slow_leaders_give_none() -> None:
    refuse, slow = httpx.ConnectError, httpx.ReadTimeout
    for failure, outcome in ((refuse, "error"), (slow, "timeout")):
        before = metrics.PREEMPT_FORWARDED.labels(outcome)._value.get()
        fwd, route = faked_leader(timeout=1)
        route.mock(side_effect=failure)
        try:
            assert await fwd.forward("preempt", b"{}") is None
        finally:
            await fwd.aclose()
        assert metrics.PREEMPT_FORWARDED.labels(outcome)._value.get() == before + 1


async def test_no_leader_known_or_no_way_to_verify_it_forwards_nothing(tmp_path: object) -> None:
    fwd = LeaderForwarder(lambda: None, TLSConfig(), identity="f", timeout=1)
    assert not fwd.leader_known() and await fwd.forward("preempt", b"{}") is None
    # HTTPS without a CA to verify the leader by: never forwards (said once in the log)
    tls = TLSConfig.model_construct(cert_file="/x/tls.crt", key_file="/x/tls.key")
    https = LeaderForwarder(lambda: "https://10.0.0.1:8888/scheduler", tls, identity="f", timeout=1)
    assert not https.usable and not https.leader_known()
    assert await https.forward("preempt", b"{}") is None
