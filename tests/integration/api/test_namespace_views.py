"""Issue #35 item 4, a team's view of its own namespace, over ASGI with the TokenReview and
SubjectAccessReview faked: runway authorises a read about one namespace in that namespace
(``api.auth.read_namespaces``), so three users see what their bindings say — the cluster
operator (a ClusterRoleBinding) everything; team-a's viewer (``view`` in team-a, into which the
chart's viewer role aggregates) team-a's workloads and nothing else; team-b's admin team-b's,
activating there but never in team-a, and deactivating nowhere (an operator's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import parse_config
from app.server import create_app
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import pod, pod_obj
from tests.integration.api.test_auth import FakeApiServer, bearer

OPERATOR, VIEWER, ADMIN = "o" * 40, "v" * 40, "a" * 40


@pytest.fixture
async def world() -> AsyncIterator[httpx.AsyncClient]:
    api = FakeApiServer()
    api.users = {
        OPERATOR: {"username": "olga", "uid": "u-o", "groups": ["ops"]},
        VIEWER: {"username": "vera", "uid": "u-v", "groups": ["team-a"]},
        ADMIN: {"username": "bob", "uid": "u-b", "groups": ["team-b"]},
    }
    api.allowed = {
        # a ClusterRoleBinding answers for every namespace and for none
        *{("olga", verb, ns) for verb in ("get", "update") for ns in (None, "team-a", "team-b")},
        ("vera", "get", "team-a"),  # view in team-a
        ("bob", "get", "team-b"),  # the chart's admin role bound in team-b
        ("bob", "update", "team-b"),
    }
    config = parse_config(
        {
            "auth": {"mode": "kubernetes", "protectReadOnly": True},
            "kubernetes": {"leaderElection": {"enable": False}},
            "scope": {"manageWithoutQueue": True},
        }
    )
    app = create_app(config, kube=api.kube())
    runway: Runway = app.state.runway
    for ns in ("team-a", "team-b"):
        runway.cache.upsert_pod(
            pod(pod_obj(f"{ns}-etl-0", namespace=ns, labels={"runway.dev/workload": "etl"}))
        )
    runway.cache.pods_synced = True
    async with asgi_client(app) as http:
        yield http


async def status(http: httpx.AsyncClient, method: str, path: str, token: str) -> int:
    return (await http.request(method, path, headers=bearer(token))).status_code


@pytest.mark.parametrize(
    ("token", "method", "path", "expected"),
    [
        # the cluster operator: everything
        (OPERATOR, "GET", "/v1/workloads", 200),
        (OPERATOR, "GET", "/v1/workloads?namespace=team-a", 200),
        (OPERATOR, "GET", "/v1/workloads/team-b/etl", 200),
        (OPERATOR, "GET", "/v1/preemptions/decisions", 200),
        # team-a's viewer: its own namespace, nothing across namespaces, no writes
        (VIEWER, "GET", "/v1/workloads?namespace=team-a", 200),
        (VIEWER, "GET", "/v1/workloads?namespace=team-a&pod=team-a-etl-0", 200),
        (VIEWER, "GET", "/v1/workloads/team-a/etl", 200),
        (VIEWER, "GET", "/v1/workloads", 403),
        (VIEWER, "GET", "/v1/workloads?namespace=team-b", 403),
        (VIEWER, "GET", "/v1/workloads/team-b/etl", 403),
        (VIEWER, "GET", "/v1/workloads?namespace=team-a&namespace=team-b", 403),
        (VIEWER, "GET", "/v1/preemptions/decisions", 403),
        (VIEWER, "GET", "/v1/explain?preemptor=team-b/x&victim=team-a/team-a-etl-0", 403),
        (VIEWER, "POST", "/v1/workloads/team-a/etl:activate", 403),
        # team-b's admin: team-b, never team-a; deactivating is an operator's
        (ADMIN, "GET", "/v1/workloads/team-b/etl", 200),
        (ADMIN, "GET", "/v1/workloads/team-a/etl", 403),
        (ADMIN, "POST", "/v1/workloads/team-b/etl:activate", 200),
        (ADMIN, "POST", "/v1/workloads/team-a/etl:activate", 403),
        (ADMIN, "POST", "/v1/workloads/team-b/etl:deactivate", 403),
        (ADMIN, "POST", "/v1/workloads/team-a/etl:deactivate", 403),
    ],
)
async def test_each_user_reads_and_acts_on_what_its_bindings_grant(
    world: httpx.AsyncClient, token: str, method: str, path: str, expected: int
) -> None:
    assert await status(world, method, path, token) == expected, (method, path)


async def test_a_namespace_read_asks_the_review_in_that_namespace(world: httpx.AsyncClient) -> None:
    resp = await world.get("/v1/workloads?namespace=team-b", headers=bearer(VIEWER))
    assert resp.status_code == 403 and "team-b" in resp.text, resp.text
