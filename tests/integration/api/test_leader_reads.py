"""Every replica answers the same (issue #35 item 5): a follower's REST reads of what only the
leader holds are the leader's answers. The leader is a real runway app served over HTTP (in a
thread) with preemptions, decisions and gates of its own; the follower is another app with
nothing of that, whose ``LeaderReader`` asks the leader. Checked: each forwarded route answers
the leader's body, status and paging headers; the caller's credentials, and nothing of the
follower's, reach the leader, so a caller the leader refuses is refused; what every replica
answers alike is never forwarded; a leader that cannot be asked gives the follower's own answer,
marked."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from fastapi import FastAPI

from app import metrics
from app.api.leader_reads import LEADER_HELD, REPLICA_ANSWERS, leader_held
from app.clock import ManualClock
from app.config import parse_config
from app.config.security import TLSConfig
from app.kube.peers import LeaderReader
from app.model.auth import Access, Identity, Permission
from app.model.gate import GateEntry, PodRef, PreemptionPlan
from app.model.timestamps import format_time
from app.server import create_app
from app.tasks.preemption import PreemptionRecord
from app.wire.forwarding import (
    FORWARDED_HEADER,
    RELAYED_BY_HEADER,
    REPLICA_HEADER,
    SERVED_BY_HEADER,
)
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import bind, pod, pod_obj, raw_pod
from tests.certs import CA
from tests.served import serve_in_thread

NOW = 1_800_000_000.0
TOKEN = "t" * 40
OTHER = "o" * 40
CONFIG: dict[str, Any] = {
    "queues": [{"name": "nlp", "preemptMinRuntime": "30m"}],
    "preemption": {"async": False},
}

# Each forwarded route, with the queries that page or filter it: a follower's answer is the
# leader's (a test below checks that every LEADER_HELD route is asked here).
READS = [
    "/v1/preemptions",
    "/v1/preemptions?limit=1",
    "/v1/preemptions/decisions?limit=5",
    "/v1/preemptions/decisions?preemptor=team/urgent",
    "/v1/gate",
    "/v1/gate?limit=1",
    "/v1/explain?preemptor=team/urgent&victim=team/t5-old",
    "/v1/explain?preemptor=team/urgent&victim=team/nobody",
    "/v1/workloads",
    "/v1/workloads?namespace=team&limit=2",
    "/v1/workloads/team/t5-old",
    "/v1/workloads/team/nobody",
]


class Role:
    """The app's cluster facts, but this leadership and identity."""

    def __init__(self, cluster: Any, leadership: bool | None, identity: str) -> None:
        self._cluster, self.leadership, self.identity = cluster, leadership, identity

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def as_replica(app: FastAPI, leadership: bool | None, identity: str, **parts: Any) -> FastAPI:
    ctx = app.state.context
    cluster = Role(ctx.cluster, leadership, identity)
    app.state.context = dataclasses.replace(ctx, cluster=cluster, **parts)
    return app


def add(runway: Runway, obj: dict[str, Any]) -> None:
    runway.cache.upsert_pod(pod(obj))
    runway.cache.pods_synced = True


def workload(name: str, **kw: Any) -> dict[str, Any]:
    labels = {"runway.dev/queue": "nlp", "runway.dev/workload": name}
    obj = pod_obj(name, labels=labels, **kw)
    obj["metadata"]["creationTimestamp"] = format_time(NOW - 9000)
    return obj


def populate(runway: Runway) -> None:
    """Workloads, a preemption in flight and a finished one, two gates."""
    add(runway, bind(workload("llama-young"), NOW - 300))
    add(runway, bind(workload("t5-old"), NOW - 7200, node="n2"))
    add(runway, workload("bert-pending"))
    runway.requeue.index.bump()
    plan = PreemptionPlan(
        PodRef("uid-hi", "team", "bert-pending"),
        "n3",
        (PodRef("uid-v1", "team", "t5-old"),),
        "preempted by team/bert-pending",
        rule="nlp",
    )
    runway.executor._in_flight["uid-hi"] = PreemptionRecord(plan, started=NOW - 4)
    done = PreemptionRecord(plan, started=NOW - 400, finished=NOW - 398, result="success")
    runway.executor._recent.append(done)
    for i in range(2):
        runway.gate.hold(
            GateEntry(
                PodRef(f"uid-held-{i}", "team", f"held-{i}"),
                "n3",
                (PodRef(f"uid-gone-{i}", "team", f"gone-{i}"),),
                since=NOW - 10 + i,
                deadline=NOW + 50,
                rule="nlp",
                holder="leader-0",
            )
        )


def preempt(url: str, runway: Runway) -> None:
    """A real preempt verb on the leader: the young victim is protected, the old one goes."""
    labels = {"runway.dev/queue": "nlp", "runway.dev/workload": "urgent"}
    urgent = raw_pod("urgent", namespace="team", uid="uid-urgent", labels=labels, priority=1000)
    urgent["metadata"]["creationTimestamp"] = format_time(NOW - 5)
    add(runway, urgent)
    body = {
        "Pod": urgent,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "uid-llama-young"}], "NumPDBViolations": 0},
            "n2": {"Pods": [{"UID": "uid-t5-old"}], "NumPDBViolations": 0},
        },
    }
    r = httpx.post(f"{url}/scheduler/preempt", content=json.dumps(body), timeout=10)
    assert r.status_code == 200 and "n2" in r.json()["NodeNameToMetaVictims"], r.text
    deadline = time.monotonic() + 10
    while runway.executor.pending_tasks():  # the dry-run task: its record then stays put
        assert time.monotonic() < deadline, "the preemption task did not finish"
        time.sleep(0.01)  # polling interval


class Spy:
    """ASGI: records the headers of every request the leader gets."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@contextmanager
def leader(
    config: dict[str, Any] | None = None, *, populated: bool = True, **serve: Any
) -> Iterator[tuple[str, Spy, FastAPI]]:
    """The leader, served over HTTP(S) in a thread, with state only it holds."""
    app = as_replica(create_app(parse_config(config or CONFIG), ManualClock(NOW)), True, "leader-0")
    spy = Spy(app)
    with serve_in_thread(spy, **serve) as url:
        if populated:
            populate(app.state.runway)
            preempt(url, app.state.runway)
        yield url, spy, app


def reader(url: str | None, *, known: bool = True, **kw: Any) -> LeaderReader:
    options: dict[str, Any] = {"identity": "follower-1", "timeout": 5, **kw}
    options.setdefault("present_certificate", False)
    tls = options.pop("tls", TLSConfig())
    return LeaderReader(lambda: known, lambda: url, tls, **options)


@asynccontextmanager
async def follower(
    reads: LeaderReader | None, config: dict[str, Any] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A replica that is not the leader, with none of the leader's state, asking through
    ``reads``."""
    app = create_app(parse_config(config or CONFIG), ManualClock(NOW))
    as_replica(app, False, "follower-1", reads=reads)
    try:
        async with asgi_client(app) as http:
            yield http
    finally:
        if reads is not None:
            await reads.aclose()


def body(response: httpx.Response) -> Any:
    return response.json()


# --- every forwarded route --------------------------------------------------------------------


def test_the_reads_below_ask_every_route_only_the_leader_holds() -> None:
    paths = [p.split("?")[0] for p in READS]
    assert all(leader_held(p) for p in paths)
    for template in LEADER_HELD:
        pattern = re.sub(r"\{[^/]+\}", "[^/]+", template)
        assert any(re.fullmatch(pattern, p) for p in paths), template


async def test_a_followers_answer_to_each_leader_held_read_is_the_leaders() -> None:
    with leader() as (url, spy, _):
        async with follower(reader(url)) as http, httpx.AsyncClient(timeout=10) as plain:
            for path in READS:
                direct = await plain.get(url + path)
                assert direct.headers[SERVED_BY_HEADER] == "leader", path
                relayed = await http.get(path)
                assert (relayed.status_code, body(relayed)) == (
                    direct.status_code,
                    body(direct),
                ), path
                assert relayed.headers[SERVED_BY_HEADER] == "leader", path
                assert relayed.headers[REPLICA_HEADER] == "leader-0", path
                assert relayed.headers[RELAYED_BY_HEADER] == "follower-1", path
                assert relayed.headers["content-type"] == direct.headers["content-type"]
                assert spy.seen[-1][FORWARDED_HEADER] == "follower-1", path
            # Paging goes on across replicas: the gate's token (a header) and a list's token.
            first = await http.get("/v1/gate", params={"limit": 1})
            token = first.headers["runway-continue"]
            rest = await http.get("/v1/gate", params={"limit": 1, "continue": token})
            assert [e["preemptor"] for e in body(first) + body(rest)] == [
                "team/held-0",
                "team/held-1",
            ]
            page = body(await http.get("/v1/preemptions", params={"limit": 1}))
            assert page["continue"] and page["inFlight"]
            # What the follower holds itself is nothing of it: its own answer differs.
            own = await http.get("/v1/preemptions", headers={FORWARDED_HEADER: "someone"})
            assert body(own)["inFlight"] == [] and body(own)["recent"] == []
            assert own.headers[SERVED_BY_HEADER] == "follower (forwarded to it)"


async def test_the_decisions_and_preemptions_are_there_whichever_replica_answers() -> None:
    # The operator's report: `kubectl runway preemptions` alternated between nothing and a list.
    answers = []
    with leader() as (url, _, _):
        async with follower(reader(url)) as http, httpx.AsyncClient(timeout=10) as plain:
            for i in range(6):  # the Service alternates between the replicas
                replica = http if i % 2 else plain
                answers.append(body(await replica.get(("" if i % 2 else url) + "/v1/preemptions")))
            decisions = body(await http.get("/v1/preemptions/decisions"))["decisions"]
    assert all(a == answers[0] for a in answers) and answers[0]["recent"]
    assert [d["preemptor"]["pod"] for d in decisions] == ["team/urgent"]


async def test_what_every_replica_answers_alike_is_never_forwarded() -> None:
    with leader() as (url, spy, _):
        async with follower(reader(url)) as http:
            for path in ("/v1/queues", "/v1/cache/summary", "/v1/config", "/v1/release"):
                r = await http.get(path)
                assert r.status_code == 200 and SERVED_BY_HEADER not in r.headers, path
            assert body(await http.get("/v1/cache/summary"))["leader"] is False
            # POSTs are never forwarded either (activate writes shared state: the record).
            r = await http.post("/v1/workloads/team/t5-old:activate")
            assert r.status_code == 404 and SERVED_BY_HEADER not in r.headers
    assert not [h for h in spy.seen if FORWARDED_HEADER in h]


def test_every_get_route_is_leader_held_or_answered_by_every_replica() -> None:
    # From the OpenAPI document: FastAPI 0.165's app.routes holds included routers, not routes.
    paths = create_app().openapi()["paths"]
    routes = {p for p, operations in paths.items() if p.startswith("/v1/") and "get" in operations}
    assert not set(LEADER_HELD) & set(REPLICA_ANSWERS)
    assert routes == set(LEADER_HELD) | set(REPLICA_ANSWERS), (
        "classify each GET route: LEADER_HELD (a follower forwards it) or REPLICA_ANSWERS"
    )


async def test_the_leader_and_a_single_replica_say_who_answered() -> None:
    for leadership, served in ((True, "leader"), (None, "standalone")):
        app = as_replica(create_app(), leadership, "r-1")
        async with asgi_client(app) as http:
            r = await http.get("/v1/preemptions")
        assert r.headers[SERVED_BY_HEADER] == served and r.headers[REPLICA_HEADER] == "r-1"


# --- the caller's credentials, the leader's decision ------------------------------------------


def static(*tokens: str) -> dict[str, Any]:
    return {
        **CONFIG,
        "auth": {"mode": "static", "staticTokens": list(tokens), "protectReadOnly": True},
    }


async def test_the_callers_credentials_and_nothing_of_the_followers_reach_the_leader() -> None:
    # The follower knows a token the leader does not: a caller the leader refuses is refused,
    # whatever the follower would have allowed.
    with leader(static(TOKEN)) as (url, spy, _):
        async with follower(reader(url), static(TOKEN, OTHER)) as http:
            ok = await http.get("/v1/preemptions", headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200 and body(ok)["recent"]
            seen = spy.seen[-1]
            assert seen["authorization"] == f"Bearer {TOKEN}"
            assert "x-runway-authorization" not in seen and "cookie" not in seen
            # Through the API server's service proxy: the token in X-Runway-Authorization.
            proxied = await http.get(
                "/v1/preemptions/decisions",
                headers={"X-Runway-Authorization": f"Bearer {TOKEN}", "Cookie": "a=b"},
            )
            assert proxied.status_code == 200 and body(proxied)["decisions"]
            seen = spy.seen[-1]
            assert seen["x-runway-authorization"] == f"Bearer {TOKEN}"
            assert "authorization" not in seen and "cookie" not in seen
            # A token only the follower accepts: the leader's 401, relayed as it is.
            refused = await http.get("/v1/gate", headers={"Authorization": f"Bearer {OTHER}"})
            assert refused.status_code == 401, refused.text
            assert "invalid bearer token" in body(refused)["error"]
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.headers[RELAYED_BY_HEADER] == "follower-1"  # the leader's refusal
            # No token: the follower refuses it itself, and never asks the leader.
            asked = len(spy.seen)
            bare = await http.get("/v1/preemptions")
            assert bare.status_code == 401 and len(spy.seen) == asked


class Reviewer:
    """TokenReview + SubjectAccessReview as a dict: token → user; users allowed to read."""

    def __init__(self, readers: set[str]) -> None:
        self.readers = readers

    async def review(self, token: str) -> Identity | None:
        return Identity({TOKEN: "alice", OTHER: "bob"}[token]) if token in (TOKEN, OTHER) else None

    async def allowed(self, identity: Identity, permission: Permission) -> Access:
        return Access(identity.username in self.readers, "no binding")


def kubernetes_auth(app: FastAPI, readers: set[str]) -> FastAPI:
    app.state.auth.reviewer.reviewer = Reviewer(readers)
    return app


async def test_a_caller_the_leader_forbids_is_forbidden_on_the_follower_too() -> None:
    config = {**CONFIG, "auth": {"mode": "kubernetes", "cacheTTL": "0s", "protectReadOnly": True}}
    with leader(config) as (url, _, app):
        kubernetes_auth(app, {"alice"})
        follower_app = create_app(parse_config(config), ManualClock(NOW))
        reads = reader(url)
        as_replica(kubernetes_auth(follower_app, {"alice", "bob"}), False, "f-1", reads=reads)
        try:
            async with asgi_client(follower_app) as http:
                alice = await http.get(
                    "/v1/preemptions", headers={"Authorization": f"Bearer {TOKEN}"}
                )
                bob = await http.get(
                    "/v1/preemptions", headers={"Authorization": f"Bearer {OTHER}"}
                )
        finally:
            await reads.aclose()
    assert alice.status_code == 200 and body(alice)["recent"]
    assert bob.status_code == 403 and "'bob' may not" in body(bob)["error"], bob.text


# --- a leader that cannot be asked: the follower's own answer, marked ---------------------------


def counted(outcome: str) -> float:
    return metrics.READS_FORWARDED.labels(outcome)._value.get()


def faked(answer: Any, timeout: float = 5) -> LeaderReader:
    """A reader whose leader is a respx router answering every REST read with ``answer`` (a
    respx side effect: a response, an exception type raised with the request, a callable)."""
    router = respx.Router(base_url="http://leader.test", assert_all_called=False)
    router.get(path__startswith="/v1/").mock(side_effect=answer)
    transport = httpx.MockTransport(router.async_handler)
    return reader("http://leader.test", timeout=timeout, transport=transport)


async def hang(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(30)
    return httpx.Response(200)


@pytest.mark.parametrize(
    ("reads", "why", "outcome"),
    [
        (lambda: faked(httpx.ConnectError), "leader unreachable", "error"),
        (lambda: faked(hang, timeout=0.3), "leader unreachable", "timeout"),
        (lambda: faked(httpx.Response(503, text="x")), "leader failed", "error"),
        (lambda: reader(None), "leader's REST address unknown", "unknown"),
        (lambda: reader("http://leader.test", known=False), "no leader", "unknown"),
        (lambda: None, "no leader", None),
    ],
    ids=["unreachable", "too-slow", "5xx", "no-rest-address", "no-leader", "no-reader"],
)
async def test_a_leader_that_cannot_be_asked_gives_the_followers_own_answer_marked(
    reads: Any, why: str, outcome: str | None
) -> None:
    before = counted(outcome) if outcome else 0
    start = time.monotonic()
    async with follower(reads()) as http:
        for path in ("/v1/preemptions", "/v1/preemptions/decisions", "/v1/gate"):
            r = await http.get(path)
            assert r.status_code == 200, r.text
            assert r.headers[SERVED_BY_HEADER] == f"follower ({why})", path
            assert r.headers[REPLICA_HEADER] == "follower-1"
            assert RELAYED_BY_HEADER not in r.headers
        assert body(await http.get("/v1/preemptions")) == {
            "inFlight": [],
            "recent": [],
            "continue": None,
        }
    assert time.monotonic() - start < 5  # bounded by the timeout, not the leader
    if outcome:
        assert counted(outcome) == before + 4


async def test_a_real_leader_gone_gives_the_followers_own_answer() -> None:
    with leader(populated=False) as (url, _, _):
        pass  # stopped: its port refuses
    async with follower(reader(url)) as http:
        r = await http.get("/v1/preemptions/decisions")
    assert r.headers[SERVED_BY_HEADER] == "follower (leader unreachable)"
    assert body(r)["decisions"] == []


# --- TLS: the leader's chain verified (forwardCAFile), a certificate only where it is needed --


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, str]:
    ca, other = CA("runway-ca"), CA("someone-else")
    # serving and client authentication, as the chart's: the replicas share it
    server = ca.issue("runway", server=True, client=True)
    files = {
        "ca.crt": ca.pem,
        "other.crt": other.pem,
        "tls.crt": server.cert,
        "tls.key": server.key,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: str(tmp_path / name) for name in files}


@pytest.mark.parametrize(
    ("ca", "client_cert_needed", "present", "served"),
    [
        ("ca.crt", False, False, "leader"),
        ("other.crt", False, False, "follower (leader unreachable)"),
        # The REST API on the verbs' port with requireClientCert: a certificate to connect.
        ("ca.crt", True, True, "leader"),
        ("ca.crt", True, False, "follower (leader unreachable)"),
    ],
)
async def test_the_leaders_certificate_is_verified_and_the_followers_presented_only_if_needed(
    pki: dict[str, str], ca: str, client_cert_needed: bool, present: bool, served: str
) -> None:
    tls = TLSConfig.model_construct(cert_file=pki["tls.crt"], key_file=pki["tls.key"])
    serve: dict[str, Any] = {"ssl_certfile": pki["tls.crt"], "ssl_keyfile": pki["tls.key"]}
    if client_cert_needed:
        serve |= {"ssl_ca_certs": pki["ca.crt"], "ssl_cert_reqs": ssl.CERT_REQUIRED}
    with leader(populated=False, **serve) as (url, _, _):
        reads = reader(url, tls=tls, ca_file=pki[ca], present_certificate=present)
        async with follower(reads) as http:
            r = await http.get("/v1/preemptions")
    assert r.headers[SERVED_BY_HEADER] == served, r.headers
